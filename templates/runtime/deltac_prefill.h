// deltac_prefill.h - host-side checks and launch of the prefill kernels.
#ifndef DELTAC_PREFILL_H
#define DELTAC_PREFILL_H

#include "deltac_api.h"
#include "deltac_decode.h"
#include "deltac_runtime.h"

#include <string>

namespace deltac_rt {

// The contract's values the host reads (deltac_abi.h, shared with the
// compiler).
using deltac_abi::kMaxSharedSMs;
using deltac_abi::kOverlapCounterBytes;
using deltac_abi::kPrefillInlineSequences;

/// The three kernels of one prefill specialization (prep, chunks, recur;
/// codegen/gpu/prefill/PrefillPlan.h) and what the host needs to launch them.
struct PrefillVariant {
  int64_t K, V, chunk;
  deltac_dtype io, state;
  GateKind gate;
  bool stateVFirst;
  unsigned threads;      // prep
  unsigned chunksThreads;
  unsigned recurThreads; // recur's block (its warp roles)
  unsigned valueTiles;   // recur blocks along V
  /// Dispatch: the first variant of a (K, V) whose recur grid N * HV *
  /// valueTiles has at least a quarter this many blocks per SM is launched
  /// (0: always; delta-plan-prefill gives 2, half a wave, or 1).
  int64_t minBlocksPerSM;
  unsigned smemPrep, smemChunks, smemRecur;
  /// recur runs a deeper pipeline (one more chunk in flight) when the
  /// device's per-block opt-in shared memory has room for this many more
  /// bytes.
  unsigned smemRecurStage;
  Kernel *prep, *chunks, *recur;
  /// Where the chunks and recur code for one target take other block sizes
  /// and shared memory (the wgmma warpgroup forms on sm_90a): that target,
  /// as Kernel::imageTarget() names it, and its values (null: none).
  const char *altTarget = nullptr;
  unsigned recurAltThreads = 0, smemRecurAlt = 0, smemRecurAltStage = 0;
  unsigned chunksAltThreads = 0, smemChunksAlt = 0;
  /// The overlapped launch (the compiler's codegen/gpu/prefill/PrefillOverlap.cpp), for
  /// altTarget's code: when recur's grid N * HV * valueTiles has at most a
  /// quarter this many blocks per SM, chunks (as `queue`) leaves that many
  /// SMs to recur, which runs beside it, chunk by chunk (0: never).
  int64_t overlapBlocksPerSM = 0;
  /// chunks' form for the overlapped launch: the same items, taken from a
  /// queue by a grid of every block the SMs hold at once.
  Kernel *queue = nullptr;
  /// The queue's shared memory: more than chunks' (it copies v with q and
  /// k, where chunks copies it late into a region it frees).
  unsigned smemQueue = 0;
  /// altTarget's recur can read the raw q and k rows itself (the compiler's
  /// RecurForm::TransposedRawQK) after this form of chunks (altTarget's code
  /// only), which writes each row's factor instead of Qg and Kd (null:
  /// none). The host takes the pair, with `qk_raw` set, where recur's grid
  /// fills a wave (not in the overlapped launch): there its bytes bound it.
  Kernel *chunksRaw = nullptr;
  /// The shared overlapped launch (altTarget's code; with the queue): a
  /// recur that fits an SM beside one queue block (168 registers, two ring
  /// stages), so chunks keeps one block on each SM left to recur instead of
  /// none (`overlap` = -R; null: none). Taken where
  /// chooseSharedOverlapVariant says.
  Kernel *recurShared = nullptr;
  /// The plan's #delta.shared_overlap: chooseSharedOverlapVariant takes the
  /// shared launch where recur's grid has at most sharedQuartersPerSM
  /// quarters of a block per SM and T / N lies in [sharedMinTokens,
  /// sharedMaxTokens] (0 quarters: only when forced).
  int64_t sharedMinTokens = 0, sharedMaxTokens = 0, sharedQuartersPerSM = 0;
  /// Context parallelism (altTarget's code; the compiler's
  /// codegen/gpu/prefill/PrefillSegments.cpp): recur over segments of each
  /// sequence with their transfers (recurCp, this variant's V tile and
  /// launch values), the chain of transfers and the correction of the
  /// segments' outputs, launched after chunks instead of recur (null: none).
  Kernel *recurCp = nullptr, *segmentChain = nullptr, *segmentCorrection = nullptr;
  unsigned segmentThreads = 0, smemSegmentChain = 0, smemSegmentCorrection = 0;
  /// The plan's #delta.context_parallel: chooseSegments splits where a busy
  /// sequence has at least segmentMinTokens tokens and recur's grid at most
  /// segmentEighthsPerSM eighths of a block per SM (0: never by itself).
  int64_t segmentMinTokens = 0, segmentEighthsPerSM = 0;
  /// deltac_abi::CallOptions bits the spec leaves to the call (0: it fixes
  /// every option).
  int32_t callOptions = 0;
};

/// Workspace bytes for a call of T tokens in N sequences over HV heads
/// (deltac_abi::prefillWorkspaceBytes with max chunks = T / C + N; -1 for
/// sizes the host rejects). Calls with at most kPrefillInlineSequences
/// sequences do not launch the prep kernel: chunks and recur scan
/// cu_seqlens themselves.
int64_t prefillWorkspaceBytes(const PrefillVariant &v, int64_t T, int64_t N,
                              int64_t HV);
/// prefillWorkspaceBytes without the context-parallel regions (the
/// ordinary launch's part; -1 as above).
int64_t prefillMinimumWorkspaceBytes(const PrefillVariant &v, int64_t T, int64_t N,
                                     int64_t HV);

/// The segments a context-parallel call splits each sequence into (0: not
/// context-parallel): where recur's grid leaves most SMs idle (busy * HV *
/// value tiles at most v.segmentEighthsPerSM eighths of the `sms`) and the
/// sequences are long (T / busy of at least v.segmentMinTokens tokens, busy
/// as in choosePrefillVariant), the most segments, a power of two up to
/// deltac_abi::kMaxSegments, whose recur_cp blocks fit one wave and N * HV
/// * segments deltac_abi::kMaxSegmentHeads.
int chooseSegments(const PrefillVariant &v, int64_t N, int64_t HV, int sms, int64_t T,
                   int64_t maxSeqlen);
/// A rank's segments in a cp_phase call (deltac_prefill_args::cp_phase):
/// every segment has transfer tiles, so the most, a power of two up to
/// deltac_abi::kMaxSegments, whose N * HV * segments * segmentTiles blocks
/// fit one wave (at least 1), within the transfer slots (0: N * HV alone
/// exceeds them).
int chooseRankSegments(const PrefillVariant &v, int64_t N, int64_t HV, int sms);
/// recur_cp's tiles per (sequence, value head, segment): V / tile value
/// tiles and K / tile transfer tiles (its grid has that many per segment).
int64_t segmentTiles(const PrefillVariant &v);
/// recur_cp's blocks that run for `segments` segments (the first
/// segment's value tiles, every other one's value and transfer tiles).
int64_t segmentBlocks(const PrefillVariant &v, int64_t N, int64_t HV, int segments);

/// Finds the variant of (K, V), or returns null with `status` set.
const PrefillVariant *findPrefillVariant(const PrefillVariant *variants,
                                         int count, int64_t K, int64_t V,
                                         deltac::Status &status);

/// The dispatch table evaluated for a call: the first variant of (K, V)
/// whose predicate holds for the call's busy sequences, HV heads and `sms`
/// SMs (the last of the (K, V) when none does); null when no variant has
/// (K, V). The busy sequences are N, or, where the host knows the longest
/// sequence (`maxSeqlen` > 0), T / maxSeqlen: the call lasts as long as
/// its longest sequence's chain of chunks, and for that long the other
/// sequences keep at most that many sequences' blocks busy (one 32K
/// sequence among short ones runs like one sequence, not like N).
const PrefillVariant *choosePrefillVariant(const PrefillVariant *variants,
                                           int count, int64_t K, int64_t V,
                                           int64_t N, int64_t HV, int sms,
                                           int64_t T = 0,
                                           int64_t maxSeqlen = 0);

/// The variant whose kernels may run overlapped for this call: the first
/// of (K, V) with overlapBlocksPerSM > 0 whose recur grid (N * HV *
/// valueTiles) has at most a quarter that many blocks per SM; `forced`
/// (DELTAC_PREFILL_FORCE=overlap...): 1 takes the first such variant whatever its
/// grid, -1 none. Null: the ordinary launch.
const PrefillVariant *chooseOverlapVariant(const PrefillVariant *variants,
                                           int count, int64_t K, int64_t V,
                                           int64_t N, int64_t HV, int sms,
                                           int forced = 0);

/// The variant the shared overlapped launch runs for a call that
/// chooseOverlapVariant does not overlap: the first of (K, V) with the
/// queue and recurShared whose recur grid (N * HV * valueTiles) takes at
/// most sharedQuartersPerSM quarters of a block per SM (the NVIDIA plan: 2,
/// half the `sms`; a grid of a wave loses: 128 blocks, 3-6 % on the H100),
/// for T / N tokens per sequence in [sharedMinTokens, sharedMaxTokens]
/// (the NVIDIA plan: 1024 to 16384; below, chunks' work is too short to
/// hide recur's start behind, above it was not measured). `forced`
/// (overlap_shared): 1 takes the first such variant whatever
/// the call, -1 none. Null: not shared.
const PrefillVariant *chooseSharedOverlapVariant(const PrefillVariant *variants,
                                                 int count, int64_t K, int64_t V,
                                                 int64_t N, int64_t HV, int64_t T,
                                                 int sms, int forced = 0);

/// Whether recur variant `v` (its altTarget code loaded) reads raw q and k
/// for a call of `recurGrid` recur blocks on `sms` SMs: where the grid
/// fills a wave (forced > 0: wherever the code can; < 0: never).
bool useRawQK(const PrefillVariant &v, int64_t recurGrid, int sms, int forced);

/// Whether the ordinary launch (not overlapped, not the raw form) runs
/// the shared launch's recur (PrefillVariant::recurShared; its 168
/// registers and two ring stages fit an SM beside one chunks block, so its
/// blocks start while chunks' last ones run): where its grid of
/// `recurGrid` blocks is under a wave of the `sms` (where the raw form is
/// not taken; H100, 2026-11-25, H16/HV32: T = 512 0.0342 -> 0.0313 ms,
/// 2 x 4K 0.3325 -> 0.3135; H200, 2026-11-26: T = 512 0.0321 -> 0.0303).
/// `forced` < 0 (another form forced) never takes it, `forced` > 1
/// (shared_recur forced) takes it whatever the grid.
bool useSharedRecur(int64_t recurGrid, int sms, int forced = 0);

/// The SMs an overlapped launch of `recurGrid` recur blocks leaves to
/// recur: the grid, at most half of the `sms`.
int64_t overlapReservedSMs(int64_t recurGrid, int sms);
/// The SMs the shared overlapped launch shares (a recur block beside one
/// queue block each): the grid, at most all `sms` and kMaxSharedSMs, at
/// least one.
int64_t overlapSharedSMs(int64_t recurGrid, int sms);

/// Where workspace region 7 (the overlapped launch's counters and flags)
/// starts, and its bytes.
int64_t prefillOverlapRegion(const PrefillVariant &v, int64_t T, int64_t N,
                             int64_t HV, int64_t *bytes);

/// `v` with the block sizes and shared memory of the code the device runs
/// (Kernel::imageTarget of the loaded chunks and recur): each kernel's
/// alternative values where its image is altTarget, else the table's.
PrefillVariant forImages(const PrefillVariant &v, const std::string &chunksImage,
                         const std::string &recurImage);

/// The depth of recur's chunk ring where a block may opt in to `perBlock`
/// bytes of shared memory: 3 where it has the room, else 2. `forced` (1, 2
/// or 3; 0 = none) overrides, 3 only where it fits.
int recurStages(const PrefillVariant &v, int64_t perBlock, int forced);

/// The dynamic shared memory recur launches with for `stages` stages (the
/// kernel reads its depth back from its dynamic shared memory size).
unsigned recurSharedBytes(const PrefillVariant &v, int stages);

/// The forms of a prefill launch that DELTAC_PREFILL_FORCE can ask for
/// (docs/host-api.md lists what each launches).
enum class PrefillForm {
  Dispatch,      ///< unset: the dispatch decides
  Ordinary,      ///< chunks, then recur
  SharedRecur,   ///< chunks, then the shared launch's recur (recurShared)
  RawQK,         ///< chunks_raw (A_w), recur reading raw q/k, W = A_w K (qk_raw = 2)
  RawQKW,        ///< chunks_raw (W), recur reading raw q/k (qk_raw = 1)
  Overlap,       ///< the queue beside recur on SMs of its own
  OverlapShared, ///< the queue beside recurShared, one queue block per recur SM
  Segments,      ///< chunks, recurCp, segmentChain, segmentCorrection (context parallelism)
};

/// DELTAC_PREFILL_FORCE=<form>[,<key>=<n>]...: one form and its settings,
/// for tuning and tests (the one switch of the prefill dispatch; read once
/// per process). Forms: dispatch (settings only), ordinary, shared_recur,
/// raw_qk, raw_qk_w, overlap, overlap_shared, cp. Keys: tile (recur's V tile),
/// stages (recur's ring depth, 1-3), tma (0 off, 1 required), sms (the
/// overlapped launch's recur SMs), segments (cp's, 2 to
/// deltac_abi::kMaxSegments; else the dispatch's). A call whose library or device cannot
/// run what is asked is refused (DELTAC_UNSUPPORTED, the message starting
/// with `DELTAC_PREFILL_FORCE=<text>:`), never run another way.
struct PrefillForce {
  PrefillForm form = PrefillForm::Dispatch;
  int valueTile = 0;  ///< 0: the dispatch's
  int stages = 0;     ///< 0: the dispatch's
  int tma = -1;       ///< -1: where the maps can be encoded; 0 off; 1 required
  int overlapSMs = 0; ///< 0: the dispatch's
  int segments = 0;   ///< 0: the dispatch's (cp)
  std::string text;   ///< as given, for messages
  bool overlapped() const {
    return form == PrefillForm::Overlap || form == PrefillForm::OverlapShared;
  }
  bool rawQK() const { return form == PrefillForm::RawQK || form == PrefillForm::RawQKW; }
};

/// Parses a DELTAC_PREFILL_FORCE value (null or "": the dispatch). Returns
/// "" or why the text is no valid request (an unknown form or key, a value
/// out of range, a key the form does not take).
std::string parsePrefillForce(const char *text, PrefillForce *force);

/// Checks `args` (everything the host can see) and launches the three
/// kernels on `stream`. Nothing is launched on a rejected call.
deltac::Status runPrefill(const PrefillVariant *variants, int count,
                          const deltac_prefill_args &args, void *stream);

/// The values of the prefill kernels' parameters (all three take the same
/// list), and packPrefillParams, the one place that lists them in the order
/// of prefillKernelParams() (codegen/gpu/prefill/PrefillPlan.cpp): runPrefill launches
/// the pack it builds, prefillParamLayout() reports the same pack's names,
/// kinds and sizes (tests/unit/PrefillPlanTest.cpp compares them with the
/// compiler's types and the generated PTX's .param list).
struct PrefillParams {
  const void *q, *k, *v;
  void *o;
  const void *g, *beta, *aLog, *dtBias, *initialState;
  void *finalState;
  const void *inIdx, *outIdx, *cu;
  void *work, *flag;
  int32_t cuI64;
  int64_t T;
  int32_t N, H, HV, maxChunks;
  int64_t qStride, kStride, vStride, oStride, slots;
  float scale;
  int32_t overlap, qkRaw, tma;
  TensorMap qMap, kMap, vMap;
  float lowerBound; ///< kernelLowerBound(): NaN for the softplus gate
  int64_t slotStride; ///< elements between state slots
  void *checkpoints;   ///< PrefillCheckpoints.cpp (null: none)
  const void *checkpointStarts;
  int32_t checkpointEvery; ///< chunks between FlashInfer's checkpoints
  int64_t checkpointRows;
  int32_t checkpointF32;
  int32_t betaF32;
  int32_t segments; ///< context parallelism's segments (0: not)
  int32_t cpPhase;  ///< across ranks: 1, 2 (deltac_prefill_args::cp_phase)
  void *cpTransfer; ///< phase 1's output
  int32_t options;  ///< deltac_abi::CallOptions bits the call chose
};
void packPrefillParams(const PrefillParams &p, ParamPack &pack);
const ParamInfo *prefillParamLayout(int *count);

} // namespace deltac_rt

#endif // DELTAC_PREFILL_H
