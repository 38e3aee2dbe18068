//===- DeltacRegistration.cpp - what every deltac tool registers -*- C++ -*-===//

#include "tools/DeltacRegistration.h"

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void deltac::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::delta::DeltaDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::math::MathDialect,
                  mlir::tensor::TensorDialect>();
}

void deltac::registerPasses() {
  mlir::delta::registerDeltacPasses();
  mlir::registerTransformsPasses(); // canonicalize, cse, symbol-dce, ...
}
