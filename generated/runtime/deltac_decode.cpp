// deltac_decode.cpp - host-side checks and launch of decode kernels.
#include "deltac_decode.h"
#include "deltac_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace deltac_rt {

deltac::Status scanDeviceIndices(
    const void *device, int64_t first, int64_t count, bool wide, void *stream,
    const std::function<std::string(int64_t, int64_t)> &check) {
  // Blocks of at most 64K entries: the host memory debug mode takes is
  // bounded whatever the sizes (they are bounded too, but products of them
  // are not small).
  constexpr int64_t kBlock = 1 << 16;
  const int64_t bytes = wide ? 8 : 4;
  std::vector<unsigned char> host(size_t(std::min(count, kBlock) * bytes));
  std::string error;
  for (int64_t at = 0; at < count; at += kBlock) {
    int64_t n = std::min(kBlock, count - at);
    // Device addresses are integers to the host (no host pointer
    // arithmetic on them).
    const void *src = reinterpret_cast<const void *>(
        reinterpret_cast<uintptr_t>(device) + uintptr_t((first + at) * bytes));
    if (!copyToHost(host.data(), src, size_t(n * bytes), stream, &error))
      return {DELTAC_CUDA_ERROR, error};
    for (int64_t i = 0; i < n; ++i) {
      int64_t value;
      if (wide) {
        std::memcpy(&value, host.data() + i * 8, 8);
      } else {
        int32_t v32;
        std::memcpy(&v32, host.data() + i * 4, 4);
        value = v32;
      }
      if (std::string e = check(first + at + i, value); !e.empty())
        return invalid(e);
    }
  }
  return {};
}

namespace {
/// Debug mode, varlen: copies cu_seqlens to the host and checks what the
/// kernel checks (0 = cu[0] <= ... <= cu[B] <= T, rows of at most
/// max_t tokens and at most `slotStride` with 2-D slots).
deltac::Status checkCuSeqlens(const deltac_decode_args &a, int64_t maxT,
                              int64_t slotStride, void *stream) {
  int64_t longest = a.state_indices_2d ? std::min(maxT, slotStride) : maxT;
  int64_t previous = 0;
  return scanDeviceIndices(
      a.cu_seqlens, 0, a.B + 1, a.indices_i64, stream,
      [&](int64_t i, int64_t cu) -> std::string {
        if (i == 0 && cu != 0)
          return "cu_seqlens[0] = " + std::to_string(cu) + " must be 0";
        // Tokens past cu_seqlens[B] (padding) get o = 0.
        if (cu > a.T)
          return "cu_seqlens[" + std::to_string(i) + "] = " +
                 std::to_string(cu) + " must not exceed T = " +
                 std::to_string(a.T);
        if (i > 0 && (cu < previous || cu - previous > longest))
          return "cu_seqlens: row " + std::to_string(i - 1) + " has " +
                 std::to_string(cu - previous) + " tokens, outside [0, " +
                 std::to_string(longest) + "]";
        previous = cu;
        return "";
      });
}

/// Debug mode: copies the device-resident indices to the host and checks
/// every one a row can use (slots below `slots`, accepted counts in [1, T],
/// or in [1, slotStride] for varlen rows; of the 2-D slots the columns a
/// row can read or write: [0, T), or [0, slotStride) for varlen rows).
deltac::Status checkIndices(const deltac_decode_args &a, int64_t slotStride,
                            void *stream) {
  auto slotCheck = [&](const char *name) {
    return [&a, name](int64_t i, int64_t slot) -> std::string {
      if (slot >= a.slots)
        return std::string(name) + "[" + std::to_string(i) + "] = " +
               std::to_string(slot) + " is not below slots = " +
               std::to_string(a.slots);
      return "";
    };
  };
  for (auto [name, data] : {std::pair<const char *, const void *>{
                                "initial_state_indices", a.initial_state_indices},
                            {"output_state_indices", a.output_state_indices}})
    if (data)
      if (deltac::Status s = scanDeviceIndices(data, 0, a.B, a.indices_i64,
                                               stream, slotCheck(name));
          !s.ok())
        return s;
  if (a.state_indices_2d) {
    int64_t columns = a.cu_seqlens ? slotStride : a.T;
    auto check = slotCheck("state_indices_2d");
    // Contiguous rows in one scan, else row by row (the columns a row uses).
    for (int64_t b = 0, rows = columns == slotStride ? 1 : a.B; b < rows; ++b)
      if (deltac::Status s = scanDeviceIndices(
              a.state_indices_2d, b * slotStride,
              columns == slotStride ? a.B * slotStride : columns,
              a.indices_i64, stream, check);
          !s.ok())
        return s;
  }
  if (a.num_accepted_tokens) {
    int64_t most = a.cu_seqlens ? slotStride : a.T;
    if (deltac::Status s = scanDeviceIndices(
            a.num_accepted_tokens, 0, a.B, a.indices_i64, stream,
            [&](int64_t i, int64_t n) -> std::string {
              if (n < 1 || n > most)
                return "num_accepted_tokens[" + std::to_string(i) + "] = " +
                       std::to_string(n) + " must lie in [1, " +
                       (a.cu_seqlens ? "state_indices_2d_stride" : "T") +
                       " = " + std::to_string(most) + "]";
              return "";
            });
        !s.ok())
      return s;
  }
  return {};
}
} // namespace

