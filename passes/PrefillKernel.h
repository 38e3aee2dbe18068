//===- PrefillKernel.h - the chunked (prefill) GPU kernels -------*- C++ -*-===//
//
// Prefill runs the chunk-level IR of `delta-chunk` as three kernels that
// share one parameter list (the host fills it once and launches all three):
//
//   prep    one block: cu_seqlens -> chunk offsets per sequence in the
//           workspace (a block-wide scan; checks cu_seqlens, raising the
//           error flag), so nothing waits on the host. Launched only for
//           more than kPrefillInlineSequences sequences; below, every warp
//           of chunks and recur scans cu_seqlens itself (chunks' first
//           block checks it).
//   chunks  one block per (chunk, value head), all chunks in parallel: the
//           ops that do not read the state - the prepared inputs (L2 norm,
//           gate, beta), chunk_cumsum, chunk_kkt, solve_tril, chunk_wy and
//           the intra-chunk half of chunk_output - written to the workspace
//           as 16-bit tensor-core operands (bf16, or f16 for f16
//           activations). Per-channel decays (rule kda) take their own
//           path through P and L (reference-row products block row by
//           block row; a diagonal block too steep for them elementwise)
//           and leave e^G_last per channel.
//   recur   one block per (sequence, value head, V tile): the ops that read
//           the state - chunk_residual, chunk_output, chunk_state_step -
//           chunk after chunk, the state in fp32 registers of the state
//           warps (K <= 128: one warp per 16 columns, transposed, its
//           products fed from its own accumulators, PrefillRecurState.cpp;
//           else shared by rows); the output warps fill the operand ring
//           and compute chunk_output (PrefillRecur.cpp). recur has a block
//           size of its own (PrefillPlan::recurThreads).
//
// The products are mma.sync m16n8k16 (16-bit operands from ldmatrix, fp32
// accumulation), on sm_90a wgmma (PrefillPlan::warpgroupRecur and
// warpgroupChunks); the triangular solve is fp32 in shared memory. recur keeps
// the next one or two chunks' operands in flight (a 2- or 3-stage ring sized
// by the shared memory the host grants; on sm_90 and later one thread fills
// it with bulk copies, on sm_80 every output thread with cp.async). The grids are
// one-dimensional: chunks head-fastest, recur sequence-major.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_PASSES_PREFILLKERNEL_H
#define DELTAC_PASSES_PREFILLKERNEL_H

#include "passes/DecodeKernel.h"

#include <array>

