/* deltac_api.h - argument structs and status shared by generated libraries.
 *
 * Plain C structs so the same arguments serve the C++ API, the extern "C"
 * API and ctypes. Copied verbatim into every generated library. */
#ifndef DELTAC_API_H
#define DELTAC_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum deltac_dtype {
  DELTAC_BF16 = 0,
  DELTAC_F16 = 1,
  DELTAC_F32 = 2
} deltac_dtype;

/* Status codes returned by every entry point. */
enum {
  DELTAC_OK = 0,
  DELTAC_INVALID_ARGUMENT = 1, /* nothing was launched or written */
  DELTAC_UNSUPPORTED = 2,      /* no specialization covers the call */
  DELTAC_CUDA_ERROR = 3,       /* driver missing, load or launch failed */
  DELTAC_INTERNAL_ERROR = 4    /* the host failed (out of host memory, an
                                  exception inside the library) */
};

/* One decode call: T = 1..max_t tokens for each of B rows, states in a pool;
 * or, with cu_seqlens, B rows of 0..max_t tokens each packed into T tokens.
 * Token-major tensors: q, k [tokens, stride q_stride / k_stride elements
 * between tokens, head h at h*K]; v, o likewise with value heads at hv*V.
 * g and beta are contiguous [tokens, HV]. Strides of 0 mean contiguous.
 * Alignment (checked): q, k, v, o, beta, state, step_states 16 bytes and
 * every token stride a multiple of 16 bytes; g, A_log, dt_bias, the index
 * arrays, cu_seqlens and error_flag their element's size. No tensor may
 * span more than 2^48 bytes. */
typedef struct deltac_decode_args {
  int64_t K, V;   /* head dims: select the specialization */
  int64_t B, T;   /* rows and tokens per row (1 <= T <= max_t); with
                     cu_seqlens, T = all tokens of the call (>= 1) */
  int64_t H, HV;  /* query/key heads and value heads, HV % H == 0 */
  deltac_dtype io_dtype;    /* dtype of q, k, v, o (and raw a, beta) */
  deltac_dtype state_dtype; /* dtype of the pool */
  const void *q;
  int64_t q_stride;
  const void *k;
  int64_t k_stride;
  const void *v;
  int64_t v_stride;
  void *o;
  int64_t o_stride;
  const void *g;        /* log g (f32; null: 0, no decay), alpha (f32) or */
                        /* raw a (io dtype) */
  const void *beta;     /* beta or its logits b (io dtype, or f32: beta_f32) */
  const float *A_log;   /* [HV], raw gates only (else null: refused) */
  const float *dt_bias; /* [HV], raw gates only (else null: refused) */
  void *state;          /* pool [slots, HV, V, K] (vk) or [slots, HV, K, V],
                           slot_stride apart; null: no state is written
                           (then initial_state or zero_initial_state) */
  int64_t slots;
  const int32_t *initial_state_indices; /* [B]; null: row b uses slot b */
  const int32_t *output_state_indices;  /* [B]; null: write the slot read */
  void *step_states;    /* [tokens, HV, state] per-step states, or null */
  int32_t keep_pool;    /* nonzero: leave the pool unchanged */
  int32_t *error_flag;  /* device int32 set to 1 on an index >= slots */
  float scale;
  int32_t debug_checks; /* nonzero: copy indices to the host and check them
                           (synchronises: not for CUDA graphs) */
  /* vLLM's speculative decoding, or null: slots [B, state_indices_2d_stride]
   * (stride 0 = T; at most 65536). Row b reads slot [b, num_accepted_tokens[b] - 1] (column
   * 0 when num_accepted_tokens is null) and writes the state after token t
   * to slot [b, t]; a negative slot is skipped. Excludes the 1-D indices. */
  const int32_t *state_indices_2d;
  int64_t state_indices_2d_stride;
  const int32_t *num_accepted_tokens;
  /* Varlen decode (vLLM's query_start_loc), or null: int32 [B + 1] on the
   * device, row b is tokens [cu_seqlens[b], cu_seqlens[b + 1]). The kernel
   * checks 0 = cu_seqlens[0] <= ... <= cu_seqlens[B] <= T as a whole: one
   * that fails skips the whole call (o = 0 for every token, no state) and
   * raises error_flag; tokens past cu_seqlens[B] get o = 0. A row over
   * max_t tokens (or over state_indices_2d_stride, which must then be
   * given) is skipped alone (o = 0, no state) and raises error_flag;
   * debug_checks checks it all on the host first. */
  const int32_t *cu_seqlens;
  /* nonzero: initial_state_indices, output_state_indices, state_indices_2d,
   * num_accepted_tokens and cu_seqlens point to int64 values (read as int64
   * by the kernel, never narrowed) */
  int32_t indices_i64;
  /* Out of place (FLA's fused_recurrent): entering states are read from
   * initial_state instead of the pool, and the leaving ones written to the
   * pool `state` (null: not written; then initial_state has `slots` rows).
   * initial_state has the pool's shape and slot stride, dtype
   * initial_state_dtype: the pool's, or bf16 / f16 for an f32 pool;
   * it may be the pool itself (in place) but must not overlap it
   * otherwise. Null: the pool is read. */
  const void *initial_state;
  int32_t initial_state_dtype; /* a deltac_dtype, read with initial_state */
  /* nonzero: every row starts from a zero state (FLA's initial_state=None);
   * neither the pool nor initial_state is read */
  int32_t zero_initial_state;
  /* Elements between slots of the pool (and initial_state): 0 = HV * K * V;
   * larger for pools that pack other data per slot (vLLM's hybrid cache).
   * A multiple of 16 bytes. */
  int64_t slot_stride;
  /* nonzero: beta is f32 (FLA's tests pass f32 beta with bf16 q), else
   * the io dtype. (dt_bias may be null: 0.) */
  int32_t beta_f32;
  /* The bounded raw gate (FLA's KDA lower_bound), raw-gate specs only:
   * nonzero bounded_gate makes the log decay lower_bound * sigmoid(
   * exp(A_log) * (a + dt_bias)) instead of -exp(A_log) * softplus(a +
   * dt_bias); A_log may then be null (a factor 1). lower_bound finite. */
  int32_t bounded_gate;
  float lower_bound;
  /* FLA's per-value terms, for specs with per_value (other specs refuse
   * them): gv, f32 [tokens, HV, V] log decays of each value column (column
   * j of S is scaled by exp(gv_j) after the gate), or null; 16-byte
   * aligned. */
  const float *gv;
  /* nonzero (per_value specs): beta is [tokens, HV, V], one per value
   * column (FLA's non-headwise beta); else [tokens, HV]. */
  int32_t beta_per_value;
  /* The options an `l2norm = call` / `beta = call` spec leaves to each
   * call; other specs fix them and refuse a nonzero value here. qk_l2norm
   * nonzero: q and k are L2-normalised in the kernel. beta_form: 0 beta as
   * given, 1 logits (beta = sigmoid(b)), 2 logits with beta = 2 sigmoid(b)
   * (FLA's allow_neg_eigval). */
  int32_t qk_l2norm;
  int32_t beta_form;
  /* A `gate = call` / `channel_call` spec's gate form: nonzero raw_gate
   * makes g a raw a (with A_log and dt_bias, as the raw forms), else g
   * holds log decays (f32). The raw a is f32, or with gate_io_dtype the io
   * dtype. Other specs refuse a nonzero value. */
  int32_t raw_gate;
  int32_t gate_io_dtype;
} deltac_decode_args;

