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
  DELTAC_CUDA_ERROR = 3        /* driver missing, load or launch failed */
};

/* One decode call: T = 1..max_t tokens for each of B rows, states in a pool.
 * Token-major tensors: q, k [B*T tokens, stride q_stride / k_stride elements
 * between tokens, head h at h*K]; v, o likewise with value heads at hv*V.
 * g and beta are contiguous [B*T, HV]. Strides of 0 mean contiguous. */
typedef struct deltac_decode_args {
  int64_t K, V;   /* head dims: select the specialization */
  int64_t B, T;   /* rows and tokens per row (1 <= T <= max_t) */
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
  const void *g;        /* log g (f32), alpha (f32) or raw a (io dtype) */
  const void *beta;     /* beta or its logits b (io dtype) */
  const float *A_log;   /* [HV], raw gates only */
  const float *dt_bias; /* [HV], raw gates only */
  void *state;          /* pool [slots, HV, V, K] (vk) or [slots, HV, K, V] */
  int64_t slots;
  const int32_t *initial_state_indices; /* [B]; null: row b uses slot b */
  const int32_t *output_state_indices;  /* [B]; null: write the slot read */
  void *step_states;    /* [B, T, HV, state] per-step states, or null */
  int32_t keep_pool;    /* nonzero: leave the pool unchanged */
  int32_t *error_flag;  /* device int32 set to 1 on an index >= slots */
  float scale;
  int32_t debug_checks; /* nonzero: copy indices to the host and check them
                           (synchronises: not for CUDA graphs) */
  /* vLLM's speculative decoding, or null: slots [B, state_indices_2d_stride]
   * (stride 0 = T). Row b reads slot [b, num_accepted_tokens[b] - 1] (column
   * 0 when num_accepted_tokens is null) and writes the state after token t
   * to slot [b, t]; a negative slot is skipped. Excludes the 1-D indices. */
  const int32_t *state_indices_2d;
  int64_t state_indices_2d_stride;
  const int32_t *num_accepted_tokens;
} deltac_decode_args;

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