namespace mlir::delta {

/// Calls with at most this many sequences skip `prep`: `chunks` and
/// `recur` scan the sequences' chunk counts in every warp instead (one
/// cu_seqlens pair per lane), which costs less than a kernel launch. The
/// host runtime uses the same bound (deltac_rt::kPrefillInlineSequences).
constexpr int64_t kPrefillInlineSequences = 32;

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
///   overlapped); qk_raw: recur reads raw q and k (PrefillPlan::recurRawQK;
///   the host launches chunks' `_chunks_raw` form with it).
llvm::ArrayRef<KernelParam> prefillKernelParams();

/// What the prefill kernels are specialised for, read from the chunk IR.
struct PrefillSpec {
  Rule rule;         ///< gated, delta or kda (per-channel decays)
  GateForm gate;     ///< none, log, linear, raw, channel_log or channel_raw
  BetaForm beta;     ///< given, sigmoid or sigmoid2
  bool qkL2Norm;
  StateLayout layout;
  Type ioType, stateType, gateType, betaType;
  int64_t k, v, chunk;
};

/// The V tile of one `recur` block, the block size of prep and chunks (256
/// threads when every product splits into a multiple of eight 16x8 tiles,
/// else 128), recur's warp roles and the dynamic shared memory of each
/// kernel, from the spec.
struct PrefillPlan {
  int64_t threads = 128;
  int64_t valueTile = 32;
  int64_t chunksSmem = 0, recurSmem = 0, prepSmem = 0;
  /// Bytes of one more recur pipeline stage (see RecurSmem).
  int64_t recurSmemStage = 0;
  /// recur fills its ring with bulk copies (cp.async.bulk, completion on
  /// an mbarrier per stage: sm_90 and later) instead of 16-byte cp.async.
  bool bulkCopies = false;
  /// sm_90 and later: recur is launched as a programmatic dependent of
  /// chunks (the host sets the launch attribute where the loaded recur is
  /// this code). Every chunks block lets it launch as soon as it starts
  /// (griddepcontrol.launch_dependents), so recur's blocks load their
  /// initial state while chunks' last blocks run; recur's output warps
  /// wait for all of chunks (griddepcontrol.wait) before their first copy
  /// of its results.
  bool gridDependency = false;
  /// recur keeps the state transposed in its state warps' registers, one
  /// warp per 16 columns of the V tile holding all K rows (K <= 128 and V
  /// tiles of 16s): the state step never leaves the warp, so the chain of
  /// states has no shared memory and no barrier on it (PrefillRecurState.cpp).
  /// Otherwise the state warps share the tile by rows and hand V' over
  /// through shared memory.
  bool registerState = false;
  /// recur's warps: the state warps, then the output warps.
  int64_t stateWarps = 0, outputWarps = 0;
  /// recur's block size (stateWarps + outputWarps warps); prep uses
  /// `threads`.
  int64_t recurThreads = 0;
  /// chunks' block size: `threads`, or 16 warps for rule kda, whose 155.5 KiB
  /// of shared memory leave one block per SM (GDN's chunks run three 8-warp
  /// blocks per SM), where every chunks product splits evenly over them.
  int64_t chunksThreads = 0;
  /// sm_90a: recur is two warpgroups, the state step's and the output's,
  /// whose products are wgmma (PrefillRecurWarpgroup.cpp), and chunks
  /// writes W, Qg, Kd and P as wgmma's 128-byte-swizzled shared-memory
  /// images and U in 16-column tiles, so that recur's ring receives every
  /// operand by bulk copy in the layout the tensor cores read
  /// (useWarpgroupRecur; prefillWarpgroupFits says for which specs).
  bool warpgroupRecur = false;
  /// sm_90a, scalar gates, K and V of 64 or 128: chunks' products are
  /// wgmma too, two warpgroups each taking one product of a pair (Q K^T
  /// and K K^T, then W and U), q, k and v landing as swizzled images and
  /// the results leaving by bulk copies (PrefillChunksWarpgroup.cpp).
  bool warpgroupChunks = false;
  /// sm_90a, V tile 64, scalar gate: recur keeps S^T in one warpgroup's
  /// accumulators and feeds it, and V'^T, to wgmma as the register A
  /// operand, so the state's chain has no shared-memory hand-over
  /// (PrefillRecurTransposed.cpp). Same workspace, ring stages and block
  /// size as warpgroupRecur, which it implies; O^T's staging buffers take
  /// the place of the S^T and V'^T images (RecurWarpgroupSmem).
  bool transposedRecur = false;
  /// The transposed recur beside warpgroupChunks reads the raw q and k rows
  /// itself (cp.async into its ring) and scales them in registers by the
  /// per-token factors chunks leaves after P (fq = scale e^G / |q|,
  /// fk = e^(G_last - G) / |k|): O^T's first product is scaled by column,
  /// V'^T by column before it meets k. Where the host says so (the
  /// `qk_raw` parameter), chunks then writes no Qg and Kd: 32 of the 72
  /// KiB per (chunk, value head) it would write and recur read.
  bool recurRawQK = false;
  /// chunks' form beside it (`_chunks_raw`, launched with qk_raw): writes
  /// each row's factor fq or fk after P instead of the scaled rows Qg, Kd.
  bool chunksRawQK = false;
  /// recur of the overlapped launch (PrefillOverlap.cpp; sm_90a, the
  /// transposed recur beside warpgroupChunks, on the variants the plan
  /// marks): chunks' queue form takes its items from a queue in workspace
  /// region 7 and publishes a ready flag per (chunk, head), and this recur,
  /// launched as the queue's programmatic dependent on the SMs it leaves
  /// free, copies each chunk once its flag is up instead of waiting for the
  /// whole grid when the `overlap` parameter is set.
  bool chunkFlags = false;
  /// recur of the shared overlapped launch (`_recur_shared`; the
  /// transposed recur with chunkFlags and without the raw q/k form): its
  /// block shares an SM with one block of chunks' queue form instead of
  /// taking an SM of its own, so it is compiled to kSharedRecurRegisters
  /// per thread (`nvvm.maxnreg`) and its warpgroups trade registers with
  /// setmaxnreg: the chain's up to kSharedChainRegisters, the output
  /// warpgroup's down to what is left. With two ring stages its block and
  /// a queue block fit an SM's registers and shared memory together.
  bool sharedOverlap = false;
};
/// The shared overlapped recur's registers (PrefillPlan::sharedOverlap):
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

/// Whether the spec's recur can be the wgmma warpgroup form (C = 64, K of
/// 64 or 128, V tiles of 16s) for every V tile in `tiles`.
bool prefillWarpgroupFits(const PrefillSpec &spec, llvm::ArrayRef<int64_t> tiles);
/// Turns `plan` (of its V tile) into the warpgroup form: recur's block
/// size and shared memory (RecurWarpgroupSmem), chunks' swizzled writes.
void useWarpgroupRecur(PrefillPlan &plan, const PrefillSpec &spec);

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

/// Bytes per (chunk, value head) of workspace regions 1-6: gamma_last (K
/// floats for kda),
/// W, U, Qg, Kd, P (PrefillEmitter::workRegion has the layout).
std::array<int64_t, 6> prefillChunkRegionBytes(const PrefillSpec &spec);

/// Bytes of workspace a call needs: chunk offsets plus the per-chunk
/// operands, for at most `maxChunks` chunks (total tokens / C + N bounds
/// it) and HV value heads. The host runtime computes the same formula.
int64_t prefillWorkspaceBytes(const PrefillSpec &spec, int64_t maxChunks,
                              int64_t valueHeads, int64_t numSeqs);

/// The kernels of a prefill entry in launch order: "prep", "chunks", "recur".
llvm::ArrayRef<llvm::StringRef> prefillKernelParts();

/// Builds kernel `<name>_<part><suffix>` into `module`. The gpu.func
/// carries `delta.block_threads`, `delta.dynamic_smem` and `delta.grid_x`
/// (V tiles of the recur grid).
void buildPrefillKernel(OpBuilder &builder, Location loc,
                        gpu::GPUModuleOp module, StringRef name,
                        StringRef part, const PrefillSpec &spec,
                        const PrefillPlan &plan, StringRef suffix = "");

} // namespace mlir::delta

#endif // DELTAC_PASSES_PREFILLKERNEL_H
