//===- PrefillKernel.h - the chunked (prefill) GPU kernels ------*- C++ -*-===//
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
// accumulation), on sm_90a wgmma (the warpgroup forms of RecurForm and
// ChunksForm); the triangular solve is fp32 in shared memory. recur keeps
// the next one or two chunks' operands in flight (a 2- or 3-stage ring sized
// by the shared memory the host grants; on sm_90 and later one thread fills
// it with bulk copies, on sm_80 every output thread with cp.async). The grids are
// one-dimensional: chunks head-fastest, recur sequence-major.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLKERNEL_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLKERNEL_H

#include "codegen/gpu/prefill/PrefillPlan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::delta {

/// The kernels of a prefill entry, in launch order: prep, chunks (or its
/// queue form in the overlapped launch), recur. The body of chunks and
/// recur is the plan's form (PrefillPlan::chunks, ::recur).
/// Context parallelism (PrefillSegments.cpp) adds recur_cp, segmentChain
/// and segmentCorrection, launched after chunks instead of recur.
enum class PrefillPart { prep, chunks, queue, recur, recurCp, segmentChain, segmentCorrection };

/// The parts built by a recur form (recur's block, shared memory and ring).
inline bool isRecurPart(PrefillPart part) {
  return part == PrefillPart::recur || part == PrefillPart::recurCp;
}


/// The part's name in its kernels' names (`<spec>_k<K>_v<V>_prefill_<part>`).
llvm::StringRef prefillPartName(PrefillPart part);

/// Builds kernel `<name>_<part><suffix>` into `module` and returns it, its
/// body the plan's form of that part. The gpu.func carries its
/// `delta.kernel` (#delta.kernel): the role (the part, or chunks_raw /
/// recur_shared by the plan's forms), the kind of target code
/// (PrefillPlan::code), block size, dynamic shared memory and the recur
/// grid's V tiles; the caller adds the dispatch bounds.
gpu::GPUFuncOp buildPrefillKernel(OpBuilder &builder, Location loc,
                        gpu::GPUModuleOp module, StringRef name,
                        PrefillPart part, const PrefillSpec &spec,
                        const PrefillPlan &plan, StringRef suffix = "");

/// The dynamic shared memory the part's kernel is launched with at most.
int64_t prefillPartSharedBytes(PrefillPart part, const PrefillPlan &plan);

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLKERNEL_H
