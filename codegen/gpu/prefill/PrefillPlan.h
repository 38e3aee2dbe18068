//===- PrefillPlan.h - the prefill kernels' ABI, plan and workspace -*- C++ -*-===//
//
// What the host and the kernels agree on (the parameter list, the
// workspace's size) and how a spec's kernels are shaped (PrefillPlan: block
// sizes, shared memory, which form each kernel takes). The kernels
// themselves are described in PrefillKernel.h.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLPLAN_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLPLAN_H

#include "codegen/gpu/KernelAbi.h"
#include "codegen/gpu/prefill/PrefillSpec.h"

#include <array>

namespace mlir::delta {

/// Calls with at most this many sequences skip `prep` (the contract's
/// value, which the runtime reads too).
using deltac_abi::kPrefillInlineSequences;

/// The prefill kernels' parameters, in order (tests/unit/PrefillPlanTest.cpp
/// checks templates/runtime/deltac_prefill.cpp fills the same list).
///   q, k [tokens, q_stride / k_stride apart; head h at h*K]; v, o likewise
///   with value heads at hv*V; g, beta [tokens, HV] (the spec's forms);
///   a_log, dt_bias [HV] (raw gates); initial_state / final_state: state
///   tensors [N or slots, HV, ...] (null: zeros / not written); in_idx,
///   out_idx: int32 [N] slots (null: sequence n uses row n); cu_seqlens
///   [N + 1] int32 or int64 per cu_is_i64 (null: N rows of T / N tokens);
///   work: the workspace; error_flag: int32 set to 1 on bad device data;
///   overlap: the SMs left to recur in the overlapped launch (0: not
///   overlapped); qk_raw: recur reads raw q and k (RecurForm::TransposedRawQK;
///   the host launches chunks' `_chunks_raw` form with it).
llvm::ArrayRef<KernelParam> prefillKernelParams();

/// chunks' forms: one kernel body each, chosen by the plan.
enum class ChunksForm : uint8_t {
  /// mma.sync, the workspace in recur's padded rows (PrefillChunks.cpp).
  Rows,
  /// mma.sync writing the warpgroup recur's wgmma images (sm_90a beside a
  /// warpgroup recur where chunks' own products cannot be wgmma: rule kda,
  /// or K, V outside {64, 128}).
  RowsForWarpgroupRecur,
  /// sm_90a, scalar gates, K and V of 64 or 128: chunks' products are
  /// wgmma too, two warpgroups each taking one product of a pair (Q K^T
  /// and K K^T, then W and U), q, k and v landing as swizzled images and
  /// the results leaving by bulk copies (PrefillChunksWarpgroup.cpp).
  Warpgroup,
  /// Warpgroup beside the recur that reads raw q and k (`_chunks_raw`,
  /// launched with qk_raw): writes each row's factor fq or fk after P
  /// instead of the scaled rows Qg, Kd.
  WarpgroupRawQK,
};

/// recur's forms: one kernel body each, chosen by the plan.
enum class RecurForm : uint8_t {
  /// mma.sync; the state warps share the state tile by rows and hand V'
  /// over through shared memory (K = 256, or V tiles not of 16s).
  SharedRows,
  /// mma.sync; the state transposed in its state warps' registers, one
  /// warp per 16 columns of the V tile holding all K rows (K <= 128 and V
  /// tiles of 16s): the state step never leaves the warp, so the chain of
  /// states has no shared memory and no barrier on it (PrefillRecurState.cpp).
  RegisterState,
  /// sm_90a: two warpgroups, the state step's and the output's, whose
  /// products are wgmma (PrefillRecurWarpgroup.cpp); chunks writes W, Qg,
  /// Kd and P as wgmma's 128-byte-swizzled images and U in 16-column tiles,
  /// so that recur's ring receives every operand by bulk copy in the layout
  /// the tensor cores read (prefillWarpgroupFits says for which specs).
  Warpgroup,
  /// sm_90a, V tile 64, scalar gate: S^T in one warpgroup's accumulators,
  /// fed with V'^T to wgmma as the register A operand, so the state's chain
  /// has no shared-memory hand-over (PrefillRecurTransposed.cpp). Same
  /// workspace, ring stages and block size as Warpgroup; O^T's staging
  /// buffers take the place of the S^T and V'^T images (RecurWarpgroupSmem).
  Transposed,
  /// Transposed beside the warpgroup chunks: where the host says so (the
  /// `qk_raw` parameter) it reads the raw q and k rows itself (cp.async
  /// into its ring) and scales them in registers by the per-token factors
  /// chunks leaves after P (fq = scale e^G / |q|, fk = e^(G_last - G) / |k|):
  /// O^T's first product is scaled by column, V'^T by column before it
  /// meets k. chunks then writes no Qg and Kd: 32 of the 72 KiB per
  /// (chunk, value head) it would write and recur read.
  TransposedRawQK,
  /// TransposedRawQK for the overlapped launch (PrefillOverlap.cpp):
  /// chunks' queue form takes its items from a queue in workspace region 7
  /// and publishes a ready flag per (chunk, head), and this recur, launched
  /// as the queue's programmatic dependent on the SMs it leaves free,
  /// copies each chunk once its flag is up instead of waiting for the
  /// whole grid when the `overlap` parameter is set.
  TransposedOverlap,
  /// The shared overlapped launch's recur (`_recur_shared`; Transposed with
  /// the chunk flags, without the raw q/k form): its block shares an SM
  /// with one block of chunks' queue form instead of taking an SM of its
  /// own, so it is compiled to kSharedRecurRegisters per thread
  /// (`nvvm.maxnreg`) and its warpgroups trade registers with setmaxnreg:
  /// the chain's up to kSharedChainRegisters, the output warpgroup's down
  /// to what is left. With two ring stages its block and a queue block fit
  /// an SM's registers and shared memory together.
  TransposedShared,
};

/// The V tile of one `recur` block, the block size of prep and chunks (256
/// threads when every product splits into a multiple of eight 16x8 tiles,
/// else 128), recur's warp roles and the dynamic shared memory of each
/// kernel, from the spec; the kind of target code and the form of chunks
/// and recur. What a form implies is asked of the plan (the queries
/// below), never stored beside the form.
struct PrefillPlan {
  int64_t threads = 128;
  int64_t valueTile = 32;
  int64_t chunksSmem = 0, recurSmem = 0, prepSmem = 0;
  /// The overlapped launch's queue form of the warpgroup chunks, which
  /// copies v with q and k (ChunksWarpgroupSmem without lateV).
  int64_t queueSmem = 0;
  /// Bytes of one more recur pipeline stage (see RecurSmem).
  int64_t recurSmemStage = 0;
  /// The context-parallel chain's and correction's dynamic shared memory
  /// (PrefillSegments.cpp; their block size is kSegmentThreads).
  int64_t segmentChainSmem = 0, segmentCorrectionSmem = 0;
  /// recur's warps: the state warps, then the output warps.
  int64_t stateWarps = 0, outputWarps = 0;
  /// recur's block size (stateWarps + outputWarps warps); prep uses
  /// `threads`.
  int64_t recurThreads = 0;
  /// chunks' block size: `threads`, or 16 warps for rule kda, whose 155.5 KiB
  /// of shared memory leave one block per SM (GDN's chunks run three 8-warp
  /// blocks per SM), where every chunks product splits evenly over them.
  int64_t chunksThreads = 0;
  /// The kind of target code: cp_async (sm_80), bulk (sm_90 and later),
  /// wgmma (sm_90a); `all` for prep, which is the same on every target.
  KernelCode code = KernelCode::all;
  ChunksForm chunks = ChunksForm::Rows;
  RecurForm recur = RecurForm::SharedRows;

