// DecodeTest.cpp - decode kernels against the fp64 reference on the GPU.
//
// Every case draws fresh random inputs, rounds them to the dtypes the GPU
// reads (so the reference sees exactly the same numbers), poisons every
// output (0xFF bytes are NaN in bf16/f16/f32) and compares:
//   o of real rows      relative error ||o - ref|| / ||ref|| <= tolerance
//   o of padding rows   exactly zero
//   pool slots written  relative error vs the reference final state
//   every other slot    bit-for-bit unchanged
//   step states         relative error vs the reference per-step states
//   error flag          1 exactly when an index >= slots or a varlen row
//                       longer than max_t was passed
// Varlen cases (cu_seqlens, rows of 0..max_t tokens) run the same checks
// against the reference's varlen recurrence; a row longer than max_t, or with
// num_accepted_tokens outside [1, T] ([1, stride] varlen), must be skipped
// whole: its o is 0 and its slot is unchanged. An invalid cu_seqlens skips
// the whole call (runBadCu): o = 0 everywhere, the pool bit-identical, the
// guard bytes around o and the pool untouched.
// Usage: decode_test [--quick]   (--quick: fewer cases, for a second run with
// DELTAC_FORCE_TARGET=sm_80 or under compute-sanitizer)
#include "GpuTestUtil.h"

#include "deltac_test_decode.h"
#include "qwen3_next_gdn.h"
#include "tests/reference/DeltaReference.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>

using namespace gputest;
namespace ref = deltac::ref;

