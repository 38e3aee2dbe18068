// RankPhaseTest.cpp - context parallelism across ranks through the C API
// (deltac_prefill_args::cp_phase; docs/context-parallelism.md, "Across
// GPUs"), as a C++ engine would drive it, on one GPU.
//
// One sequence with an initial state in a pool, split into R slices (not
// multiples of the chunk; a slice must start where every tensor keeps its
// 16-byte alignment, else the host rejects the call: at HV = 4 bf16 beta,
// an even token): slice 0 is an ordinary call from the pool's row whose final
// state (b_0; M_0 = 0) goes to a scratch row; every other slice runs phase
// 1 (its transfer [b | M] to a buffer); the host folds the transfers in
// fp64 (E_r = M_{r-1} E_{r-1} + b_{r-1}: the fold a C++ engine does after
// its exchange); each slice r > 0 runs phase 2 with E_r staged in a pool
// row (initial_state_indices) and, for the last slice only, the final state
// written to the sequence's pool row (output_state_indices). o (poisoned
// first) and the final state are compared with the fp64 token-by-token
// reference (relative L2, tolerance 1e-2), the pool's other rows must keep
// their bits, the error flag must stay clear, and the launches must be the
// phases' kernels. Specs: gkv (kv layout, log gate), qwen3_next (vk,
// raw gate, sigmoid beta, bf16 activations, f32 pool) and kkv (KDA: a log
// decay per key channel, its recur_cp the warpgroup recur).
// Usage: rank_phase_test
#include "GpuTestUtil.h"

#include "deltac_test_prefill.h"
#include "qwen3_next_gdn.h"
#include "tests/reference/DeltaReference.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

using namespace gputest;
namespace ref = deltac::ref;

