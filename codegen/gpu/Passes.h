//===- Passes.h - deltac's NVIDIA GPU passes ----------------------*- C++ -*-===//
#ifndef DELTAC_CODEGEN_GPU_PASSES_H
#define DELTAC_CODEGEN_GPU_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::delta {

#define GEN_PASS_DECL
#include "codegen/gpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/gpu/Passes.h.inc"

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_PASSES_H