namespace {
struct SpecUnderTest {
  const char *name;
  int (*decode)(const deltac_decode_args *, void *);
  const char *(*lastError)();
  ref::Rule rule;
  ref::GateForm gate;
  ref::BetaForm beta;
  bool l2norm;
  deltac_dtype io, state;
  ref::Layout layout;
  int64_t maxT;
  std::vector<std::pair<int64_t, int64_t>> dims;
  bool perValue = false; // FLA's gv and per-value beta (per_value specs)
};

const std::vector<SpecUnderTest> &specs() {
  using R = ref::Rule;
  using G = ref::GateForm;
  using Bf = ref::BetaForm;
  static const std::vector<SpecUnderTest> all = {
      {"qwen3_next", qwen3_next_gdn_qwen3_next_decode, qwen3_next_gdn_last_error,
       R::Gated, G::Raw, Bf::Sigmoid, true, DELTAC_BF16, DELTAC_F32,
       ref::Layout::Vk, 4, {{128, 128}}},
      {"gdn_log", deltac_test_decode_gdn_log_decode, deltac_test_decode_last_error,
       R::Gated, G::Log, Bf::Given, true, DELTAC_BF16, DELTAC_F32,
       ref::Layout::Vk, 8, {{128, 128}, {64, 64}}},
      {"gdn_raw_bf16", deltac_test_decode_gdn_raw_bf16_decode,
       deltac_test_decode_last_error, R::Gated, G::Raw, Bf::Sigmoid, true,
       DELTAC_BF16, DELTAC_BF16, ref::Layout::Vk, 4, {{128, 128}}},
      {"gdn_linear", deltac_test_decode_gdn_linear_decode,
       deltac_test_decode_last_error, R::Gated, G::Linear, Bf::Sigmoid2, false,
       DELTAC_F16, DELTAC_F32, ref::Layout::Vk, 4, {{64, 128}, {128, 64}}},
      {"deltanet", deltac_test_decode_deltanet_decode,
       deltac_test_decode_last_error, R::Delta, G::None, Bf::Given, true,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Vk, 2, {{128, 128}}},
      {"gdn_log_kv", deltac_test_decode_gdn_log_kv_decode,
       deltac_test_decode_last_error, R::Gated, G::Log, Bf::Given, true,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Kv, 8, {{128, 128}, {64, 128}}},
      {"gdn_raw_kv_bf16", deltac_test_decode_gdn_raw_kv_bf16_decode,
       deltac_test_decode_last_error, R::Gated, G::Raw, Bf::Sigmoid2, false,
       DELTAC_BF16, DELTAC_BF16, ref::Layout::Kv, 4, {{128, 128}, {128, 48}}},
      {"deltanet_kv", deltac_test_decode_deltanet_kv_decode,
       deltac_test_decode_last_error, R::Delta, G::None, Bf::Sigmoid, true,
       DELTAC_F16, DELTAC_F32, ref::Layout::Kv, 2, {{64, 64}}},
      {"gdn_raw_f16", deltac_test_decode_gdn_raw_f16_decode,
       deltac_test_decode_last_error, R::Gated, G::Raw, Bf::Sigmoid, true,
       DELTAC_F16, DELTAC_F16, ref::Layout::Vk, 4, {{128, 128}}},
      {"gdn_raw_kv_f16", deltac_test_decode_gdn_raw_kv_f16_decode,
       deltac_test_decode_last_error, R::Gated, G::Raw, Bf::Sigmoid, true,
       DELTAC_F16, DELTAC_F16, ref::Layout::Kv, 4, {{128, 128}}},
      // per_value: every case below runs with gv and a per-value beta,
      // and main() adds the head-beta and no-gv mixes.
      {"gdn_pv_kv", deltac_test_decode_gdn_pv_kv_decode,
       deltac_test_decode_last_error, R::Gated, G::Log, Bf::Given, false,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Kv, 4, {{128, 128}, {64, 64}},
       true},
      {"gdn_pv_vk", deltac_test_decode_gdn_pv_vk_decode,
       deltac_test_decode_last_error, R::Gated, G::Raw, Bf::Sigmoid, true,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Vk, 4, {{128, 128}}, true},
      {"kda_pv_kv", deltac_test_decode_kda_pv_kv_decode,
       deltac_test_decode_last_error, R::Kda, G::Log, Bf::Sigmoid, true,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Kv, 4, {{128, 128}}, true},
      {"kda_pv_vk", deltac_test_decode_kda_pv_vk_decode,
       deltac_test_decode_last_error, R::Kda, G::Log, Bf::Given, true,
       DELTAC_F16, DELTAC_F32, ref::Layout::Vk, 2, {{64, 64}}, true},
      {"dn_pv_vk", deltac_test_decode_dn_pv_vk_decode,
       deltac_test_decode_last_error, R::Delta, G::None, Bf::Given, false,
       DELTAC_BF16, DELTAC_F32, ref::Layout::Vk, 2, {{64, 128}}, true},
  };
  return all;
}

/// One decode call's shape and slot plan.
struct Case {
  std::string label;
  int64_t B = 4, T = 1, H = 2, HV = 4, slots = 9;
  std::vector<int32_t> inIdx;  // empty: no index buffer (row b uses slot b)
  std::vector<int32_t> outIdx; // empty: no output index buffer
  std::vector<int32_t> slots2d;  // vLLM [B, T] slots (empty: not used)
  std::vector<int32_t> accepted; // vLLM num_accepted_tokens [B] (or empty)
  // Varlen: row lengths (cu_seqlens); B must equal lengths.size(), T is
  // unused, and slots2d rows are max_t apart.
  std::vector<int64_t> lengths;
  bool debugChecks = false;      // host-side index checks
  std::string rejectWith;        // expected host rejection (nothing written)
  int64_t strideExtra = 0;     // extra elements per token in q, k, v, o
  bool steps = false, keepPool = false;
  uint64_t seed = 1;
  bool poolCheckAll = true; // compare every slot (off for huge pools)
  bool i64 = false; // index arrays and cu_seqlens as int64 (indices_i64)
  // per_value specs: FLA's gv [tokens, HV, V] and beta [tokens, HV, V].
  bool gv = false, betaPerValue = false;
  // Log-gate specs: g passed as null (FLA's g=None), which the kernels read
  // as log g = 0 (no decay); the reference gets zeros.
  bool nullG = false;
};

/// Gate inputs per value head: KDA's g [tokens, HV, K] (and a raw gate's
/// dt_bias [HV, K]) has one per key channel, the other rules one.
int64_t gatesPerHead(const SpecUnderTest &s, int64_t K) {
  return s.rule == ref::Rule::Kda ? K : 1;
}

double tolO(const SpecUnderTest &s) {
  // o is rounded once to the io type (bf16: 2^-9 relative); a 16-bit state
  // adds its own rounding of every state element (f16: 2^-12 relative).
  return s.state == DELTAC_BF16 ? 8e-3 : 4e-3;
}
double tolState(const SpecUnderTest &s) {
  return s.state == DELTAC_BF16 ? 8e-3 : s.state == DELTAC_F16 ? 2e-3 : 2e-5;
}

/// Runs one case and records its checks.
void runCase(Results &results, const SpecUnderTest &s, int64_t K, int64_t V,
             const Case &c) {
  std::string name = fmt("%s k%lld v%lld %s", s.name, (long long)K,
                         (long long)V, c.label.c_str());
  // Row b is tokens [begin(b), begin(b) + len(b)).
  const bool varlen = !c.lengths.empty();
  std::vector<int64_t> cu =
      varlen ? ref::cuSeqlensFromLengths(c.lengths) : std::vector<int64_t>{};
  auto begin = [&](int64_t b) { return varlen ? cu[b] : b * c.T; };
  auto len = [&](int64_t b) { return varlen ? c.lengths[b] : c.T; };
  const int64_t stride2d = varlen ? s.maxT : c.T;
  // num_accepted_tokens must lie in [1, T] ([1, stride] varlen).
  auto acceptedOk = [&](int64_t b) {
    return c.accepted.empty() ||
           (c.accepted[b] >= 1 && c.accepted[b] <= (varlen ? stride2d : c.T));
  };
  // A varlen row longer than max_t, or a bad accepted count, is skipped by
  // the kernel (error flag).
  auto skipped = [&](int64_t b) { return len(b) > s.maxT || !acceptedOk(b); };
  const int64_t tokens = varlen ? cu.back() : c.B * c.T;
  ref::Problem p;
  p.rule = s.rule;
  p.B = varlen ? 1 : c.B;
  p.T = varlen ? tokens : c.T;
  p.cuSeqlens = cu;
  p.H = c.H;
  p.HV = c.HV;
  p.K = K;
  p.V = V;
  p.layout = s.layout;
  p.gate = s.gate;
  p.beta = s.beta;
  p.qkL2Norm = s.l2norm;
  p.scale = 1.0 / std::sqrt(double(K));
  p.betaPerValue = c.betaPerValue;
  ref::Inputs in = ref::randomInputs(p, c.seed);
  if (c.gv) {
    // Log decays of each value column in [-1, 0.05]: mostly decays, a few
    // small growths (FLA does not bound gv).
    std::mt19937_64 rng(c.seed * 31 + 5);
    std::uniform_real_distribution<double> logDecay(-1.0, 0.05);
    in.gv.resize(ref::sizesOf(p).gv);
    for (double &x : in.gv)
      x = logDecay(rng);
  }

  // Round every input to what the GPU reads.
  auto roundAll = [](std::vector<double> &x, deltac_dtype d) {
    for (double &e : x)
      e = roundTo(d, e);
  };
  roundAll(in.q, s.io);
  roundAll(in.k, s.io);
  roundAll(in.v, s.io);
  roundAll(in.g, s.gate == ref::GateForm::Raw ? s.io : DELTAC_F32);
  if (c.nullG)
    std::fill(in.g.begin(), in.g.end(), 0.0);
  roundAll(in.beta, s.io);
  roundAll(in.aLog, DELTAC_F32);
  roundAll(in.dtBias, DELTAC_F32);
  roundAll(in.gv, DELTAC_F32);

  // The pool: slots hold random states (huge pools: only the slots the call
  // touches and the two ends; the rest keep the 0xFF poison). Row b starts
  // from the slot it reads.
  const int64_t stateElems = K * V * c.HV;
  auto inSlot = [&](int64_t b) -> int64_t {
    if (!c.slots2d.empty())
      return acceptedOk(b) ? c.slots2d[b * stride2d +
                                       (c.accepted.empty() ? 0 : c.accepted[b] - 1)]
                           : -1;
    return c.inIdx.empty() ? b : c.inIdx[b];
  };
  auto outSlot = [&](int64_t b) -> int64_t {
    return c.outIdx.empty() ? inSlot(b) : c.outIdx[b];
  };
  auto valid = [&](int64_t slot) { return slot >= 0 && slot < c.slots; };
  std::vector<int64_t> filled;
  for (int64_t slot = 0; slot < c.slots; ++slot) {
    bool used = slot == 0 || slot == c.slots - 1;
    for (int64_t b = 0; b < c.B; ++b)
      used |= inSlot(b) == slot || outSlot(b) == slot;
    for (int32_t s2 : c.slots2d)
      used |= s2 == slot;
    if (c.poolCheckAll || used)
      filled.push_back(slot);
  }
  std::map<int64_t, std::vector<uint8_t>> poolBytes; // slot -> bytes
  ref::Problem slotProblem = p; // one fixed-length row: one state
  slotProblem.B = 1;
  slotProblem.T = 1;
  slotProblem.cuSeqlens.clear();
  for (int64_t slot : filled) {
    std::vector<double> st =
        ref::randomInputs(slotProblem, c.seed * 7919 + slot).initialState;
    poolBytes[slot] = encode(s.state, st);
  }
  in.initialState.assign(c.B * stateElems, 0.0);
  for (int64_t b = 0; b < c.B; ++b)
    if (valid(inSlot(b))) {
      std::vector<double> st = decode(s.state, poolBytes[inSlot(b)]);
      std::copy(st.begin(), st.end(), in.initialState.begin() + b * stateElems);
    }

  ref::Outputs want;
  std::string err = ref::run(p, in, want, /*wantStepStates=*/true);
  if (!err.empty()) {
    results.add(name, false, "reference rejected the problem: " + err);
    return;
  }

  // Device buffers; token-major with an optional stride.
  const int64_t qStride = c.H * K + c.strideExtra,
                vStride = c.HV * V + c.strideExtra;
  auto stridedUpload = [&](const std::vector<double> &x, int64_t width,
                           int64_t stride, deltac_dtype d) {
    auto buf = std::make_unique<DeviceBuffer>(tokens * stride * bytesOf(d));
    std::vector<uint8_t> bytes = encode(d, x);
    for (int64_t t = 0; t < tokens; ++t)
      buf->upload(&bytes[t * width * bytesOf(d)], width * bytesOf(d),
                  t * stride * bytesOf(d));
    return buf;
  };
  auto q = stridedUpload(in.q, c.H * K, qStride, s.io);
  auto k = stridedUpload(in.k, c.H * K, qStride, s.io);
  auto v = stridedUpload(in.v, c.HV * V, vStride, s.io);
  DeviceBuffer o(tokens * vStride * bytesOf(s.io)); // poisoned
  deltac_dtype gType = s.gate == ref::GateForm::Raw ? s.io : DELTAC_F32;
  std::unique_ptr<DeviceBuffer> g, aLog, dtBias;
  const int64_t gWidth = c.HV * gatesPerHead(s, K);
  if (s.gate != ref::GateForm::None && !c.nullG)
    g = stridedUpload(in.g, gWidth, gWidth, gType);
  const int64_t betaWidth = c.HV * (c.betaPerValue ? V : 1);
  auto beta = stridedUpload(in.beta, betaWidth, betaWidth, s.io);
  std::unique_ptr<DeviceBuffer> gv;
  if (c.gv)
    gv = stridedUpload(in.gv, c.HV * V, c.HV * V, DELTAC_F32);
  if (s.gate == ref::GateForm::Raw) {
    aLog = stridedUpload(in.aLog, c.HV, c.HV, DELTAC_F32);
    dtBias = stridedUpload(in.dtBias, c.HV, c.HV, DELTAC_F32);
  }
  const size_t slotBytes = stateElems * bytesOf(s.state);
  DeviceBuffer poolBuf(c.slots * slotBytes); // 0xFF poison
  for (const auto &[slot, bytes] : poolBytes)
    poolBuf.upload(bytes.data(), slotBytes, slot * slotBytes);
  // An index array as int32, or int64 with c.i64 (values past 2^32 are
  // what a narrowing cast would break: none here, but the width is).
  auto indexBuffer = [&](const auto &values) {
    size_t width = c.i64 ? 8 : 4;
    auto buf = std::make_unique<DeviceBuffer>(values.size() * width);
    if (c.i64) {
      std::vector<int64_t> wide(values.begin(), values.end());
      buf->upload(wide.data(), wide.size() * 8);
    } else {
      std::vector<int32_t> narrow(values.begin(), values.end());
      buf->upload(narrow.data(), narrow.size() * 4);
    }
    return buf;
  };
  std::unique_ptr<DeviceBuffer> inIdx, outIdx, steps;
  if (!c.inIdx.empty())
    inIdx = indexBuffer(c.inIdx);
  if (!c.outIdx.empty())
    outIdx = indexBuffer(c.outIdx);
  if (c.steps)
    steps = std::make_unique<DeviceBuffer>(tokens * slotBytes);
  std::unique_ptr<DeviceBuffer> slots2d, accepted;
  if (!c.slots2d.empty())
    slots2d = indexBuffer(c.slots2d);
  if (!c.accepted.empty())
    accepted = indexBuffer(c.accepted);
  std::unique_ptr<DeviceBuffer> cuBuf;
  if (varlen)
    cuBuf = indexBuffer(cu);
  DeviceBuffer flag(4, 0);

  deltac_decode_args a{};
  a.K = K;
  a.V = V;
  a.B = c.B;
  a.T = varlen ? tokens : c.T;
  a.H = c.H;
  a.HV = c.HV;
  a.io_dtype = s.io;
  a.state_dtype = s.state;
  a.q = q->ptr;
  a.q_stride = c.strideExtra ? qStride : 0;
  a.k = k->ptr;
  a.k_stride = a.q_stride;
  a.v = v->ptr;
  a.v_stride = c.strideExtra ? vStride : 0;
  a.o = o.ptr;
  a.o_stride = a.v_stride;
  a.g = g ? g->ptr : nullptr;
  a.beta = beta->ptr;
  a.A_log = aLog ? static_cast<const float *>(aLog->ptr) : nullptr;
  a.dt_bias = dtBias ? static_cast<const float *>(dtBias->ptr) : nullptr;
  a.state = poolBuf.ptr;
  a.slots = c.slots;
  a.initial_state_indices =
      inIdx ? static_cast<const int32_t *>(inIdx->ptr) : nullptr;
  a.output_state_indices =
      outIdx ? static_cast<const int32_t *>(outIdx->ptr) : nullptr;
  a.step_states = steps ? steps->ptr : nullptr;
  a.keep_pool = c.keepPool;
  a.error_flag = static_cast<int32_t *>(flag.ptr);
  a.scale = float(p.scale);
  a.state_indices_2d =
      slots2d ? static_cast<const int32_t *>(slots2d->ptr) : nullptr;
  a.num_accepted_tokens =
      accepted ? static_cast<const int32_t *>(accepted->ptr) : nullptr;
  a.state_indices_2d_stride = varlen && slots2d ? stride2d : 0;
  a.cu_seqlens = cuBuf ? static_cast<const int32_t *>(cuBuf->ptr) : nullptr;
  a.debug_checks = c.debugChecks;
  a.indices_i64 = c.i64;
  a.gv = gv ? static_cast<const float *>(gv->ptr) : nullptr;
  a.beta_per_value = c.betaPerValue;
  int rc = s.decode(&a, nullptr);
  sync();
  if (!c.rejectWith.empty()) {
    std::string message = s.lastError();
    bool named = rc == DELTAC_INVALID_ARGUMENT &&
                 message.find(c.rejectWith) != std::string::npos;
    std::vector<uint8_t> oBytes = o.read<uint8_t>(o.bytes);
    bool oUntouched = std::all_of(oBytes.begin(), oBytes.end(),
                                  [](uint8_t x) { return x == 0xFF; });
    bool poolUntouched = true;
    for (const auto &[slot, bytes] : poolBytes)
      poolUntouched &= poolBuf.read<uint8_t>(slotBytes, slot * slotBytes) ==
                       bytes;
    results.add(name, named && oUntouched && poolUntouched,
                fmt("status %d \"%s\"%s%s", rc, message.c_str(),
                    oUntouched ? "" : ", O WRITTEN",
                    poolUntouched ? "" : ", POOL WRITTEN"));
    return;
  }
  if (rc != DELTAC_OK) {
    results.add(name, false, fmt("status %d: %s", rc, s.lastError()));
    return;
  }
  // Which kernel ran: the staged form for 2 (kv) or 3 (vk) or more tokens
  // a row (varlen: on average) where the spec has it (a gate and beta per
  // head, max_t >= 3); the bulk or small form otherwise.
  char launched[256] = "";
  (std::string(s.name) == "qwen3_next" ? qwen3_next_gdn_last_launches
                                        : deltac_test_decode_last_launches)(
      launched, sizeof launched);
  bool hasStaged = !s.perValue && s.maxT >= 3 &&
                   (s.layout == ref::Layout::Kv ? K <= 128
                                                : s.rule != ref::Rule::Kda);
  int64_t rowTokens = varlen ? tokens / c.B : c.T;
  static const int sms = [] {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
    return n;
  }();
  // The staged kernels of these libraries: vk one block per head, launched
  // from three tokens a row and three quarters of a block per SM; kv one
  // block per 32 value columns (16 where V is not a multiple of 32), from
  // two tokens a row and seven quarters.
  int64_t gridX = s.layout == ref::Layout::Vk ? 1 : V / (V % 32 == 0 ? 32 : 16);
  int64_t quarters = s.layout == ref::Layout::Vk ? 3 : 7;
  int64_t minTokens = s.layout == ref::Layout::Vk ? 3 : 2;
  bool wantStaged = hasStaged && rowTokens >= minTokens &&
                    4 * gridX * c.B * c.HV >= quarters * sms;
  bool ranStaged = std::string(launched).find("_staged") != std::string::npos;

  // o: real rows against the reference, padding rows exactly zero.
  std::vector<double> oGot = decode(
      s.io, o.read<uint8_t>(tokens * vStride * bytesOf(s.io)));
  std::vector<double> oReal, oWant;
  bool paddingZero = true, sawPadding = false, skippedZero = true;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < len(b); ++t)
      for (int64_t i = 0; i < c.HV * V; ++i) {
        int64_t tok = begin(b) + t;
        double got = oGot[tok * vStride + i];
        if (skipped(b)) {
          skippedZero &= got == 0.0;
        } else if (valid(inSlot(b))) {
          oReal.push_back(got);
          oWant.push_back(want.o[tok * c.HV * V + i]);
        } else {
          sawPadding = true;
          paddingZero &= got == 0.0;
        }
      }
  double oErr = oReal.empty() ? 0.0 : ref::relativeError(oReal, oWant);
  bool ok = oErr <= tolO(s) && paddingZero && skippedZero &&
            ranStaged == wantStaged;
  std::string detail = fmt("o err %.2e", oErr);
  if (ranStaged != wantStaged)
    detail += fmt(", RAN %s (want %s form)", launched,
                  wantStaged ? "the staged" : "the bulk or small");
  if (!skippedZero)
    detail += ", SKIPPED ROW o != 0";
  if (sawPadding)
    detail += paddingZero ? ", padding o = 0" : ", PADDING o != 0";