namespace {
deltac::Status checkAndLaunch(const DecodeVariant *variants, int count,
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
  // Index arrays (and cu_seqlens) are int32, or int64 with indices_i64.
  const int64_t indexBytes = a.indices_i64 ? 8 : 4;
  const char *indexType = a.indices_i64 ? "int64" : "int32";
  if (a.cu_seqlens) {
    if (a.T < 1 || a.T > INT32_MAX)
      return invalid("T = " + std::to_string(a.T) +
                     " (all tokens, with cu_seqlens) must lie in [1, 2^31)");
    if (!alignedTo(a.cu_seqlens, indexBytes))
      return invalid("cu_seqlens must be " + std::to_string(indexBytes) +
                     "-byte aligned (" + indexType + ")");
  } else if (a.T < 1 || a.T > v.maxT) {
    return invalid("T = " + std::to_string(a.T) + " must lie in [1, " +
                   std::to_string(v.maxT) + "] (max_t of the spec)");
  }
  if (std::string e = checkHeads(a.H, a.HV); !e.empty())
    return invalid(e);
  if (a.slots < 1)
    return invalid("slots = " + std::to_string(a.slots) +
                   " must be positive");
  // Without indices row b uses slot b (prefill rejects the analogue).
  if (!a.initial_state_indices && !a.state_indices_2d && a.B > a.slots)
    return invalid("slots = " + std::to_string(a.slots) + " is below B = " +
                   std::to_string(a.B) +
                   " (without initial_state_indices or state_indices_2d, "
                   "row b uses slot b)");
  if (std::string e = checkScale(a.scale); !e.empty())
    return invalid(e);
  for (auto [name, p] : {std::pair<const char *, const void *>{"q", a.q},
                         {"k", a.k},
                         {"v", a.v},
                         {"o", a.o}})
    if (std::string e = needPointer(name, p); !e.empty())
      return invalid(e);
  // The options the spec leaves to the call, and so the gate form it runs.
  CallForm form;
  if (deltac::Status s = callForm(v, a, form); !s.ok())
    return s;
  const GateKind gate = form.gate;
  const int64_t gBytes = form.gateBytes;
  // dt_bias may be null (0: FLA's dt_bias=None); a null log g reads 0.
  if (std::string e = checkGateInputs(gate, a.g, a.A_log, a.dt_bias, a.bounded_gate,
                                      a.lower_bound, /*nullLogGate=*/true);
      !e.empty())
    return invalid(e);
  if (!a.beta)
    return invalid("beta must not be null");
  const bool betaF32 = a.beta_f32 != 0;
  // FLA's per-value terms exist only in per_value kernels (others would
  // read beta per head and never read gv: refused, never ignored).
  const bool betaPerValue = a.beta_per_value != 0;
  if ((a.gv || betaPerValue) && !v.perValue)
    return {DELTAC_UNSUPPORTED,
            std::string(a.gv ? "gv" : "beta_per_value") +
                ": this spec has no per-value terms (a spec with per_value "
                "computes FLA's gv and per-value beta)"};
  if (a.gv && !aligned16(a.gv))
    return invalid("gv must be 16-byte aligned");
  // Entering states: the pool, initial_state (out of place), or zeros.
  const void *stateIn = a.initial_state;
  deltac_dtype inDtype = v.state;
  if (stateIn) {
    if (a.zero_initial_state)
      return invalid("zero_initial_state excludes initial_state");
    if (a.initial_state_dtype < DELTAC_BF16 ||
        a.initial_state_dtype > DELTAC_F32)
      return invalid("initial_state_dtype = " +
                     std::to_string(a.initial_state_dtype) +
                     " is not a deltac_dtype");
    inDtype = deltac_dtype(a.initial_state_dtype);
    if (inDtype != v.state && v.state != DELTAC_F32)
      return invalid("initial_state_dtype must be the pool's dtype (the "
                     "kernels convert only bf16 or f16 entering states of an "
                     "f32 pool)");
    if (!aligned16(stateIn))
      return invalid("initial_state must be 16-byte aligned");
  }
  if (!a.state && !stateIn && !a.zero_initial_state)
    return invalid("state must not be null (it is the pool) unless "
                   "initial_state or zero_initial_state gives the entering "
                   "states");
  if (!a.state && (a.state_indices_2d || a.output_state_indices))
    return invalid(std::string(a.state_indices_2d ? "state_indices_2d"
                                                  : "output_state_indices") +
                   " writes the pool: state must not be null");
  if (a.state && !aligned16(a.state))
    return invalid("state must be 16-byte aligned");
  const int64_t stateBytes = dtypeBytes(v.state);
  int64_t poolStride = 0;
  // Slots of the pool and of state_in: the narrower dtype's alignment.
  if (std::string e = checkSlotStride(a.slot_stride, a.HV * v.K * v.V,
                                      std::min(stateBytes, dtypeBytes(inDtype)),
                                      poolStride);
      !e.empty())
    return invalid(e);
  if (a.step_states && !aligned16(a.step_states))
    return invalid("step_states must be 16-byte aligned");
  // Natural alignment of what the kernel loads one element at a time.
  const int64_t betaBytes = betaF32 ? 4 : dtypeBytes(v.io);
  // KDA: the vk kernels load a lane's dt_bias channels in 16-byte pieces
  // too (g's alignment: checkGateInputs).
  if (perChannel(gate) && a.dt_bias && !aligned16(a.dt_bias))
    return invalid("dt_bias must be 16-byte aligned (per-channel gates)");
  for (std::string e :
       {needAligned("g", a.g, gBytes, gBytes == 4 ? "f32" : "the io dtype"),
        needAligned("beta", a.beta, betaBytes,
                    betaF32 ? "f32" : "the io dtype"),
        needAligned("A_log", a.A_log, 4, "f32"),
        needAligned("dt_bias", a.dt_bias, 4, "f32"),
        needAligned("initial_state_indices", a.initial_state_indices,
                    indexBytes, indexType),
        needAligned("output_state_indices", a.output_state_indices,
                    indexBytes, indexType),
        needAligned("state_indices_2d", a.state_indices_2d, indexBytes,
                    indexType),
        needAligned("num_accepted_tokens", a.num_accepted_tokens, indexBytes,
                    indexType),
        needAligned("error_flag", a.error_flag, 4, "int32")})
    if (!e.empty())
      return invalid(e);
  int64_t slotStride = a.state_indices_2d_stride == 0
                           ? a.T
                           : a.state_indices_2d_stride;
  // The 2-D slots' columns per row: vLLM's speculative tokens plus one.
  constexpr int64_t kMaxSlotStride = 65536;
  if (a.state_indices_2d_stride < 0 || a.state_indices_2d_stride > kMaxSlotStride)
    return invalid("state_indices_2d_stride = " +
                   std::to_string(a.state_indices_2d_stride) +
                   " must lie in [0, " + std::to_string(kMaxSlotStride) +
                   "] (0: T)");
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
        // kv-layout kernels move v and o in 8- and 16-byte pieces.
        tokenStride("v_stride", a.v_stride, a.HV * v.V, qkMultiple, vs),
        tokenStride("o_stride", a.o_stride, a.HV * v.V, qkMultiple, os)})
    if (!e.empty())
      return invalid(e);
  // No element offset a kernel forms may wrap: every tensor's extent fits
  // 2^48 bytes.
  const int64_t tokens = a.cu_seqlens ? a.T : a.B * a.T;
  const int64_t gateWidth = perChannel(gate) ? v.K : 1;
  for (std::string e :
       {checkExtent("q", {tokens, qs, ioBytes}),
        checkExtent("k", {tokens, ks, ioBytes}),
        checkExtent("v", {tokens, vs, ioBytes}),
        checkExtent("o", {tokens, os, ioBytes}),
        checkExtent("g", {tokens, a.HV, gateWidth, gBytes}),
        checkExtent("beta", {tokens, a.HV, betaPerValue ? v.V : 1, betaBytes}),
        checkExtent("gv", {tokens, a.HV, v.V, 4}),
        checkExtent("state (slots * slot_stride)",
                    {a.slots, poolStride, stateBytes}),
        checkExtent("initial_state (slots * slot_stride)",
                    {a.slots, poolStride, dtypeBytes(inDtype)}),
        checkExtent("step_states", {tokens, a.HV, v.K, v.V, stateBytes}),
        checkExtent("state_indices_2d", {a.B, slotStride, indexBytes})})
    if (!e.empty())
      return invalid(e);
  // initial_state may be the pool itself (in place: the kernel then reads
  // the pool; every thread reads its tile before it writes it) but no
  // other part of it.
  if (stateIn && a.state) {
    auto begin = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
    uintptr_t poolEnd =
        begin(a.state) + uintptr_t(a.slots * poolStride * stateBytes);
    uintptr_t inEnd =
        begin(stateIn) + uintptr_t(a.slots * poolStride * dtypeBytes(inDtype));
    if (stateIn == a.state && inDtype == v.state)
      stateIn = nullptr;
    else if (begin(stateIn) < poolEnd && begin(a.state) < inEnd)
      return invalid("initial_state overlaps the pool state without being "
                     "it (same pointer and dtype: in place)");
  }
  if (a.debug_checks) {
    if (a.cu_seqlens)
      if (deltac::Status s = checkCuSeqlens(a, v.maxT, slotStride, stream);
          !s.ok())
        return s;
    if (deltac::Status s = checkIndices(a, slotStride, stream); !s.ok())
      return s;
  }

  DecodeParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.g = a.g;
  p.beta = a.beta;
  p.aLog = a.A_log;
  p.dtBias = a.dt_bias;
  p.o = a.o;
  p.state = a.state;
  p.stateIn = stateIn;
  p.slotStride = poolStride;
  p.inIdx = a.initial_state_indices;
  p.outIdx = a.output_state_indices;
  p.steps = a.step_states;
  p.flag = a.error_flag;
  p.T = (int32_t)a.T;
  p.H = (int32_t)a.H;
  p.HV = (int32_t)a.HV;
  p.slots = a.slots;
  p.qStride = qs;
  p.kStride = ks;
  p.vStride = vs;
  p.oStride = os;
  p.scale = a.scale;
  p.lowerBound = kernelLowerBound(a.bounded_gate, a.lower_bound);
  p.gv = a.gv;
  // The flags' bits: deltac_abi::DecodeFlags.
  const bool half = stateIn && inDtype != v.state;
  using namespace deltac_abi; // the flags' bits
  p.flags = (a.keep_pool || !a.state ? kKeepPool : 0) |
            (a.indices_i64 ? kIndicesI64 : 0) |
            (a.zero_initial_state ? kZeroState : 0) | (betaF32 ? kBetaF32 : 0) |
            (half ? kStateInHalf : 0) |
            (half && inDtype == DELTAC_F16 ? kStateInF16 : 0) |
            (betaPerValue ? kBetaPerValue : 0) |
            (gate == GateKind::Log && !a.g ? kNullGate : 0) | form.bits;
  p.stepSlots = a.state_indices_2d;
  p.accepted = a.num_accepted_tokens;
  p.stepSlotsStride = slotStride;
  p.cu = a.cu_seqlens;
  ParamPack params;
  packDecodeParams(p, params);
  // Dispatch among the variants of this (K, V).
  std::string error;
  const DecodeVariant *chosen = nullptr, *fallback = nullptr;
  int sms = 0;
  // A variant's min_tokens against the call's tokens a row: on average
  // for varlen calls (every variant runs any row of up to max_t tokens).
  const int64_t rowTokens = a.cu_seqlens ? a.T / std::max<int64_t>(a.B, 1)
                                         : a.T;
  for (int i = 0; i < count && !chosen; ++i) {
    const DecodeVariant &c = variants[i];
    if (c.K != a.K || c.V != a.V)
      continue;
    if (rowTokens < c.minTokens)
      continue;
    if (!fallback)
      fallback = &c;
    if (c.minBlocksPerSM > 0 && sms == 0 &&
        (sms = multiprocessorCount(&error)) == 0)
      return {DELTAC_CUDA_ERROR, error};
    // min_blocks_per_sm is in quarters of a block per SM.
    if (4 * int64_t(c.gridX) * a.HV * a.B >= c.minBlocksPerSM * sms)
      chosen = &c;
  }
  if (!chosen)
    chosen = fallback;
  if (!chosen)
    return {DELTAC_UNSUPPORTED,
            "this library's decode kernels for K = " + std::to_string(a.K) +
                ", V = " + std::to_string(a.V) +
                " all serve longer calls: T = " + std::to_string(rowTokens) +
                " tokens a row is below their min_tokens"};
  // sm_90+ code waits for the previous grid itself (griddepcontrol.wait
  // before its first memory access; buildDecodeKernel), so it is launched
  // as a programmatic dependent: its blocks start while that grid ends.
  if (!chosen->kernel->load(&error))
    return {DELTAC_CUDA_ERROR, error};
  bool dependent = chosen->kernel->loadedCapability() >= 90;
  if (!chosen->kernel->launch(chosen->gridX, (unsigned)a.HV, (unsigned)a.B,
                              chosen->threads, stream, params.args(), &error,
                              /*sharedBytes=*/0, dependent))
    return {DELTAC_CUDA_ERROR, error};
  return {};
}
} // namespace