/* One prefill call: N sequences packed into T tokens (B = 1), chunked.
 * Token-major tensors as for decode: q, k [T, q_stride / k_stride, head h at
 * h*K]; v, o [T, v_stride / o_stride, head hv at hv*V]; g, beta [T, HV].
 * cu_seqlens [N + 1] (int32, or int64 with cu_seqlens_i64) lives on the
 * device: 0 = cu_seqlens[0] <= ... <= cu_seqlens[N] <= T is checked by the
 * kernels as a whole (a failure skips the whole call: o = 0 for every
 * token, no state read or written, error_flag) and, with debug_checks, on
 * the host; tokens past cu_seqlens[N] get o = 0. Null cu_seqlens:
 * N sequences of T / N tokens. States: initial_state / final_state are
 * [rows, HV, V, K] (vk) or [rows, HV, K, V] with rows = slots; sequence n
 * uses row initial_state_indices[n] / output_state_indices[n] (null: row n;
 * output null: the row read); a negative index skips the read (zeros) or
 * the write; an index >= slots does too and raises error_flag. Either state
 * may be null (zeros / not written). The workspace (prefill_workspace_bytes)
 * is scratch owned by the caller; calls on different streams need their
 * own. */
typedef struct deltac_prefill_args {
  int64_t K, V;   /* head dims: select the specialization */
  int64_t T, N;   /* total tokens, sequences */
  int64_t H, HV;  /* query/key heads and value heads, HV % H == 0 */
  deltac_dtype io_dtype;
  deltac_dtype state_dtype;
  const void *q;
  int64_t q_stride;
  const void *k;
  int64_t k_stride;
  const void *v;
  int64_t v_stride;
  void *o;
  int64_t o_stride;
  const void *g;        /* log g (f32), alpha (f32) or raw a (io dtype) */
  const void *beta;     /* beta or its logits b (io dtype) */
  const float *A_log;   /* [HV], raw gates only (else null: refused) */
  const float *dt_bias; /* [HV] ([HV * K]: kda), raw gates only; null: 0 */
  const void *initial_state;
  void *final_state;
  int64_t slots;        /* rows of the state tensors (0: N) */
  const int32_t *initial_state_indices; /* [N] or null */
  const int32_t *output_state_indices;  /* [N] or null */
  const void *cu_seqlens;
  int32_t cu_seqlens_i64;
  void *workspace;
  int64_t workspace_bytes;
  int32_t *error_flag;  /* device int32, set to 1 on bad device data */
  float scale;
  int32_t debug_checks; /* nonzero: check cu_seqlens and indices on the
                           host (synchronises: not for CUDA graphs) */
  int64_t max_seqlen;   /* the longest sequence where the host knows it
                           (FLA's cu_seqlens_cpu), 0: unknown. It only picks
                           the kernel variant (never read on the device):
                           a wrong value costs speed, not correctness */
  int32_t indices_i64;  /* nonzero: initial_state_indices and
                           output_state_indices point to int64 values */
  int32_t bounded_gate; /* the bounded raw gate, as for decode (A_log and */
  float lower_bound;    /* dt_bias may be null here too: 1 and 0) */
  /* Elements between slots of initial_state and final_state: 0 = HV * K *
   * V; larger for pools that pack other data per slot (vLLM's hybrid
   * cache). A multiple of 16 bytes. */
  int64_t slot_stride;
  /* State checkpoints: the states of chunk boundaries besides the final
   * one, in the state's layout ([rows, HV, V, K] or [rows, HV, K, V]), f32
   * (checkpoint_dtype DELTAC_F32) or the io dtype, checkpoints 16-byte
   * aligned. checkpoints and checkpoint_starts both null: none.
   *  - checkpoint_starts null (FLA's return_intermediate_states): the state
   *    entering every chunk (of the spec's chunk length), row = the chunk's
   *    index in the call: sequence n's ceil(len_n / chunk) chunks follow
   *    sequence n - 1's. checkpoint_every_n_tokens must be 0.
   *  - checkpoint_starts [N] int64 on the device (FlashInfer's
   *    state_checkpoints): the state after every checkpoint_every_n_tokens
   *    tokens (a positive multiple of the chunk) of sequence n, j = 0 ..
   *    len_n / n_tokens - 1 at row checkpoint_starts[n] + j. Here
   *    checkpoint_rows may be 0 (no sequence reaches n tokens), and
   *    checkpoints then null.
   * Rows a sequence would store past checkpoint_rows (or below 0) raise
   * error_flag and are not written; a skipped sequence's rows are zeros
   * (an invalid cu_seqlens: every row). */
  void *checkpoints;
  int64_t checkpoint_rows;
  deltac_dtype checkpoint_dtype;
  const int64_t *checkpoint_starts;
  int64_t checkpoint_every_n_tokens;
  /* Nonzero: beta is f32 (read as given, never rounded; FLA's callers may
   * pass f32 beta with bf16 q). Else the io dtype; 16-byte aligned either way. */
  int32_t beta_f32;
  /* Context parallelism across ranks (docs/context-parallelism.md, "Across
   * GPUs"): a sequence split over ranks runs, on every rank but the one
   * holding its first token, in two calls with the same arguments, on the
   * same stream and workspace:
   *  - cp_phase 1: every sequence of the call enters in a state not yet
   *    known. Writes each one's transfer to cp_transfer (f32 [N, HV, K *
   *    (V + K)], 16-byte aligned: b [K][V] then M [K][K], row-major, so
   *    that the state leaving the call is M E + b for the entering state E
   *    in the [K][V] orientation, whatever the spec's layout) and a partial
   *    o; reads no state and writes none.
   *  - cp_phase 2: initial_state (and its indices) is the entering state E;
   *    finishes o and writes final_state as an ordinary call would. Run it
   *    once per phase 1 (it adds to o).
   * 0: an ordinary call (cp_transfer must be null). Phase calls need the
   * context-parallel kernels (sm_90a code, scalar gates), T >= 1 and no
   * checkpoints. cp_segments: the segments each sequence splits into on
   * the card (1 to deltac_abi::kMaxSegments; 0: chosen from N, HV and the
   * SMs); both phases must use the same. */
  int32_t cp_phase;
  void *cp_transfer;
  int32_t cp_segments;
  /* The options an `l2norm = call` / `beta = call` spec leaves to each
   * call; other specs fix them and refuse a nonzero value here. qk_l2norm
   * nonzero: q and k are L2-normalised in the kernel. beta_form: 0 beta as
   * given, 1 logits (beta = sigmoid(b)), 2 logits with beta = 2 sigmoid(b)
   * (FLA's allow_neg_eigval). */
  int32_t qk_l2norm;
  int32_t beta_form;
  /* A `gate = call` / `channel_call` spec's gate form: nonzero raw_gate
   * makes g a raw a (with A_log and dt_bias, as the raw forms), else g
   * holds log decays (f32). The raw a is f32, or with gate_io_dtype the io
   * dtype. Other specs refuse a nonzero value. */
  int32_t raw_gate;
  int32_t gate_io_dtype;
} deltac_prefill_args;

#ifdef __cplusplus
} /* extern "C" */

#include <string>

namespace deltac {
/// What every C++ entry point returns: ok(), or a code and a message that
/// names the offending argument or carries the driver's message.
struct Status {
  int code = DELTAC_OK;
  std::string message;
  bool ok() const { return code == DELTAC_OK; }
};
} // namespace deltac
#endif

#endif /* DELTAC_API_H */
