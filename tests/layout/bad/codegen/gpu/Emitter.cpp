#include "codegen/gpu/Emitter.h"
#include "codegen/gpu/Target.h"
