// deltac_abi.h - the contract between the deltac compiler and its runtime.
//
// Every value both sides must agree on is defined here once: the compiler
// (codegen/gpu/) includes this file from templates/runtime/, and every
// generated library carries a copy beside its runtime. Plain C++17, no
// LLVM and no CUDA, so that both can include it.
#ifndef DELTAC_ABI_H
#define DELTAC_ABI_H

#include <array>
#include <cstdint>

namespace deltac_abi {

/// What one kernel parameter carries: a device pointer, a 32/64-bit
/// integer, an f32 or a TMA tensor map (cuda.h's CUtensorMap, 128 bytes
/// passed by value).
enum class ParamKind { Pointer, I32, I64, F32, TensorMap };

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

/// Bit values of the decode kernel's `flags` parameter.
enum DecodeFlags : int32_t {
  /// No state is written back (only step states, if any).
  kKeepPool = 1,
  /// in_idx, out_idx, step_slots, num_accepted and cu_seqlens are int64
  /// (read as int64, never narrowed).
  kIndicesI64 = 2,
  /// Every row starts from a zero state; none is read.
  kZeroState = 4,
  /// beta is f32 (else the io dtype).
  kBetaF32 = 8,
  /// The entering states (state_in) of an f32 pool are 16-bit: bf16, or
  /// f16 with kStateInF16. Otherwise they have the pool's dtype.
  kStateInHalf = 16,
  kStateInF16 = 32,
  /// per_value kernels: beta is [tokens, HV, V], one per value column
  /// (else one per head).
  kBetaPerValue = 64,
  /// Log-gate kernels: g is null (FLA's g=None), read as 0 (no decay). A
  /// flag rather than a test of the pointer: the test's predicate, hoisted
  /// out of the token loop, made a kv kernel spill.
  kNullGate = 128,
};

/// The options an `l2norm = call` / `beta = call` spec leaves to each call:
/// bits of the decode kernel's `flags` and of the prefill kernels'
/// `options` (and of the sequence-level function's `options` argument).
/// Kernels of other specs ignore them; the host refuses them there.
enum CallOptions : int32_t {
  /// q and k are L2-normalised in the kernel.
  kCallL2Norm = 256,
  /// beta holds logits: beta = sigmoid(b), times 2 with kCallBetaTwice.
  kCallBetaSigmoid = 512,
  kCallBetaTwice = 1024,
  /// gate = call / channel_call: g is a raw `a` (with A_log and dt_bias),
  /// else log-space decays.
  kCallGateRaw = 2048,
  /// ... and that raw `a` is in the io dtype (else f32).
  kCallGate16 = 4096,
};

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

/// Calls with at most this many sequences skip the prep kernel: chunks and
/// recur scan the sequences' chunk counts in every warp instead (one
/// cu_seqlens pair per lane), which costs less than a kernel launch.
constexpr int64_t kPrefillInlineSequences = 32;

/// Prefill state checkpoints are kept for K up to this (K = 256's recur
/// has no registers left for them: the host refuses them there).
constexpr int64_t kCheckpointMaxK = 128;

/// 16-bit elements of padding per row of W, Qg, Kd and P: the kernels'
/// shared-memory rows (16-byte aligned, the 8 rows of an ldmatrix matrix in
/// different banks), which the workspace keeps so recur copies each tile
/// in one piece.
constexpr int64_t kRowPad = 8;

/// Workspace region 7 (the overlapped launch) starts with this many bytes
/// of counters: the queue's kOverlapQueueCounters, then one per shared SM
/// (the shared overlapped launch shares at most kMaxSharedSMs SMs); a u32
/// ready flag per (chunk, value head) follows.
constexpr int64_t kOverlapCounterBytes = 1024;
constexpr int64_t kOverlapQueueCounters = 2;
constexpr int64_t kMaxSharedSMs = kOverlapCounterBytes / 4 - kOverlapQueueCounters;

constexpr int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

/// Bytes per (chunk, value head) of workspace regions 1-6, for chunk C and
/// a K x V state: G_last (one float, or K factors e^G_last with
/// per-channel decays), W, U, Qg, Kd (16-bit, rows padded by kRowPad) and
/// P (C x C, padded likewise).
constexpr std::array<int64_t, 6> prefillChunkRegionBytes(int64_t C, int64_t K,
                                                         int64_t V,
                                                         bool perChannel) {
  int64_t Kp = K + kRowPad, Cp = C + kRowPad;
  return {4 * (perChannel ? K : 1), C * Kp * 2, C * V * 2,
          C * Kp * 2,               C * Kp * 2, C * Cp * 2};
}

/// 32-bit words of workspace region 0, written by prep for N sequences:
/// the chunk offsets [N + 1], prep's verdict on cu_seqlens, the sequences
/// longest first [N] (recur's order where prep's block can rank them: N
/// at most its threads), then the longest sequence's chunk count (word
/// prefillLongestWord(N): context parallelism's segment length). Linear
/// in N: the kernels take its coefficients from here.
constexpr int64_t prefillLongestWord(int64_t N) { return 2 * N + 2; }
constexpr int64_t prefillSequenceRegionWords(int64_t N) { return prefillLongestWord(N) + 1; }

/// Byte offset of workspace region 7 for a call of N sequences and
/// `chunks` (chunk, value head) items: region 0
/// (prefillSequenceRegionWords), then regions 1-6, each 256-aligned.
constexpr int64_t prefillOverlapRegionOffset(int64_t C, int64_t K, int64_t V,
                                             bool perChannel, int64_t chunks,
                                             int64_t N) {
  int64_t total = align256(prefillSequenceRegionWords(N) * 4);
  for (int64_t per : prefillChunkRegionBytes(C, K, V, perChannel))
    total += align256(chunks * per);
  return total;
}

/// Bytes of region 7: the counters, then a u32 per item.
constexpr int64_t prefillOverlapRegionBytes(int64_t chunks) {
  return kOverlapCounterBytes + align256(chunks * 4);
}

/// Workspace bytes of a prefill call: `maxChunks` chunks per value head
/// (total tokens / C + N bounds it), HV value heads, N sequences.
constexpr int64_t prefillWorkspaceBytes(int64_t C, int64_t K, int64_t V,
                                        bool perChannel, int64_t maxChunks,
                                        int64_t HV, int64_t N) {
  int64_t chunks = maxChunks * HV;
  return prefillOverlapRegionOffset(C, K, V, perChannel, chunks, N) +
         prefillOverlapRegionBytes(chunks);
}

//===----------------------------------------------------------------------===//
// Prefill context parallelism (recur_cp, cp_chain, cp_correct)
//===----------------------------------------------------------------------===//

/// A context-parallel call splits each sequence's chunks into at most this
/// many segments, run side by side (docs/context-parallelism.md).
constexpr int64_t kMaxSegments = 8;
/// ... and keeps at most this many (sequence, value head, segment)
/// transfers: N * HV * segments, which also bounds recur_cp's grid.
constexpr int64_t kMaxSegmentHeads = 256;

/// cp_chain's block covers this many V columns of one (sequence, value
/// head): its grid is N * HV * V / kSegmentChainColumns.
constexpr int64_t kSegmentChainColumns = 4;

/// The (sequence, value head, segment) transfers a call of N sequences
/// over HV heads has room for: N * HV * kMaxSegments, at most
/// kMaxSegmentHeads.
constexpr int64_t prefillSegmentSlots(int64_t N, int64_t HV) {
  return N * HV * kMaxSegments < kMaxSegmentHeads ? N * HV * kMaxSegments : kMaxSegmentHeads;
}

/// Bytes of the context-parallel regions 8-10, after region 7: [8] each
/// segment's transfer (f32: the state it leaves from zero, K x V, then its
/// K x K transfer matrix) per slot (prefillSegmentSlots); [9] each
/// segment's entering state (16-bit, K x V), the correction's operand;
/// [10] the correction's left operand (16-bit, C x K) per (chunk, value
/// head).
constexpr std::array<int64_t, 3> prefillSegmentRegionBytes(int64_t C, int64_t K, int64_t V,
                                                           int64_t chunks, int64_t slots) {
  return {align256(slots * K * (V + K) * 4), align256(slots * K * V * 2),
          align256(chunks * C * K * 2)};
}

/// Workspace bytes of a prefill call of a spec with context parallelism:
/// the ordinary call's, then regions 8-10.
constexpr int64_t prefillSegmentWorkspaceBytes(int64_t C, int64_t K, int64_t V,
                                               bool perChannel, int64_t maxChunks,
                                               int64_t HV, int64_t N) {
  int64_t total = prefillWorkspaceBytes(C, K, V, perChannel, maxChunks, HV, N);
  for (int64_t r : prefillSegmentRegionBytes(C, K, V, maxChunks * HV, prefillSegmentSlots(N, HV)))
    total += r;
  return total;
}

} // namespace deltac_abi

#endif // DELTAC_ABI_H