namespace {
struct Spec {
  const char *name;
  int (*prefill)(const deltac_prefill_args *, void *);
  int64_t (*workspace)(int64_t, int64_t, int64_t, int64_t, int64_t);
  const char *(*lastError)();
  size_t (*lastLaunches)(char *, size_t);
  ref::Rule rule;
  ref::GateForm gate;
  ref::BetaForm beta;
  ref::Layout layout;
};

const Spec kSpecs[] = {
    {"gkv", deltac_test_prefill_gkv_prefill, deltac_test_prefill_gkv_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Gated,
     ref::GateForm::Log, ref::BetaForm::Given, ref::Layout::Kv},
    {"qwen3_next", qwen3_next_gdn_qwen3_next_prefill,
     qwen3_next_gdn_qwen3_next_prefill_workspace_bytes, qwen3_next_gdn_last_error,
     qwen3_next_gdn_last_launches, ref::Rule::Gated, ref::GateForm::Raw, ref::BetaForm::Sigmoid,
     ref::Layout::Vk},
    {"kkv", deltac_test_prefill_kkv_prefill, deltac_test_prefill_kkv_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Kda,
     ref::GateForm::Log, ref::BetaForm::Given, ref::Layout::Kv},
};

constexpr int64_t K = 128, V = 128, H = 2, HV = 4;

/// State element (hv, i, j) of the [K][V] orientation in the spec's layout.
int64_t at(ref::Layout layout, int64_t hv, int64_t i, int64_t j) {
  return layout == ref::Layout::Kv ? (hv * K + i) * V + j : (hv * V + j) * K + i;
}

void runSpec(const Spec &s, int64_t T, int R, Results &results) {
  ref::Problem p;
  p.rule = s.rule;
  p.B = 1;
  p.T = T;
  p.H = H;
  p.HV = HV;
  p.K = K;
  p.V = V;
  p.layout = s.layout;
  p.gate = s.gate;
  p.beta = s.beta;
  p.qkL2Norm = true;
  p.scale = 1.0 / std::sqrt(double(K));
  ref::Inputs in = ref::randomInputs(p, 4242 + R);
  for (auto *t : {&in.q, &in.k, &in.v, &in.beta})
    for (double &x : *t)
      x = roundTo(DELTAC_BF16, x);
  for (double &x : in.g)
    x = roundTo(s.gate == ref::GateForm::Raw ? DELTAC_BF16 : DELTAC_F32, x);
  for (auto *t : {&in.aLog, &in.dtBias, &in.initialState})
    for (double &x : *t)
      x = roundTo(DELTAC_F32, x);
  ref::Outputs want;
  if (std::string e = ref::run(p, in, want); !e.empty()) {
    results.add(std::string(s.name) + ": reference", false, e);
    return;
  }

  // The pool: row 1 holds the sequence's state (read by slice 0, written
  // by the last slice), row 3 is the scratch of E_r and row 0 slice 0's
  // final state; rows 2 and 4 are never named and keep their bits.
  const int64_t per = HV * K * V, rows = 5;
  std::vector<double> pool(rows * per);
  for (size_t i = 0; i < pool.size(); ++i)
    pool[i] = roundTo(DELTAC_F32, std::cos(0.11 * double(i)));
  std::copy(in.initialState.begin(), in.initialState.end(), pool.begin() + 1 * per);
  // g per value head, or for KDA per (value head, key channel).
  const int64_t gPer = int64_t(in.g.size()) / T;
  DeviceBuffer q(T * H * K * 2), k(T * H * K * 2), v(T * HV * V * 2), o(T * HV * V * 2),
      beta(T * HV * 2), g(T * gPer * 4), aLog(HV * 4), dt(HV * 4), states(rows * per * 4),
      flag(4, 0), idx(8 * 4), transfer(HV * K * (V + K) * 4);
  q.upload(encode(DELTAC_BF16, in.q).data(), T * H * K * 2);
  k.upload(encode(DELTAC_BF16, in.k).data(), T * H * K * 2);
  v.upload(encode(DELTAC_BF16, in.v).data(), T * HV * V * 2);
  beta.upload(encode(DELTAC_BF16, in.beta).data(), T * HV * 2);
  deltac_dtype gType = s.gate == ref::GateForm::Raw ? DELTAC_BF16 : DELTAC_F32;
  g.upload(encode(gType, in.g).data(), T * gPer * bytesOf(gType));
  if (!in.aLog.empty()) {
    aLog.upload(encode(DELTAC_F32, in.aLog).data(), HV * 4);
    dt.upload(encode(DELTAC_F32, in.dtBias).data(), HV * 4);
  }
  states.upload(encode(DELTAC_F32, pool).data(), rows * per * 4);
  // Index pairs (in, out): slice 0 (1, 0), phase 2 (3, -1), the last (3, 1).
  const int32_t pairs[8] = {1, 0, 3, -1, 3, 1, 0, 0};
  idx.upload(pairs, sizeof pairs);
  auto *ix = static_cast<int32_t *>(idx.ptr);

  int64_t wsMax = s.workspace(K, V, T, 1, HV);
  DeviceBuffer ws(wsMax);
  auto args = [&](int64_t t0, int64_t t1) {
    deltac_prefill_args a{};
    a.K = K;
    a.V = V;
    a.T = t1 - t0;
    a.N = 1;
    a.H = H;
    a.HV = HV;
    a.io_dtype = DELTAC_BF16;
    a.state_dtype = DELTAC_F32;
    a.q = static_cast<char *>(q.ptr) + t0 * H * K * 2;
    a.k = static_cast<char *>(k.ptr) + t0 * H * K * 2;
    a.v = static_cast<char *>(v.ptr) + t0 * HV * V * 2;
    a.o = static_cast<char *>(o.ptr) + t0 * HV * V * 2;
    a.g = static_cast<char *>(g.ptr) + t0 * gPer * bytesOf(gType);
    a.beta = static_cast<char *>(beta.ptr) + t0 * HV * 2;
    a.A_log = in.aLog.empty() ? nullptr : static_cast<float *>(aLog.ptr);
    a.dt_bias = in.aLog.empty() ? nullptr : static_cast<float *>(dt.ptr);
    a.slots = rows;
    a.workspace = ws.ptr;
    a.workspace_bytes = s.workspace(K, V, t1 - t0, 1, HV);
    a.error_flag = static_cast<int32_t *>(flag.ptr);
    a.scale = float(p.scale);
    return a;
  };
  auto launched = [&] {
    char names[1024];
    s.lastLaunches(names, sizeof names);
    return std::string(names);
  };
  std::string tag = fmt("%s, T = %lld, R = %d", s.name, (long long)T, R);
  bool ok = true, kernels = true;
  std::string detail;
  // fp64 fold: E = M E + b over the slices so far ([HV][K][V]).
  std::vector<double> E(per, 0.0);
  for (int r = 0; r < R && ok; ++r) {
    int64_t t0 = T * r / R, t1 = T * (r + 1) / R;
    deltac_prefill_args a = args(t0, t1);
    if (r == 0) {
      a.initial_state = a.final_state = states.ptr;
      a.initial_state_indices = ix + 0;
      a.output_state_indices = ix + 1;
      ok = s.prefill(&a, nullptr) == DELTAC_OK;
      check(cudaDeviceSynchronize(), "slice 0");
      std::vector<double> b0 = decode(DELTAC_F32, states.read<uint8_t>(per * 4, 0));
      for (int64_t hv = 0; hv < HV; ++hv)
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j)
            E[(hv * K + i) * V + j] = b0[at(s.layout, hv, i, j)];
      continue;
    }
    // Phase 1: the slice's transfer.
    a.cp_phase = 1;
    a.cp_transfer = transfer.ptr;
    ok = s.prefill(&a, nullptr) == DELTAC_OK;
    check(cudaDeviceSynchronize(), "phase 1");
    kernels &= launched().find("_recur_cp") != std::string::npos &&
               launched().find("_cp_chain") != std::string::npos &&
               launched().find("_cp_correct") == std::string::npos;
    std::vector<float> X = transfer.read<float>(HV * K * (V + K));
    // Stage E (this slice's entering state) in pool row 3, then phase 2.
    std::vector<double> staged(per);
    for (int64_t hv = 0; hv < HV; ++hv)
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          staged[at(s.layout, hv, i, j)] = E[(hv * K + i) * V + j];
    states.upload(encode(DELTAC_F32, staged).data(), per * 4, 3 * per * 4);
    a.cp_phase = 2;
    a.cp_transfer = nullptr;
    a.initial_state = a.final_state = states.ptr;
    bool last = r == R - 1;
    a.initial_state_indices = ix + (last ? 4 : 2);
    a.output_state_indices = ix + (last ? 5 : 3);
    ok = ok && s.prefill(&a, nullptr) == DELTAC_OK;
    check(cudaDeviceSynchronize(), "phase 2");
    kernels &= launched().find("_cp_chain") != std::string::npos &&
               launched().find("_cp_correct") != std::string::npos &&
               launched().find("_recur") == std::string::npos;
    // The fold, in fp64 from the f32 transfer: E <- M E + b.
    std::vector<double> next(per);
    for (int64_t hv = 0; hv < HV; ++hv) {
      const float *x = X.data() + hv * K * (V + K);
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j) {
          double acc = x[i * V + j];
          for (int64_t m = 0; m < K; ++m)
            acc += double(x[K * V + i * K + m]) * E[(hv * K + m) * V + j];
          next[(hv * K + i) * V + j] = acc;
        }
    }
    E = std::move(next);
  }
  if (!ok)
    detail = s.lastError();
  std::vector<double> oGot = decode(DELTAC_BF16, o.read<uint8_t>(T * HV * V * 2));
  std::vector<double> poolGot = decode(DELTAC_F32, states.read<uint8_t>(rows * per * 4));
  std::vector<double> finalGot(poolGot.begin() + 1 * per, poolGot.begin() + 2 * per);
  double eo = ref::relativeError(oGot, want.o), es = ref::relativeError(finalGot, want.finalState);
  bool untouched = true;
  for (int64_t row : {2, 4})
    for (int64_t e = 0; e < per; ++e)
      untouched &= poolGot[row * per + e] == pool[row * per + e];
  int32_t raised = flag.read<int32_t>(1)[0];
  results.add(tag + ": calls accepted", ok, detail);
  results.add(tag + ": o vs fp64 (tol 1e-2)", ok && eo < 1e-2, fmt("%.3e", eo));
  results.add(tag + ": final state in its pool row vs fp64 (tol 1e-2)", ok && es < 1e-2,
              fmt("%.3e", es));
  results.add(tag + ": rows not named keep their bits, flag clear", untouched && raised == 0,
              fmt("flag %d", raised));
  results.add(tag + ": phase 1 launched recur_cp and the chain, phase 2 the chain and the "
                    "correction",
              kernels, "");
}
} // namespace

int main() {
  Results results;
  for (const Spec &s : kSpecs)
    for (int R : {2, 3})
      runSpec(s, 5004, R, results); // slices of 2502 and 1668: beta's rows stay 16-byte aligned
  return results.finish("rank_phase");
}
