//===- PrefillPlan.cpp - the prefill kernels' ABI, plan and workspace -*- C++ -*-===//

#include "codegen/gpu/prefill/PrefillPlan.h"
#include "codegen/gpu/prefill/PrefillLayout.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

namespace {
const KernelParam kParams[] = {
    {"q", ParamKind::Pointer},           {"k", ParamKind::Pointer},
    {"v", ParamKind::Pointer},           {"o", ParamKind::Pointer},
    {"g", ParamKind::Pointer},           {"beta", ParamKind::Pointer},
    {"a_log", ParamKind::Pointer},       {"dt_bias", ParamKind::Pointer},
    {"initial_state", ParamKind::Pointer}, {"final_state", ParamKind::Pointer},
    {"in_idx", ParamKind::Pointer},      {"out_idx", ParamKind::Pointer},
    {"cu_seqlens", ParamKind::Pointer},  {"work", ParamKind::Pointer},
    {"error_flag", ParamKind::Pointer},  {"cu_is_i64", ParamKind::I32},
    {"T", ParamKind::I64},               {"N", ParamKind::I32},
    {"H", ParamKind::I32},               {"HV", ParamKind::I32},
    {"max_chunks", ParamKind::I32},      {"q_stride", ParamKind::I64},
    {"k_stride", ParamKind::I64},        {"v_stride", ParamKind::I64},
    {"o_stride", ParamKind::I64},        {"slots", ParamKind::I64},
    {"scale", ParamKind::F32},           {"overlap", ParamKind::I32},
    {"qk_raw", ParamKind::I32},
    // sm_90a's warpgroup chunks and raw-form recur take q, k (and v) by
    // TMA tensor copies when `tma` is set.
    {"tma", ParamKind::I32},             {"q_map", ParamKind::TensorMap},
    {"k_map", ParamKind::TensorMap},     {"v_map", ParamKind::TensorMap},
    // NaN: the softplus raw gate; a number: FLA's bounded KDA gate.
    {"lower_bound", ParamKind::F32},
    // Elements between state slots (>= HV * K * V: vLLM's hybrid cache).
    {"slot_stride", ParamKind::I64},
    // State checkpoints (PrefillCheckpoints.cpp): the tensor (null: none),
    // FlashInfer's per-sequence first rows (null: FLA's every chunk), the
    // chunks between FlashInfer's checkpoints, the tensor's rows, and
    // nonzero for f32 (else the io dtype).
    {"checkpoints", ParamKind::Pointer}, {"checkpoint_starts", ParamKind::Pointer},
    {"checkpoint_every", ParamKind::I32},  {"checkpoint_rows", ParamKind::I64},
    {"checkpoint_f32", ParamKind::I32},
    // Nonzero: a 16-bit spec's beta is f32 (read as given, never rounded).
    {"beta_f32", ParamKind::I32},
    // Context parallelism (recur_cp, cp_chain, cp_correct): the segments
    // each sequence's chunks split into (the other kernels ignore it).
    {"segments", ParamKind::I32},
    // Context parallelism across ranks (issue 36): 1 = phase 1 (every
    // sequence enters in an unknown state; cp_chain writes each one's
    // transfer [b | M] to cp_transfer), 2 = phase 2 (the chain starts from
    // initial_state, the entering state; cp_correct finishes every
    // segment), 0 = an ordinary call.
    {"cp_phase", ParamKind::I32},        {"cp_transfer", ParamKind::Pointer},
    // deltac_abi::CallOptions bits: what an `l2norm = call` / `beta = call`
    // spec's call chose (other kernels ignore them).
    {"options", ParamKind::I32},
};
} // namespace

ArrayRef<KernelParam> mlir::delta::prefillKernelParams() { return kParams; }

