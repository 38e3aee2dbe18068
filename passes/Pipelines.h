//===- Pipelines.h - named pass pipelines -------------------------*- C++ -*-===//
#ifndef DELTAC_PASSES_PIPELINES_H
#define DELTAC_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::delta {

/// delta.spec ops to chunk-level IR: one function per specialization and
/// entry, prefill recurrences rewritten by `delta-chunk` (decode functions
/// keep their `delta.recurrence`). `segments` > 1 gives `delta-chunk`'s
/// segmented form (context parallelism's schedule; CPU only).
void buildSpecToChunkPipeline(OpPassManager &pm, int64_t segments = 1);

/// Chunk-level IR to the LLVM dialect for the host CPU. Function results are
/// memrefs the function allocates with `malloc` (their sizes are dynamic).
void buildChunkToCpuPipeline(OpPassManager &pm);

/// Registers both as `delta-spec-to-chunk` and `delta-cpu-pipeline`.
void registerDeltacPipelines();

} // namespace mlir::delta

#endif // DELTAC_PASSES_PIPELINES_H
