//===- deltac-opt.cpp - run deltac passes on .mlir files --------*- C++ -*-===//
//
// mlir-opt for deltac: any delta pass or pipeline, with MLIR's usual flags
// (--split-input-file, --verify-diagnostics, --mlir-print-ir-after-all, ...).
//
//===----------------------------------------------------------------------===//

#include "tools/DeltacRegistration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  deltac::registerPasses();
  mlir::DialectRegistry registry;
  deltac::registerDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "deltac-opt: run delta-rule compiler passes\n", registry));
}