  /// recur fills its ring with bulk copies (cp.async.bulk, completion on
  /// an mbarrier per stage: sm_90 and later) instead of 16-byte cp.async.
  bool bulkCopies() const { return code == KernelCode::bulk || code == KernelCode::wgmma; }
  /// sm_90 and later: recur is launched as a programmatic dependent of
  /// chunks (the host sets the launch attribute where the loaded recur is
  /// this code). Every chunks block lets it launch as soon as it starts
  /// (griddepcontrol.launch_dependents), so recur's blocks load their
  /// initial state while chunks' last blocks run; recur's output warps
  /// wait for all of chunks (griddepcontrol.wait) before their first copy
  /// of its results.
  bool gridDependency() const { return bulkCopies(); }
  bool registerState() const { return recur == RecurForm::RegisterState; }
  /// recur is one of the wgmma warpgroup forms (and chunks writes their
  /// swizzled workspace).
  bool warpgroupRecur() const { return recur >= RecurForm::Warpgroup; }
  bool transposedRecur() const { return recur >= RecurForm::Transposed; }
  /// recur has the raw q/k form (chosen per call by `qk_raw`).
  bool recurRawQK() const {
    return recur == RecurForm::TransposedRawQK || recur == RecurForm::TransposedOverlap;
  }
  /// recur may wait for chunks' per-chunk flags (the overlapped launches).
  bool chunkFlags() const {
    return recur == RecurForm::TransposedOverlap || recur == RecurForm::TransposedShared;
  }
  bool sharedOverlap() const { return recur == RecurForm::TransposedShared; }
  bool warpgroupChunks() const { return chunks >= ChunksForm::Warpgroup; }
  bool chunksRawQK() const { return chunks == ChunksForm::WarpgroupRawQK; }
  /// chunks writes the warpgroup recur's workspace: wgmma's swizzled
  /// images of W, Qg, Kd and P, U in 16-column tiles (workTileAt).
  bool swizzledWorkspace() const { return chunks != ChunksForm::Rows; }
};
/// cp_chain's block: one thread per K row of this many V columns (deltac_abi.h).
using deltac_abi::kSegmentChainColumns;
/// The block size of cp_chain and cp_correct (K <= 128 rows; 4 warps for
/// the correction's C x V product).
constexpr int64_t kSegmentThreads = 128;
/// The shared overlapped recur's registers (RecurForm::TransposedShared):
/// 168 per thread at launch (43 008 for 256 threads; with one queue block
/// of 80 the SM's 65 536), the chain's warpgroup 232 of them, the output
/// warpgroup 104 ((232 + 104) * 128 = 168 * 256; ptxas: no spills).
constexpr int64_t kSharedRecurRegisters = 168, kSharedChainRegisters = 232,
                  kSharedOutputRegisters = 2 * kSharedRecurRegisters - kSharedChainRegisters;
/// `threads` (0: chosen) fixes prep's block size, and the others' where
/// they take it: the kernels of one entry share it (the host launches them
/// with the sizes of its variant table).
PrefillPlan planPrefill(const PrefillSpec &spec, int64_t valueTile = 0,
                        int64_t threads = 0);

/// The chunk size the sm_90a warpgroup forms are written for: wgmma's M is
/// 64 rows (the chunk's rows in V' = U - W S and the output).
/// prefillWarpgroupFits is where a spec's chunk is held to it.
constexpr int64_t kWarpgroupChunk = 64;

/// Whether recur's mma.sync form can keep the state in its state warps'
/// registers (RecurForm::RegisterState): K <= 128, V tiles of 16s.
bool recurStateInRegisters(const PrefillSpec &spec, int64_t valueTile);

/// Whether recur is compiled with the hardware's 255 registers a thread as
/// its limit (`nvvm.maxnreg`) instead of ptxas's own choice: KDA's
/// register-state recur at chunk 32, which ptxas held to 128 registers and
/// spilled (K = V = 64 with the gate by call: 4-12 B on sm_80 and sm_90a;
/// with the limit it takes 139-145). Elsewhere the count stays ptxas's,
/// as measured.
bool recurTakesAllRegisters(const PrefillPlan &plan, const PrefillSpec &spec);

/// Whether the spec's recur can be the wgmma warpgroup form (C =
/// kWarpgroupChunk, K of 64 or 128, V tiles of 16s) for every V tile in
/// `tiles`.
bool prefillWarpgroupFits(const PrefillSpec &spec, llvm::ArrayRef<int64_t> tiles);
/// Turns `plan` (of its V tile) into sm_90a's wgmma code: recur's
/// warpgroup form (Transposed, with the raw q/k form beside the warpgroup
/// chunks, at V tile 64 and a scalar gate; else Warpgroup), its block size
/// and shared memory (RecurWarpgroupSmem), chunks' warpgroup form or its
/// swizzled writes.
void useWarpgroupRecur(PrefillPlan &plan, const PrefillSpec &spec);

/// Bytes per (chunk, value head) of workspace regions 1-6: gamma_last (K
/// floats for kda), W, U, Qg, Kd, P (deltac_abi::prefillChunkRegionBytes;
/// PrefillEmitter::workRegion has the layout).
std::array<int64_t, 6> prefillChunkRegionBytes(const PrefillSpec &spec);

/// Bytes of workspace a call needs: chunk offsets plus the per-chunk
/// operands, for at most `maxChunks` chunks (total tokens / C + N bounds
/// it) and HV value heads: deltac_abi::prefillWorkspaceBytes, the formula
/// the host runtime evaluates too.
int64_t prefillWorkspaceBytes(const PrefillSpec &spec, int64_t maxChunks,
                              int64_t valueHeads, int64_t numSeqs);

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLPLAN_H