  // Pool: written slots hold the final state (vLLM 2-D slots: the state
  // after the token of that slot), all others are unchanged. `written`
  // holds the offset of the expected state in want.finalState or, as
  // -2 - offset, in want.stepStates.
  std::vector<int64_t> written(c.slots, -1);
  if (!c.slots2d.empty()) {
    for (int64_t b = 0; b < c.B; ++b)
      if (valid(inSlot(b)) && !skipped(b))
        for (int64_t t = 0; t < len(b); ++t)
          if (valid(c.slots2d[b * stride2d + t]))
            written[c.slots2d[b * stride2d + t]] =
                -2 - (begin(b) + t) * stateElems;
  } else if (!c.keepPool) {
    for (int64_t b = 0; b < c.B; ++b)
      if (valid(inSlot(b)) && valid(outSlot(b)) && !skipped(b))
        written[outSlot(b)] = b * stateElems;
  }
  double stateErr = 0.0;
  bool untouched = true;
  for (int64_t slot = 0; slot < c.slots; ++slot) {
    bool isWritten = written[slot] != -1;
    if (!poolBytes.count(slot))
      continue; // never touched by the call: poison, not downloaded
    std::vector<uint8_t> got = poolBuf.read<uint8_t>(slotBytes, slot * slotBytes);
    if (isWritten) {
      std::vector<double> gotState = decode(s.state, got);
      const std::vector<double> &from =
          written[slot] >= 0 ? want.finalState : want.stepStates;
      int64_t offset = written[slot] >= 0 ? written[slot] : -2 - written[slot];
      std::vector<double> wantState(from.begin() + offset,
                                    from.begin() + offset + stateElems);
      stateErr = std::max(stateErr, ref::relativeError(gotState, wantState));
    } else {
      untouched &= std::memcmp(got.data(), poolBytes[slot].data(),
                               slotBytes) == 0;
    }
  }
  ok &= stateErr <= tolState(s) && untouched;
  detail += fmt(", state err %.2e", stateErr);
  if (!untouched)
    detail += ", UNWRITTEN SLOT CHANGED";

