// A fixture for check_includes.py: passes/ reaching into codegen/gpu/.
#include "codegen/gpu/Target.h"
