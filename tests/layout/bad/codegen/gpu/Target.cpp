#include "codegen/gpu/Target.h"
#include "codegen/gpu/Emitter.h"