  if (c.steps) {
    std::vector<double> stepsGot =
        decode(s.state, steps->read<uint8_t>(tokens * slotBytes));
    std::vector<double> real, wantSteps;
    for (int64_t b = 0; b < c.B; ++b)
      if (valid(inSlot(b)) && !skipped(b))
        for (int64_t i = 0; i < len(b) * stateElems; ++i) {
          real.push_back(stepsGot[begin(b) * stateElems + i]);
          wantSteps.push_back(want.stepStates[begin(b) * stateElems + i]);
        }
    double stepErr = ref::relativeError(real, wantSteps);
    ok &= stepErr <= tolState(s);
    detail += fmt(", steps err %.2e", stepErr);
  }

  bool expectFlag = false;
  for (int64_t b = 0; b < c.B; ++b) {
    expectFlag |= skipped(b);
    if (c.slots2d.empty()) {
      expectFlag |= inSlot(b) >= c.slots || outSlot(b) >= c.slots;
    } else {
      expectFlag |= inSlot(b) >= c.slots;
      if (valid(inSlot(b)) && !skipped(b))
        for (int64_t t = 0; t < len(b); ++t)
          expectFlag |= c.slots2d[b * stride2d + t] >= c.slots;
    }
  }
  int32_t flagGot = flag.read<int32_t>(1)[0];
  bool flagOk = flagGot == (expectFlag ? 1 : 0);
  ok &= flagOk;
  if (expectFlag || !flagOk)
    detail += fmt(", error flag %d (want %d)", flagGot, expectFlag ? 1 : 0);
  results.add(name, ok, detail);
}