PrefillPlan mlir::delta::planPrefill(const PrefillSpec &spec, int64_t valueTile,
                                     int64_t threads) {
  PrefillPlan p;
  p.valueTile = valueTile > 0 ? valueTile : std::min<int64_t>(32, spec.v);
  // Eight warps when every product has a multiple of eight 16x8 tiles
  // (C = 64 with V tiles of 16 or more): twice the warps to hide latency.
  auto tiles = [](int64_t m, int64_t n) { return (m / 16) * (n / 8); };
  bool eight = tiles(spec.chunk, spec.chunk) % 8 == 0 &&
               tiles(spec.chunk, p.valueTile) % 8 == 0 &&
               tiles(spec.chunk, spec.k) % 8 == 0 &&
               tiles(spec.chunk, spec.v) % 8 == 0 &&
               tiles(spec.k, p.valueTile) % 8 == 0 && spec.chunk / 8 >= 4;
  p.threads = threads > 0 ? threads : eight ? 256 : 128;
  // The transposed state of one warp takes K / 2 registers per thread (64
  // at K = 128); as many output warps as state warps, at least two,
  // compute each chunk's C x V-tile output while the state warps run ahead
  // (at V tile 64, two output warps would each issue more mma.sync per
  // chunk than a state warp).
  p.recur = recurStateInRegisters(spec, p.valueTile) ? RecurForm::RegisterState
                                                     : RecurForm::SharedRows;
  if (p.registerState()) {
    p.stateWarps = p.valueTile / 16;
    p.outputWarps = std::max<int64_t>(2, p.stateWarps);
  } else {
    p.stateWarps = p.threads / 64;
    p.outputWarps = p.threads / 32 - p.stateWarps;
  }
  p.recurThreads = 32 * (p.stateWarps + p.outputWarps);
  auto sixteen = [&](int64_t m, int64_t n) { return tiles(m, n) % 16 == 0; };
  p.chunksThreads = spec.rule == Rule::kda && sixteen(spec.chunk, spec.chunk) &&
                            sixteen(spec.chunk, spec.k) && sixteen(spec.chunk, spec.v)
                        ? 512
                        : p.threads;
  p.chunksSmem = ChunksSmem(spec).total;
  RecurSmem recur(spec, p.valueTile, p.registerState());
  p.recurSmem = recur.total;
  p.recurSmemStage = recur.stage;
  p.prepSmem = 2 * p.threads * 4 + 16; // the scan's two buffers, the verdict, the longest
  // Context parallelism (PrefillSegments.cpp): the chain's [K][4] f32
  // state columns; the correction's Q^ [C][K] and S_start [K][V] operands
  // and o's rows [C][V].
  p.segmentChainSmem = spec.k * kSegmentChainColumns * 4;
  p.segmentCorrectionSmem = (spec.chunk * (spec.k + kRowPad) + spec.k * (spec.v + kRowPad) +
                             spec.chunk * (spec.v + kRowPad)) *
                            2;
  return p;
}

bool mlir::delta::recurStateInRegisters(const PrefillSpec &spec, int64_t valueTile) {
  return spec.k <= 128 && valueTile % 16 == 0;
}

bool mlir::delta::recurTakesAllRegisters(const PrefillPlan &plan, const PrefillSpec &spec) {
  return plan.registerState() && spec.rule == Rule::kda && spec.chunk == 32;
}

bool mlir::delta::prefillWarpgroupFits(const PrefillSpec &spec, ArrayRef<int64_t> tiles) {
  // wgmma's M is 64 rows: the chunk's rows in V' = U - W S and the output,
  // 64 K rows per product in the state step.
  if (spec.chunk != kWarpgroupChunk || spec.k % 64 != 0 || spec.k > 128 || spec.v % 16 != 0)
    return false;
  return llvm::all_of(tiles, [](int64_t t) { return t % 16 == 0 && t <= 64; });
}

void mlir::delta::useWarpgroupRecur(PrefillPlan &plan, const PrefillSpec &spec) {
  plan.code = KernelCode::wgmma;
  bool transposed = spec.rule != Rule::kda && plan.valueTile == 64;
  RecurWarpgroupSmem L(spec, plan.valueTile, transposed);
  plan.recurThreads = 256; // the state warpgroup, then the output warpgroup
  plan.recurSmem = L.total;
  plan.recurSmemStage = L.stage;
  auto wide = [](int64_t n) { return n == 64 || n == 128; };
  plan.chunks = ChunksForm::RowsForWarpgroupRecur;
  if (spec.rule != Rule::kda && wide(spec.k) && wide(spec.v)) {
    plan.chunks = ChunksForm::Warpgroup;
    plan.chunksThreads = 256; // the Q K^T / W warpgroup, the K K^T / U warpgroup
    plan.chunksSmem = ChunksWarpgroupSmem(spec, /*lateV=*/true).total;
    plan.queueSmem = ChunksWarpgroupSmem(spec).total;
  }
  // Beside the warpgroup chunks the transposed recur has the raw q/k form.
  plan.recur = !transposed                   ? RecurForm::Warpgroup
               : plan.warpgroupChunks()      ? RecurForm::TransposedRawQK
                                             : RecurForm::Transposed;
}

std::array<int64_t, 6> mlir::delta::prefillChunkRegionBytes(const PrefillSpec &s) {
  return deltac_abi::prefillChunkRegionBytes(s.chunk, s.k, s.v, s.rule == Rule::kda);
}

int64_t mlir::delta::prefillWorkspaceBytes(const PrefillSpec &s, int64_t maxChunks,
                                           int64_t valueHeads, int64_t numSeqs) {
  return deltac_abi::prefillWorkspaceBytes(s.chunk, s.k, s.v, s.rule == Rule::kda, maxChunks,
                                           valueHeads, numSeqs);
}
