//===- NvidiaTarget.h - what the NVIDIA targets can do --------------*- C++ -*-===//
//
// Facts about the SMs deltac generates for, which the GPU lowerings ask
// before choosing a kernel form, and the NVIDIA cost model that
// delta-plan-prefill consults through passes/PlanTarget.h.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_NVIDIATARGET_H
#define DELTAC_CODEGEN_GPU_NVIDIATARGET_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir::delta {

/// Whether `chip` has wgmma (sm_90a only: sm_100a has tcgen05 instead).
bool targetHasWarpgroupMma(llvm::StringRef chip);

/// The most dynamic shared memory one block may opt into on `chip`
/// ("sm_80", "sm_90a", ...), from the CUDA programming guide's table of
/// compute capabilities: 163 KiB on sm_80/sm_87, 227 KiB on sm_90/sm_100,
/// 99 KiB on the consumer parts (sm_86, sm_89, sm_120); 48 KiB otherwise.
int64_t targetSharedLimit(llvm::StringRef chip);

/// Whether `chip` has bulk copies (cp.async.bulk with mbarriers): sm_90
/// and later.
bool targetHasBulkCopies(llvm::StringRef chip);

/// Registers the NVIDIA cost model of delta-plan-prefill under the name
/// "nvidia" (its default). Idempotent.
void registerNvidiaPlanTarget();

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_NVIDIATARGET_H