deltac::Status runDecode(const DecodeVariant *variants, int count,
                         const deltac_decode_args &a, void *stream) {
  beginCall();
  return guarded([&] { return checkAndLaunch(variants, count, a, stream); });
}

void packDecodeParams(const DecodeParams &p, ParamPack &pack) {
  pack.add("q", &p.q);
  pack.add("k", &p.k);
  pack.add("v", &p.v);
  pack.add("g", &p.g);
  pack.add("beta", &p.beta);
  pack.add("A_log", &p.aLog);
  pack.add("dt_bias", &p.dtBias);
  pack.add("o", &p.o);
  pack.add("state", &p.state);
  pack.add("in_idx", &p.inIdx);
  pack.add("out_idx", &p.outIdx);
  pack.add("step_states", &p.steps);
  pack.add("error_flag", &p.flag);
  pack.add("T", &p.T);
  pack.add("H", &p.H);
  pack.add("HV", &p.HV);
  pack.add("slots", &p.slots);
  pack.add("q_stride", &p.qStride);
  pack.add("k_stride", &p.kStride);
  pack.add("v_stride", &p.vStride);
  pack.add("o_stride", &p.oStride);
  pack.add("scale", &p.scale);
  pack.add("flags", &p.flags);
  pack.add("step_slots", &p.stepSlots);
  pack.add("num_accepted", &p.accepted);
  pack.add("step_slots_stride", &p.stepSlotsStride);
  pack.add("cu_seqlens", &p.cu);
  pack.add("state_in", &p.stateIn);
  pack.add("slot_stride", &p.slotStride);
  pack.add("lower_bound", &p.lowerBound);
  pack.add("gv", &p.gv);
}

