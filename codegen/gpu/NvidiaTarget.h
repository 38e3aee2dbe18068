//===- NvidiaTarget.h - what the NVIDIA targets can do --------------*- C++ -*-===//
//
// Facts about the SMs deltac generates for, which the GPU lowerings ask
// before choosing a kernel form, and the NVIDIA cost model that
// delta-plan-prefill consults through passes/PlanTarget.h.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_NVIDIATARGET_H
#define DELTAC_CODEGEN_GPU_NVIDIATARGET_H

#include "dialect/DeltaOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <utility>

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

/// Whether `chip` is sm_100 or later, whose ptxas holds a kernel without
/// `.maxnreg` to fewer registers than it needs (see PrefillKernel.cpp).
bool targetIsBlackwellOrLater(llvm::StringRef chip);

/// The `#nvvm.target`s of `targets` grouped by the kind of code `codeOf`
/// gives each chip, the kinds in the order of their first target (the
/// listing's order). A lowering builds one gpu.module (same kernel names)
/// per kind; the library merges them by kernel name.
llvm::SmallVector<std::pair<KernelCode, llvm::SmallVector<Attribute>>>
groupTargetsByCode(ArrayAttr targets, llvm::function_ref<KernelCode(llvm::StringRef)> codeOf);

/// The module-name suffix of kind `code` where a kernel is built for
/// `kinds` kinds of code: none for a single kind, else "_bulk" / "_wgmma"
/// (and none for the other kinds, whose modules keep the plain name).
std::string moduleSuffixOfCode(KernelCode code, size_t kinds);

/// Registers the NVIDIA cost model of delta-plan-prefill under the name
/// "nvidia" (its default). Idempotent.
void registerNvidiaPlanTarget();

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_NVIDIATARGET_H
