//===- DecodeKernel.h - the recurrent-step (decode) GPU kernel --*- C++ -*-===//
//
// The decode kernel advances one state per (batch row, value head) by T <=
// max_t tokens in a single pass over the state: every state element is read
// once, kept in registers for all T tokens and written once. This header
// fixes its ABI (the parameter list the host runtime fills, in
// templates/runtime/deltac_decode.cpp; tests/unit/DecodeAbiTest.cpp checks
// that both list the same parameters in the same order) and its tiling.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_DECODE_DECODEKERNEL_H
#define DELTAC_CODEGEN_GPU_DECODE_DECODEKERNEL_H

#include "codegen/gpu/KernelAbi.h"
#include "codegen/gpu/decode/DecodeSpec.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir::delta {

/// The decode kernel's parameters, in order. Pointers that an option does not
/// use (g for `delta`, A_log without a raw gate, the index and step buffers
/// when absent) are passed as null.
///   q, k [tokens, q_stride / k_stride elements apart; heads at h*K]
///   v, o [tokens, v_stride / o_stride; heads at hv*V]
///   g, beta [tokens, HV] contiguous (g: [tokens, HV, K] for kda)
///   state: the pool, [slots, HV, V, K] (vk) or [slots, HV, K, V] (kv)
///   in_idx, out_idx: int32 [B] slots (null: row b uses slot b; out_idx null:
///     write back to the slot read). Negative = padding; >= slots = padding
///     and sets *error_flag = 1.
///   step_states: [tokens, HV, state] per-step states, or null
///   flags: bit 0 = leave the pool unchanged (only step states are written);
///     bit 1 = the index arrays and cu_seqlens are int64; see DecodeFlags
///   step_slots, num_accepted, step_slots_stride: vLLM's speculative decoding
///     (or null): row b reads slot step_slots[b * stride + num_accepted[b]
///     - 1] (num_accepted null: column 0) and writes the state after token t
///     to slot step_slots[b * stride + t] instead of a final write.
///   cu_seqlens: int32 [B + 1] or null. Null: row b is tokens [b T, b T + T).
///     Given: T is the total token count and row b is tokens [cu[b], cu[b+1])
///     (0 to max_t of them); tokens past cu[B] get o = 0. A cu_seqlens that
///     breaks 0 = cu[0] <= cu[1] <= ... <= cu[B] <= T anywhere skips the
///     whole call (o = 0 for every token, no state) and sets *error_flag = 1;
///     a row over max_t (or the 2-D slot stride) is skipped alone (o = 0,
///     no state) and sets the flag. num_accepted[b] outside [1, T] (varlen:
///     [1, step_slots_stride]) skips the row likewise.
///   state_in: entering states read instead of the pool's (out of place:
///     FLA's initial_state), same shape and slot stride, indexed by the
///     slot read; null: the pool. The pool's dtype, or for an f32 pool
///     bf16 / f16 as the flags say.
///   slot_stride: elements between slots of the pool and of state_in
///     (>= HV * K * V: vLLM's hybrid cache packs other data in a slot).
///   lower_bound: NaN for the softplus raw gate -exp(A_log) softplus(a +
///     dt_bias); a number for FLA's bounded KDA gate lower_bound *
///     sigmoid(exp(A_log) (a + dt_bias)) (raw gates only).
///   gv: per_value specs only (others never read it): f32 [tokens, HV, V]
///     log decays of each value column, or null (none). With the
///     kBetaPerValue flag beta is [tokens, HV, V] too.
/// dt_bias may be null (0); A_log too (a factor 1, the bounded gate only).
llvm::ArrayRef<KernelParam> decodeKernelParams();

/// The `flags` parameter's bits are deltac_abi::DecodeFlags
/// (templates/runtime/deltac_abi.h).

/// Whether the staged form covers `spec`: beta per head (no per-value
/// terms), max_t >= 3, and a gate per head or, kv only, KDA's per-channel
/// decays; kv up to K = 128.
bool stagedDecodeFits(const DecodeSpec &spec);

/// Chooses the tiling of `spec` (see DecodeKernel.cpp for the reasoning).
DecodeTiling chooseDecodeTiling(const DecodeSpec &spec,
                                const DecodeTuning &tuning = {});

/// The decode kernels of `spec`'s entry, in dispatch order: "staged" (the
/// bulk shape with a call's token inputs staged in shared memory, for calls
/// of three or more tokens a row, where the spec fits it:
/// stagedDecodeFits), "bulk" (no prefetch, more state per thread: best when
/// the grid fills the GPU several times) and "small" (prefetch, more
/// blocks: lower latency for few rows; not built for a kv spec that has
/// the staged form, where bulk measured faster for few rows).
/// `overrides` carries the pass options (rows per thread, dot partials,
/// unswitching); `only` restricts to one variant ("" = all).
llvm::SmallVector<std::pair<std::string, DecodeTuning>>
decodeVariants(const DecodeSpec &spec, const DecodeTuning &overrides,
               llvm::StringRef only);

/// Builds the kernel `name` into `module` (a gpu.module). The gpu.func carries
/// its launch shape and dispatch thresholds in its `delta.kernel` attribute
/// (value tile, grid x = blocks along V; grid y = HV, z = B).
/// `code`: KernelCode::bulk for sm_90+ targets, whose code is launched as a
/// programmatic dependent of the previous kernel in the stream (it waits
/// for that grid before its first memory access, then lets its own
/// dependent launch: in a run of decode calls each one's launch overlaps
/// its predecessor); KernelCode::all for code every target runs.
gpu::GPUFuncOp buildDecodeKernel(OpBuilder &builder, Location loc,
                                 gpu::GPUModuleOp module, StringRef name,
                                 const DecodeSpec &spec,
                                 const DecodeTuning &tuning = {},
                                 KernelCode code = KernelCode::all);

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_DECODE_DECODEKERNEL_H
