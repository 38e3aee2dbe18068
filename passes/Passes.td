//===- Passes.td - deltac passes -------------------------------*- tablegen -*-===//
//
// The target-independent passes, from a spec to the chunk-level IR and its
// plan (keep in pipeline order; docs/passes.md describes each with its lit
// test). The GPU lowerings are in codegen/gpu/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_PASSES_TD
#define DELTAC_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeltaAttachTargets : Pass<"delta-attach-targets", "::mlir::ModuleOp"> {
  let summary = "record the target SMs in the module";
  let description = [{
    Writes the `delta.targets` module attribute (e.g. `["sm_90a", "sm_80"]`)
    that every target-dependent pass reads. The driver runs it with its
    `--target` list; lit tests write the attribute directly so they stay
    hermetic. Unknown or repeated targets are errors.
  }];
  let options = [
    ListOption<"targets", "targets", "std::string",
               "target SMs (sm_80, sm_90a, sm_100a)">
  ];
  // The pass asks the dialect to verify the list, so it must be loaded even
  // when the module holds no delta op yet.
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
}

def DeltaExpandSpec : Pass<"delta-expand-spec", "::mlir::ModuleOp"> {
  let summary = "expand each delta.spec into sequence-level functions";
  let description = [{
    For every `delta.spec`, every (K, V) specialization and every entry point
    emits a `func.func @<spec>_k<K>_v<V>_<entry>` whose body is one
    `delta.recurrence` carrying the spec's options. Run-time sizes (B, T, H,
    HV, N) stay dynamic; K, V and the dtypes are static. Prefill takes packed
    sequences (`B = 1` with `cu_seqlens`); decode takes `[B, T]` tokens and
    one state per row. The functions carry `delta.spec`, `delta.entry` and
    `delta.chunk_size` or `delta.max_t`. The specs stay: later stages read
    them to emit the host API.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def DeltaNormalizeOptions : Pass<"delta-normalize-options"> {
  let summary = "rewrite every recurrence into its canonical option set";
  let description = [{
    Makes the preparation of the inputs explicit so later passes see one
    form: raw and linear gates become `delta.gate_from_raw` /
    `delta.gate_from_linear` (log-space decays), beta logits become
    `delta.beta_sigmoid`, in-op L2 normalisation becomes `delta.l2norm` on q
    and k. The recurrence left behind has gate `log` (`channel_log` for
    `kda`, `none` for `delta`), beta `given` and no `l2norm`. Prepared values
    are f32, so nothing is rounded between preparation and recurrence.
    `beta = call` and `l2norm = call` become `scf.if`s on the call's
    `options` argument with the preparation op in the then-branch.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def DeltaPrepareChunking : Pass<"delta-prepare-chunking",
                                "::mlir::func::FuncOp"> {
  let summary = "sum decays inside chunks and mark recurrences for chunking";
  let description = [{
    In prefill functions, replaces each canonical `delta.recurrence` by a
    `delta.chunk_cumsum` of its decays (restarting at every sequence start
    and every `chunk_size` tokens) and a `delta.chunked_recurrence` that
    consumes the summed decays. The chunk size comes from the function's
    `delta.chunk_size` attribute unless `chunk-size` overrides it. A
    recurrence that still has non-canonical options is an error: run
    `delta-normalize-options` first. Decode functions are left alone.
  }];
  let options = [
    Option<"chunkSize", "chunk-size", "int64_t", /*default=*/"0",
           "chunk size to use (16, 32 or 64); 0 takes the function's">
  ];
}

def DeltaChunk : Pass<"delta-chunk", "::mlir::func::FuncOp"> {
  let summary = "rewrite chunked recurrences into loops of chunk-level ops";
  let description = [{
    Replaces each `delta.chunked_recurrence` by `scf.for` loops over
    sequences (the `cu_seqlens` segments, or the batch rows) and value heads
    around a loop over the chunks of one sequence that carries the [K, V]
    f32 state. Per chunk: `chunk_load` of q, k (head hv / (HV / H)), v, beta
    and the summed decays (edge-padded), `chunk_kkt`, `solve_tril`,
    `chunk_wy`, `chunk_residual`, `chunk_output`, `chunk_state_step` and
    `chunk_store` of the outputs; `state_load` / `state_store` translate
    the initial and final states from and to their layout. The result is
    target-independent: `delta-chunk-to-linalg` runs it on the CPU.

    With `segments` = n > 1 each sequence's chunks are split as the GPU's
    context parallelism splits them: L = ceil(longest sequence's chunks /
    n), at least 1, chunks a segment, so a sequence of N chunks fills
    ceil(N / L) segments (one no longer than L runs whole; the longest
    takes n). Each is computed without its entering state
    (docs/context-parallelism.md): from a zero state (outputs O0, leaving
    state b) and, as the same chunk ops on K more columns with zero values,
    from -I (X = -Mpre, whose outputs are -Qh); then each chunk's output is
    corrected, `chunk_residual(O0, -Qh, S_start)` = O0 + Qh S_start, and the
    segment's leaving state is `chunk_residual(b, -M, S_start)`. The CPU
    pipeline runs it against the fp64 reference (ChunkCpuTest); the GPU
    lowering takes the serial form only.
  }];
  let options = [
    Option<"segments", "segments", "int64_t", /*default=*/"1",
           "segments of the longest sequence (the others take as many of "
           "its length as they fill), each computed without its entering "
           "state and then chained (1: the serial loop)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DeltaChunkToLinalg : Pass<"delta-chunk-to-linalg", "::mlir::func::FuncOp"> {
  let summary = "lower chunk-level IR to linalg, scf and tensor for the CPU";
  let description = [{
    Rewrites every delta op left after `delta-chunk` (chunk math, chunk and
    state movers, and the sequence-level preparation ops) into
    `linalg.generic`, `scf.for`, `tensor`, `arith` and `math` on tensors,
    term by term from the op definitions. With upstream bufferization and
    LLVM lowering (the `delta-cpu-pipeline`) the chunk IR runs on the CPU,
    which is how CI checks the chunking math against the fp64 reference.
    A delta op it does not know (e.g. `delta.recurrence`) is an error.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DeltaPlanPrefill : Pass<"delta-plan-prefill", "::mlir::func::FuncOp"> {
  let summary = "choose the prefill kernel variants and their dispatch table";
  let description = [{
    For a chunked prefill function, writes `delta.recur_variants`: the
    recur kernels to emit, widest V tile first, each with the dispatch
    predicate the host evaluates per call (`min_blocks_per_sm`: launched when
    2 * busy * HV * V / value_tile >= min_blocks_per_sm * SMs, busy being N,
    or T / max_seqlen where the host knows the longest sequence; the last
    is unconditional). Wide tiles repeat less work on K; narrow ones make more
    blocks for calls with few sequences and heads. The candidate tiles and
    the thresholds come from the target model named by `target-model`
    (passes/PlanTarget.h; "nvidia", codegen/gpu/NvidiaTarget.cpp: 64, 32,
    16, 64 only for K <= 128, where recur's state fits its warps'
    registers). `value-tiles` overrides the candidates.

    It also writes `delta.context_parallel`: from which sequence length
    (`min_tokens`, tokens of a busy sequence) and up to which recur grid
    (`eighths_per_sm`, eighths of a block per SM) the host splits each
    sequence into segments run side by side (docs/context-parallelism.md;
    the target model's values, or `segment-min-tokens` /
    `segment-eighths-per-sm`; an eighths of 0 leaves the split to forced
    calls and multi-GPU ranks); and `delta.shared_overlap`: the tokens per
    sequence and the recur grid (quarters of a block per SM) where the host
    takes the shared overlapped launch (the target model's, or
    `shared-min-tokens` / `shared-max-tokens` / `shared-quarters-per-sm`).
  }];
  let options = [
    ListOption<"valueTiles", "value-tiles", "int64_t",
               "candidate V tiles of the recur kernel">,
    Option<"segmentMinTokens", "segment-min-tokens", "int64_t", /*default=*/"-1",
           "context parallelism: the fewest tokens of a busy sequence the host "
           "splits (-1: the target model's)">,
    Option<"segmentEighthsPerSm", "segment-eighths-per-sm", "int64_t", /*default=*/"-1",
           "context parallelism: the largest recur grid, in eighths of a block "
           "per SM, whose sequences the host splits (0: never by itself; -1: "
           "the target model's)">,
    Option<"sharedMinTokens", "shared-min-tokens", "int64_t", /*default=*/"-1",
           "the shared overlapped launch: the fewest tokens per sequence (-1: the "
           "target model's)">,
    Option<"sharedMaxTokens", "shared-max-tokens", "int64_t", /*default=*/"-1",
           "the shared overlapped launch: the most tokens per sequence (-1: the "
           "target model's)">,
    Option<"sharedQuartersPerSm", "shared-quarters-per-sm", "int64_t", /*default=*/"-1",
           "the shared overlapped launch: the largest recur grid, in quarters of "
           "a block per SM (0: only when forced; -1: the target model's)">,
    Option<"targetModel", "target-model", "std::string", /*default=*/"\"nvidia\"",
           "the registered PlanTarget whose costs decide (passes/PlanTarget.h)">
  ];
}

#endif // DELTAC_PASSES_TD
