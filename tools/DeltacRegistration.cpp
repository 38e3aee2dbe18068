//===- DeltacRegistration.cpp - what every deltac tool registers -*- C++ -*-===//

#include "tools/DeltacRegistration.h"

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"

void deltac::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::delta::DeltaDialect, mlir::arith::ArithDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect,
                  mlir::math::MathDialect, mlir::NVVM::NVVMDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::vector::VectorDialect>();
  // Lowering to LLVM goes through the ConvertToLLVM interfaces; turning a
  // gpu.module into PTX needs the NVVM target and the LLVM IR translations.
  mlir::registerAllExtensions(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
}

void deltac::registerPasses() {
  mlir::delta::registerDeltacPasses();
  mlir::registerTransformsPasses(); // canonicalize, cse, symbol-dce, ...
  mlir::registerConversionPasses(); // convert-gpu-to-nvvm, scf-to-cf, ...
  mlir::registerGPUPasses();        // nvvm-attach-target, module-to-binary
}
