//===- GpuPipelines.cpp - the named GPU and PTX pipelines ---------*- C++ -*-===//
//
// One definition of each pipeline for the driver (codegen/SpecPipeline.cpp,
// codegen/KernelLibrary.cpp) and for `deltac-opt`, so that a lit test on
// the GPU IR or the PTX sees what `deltac` emits.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/GpuPipelines.h"
#include "codegen/gpu/Passes.h"
#include "passes/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::delta::buildGpuKernelsPipeline(OpPassManager &pm, std::unique_ptr<Pass> decode,
                                          std::unique_ptr<Pass> plan) {
  // Decode fuses the options into its kernel, so it lowers first, from the
  // recurrence as the spec wrote it.
  pm.addPass(decode ? std::move(decode) : createDeltaLowerDecodeToGPU());
  pm.addPass(createDeltaNormalizeOptions());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createDeltaPrepareChunking());
  // Prefill: the chunk-level IR, its plan, then its GPU kernels.
  fn.addPass(createDeltaChunk());
  fn.addPass(createCanonicalizerPass());
  fn.addPass(plan ? std::move(plan) : createDeltaPlanPrefill());
  pm.addPass(createDeltaLowerPrefillToGPU());
}

void mlir::delta::buildGpuToNvvmPipeline(OpPassManager &pm) {
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createSCFToControlFlowPass());
  gpuPm.addPass(createConvertGpuOpsToNVVMOps());
  // The kernels' NVVM ops that have no intrinsic form (a predicate, a
  // spin loop) become inline PTX here; the others translate to intrinsics.
  gpuPm.addPass(createConvertNVVMToLLVMPass());
  gpuPm.addPass(createDeltaTensorMapParams());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::delta::buildGpuToPtxPipeline(OpPassManager &pm) {
  buildGpuToNvvmPipeline(pm);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::delta::registerDeltacGpuPipelines() {
  PassPipelineRegistration<>(
      "delta-gpu-kernels",
      "expanded spec functions -> gpu.module kernels (decode lowering, "
      "chunk-level IR, delta-plan-prefill, prefill lowering)",
      [](OpPassManager &pm) { buildGpuKernelsPipeline(pm); });
  PassPipelineRegistration<>("delta-gpu-to-nvvm",
                             "gpu.module kernels -> NVVM/LLVM dialects",
                             buildGpuToNvvmPipeline);
  PassPipelineRegistration<>("delta-gpu-to-ptx",
                             "gpu.module kernels -> gpu.binary of PTX per target",
                             buildGpuToPtxPipeline);
}
