//===- DeltacRegistration.cpp - what every deltac tool registers -*- C++ -*-===//

#include "tools/DeltacRegistration.h"

#include "dialect/DeltaOps.h"
#include "codegen/gpu/NvidiaTarget.h"
#include "codegen/gpu/GpuPipelines.h"
#include "codegen/gpu/Passes.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
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
                  mlir::vector::VectorDialect, mlir::linalg::LinalgDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::memref::MemRefDialect>();
  // Running the chunk IR on the CPU bufferizes these dialects' tensor ops.
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  // Lowering to LLVM goes through the ConvertToLLVM interfaces; turning a
  // gpu.module into PTX needs the NVVM target and the LLVM IR translations.
  mlir::registerAllExtensions(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
}

void deltac::registerPasses() {
  mlir::delta::registerDeltacPasses();
  mlir::delta::registerDeltacGpuPasses();
  mlir::delta::registerNvidiaPlanTarget(); // delta-plan-prefill's default model
  mlir::registerTransformsPasses(); // canonicalize, cse, symbol-dce, ...
  mlir::registerConversionPasses(); // convert-gpu-to-nvvm, scf-to-cf, ...
  mlir::registerGPUPasses();        // nvvm-attach-target, module-to-binary
  mlir::bufferization::registerBufferizationPasses();
  mlir::registerLinalgPasses();
  mlir::memref::registerMemRefPasses();
  mlir::delta::registerDeltacPipelines();
  mlir::delta::registerDeltacGpuPipelines();
}
