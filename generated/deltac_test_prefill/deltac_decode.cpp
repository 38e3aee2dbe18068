// deltac_decode.cpp - host-side checks and launch of decode kernels.
#include "deltac_decode.h"
#include "deltac_checks.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace deltac_rt {
namespace {
/// Debug mode, varlen: copies cu_seqlens to the host and checks what the
/// kernel checks per row (0 = cu[0] <= ... <= cu[B] = T, rows of at most
/// max_t tokens and at most `slotStride` with 2-D slots).
deltac::Status checkCuSeqlens(const deltac_decode_args &a, int64_t maxT,
                              int64_t slotStride, void *stream) {
  std::vector<int32_t> cu(a.B + 1);
  std::string error;
  if (!copyToHost(cu.data(), a.cu_seqlens, cu.size() * sizeof(int32_t), stream,
                  &error))
    return {DELTAC_CUDA_ERROR, error};
  if (cu[0] != 0)
    return invalid("cu_seqlens[0] = " + std::to_string(cu[0]) +
                   " must be 0");
  if (cu[a.B] != a.T)
    return invalid("cu_seqlens[" + std::to_string(a.B) + "] = " +
                   std::to_string(cu[a.B]) + " must equal T = " +
                   std::to_string(a.T));
  int64_t longest = a.state_indices_2d ? std::min(maxT, slotStride) : maxT;
  for (int64_t b = 0; b < a.B; ++b) {
    int64_t len = int64_t(cu[b + 1]) - cu[b];
    if (len < 0 || len > longest)
      return invalid("cu_seqlens: row " + std::to_string(b) + " has " +
                     std::to_string(len) + " tokens, outside [0, " +
                     std::to_string(longest) + "]");
  }
  return {};
}

/// Debug mode: copies the device-resident indices to the host and checks
/// every one (slots below `slots`, accepted counts in [1, T], or in [1,
/// slotStride] for varlen rows).
deltac::Status checkIndices(const deltac_decode_args &a, int64_t slotStride,
                            void *stream) {
  struct Indices {
    const char *name;
    const int32_t *data;
    int64_t count;
  };
  const Indices all[] = {
      {"initial_state_indices", a.initial_state_indices, a.B},
      {"output_state_indices", a.output_state_indices, a.B},
      {"state_indices_2d", a.state_indices_2d, a.B * slotStride},
      {"num_accepted_tokens", a.num_accepted_tokens, a.B}};
  for (const Indices &ix : all) {
    if (!ix.data)
      continue;
    std::vector<int32_t> host(ix.count);
    std::string error;
    if (!copyToHost(host.data(), ix.data, ix.count * sizeof(int32_t), stream,
                    &error))
      return {DELTAC_CUDA_ERROR, error};
    bool accepted = ix.data == a.num_accepted_tokens;
    int64_t most = a.cu_seqlens ? slotStride : a.T; // accepted counts
    for (int64_t i = 0; i < ix.count; ++i) {
      bool bad = accepted ? host[i] < 1 || host[i] > most : host[i] >= a.slots;
      if (bad)
        return invalid(std::string(ix.name) + "[" + std::to_string(i) +
                       "] = " + std::to_string(host[i]) +
                       (accepted ? " must lie in [1, " +
                                       std::string(a.cu_seqlens
                                                       ? "state_indices_2d_stride"
                                                       : "T") +
                                       " = " + std::to_string(most) + "]"
                                 : " is not below slots = " +
                                       std::to_string(a.slots)));
    }
  }
  return {};
}
} // namespace