const ParamInfo *decodeParamLayout(int *count) {
  static const DecodeParams values{};
  static ParamPack pack = [] {
    ParamPack p;
    packDecodeParams(values, p);
    return p;
  }();
  *count = pack.size();
  return pack.info();
}

namespace {
thread_local std::string lastErrorText;
thread_local const char *lastErrorMessage = "";
} // namespace

int setLastError(const deltac::Status &status) noexcept {
  // Every C entry point ends here, also those that fail before the
  // runtime is reached (null args): a failed call reports no launches.
  if (!status.ok())
    beginCall();
  try {
    lastErrorText = status.message;
    lastErrorMessage = lastErrorText.c_str();
  } catch (...) {
    lastErrorMessage = nullptr;
  }
  if (status.code != DELTAC_OK && (!lastErrorMessage || !*lastErrorMessage))
    lastErrorMessage = "the call failed on the host and its message could "
                       "not be stored (out of host memory)";
  return status.code;
}

int setLastError(int code, const char *message) noexcept {
  if (code != DELTAC_OK)
    beginCall();
  try {
    lastErrorText = message ? message : "";
    lastErrorMessage = lastErrorText.c_str();
  } catch (...) {
    lastErrorMessage = message; // static text: valid for the caller
  }
  if (code != DELTAC_OK && (!lastErrorMessage || !*lastErrorMessage))
    lastErrorMessage = "the call failed on the host and its message could "
                       "not be stored (out of host memory)";
  return code;
}

const char *lastError() noexcept { return lastErrorMessage; }

} // namespace deltac_rt
