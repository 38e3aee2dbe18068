//===- GpuPipelines.h - the named GPU and PTX pipelines ------------*- C++ -*-===//
//
// The NVIDIA half of the pipeline, named so that `deltac`, `deltac-opt` and
// the lit tests run the same passes: spec functions to GPU kernels, and GPU
// kernels to NVVM and to PTX.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_GPUPIPELINES_H
#define DELTAC_CODEGEN_GPU_GPUPIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <memory>

namespace mlir::delta {

/// The functions of delta-expand-spec to gpu.module kernels: decode lowered
/// from its recurrence (`decode`: delta-lower-decode-to-gpu with its
/// options), then prefill through the chunk-level IR, its plan (`plan`:
/// delta-plan-prefill with its options) and delta-lower-prefill-to-gpu.
/// Null passes take their default options.
void buildGpuKernelsPipeline(OpPassManager &pm, std::unique_ptr<Pass> decode = nullptr,
                             std::unique_ptr<Pass> plan = nullptr);

/// Every gpu.module to the NVVM/LLVM dialects (SCF to CF, the GPU ops to
/// NVVM, delta-tensor-map-params, canonicalize, CSE, casts reconciled).
void buildGpuToNvvmPipeline(OpPassManager &pm);

/// buildGpuToNvvmPipeline, then each gpu.module to a gpu.binary of PTX,
/// one object per target (gpu-module-to-binary{format=isa}).
void buildGpuToPtxPipeline(OpPassManager &pm);

/// Registers them as `delta-gpu-kernels`, `delta-gpu-to-nvvm` and
/// `delta-gpu-to-ptx`.
void registerDeltacGpuPipelines();

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_GPUPIPELINES_H