deltac::Status runDecode(const DecodeVariant *variants, int count,
                         const deltac_decode_args &a, void *stream) {
  const DecodeVariant *variant = nullptr;
  std::string available;
  for (int i = 0; i < count; ++i) {
    if (variants[i].K == a.K && variants[i].V == a.V && !variant)
      variant = &variants[i];
    // Variants of one (K, V) are adjacent in the table: list each pair once.
    if (i > 0 && variants[i - 1].K == variants[i].K &&
        variants[i - 1].V == variants[i].V)
      continue;
    available += (available.empty() ? "" : ", ") +
                 std::to_string(variants[i].K) + "x" +
                 std::to_string(variants[i].V);
  }
  if (!variant)
    return {DELTAC_UNSUPPORTED, "K = " + std::to_string(a.K) + ", V = " +
                                    std::to_string(a.V) +
                                    ": no specialization (available: " +
                                    available + ")"};
  const DecodeVariant &v = *variant;
  if (std::string e = checkDtypes(a.io_dtype, a.state_dtype, v.io, v.state);
      !e.empty())
    return invalid(e);
  if (a.B < 1 || a.B > 65535)
    return invalid("B = " + std::to_string(a.B) + " must lie in [1, 65535]");
  if (a.cu_seqlens) {
    if (a.T < 1 || a.T > INT32_MAX)
      return invalid("T = " + std::to_string(a.T) +
                     " (all tokens, with cu_seqlens) must lie in [1, 2^31)");
    if (!aligned4(a.cu_seqlens))
      return invalid("cu_seqlens must be 4-byte aligned (int32)");
  } else if (a.T < 1 || a.T > v.maxT) {
    return invalid("T = " + std::to_string(a.T) + " must lie in [1, " +
                   std::to_string(v.maxT) + "] (max_t of the spec)");
  }
  if (std::string e = checkHeads(a.H, a.HV); !e.empty())
    return invalid(e);
  if (a.slots < 1)
    return invalid("slots = " + std::to_string(a.slots) +
                   " must be positive");
  for (auto [name, p] : {std::pair<const char *, const void *>{"q", a.q},
                         {"k", a.k},
                         {"v", a.v},
                         {"o", a.o},
                         {"beta", a.beta},
                         {"state", a.state}})
    if (std::string e = needPointer(name, p); !e.empty())
      return invalid(e);
  if (std::string e = checkGateInputs(v.gate, a.g, a.A_log, a.dt_bias);
      !e.empty())
    return invalid(e);
  if (a.step_states && !aligned16(a.step_states))
    return invalid("step_states must be 16-byte aligned");
  int64_t slotStride = a.state_indices_2d_stride == 0
                           ? a.T
                           : a.state_indices_2d_stride;
  if (a.state_indices_2d) {
    if (a.initial_state_indices || a.output_state_indices)
      return invalid("state_indices_2d excludes initial_state_indices and "
                     "output_state_indices");
    if (a.cu_seqlens && a.state_indices_2d_stride < 1)
      return invalid("state_indices_2d_stride = " +
                     std::to_string(a.state_indices_2d_stride) +
                     " must be given (>= 1) with cu_seqlens");
    if (!a.cu_seqlens && slotStride < a.T)
      return invalid("state_indices_2d_stride = " +
                     std::to_string(a.state_indices_2d_stride) +
                     " is smaller than T = " + std::to_string(a.T));
  } else if (a.num_accepted_tokens) {
    return invalid("num_accepted_tokens needs state_indices_2d");
  }
  if (a.keep_pool && !a.step_states)
    return invalid("keep_pool needs step_states (otherwise the call would "
                   "compute nothing it keeps)");
  int64_t ioBytes = dtypeBytes(v.io);
  int64_t qkMultiple = 16 / ioBytes;
  int64_t qs, ks, vs, os;
  for (std::string e :
       {tokenStride("q_stride", a.q_stride, a.H * v.K, qkMultiple, qs),
        tokenStride("k_stride", a.k_stride, a.H * v.K, qkMultiple, ks),
        tokenStride("v_stride", a.v_stride, a.HV * v.V, 1, vs),
        tokenStride("o_stride", a.o_stride, a.HV * v.V, 1, os)})
    if (!e.empty())
      return invalid(e);
  if (a.debug_checks) {
    if (a.cu_seqlens)
      if (deltac::Status s = checkCuSeqlens(a, v.maxT, slotStride, stream);
          !s.ok())
        return s;
    if (deltac::Status s = checkIndices(a, slotStride, stream); !s.ok())
      return s;
  }

  // Parameter order: decodeKernelParams() in passes/DecodeKernel.h, named
  // in decodeParamNames() below (a unit test compares the two).
  const void *q = a.q, *k = a.k, *vp = a.v, *g = a.g, *beta = a.beta,
             *aLog = a.A_log, *dtBias = a.dt_bias, *o = a.o, *state = a.state,
             *inIdx = a.initial_state_indices,
             *outIdx = a.output_state_indices, *steps = a.step_states,
             *flag = a.error_flag;
  int32_t T = (int32_t)a.T, H = (int32_t)a.H, HV = (int32_t)a.HV;
  int64_t slots = a.slots;
  float scale = a.scale;
  int32_t flags = a.keep_pool ? 1 : 0;
  const void *stepSlots = a.state_indices_2d,
             *accepted = a.num_accepted_tokens, *cu = a.cu_seqlens;
  void *params[] = {&q,    &k,     &vp,    &g,       &beta,  &aLog,
                    &dtBias, &o,   &state, &inIdx,   &outIdx, &steps,
                    &flag, &T,     &H,     &HV,      &slots, &qs,
                    &ks,   &vs,    &os,    &scale,   &flags, &stepSlots,
                    &accepted, &slotStride, &cu};
  // Dispatch among the variants of this (K, V).
  std::string error;
  const DecodeVariant *chosen = nullptr;
  int sms = 0;
  for (int i = 0; i < count && !chosen; ++i) {
    const DecodeVariant &c = variants[i];
    if (c.K != a.K || c.V != a.V)
      continue;
    if (c.minBlocksPerSM > 0 && sms == 0 &&
        (sms = multiprocessorCount(&error)) == 0)
      return {DELTAC_CUDA_ERROR, error};
    if (int64_t(c.gridX) * a.HV * a.B >= c.minBlocksPerSM * sms)
      chosen = &c;
  }
  if (!chosen)
    chosen = &v;
  if (!chosen->kernel->launch(chosen->gridX, (unsigned)a.HV, (unsigned)a.B,
                              chosen->threads, stream, params, &error))
    return {DELTAC_CUDA_ERROR, error};
  return {};
}

const char *const *decodeParamNames(int *count) {
  // The order of `params` in runDecode.
  static const char *const names[] = {
      "q",     "k",       "v",           "g",          "beta",
      "A_log", "dt_bias", "o",           "state",      "in_idx",
      "out_idx", "step_states", "error_flag", "T",     "H",
      "HV",    "slots",   "q_stride",    "k_stride",   "v_stride",
      "o_stride", "scale", "flags",      "step_slots", "num_accepted",
      "step_slots_stride", "cu_seqlens"};
  *count = sizeof(names) / sizeof(names[0]);
  return names;
}

namespace {
thread_local std::string lastErrorText;
}

int setLastError(const deltac::Status &status) {
  lastErrorText = status.message;
  return status.code;
}

const char *lastError() { return lastErrorText.c_str(); }

} // namespace deltac_rt
