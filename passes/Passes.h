//===- Passes.h - deltac passes ---------------------------------*- C++ -*-===//
#ifndef DELTAC_PASSES_PASSES_H
#define DELTAC_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::delta {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::delta

#endif // DELTAC_PASSES_PASSES_H