/// An invalid cu_seqlens (B = 3 rows, T = 6 tokens): the whole call is
/// skipped. The flag is raised, o is 0 for every token, the pool stays bit
/// for bit, and 4 KiB guards before and after o and the pool keep their
/// fill (run.sh also runs this under compute-sanitizer memcheck). With
/// `padTail`, cu = {0, 1, 2, 3} of T = 6 is valid: rows as usual, tokens
/// 3..5 get o = 0, no flag.
void runBadCu(Results &results, const SpecUnderTest &s, int64_t K, int64_t V,
              const char *what, std::vector<int64_t> cu, bool i64) {
  const int64_t B = int64_t(cu.size()) - 1, T = 6, H = 1, HV = 2, slots = B;
  const size_t guard = 4096, io = bytesOf(s.io);
  std::string name = fmt("%s k%lld v%lld bad cu_seqlens %s%s", s.name, (long long)K,
                         (long long)V, what, i64 ? " (int64)" : "");
  auto filled = [](size_t bytes, double scale, deltac_dtype d) {
    std::vector<double> x(bytes / bytesOf(d));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = scale * std::sin(0.7 * double(i) + 0.3);
    return encode(d, x);
  };
  const int64_t perHead = gatesPerHead(s, K);
  DeviceBuffer q(T * H * K * io), k(T * H * K * io), v(T * HV * V * io),
      beta(T * HV * io), g(T * HV * perHead * 4), aLog(HV * 4),
      dt(HV * perHead * 4);
  for (auto *b : {&q, &k, &v}) {
    auto bytes = filled(b->bytes, 0.5, s.io);
    b->upload(bytes.data(), bytes.size());
  }
  auto betaBytes = filled(beta.bytes, 0.5, s.io);
  beta.upload(betaBytes.data(), betaBytes.size());
  std::vector<float> small(T * HV * perHead, -0.1f);
  g.upload(small.data(), small.size() * 4);
  aLog.upload(small.data(), HV * 4);
  dt.upload(small.data(), HV * perHead * 4);
  if (s.gate == ref::GateForm::Raw) {
    auto raw = filled(T * HV * perHead * io, 0.5, s.io);
    g.upload(raw.data(), raw.size());
  }
  const size_t oBytes = T * HV * V * io,
               poolBytes = slots * HV * K * V * bytesOf(s.state);
  DeviceBuffer o(oBytes + 2 * guard), pool(poolBytes + 2 * guard);
  std::vector<uint8_t> poolInit = filled(poolBytes, 0.1, s.state);
  pool.upload(poolInit.data(), poolBytes, guard);
  DeviceBuffer cuBuf(cu.size() * 8), flag(4, 0);
  if (i64) {
    cuBuf.upload(cu.data(), cu.size() * 8);
  } else {
    std::vector<int32_t> c32(cu.begin(), cu.end());
    cuBuf.upload(c32.data(), c32.size() * 4);
  }
  deltac_decode_args a{};
  a.K = K;
  a.V = V;
  a.B = B;
  a.T = T;
  a.H = H;
  a.HV = HV;
  a.io_dtype = s.io;
  a.state_dtype = s.state;
  a.q = q.ptr;
  a.k = k.ptr;
  a.v = v.ptr;
  a.o = static_cast<char *>(o.ptr) + guard;
  a.g = s.gate == ref::GateForm::None ? nullptr : g.ptr;
  a.beta = beta.ptr;
  a.A_log = s.gate == ref::GateForm::Raw ? static_cast<const float *>(aLog.ptr) : nullptr;
  a.dt_bias = s.gate == ref::GateForm::Raw ? static_cast<const float *>(dt.ptr) : nullptr;
  a.state = static_cast<char *>(pool.ptr) + guard;
  a.slots = slots;
  a.error_flag = static_cast<int32_t *>(flag.ptr);
  a.scale = 0.1f;
  a.cu_seqlens = static_cast<const int32_t *>(cuBuf.ptr);
  a.indices_i64 = i64;
  int rc = s.decode(&a, nullptr);
  sync();
  if (rc != DELTAC_OK) {
    results.add(name, false, fmt("status %d: %s", rc, s.lastError()));
    return;
  }
  bool valid = cu.front() == 0 && cu.back() <= T;
  for (size_t i = 0; i + 1 < cu.size(); ++i)
    valid &= cu[i] <= cu[i + 1];
  std::vector<uint8_t> oAll = o.read<uint8_t>(o.bytes);
  std::vector<uint8_t> poolAll = pool.read<uint8_t>(pool.bytes);
  bool guards = true;
  for (size_t i = 0; i < guard; ++i)
    guards &= oAll[i] == 0xFF && oAll[guard + oBytes + i] == 0xFF &&
              poolAll[i] == 0xFF && poolAll[guard + poolBytes + i] == 0xFF;
  std::vector<double> oGot =
      decode(s.io, std::vector<uint8_t>(oAll.begin() + guard, oAll.begin() + guard + oBytes));
  int64_t zeroFrom = valid ? cu.back() : 0, nonZero = 0, unwritten = 0;
  for (int64_t i = 0; i < T * HV * V; ++i) {
    if (i >= zeroFrom * HV * V)
      nonZero += oGot[i] != 0.0;
    else
      unwritten += std::isnan(oGot[i]);
  }
  bool poolSame = std::equal(poolInit.begin(), poolInit.end(), poolAll.begin() + guard);
  int32_t flagGot = flag.read<int32_t>(1)[0];
  bool ok = guards && nonZero == 0 && flagGot == (valid ? 0 : 1) &&
            (valid ? unwritten == 0 : poolSame);
  results.add(name, ok,
              fmt("flag %d (want %d), %lld o != 0 past token %lld%s%s%s", flagGot, valid ? 0 : 1,
                  (long long)nonZero, (long long)zeroFrom, guards ? "" : ", GUARDS OVERWRITTEN",
                  valid || poolSame ? "" : ", POOL CHANGED",
                  unwritten ? ", ROWS NOT WRITTEN" : ""));
}

} // namespace

int main(int argc, char **argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  Results results;
  uint64_t seed = 7;
  for (const SpecUnderTest &s : specs()) {
    for (auto [K, V] : s.dims) {
      Case base;
      base.seed = ++seed;
      base.label = "T=1 B=4 H=2 HV=4 identity slots";
      // per_value specs: every case below with gv and a per-value beta.
      base.gv = base.betaPerValue = s.perValue;
      if (s.perValue)
        base.label += " gv beta[V]";
      runCase(results, s, K, V, base);
      if (s.perValue)
        for (auto [gv, perValue] : {std::pair{true, false}, {false, true},
                                    {false, false}}) {
          Case mix = base;
          mix.seed = ++seed;
          mix.T = s.maxT;
          mix.gv = gv;
          mix.betaPerValue = perValue;
          mix.label = fmt("T=%lld %s, %s", (long long)s.maxT,
                          gv ? "gv" : "no gv (null)",
                          perValue ? "beta[V]" : "beta per head");
          runCase(results, s, K, V, mix);
        }

      Case multi = base;
      multi.seed = ++seed;
      multi.T = s.maxT;
      multi.B = 3;
      multi.H = 1;
      multi.HV = 3;
      multi.slots = 7;
      multi.inIdx = {5, 0, 3};
      multi.label = fmt("T=%lld (max_t) HV=3 H=1 pool indices", (long long)s.maxT);
      runCase(results, s, K, V, multi);

      // Varlen rows (cu_seqlens, vLLM's query_start_loc) of 0..max_t tokens,
      // a padding row among them, per-token step states.
      Case varlen = base;
      varlen.seed = ++seed;
      varlen.lengths = {1, s.maxT, 0, std::min<int64_t>(2, s.maxT), 1};
      varlen.B = 5;
      varlen.slots = 9;
      varlen.inIdx = {3, 0, 5, -1, 8};
      varlen.steps = true;
      varlen.label = fmt("varlen rows 1,%lld,0,%lld,1 pool, padding, steps",
                         (long long)s.maxT,
                         (long long)std::min<int64_t>(2, s.maxT));
      runCase(results, s, K, V, varlen);
      // Every T up to max_t on few rows (the bulk and small forms), then on
      // a grid of more blocks than SMs (B * HV = 160), where the staged form
      // runs from T = 3 where the spec has it: pool indices, step states
      // and varlen rows of 0..max_t (a padding row among them).
      for (int64_t T : {2, 3, 5, 8})
        if (T <= s.maxT) {
          Case few = multi;
          few.seed = ++seed;
          few.T = T;
          few.label = fmt("T=%lld HV=3 H=1 pool indices", (long long)T);
          runCase(results, s, K, V, few);
        }
      Case wide = base;
      wide.B = 40;
      wide.H = 2;
      wide.HV = 4;
      wide.slots = 45;
      for (int64_t b = 0; b < wide.B; ++b)
        wide.inIdx.push_back(int32_t((b * 11 + 5) % wide.slots));
      for (int64_t T : {2, 3, 5, 8})
        if (T <= s.maxT) {
          Case c = wide;
          c.seed = ++seed;
          c.T = T;
          c.label = fmt("T=%lld B=40 HV=4 pool indices", (long long)T);
          runCase(results, s, K, V, c);
        }
      Case wideSteps = wide;
      wideSteps.seed = ++seed;
      wideSteps.T = s.maxT;
      wideSteps.steps = true;
      wideSteps.label = fmt("T=%lld B=40 HV=4 step states", (long long)s.maxT);
      runCase(results, s, K, V, wideSteps);
      Case wideVarlen = wide;
      wideVarlen.seed = ++seed;
      wideVarlen.inIdx[7] = -1; // a padding row
      for (int64_t b = 0; b < wide.B; ++b)
        wideVarlen.lengths.push_back(b % 9 == 4 ? 0 : s.maxT - b % 3);
      wideVarlen.label = fmt("varlen B=40 HV=4 rows of 0,%lld..%lld, padding",
                             (long long)s.maxT - 2, (long long)s.maxT);
      runCase(results, s, K, V, wideVarlen);
      // A null log g (FLA's g=None): no decay, in every form (few rows: bulk
      // or small; the wide grid at max_t: staged where the spec has it).
      // KDA's per-channel g is refused null, nothing written.
      if (s.gate == ref::GateForm::Log)
        for (Case c : {multi, wide}) {
          c.seed = ++seed;
          c.T = s.maxT;
          c.nullG = true;
          if (s.rule == ref::Rule::Kda)
            c.rejectWith = "g must not be null (the spec's gate is not log";
          c.label = fmt("g null (no decay) T=%lld B=%lld HV=%lld",
                        (long long)c.T, (long long)c.B, (long long)c.HV);
          runCase(results, s, K, V, c);
        }
      // Whole-call checks of cu_seqlens (B = 3, T = 6), and padding past
      // cu[B]: every spec, also under --quick (memcheck runs --quick).
      for (bool i64 : {false, true}) {
        runBadCu(results, s, K, V, "negative", {0, -4, 2, 6}, i64);
        runBadCu(results, s, K, V, "past T", {0, 1, 2, 40}, i64);
        runBadCu(results, s, K, V, "decreasing", {0, 3, 1, 6}, i64);
        runBadCu(results, s, K, V, "overlapping", {0, 2, 1, 3}, i64);
        runBadCu(results, s, K, V, "start not 0", {1, 2, 3, 6}, i64);
        runBadCu(results, s, K, V, "padding past cu[B] (valid)", {0, 1, 2, 3}, i64);
      }
      runBadCu(results, s, K, V, "past 2^32", {0, (int64_t(1) << 32) + 1, 2, 6}, true);
      // B = 600: the check's second round (512 entries a round), valid and
      // with the one bad entry there.
      if (&s == &specs()[0]) {
        std::vector<int64_t> many(601);
        for (int64_t i = 0; i <= 600; ++i)
          many[i] = std::min<int64_t>(i, 6);
        runBadCu(results, s, K, V, "B = 600 (valid)", many, false);
        many[550] = 7;
        runBadCu(results, s, K, V, "B = 600, past T at 550", many, false);
      }
      // The index arrays as int64 (read as int64 by the kernel).
      Case varlen64 = varlen;
      varlen64.seed = ++seed;
      varlen64.i64 = true;
      varlen64.label += " int64 indices";
      runCase(results, s, K, V, varlen64);
      // vLLM speculative decoding (also under --quick: memcheck runs the
      // bad num_accepted_tokens rows): [B, T] slots, num_accepted_tokens picks
      // the slot to read, each token's state goes to its own slot.
      Case vllm = base;
      vllm.seed = ++seed;
      vllm.B = 3;
      vllm.T = std::min<int64_t>(3, s.maxT);
      vllm.slots = 12;
      vllm.slots2d.clear();
      for (int64_t b = 0; b < vllm.B; ++b)
        for (int64_t t = 0; t < vllm.T; ++t)
          vllm.slots2d.push_back(int32_t(1 + b * 3 + t));
      if (vllm.T > 1)
        vllm.slots2d[1 * vllm.T + 1] = -1; // a step whose state is dropped
      vllm.accepted = {int32_t(vllm.T), 1, int32_t(std::min<int64_t>(2, vllm.T))};
      vllm.label = fmt("vLLM 2-D slots T=%lld, num_accepted", (long long)vllm.T);
      runCase(results, s, K, V, vllm);
      // num_accepted_tokens outside [1, T]: that row is skipped (o = 0, no
      // state), the flag raised; the others computed.
      for (int32_t bad : {0, -3, int32_t(vllm.T) + 1}) {
        Case badAccepted = vllm;
        badAccepted.seed = ++seed;
        badAccepted.accepted[1] = bad;
        badAccepted.i64 = bad < 0;
        badAccepted.label = fmt("vLLM num_accepted %d outside [1, %lld] skips its row%s", bad,
                                (long long)vllm.T, bad < 0 ? " (int64)" : "");
        runCase(results, s, K, V, badAccepted);
      }
      if (quick)
        continue;

      // vLLM's speculative decoding with varlen rows: 2-D slots max_t apart.
      Case varlenVllm = base;
      varlenVllm.seed = ++seed;
      varlenVllm.lengths = {std::min<int64_t>(3, s.maxT), 1,
                            std::min<int64_t>(2, s.maxT)};
      varlenVllm.B = 3;
      varlenVllm.slots = 3 * s.maxT + 2;
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t t = 0; t < s.maxT; ++t)
          varlenVllm.slots2d.push_back(int32_t(1 + b * s.maxT + t));
      varlenVllm.accepted = {1, int32_t(std::min<int64_t>(2, s.maxT)), 1};
      varlenVllm.label = "varlen vLLM 2-D slots, num_accepted";
      runCase(results, s, K, V, varlenVllm);

      // A row longer than max_t: skipped whole, error flag raised.
      Case varlenLong = base;
      varlenLong.seed = ++seed;
      varlenLong.lengths = {1, s.maxT + 1, 2 % (s.maxT + 1)};
      varlenLong.B = 3;
      varlenLong.label = fmt("varlen row of %lld > max_t tokens is skipped",
                             (long long)s.maxT + 1);
      runCase(results, s, K, V, varlenLong);

      Case varlenReject = varlenLong;
      varlenReject.seed = ++seed;
      varlenReject.debugChecks = true;
      varlenReject.rejectWith =
          fmt("cu_seqlens: row 1 has %lld tokens", (long long)s.maxT + 1);
      varlenReject.label = "debug_checks reject a varlen row > max_t";
      runCase(results, s, K, V, varlenReject);

      Case padding = base;
      padding.seed = ++seed;
      padding.B = 5;
      padding.slots = 6;
      padding.inIdx = {4, -1, 1, 6, 2}; // -1 padding, 6 out of range
      padding.T = std::min<int64_t>(2, s.maxT);
      padding.label = "padding -1 and index >= slots";
      runCase(results, s, K, V, padding);

      Case split = base;
      split.seed = ++seed;
      split.B = 3;
      split.slots = 8;
      split.inIdx = {1, 2, 3};
      split.outIdx = {6, 7, -1}; // -1: compute, keep state unwritten
      split.label = "split pool (read 1,2,3 write 6,7,-)";
      runCase(results, s, K, V, split);

      Case steps = base;
      steps.seed = ++seed;
      steps.T = s.maxT;
      steps.B = 2;
      steps.inIdx = {3, 1};
      steps.steps = true;
      steps.keepPool = true;
      steps.label = fmt("T=%lld step states, pool kept", (long long)s.maxT);
      runCase(results, s, K, V, steps);

      Case stepsWrite = steps;
      stepsWrite.seed = ++seed;
      stepsWrite.keepPool = false;
      stepsWrite.label = fmt("T=%lld step states, pool written", (long long)s.maxT);
      runCase(results, s, K, V, stepsWrite);


      Case debug = padding;
      debug.seed = ++seed;
      debug.inIdx = {4, -1, 1, 3, 2}; // valid: the debug checks pass
      debug.debugChecks = true;
      debug.label = "debug_checks on valid indices";
      runCase(results, s, K, V, debug);

      Case rejected = padding;
      rejected.seed = ++seed;
      rejected.debugChecks = true; // index 6 >= slots: rejected on the host
      rejected.rejectWith = "initial_state_indices[3] = 6 is not below slots = 6";
      rejected.label = "debug_checks reject an index >= slots";
      runCase(results, s, K, V, rejected);

      // A grid of >= 4 blocks per SM: the dispatch picks the bulk kernel
      // (the cases above, with few rows, run the small one).
      Case bulk = base;
      bulk.seed = ++seed;
      bulk.B = 24;
      bulk.H = 8;
      bulk.HV = 32;
      bulk.T = s.maxT;
      bulk.slots = 30;
      bulk.inIdx.clear();
      for (int64_t b = 0; b < bulk.B; ++b)
        bulk.inIdx.push_back(int32_t((b * 7 + 3) % bulk.slots));
      bulk.label = fmt("bulk kernel B=24 HV=32 T=%lld", (long long)s.maxT);
      runCase(results, s, K, V, bulk);

      Case strided = base;
      strided.seed = ++seed;
      strided.strideExtra = 24; // a view of a wider fused projection
      strided.T = std::min<int64_t>(2, s.maxT);
      strided.label = "token strides (+24 elements)";
      runCase(results, s, K, V, strided);
    }
  }
  if (!quick) {
    // 64-bit offsets: byte offsets pass 2^31 beyond 1024 slots of an fp32
    // 128x128 HV=32 pool, element offsets beyond 4096 slots.
    const SpecUnderTest &s = specs()[1]; // gdn_log, f32 state
    for (int64_t slots : {1100, 4200}) {
      Case big;
      big.seed = ++seed;
      big.B = 3;
      big.H = 16;
      big.HV = 32;
      big.slots = slots;
      big.inIdx = {int32_t(slots - 1), 5, int32_t(slots - 2)};
      big.outIdx = {int32_t(slots - 3), int32_t(slots - 1), 7};
      big.poolCheckAll = false;
      big.label = fmt("large pool %lld slots (64-bit offsets)", (long long)slots);
      runCase(results, s, 128, 128, big);
    }
  }
  return results.finish("decode GPU tests");
}
