// PrefillTest.cpp - chunked prefill kernels against the fp64 reference.
//
// Every case draws fresh random inputs, rounds them to the dtypes the GPU
// reads (the reference sees exactly those numbers), poisons the outputs
// (0xFF bytes: NaN) and compares the relative errors ||x - ref|| / ||ref||
// of o and of the final states with a tolerance (bf16 operands in the
// tensor-core products: 1e-2 on o and the state; FLA measures 4e-3 / 3e-3
// on its own shapes, reported by the benchmark beside ours). State rows
// not named by an index must stay bit-for-bit unchanged, and the device
// error flag must be raised exactly for bad cu_seqlens / indices.
// Usage: prefill_test [--quick | --mismatch]
#include "GpuTestUtil.h"

#include "deltac_test_prefill.h"
#include "qwen3_next_gdn.h"
#include "tests/reference/DeltaReference.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

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
  bool l2norm;
  deltac_dtype io, state;
  ref::Layout layout;
  int64_t K, V;
  // The library has sm_90a's forms for it: _queue (the overlapped
  // launch), _chunks_raw and _recur_shared.
  bool sm90Forms = false;
  int64_t chunk = 64; // the spec's chunk length
};

const Spec kSpecs[] = {
    {"qwen3_next", qwen3_next_gdn_qwen3_next_prefill,
     qwen3_next_gdn_qwen3_next_prefill_workspace_bytes,
     qwen3_next_gdn_last_error, qwen3_next_gdn_last_launches, ref::Rule::Gated, ref::GateForm::Raw,
     ref::BetaForm::Sigmoid, true, DELTAC_BF16, DELTAC_F32, ref::Layout::Vk,
     128, 128, true},
    {"gkv", deltac_test_prefill_gkv_prefill,
     deltac_test_prefill_gkv_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Gated, ref::GateForm::Log,
     ref::BetaForm::Given, true, DELTAC_BF16, DELTAC_F32, ref::Layout::Kv,
     128, 128, true},
    {"dn", deltac_test_prefill_dn_prefill,
     deltac_test_prefill_dn_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Delta, ref::GateForm::None,
     ref::BetaForm::Sigmoid2, true, DELTAC_BF16, DELTAC_BF16, ref::Layout::Vk,
     64, 64, false, 32},
    {"glin", deltac_test_prefill_glin_prefill,
     deltac_test_prefill_glin_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Gated, ref::GateForm::Linear,
     ref::BetaForm::Given, false, DELTAC_BF16, DELTAC_F16, ref::Layout::Vk,
     64, 128, false, 32},
    {"d64", deltac_test_prefill_d64_prefill,
     deltac_test_prefill_d64_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Delta, ref::GateForm::None,
     ref::BetaForm::Sigmoid, true, DELTAC_F16, DELTAC_F32, ref::Layout::Kv,
     64, 64, true},
    {"kkv", deltac_test_prefill_kkv_prefill,
     deltac_test_prefill_kkv_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Kda, ref::GateForm::Log,
     ref::BetaForm::Given, true, DELTAC_BF16, DELTAC_F32, ref::Layout::Kv,
     128, 128},
    {"kraw", deltac_test_prefill_kraw_prefill,
     deltac_test_prefill_kraw_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Kda, ref::GateForm::Raw,
     ref::BetaForm::Sigmoid, false, DELTAC_BF16, DELTAC_F32, ref::Layout::Vk,
     64, 64, false, 32},
    {"k256", deltac_test_prefill_k256_prefill,
     deltac_test_prefill_k256_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Kda, ref::GateForm::Log,
     ref::BetaForm::Given, true, DELTAC_BF16, DELTAC_F32, ref::Layout::Kv,
     256, 64, false, 32},
    {"k64", deltac_test_prefill_k64_prefill,
     deltac_test_prefill_k64_prefill_workspace_bytes,
     deltac_test_prefill_last_error, deltac_test_prefill_last_launches, ref::Rule::Kda, ref::GateForm::Log,
     ref::BetaForm::Given, true, DELTAC_F16, DELTAC_F32, ref::Layout::Vk,
     64, 64},
};

struct Case {
  std::string name;
  const Spec *spec;
  std::vector<int64_t> lengths;
  int64_t H, HV;
  bool initialState;
  bool pool;       // states in a larger pool by index (in != out)
  bool cu64;       // int64 cu_seqlens
  double gMin = -1.0, gMax = 0.0;
  bool capture = false; // run inside a CUDA graph
  // The last of `lengths` is padding: the call gets one sequence fewer and
  // T still counts those tokens (cu_seqlens[N] < T), whose o must be 0.
  bool padTail = false;
  // Pool cases: sequence `skipIndex`'s initial_state_indices entry (or,
  // with skipOut, its output_state_indices entry) lies past the pool. That
  // sequence is skipped: o = 0 for its tokens, its rows untouched, the flag
  // raised; the others as usual.
  int64_t skipIndex = -1;
  bool skipOut = false;
  // State checkpoints: 1 = FLA's (the state entering every chunk, a row
  // per chunk), 2 = FlashInfer's (the state after every ckEvery chunks of
  // a sequence, from per-sequence first rows one row apart, so that the
  // unnamed rows must keep their poison); f32 or the io dtype.
  int ckMode = 0;
  int64_t ckEvery = 1;
  bool ckF32 = true;
  // beta passed as f32 (beta_f32), unrounded: the reference sees the same.
  bool betaF32 = false;
  // The dispatch takes context parallelism (the compiler's
  // PrefillSegments.cpp) for this call where the code run has it: asserted
  // from the launches when no form is forced.
  bool wantSegments = false;
  // Pass the longest sequence as max_seqlen (FLA's hint), by which the
  // dispatch counts the busy sequences of a varlen batch.
  bool hintMaxSeqlen = false;
};

struct Run {
  double oErr = 0, sErr = 0;
  bool untouched = true; // pool rows not written stayed the same
  int32_t flag = -1;
  int status = 0;
  std::string error;
  // The guard bytes around o, the states and the pool kept their fill.
  bool guards = true;
  // Elements of o that must be 0 (padding tokens; every token of a skipped
  // call) and are not.
  int64_t oNonZero = 0;
  // A skipped call: the pool (or the final-state buffer) bit-identical.
  bool statesUntouched = true;
  // The kernels the call launched (the library's last_launches).
  std::string launches;
  // Checkpoints against the fp64 states at the same boundaries (a skipped
  // sequence's rows: zeros); unnamed rows kept their NaN poison.
  double ckErr = 0;
  bool ckPoisonKept = true;
};

/// A device buffer with `kGuard` bytes of its fill before and after the
/// `bytes` the kernels may touch: a write or a stray store outside them is
/// seen by guardsIntact().
constexpr size_t kGuard = 4096;
struct Guarded {
  DeviceBuffer buf;
  int fill;
  Guarded(size_t bytes, int fill = 0xFF) : buf(bytes + 2 * kGuard, fill), fill(fill) {}
  void *ptr() const { return static_cast<char *>(buf.ptr) + kGuard; }
  size_t bytes() const { return buf.bytes - 2 * kGuard; }
  void upload(const void *src, size_t n) { buf.upload(src, n, kGuard); }
  template <typename T> std::vector<T> read(size_t count) const {
    return buf.read<T>(count, kGuard);
  }
  bool guardsIntact() const {
    for (size_t at : {size_t(0), buf.bytes - kGuard})
      for (uint8_t x : buf.read<uint8_t>(kGuard, at))
        if (x != uint8_t(fill))
          return false;
    return true;
  }
};

Run runCase(const Case &c, const std::vector<int64_t> *badCu = nullptr) {
  const Spec &s = *c.spec;
  ref::Problem p;
  p.rule = s.rule;
  p.B = 1;
  p.cuSeqlens = ref::cuSeqlensFromLengths(c.lengths);
  p.T = p.cuSeqlens.back();
  p.H = c.H;
  p.HV = c.HV;
  p.K = s.K;
  p.V = s.V;
  p.layout = s.layout;
  p.gate = s.gate;
  p.beta = s.beta;
  p.qkL2Norm = s.l2norm;
  p.scale = 1.0 / std::sqrt(double(s.K));
  ref::RandomOptions opts;
  opts.gMin = c.gMin;
  opts.gMax = c.gMax;
  opts.initialState = c.initialState;
  ref::Inputs in = ref::randomInputs(p, std::hash<std::string>()(c.name), opts);
  ref::Sizes sz = ref::sizesOf(p);
  int64_t N = ref::numSequences(p), T = p.T;
  // The call's sequences (the reference's last one is padding with padTail).
  int64_t callN = c.padTail ? N - 1 : N;
  int64_t covered = p.cuSeqlens[callN];
  // Round what the GPU reads to its dtypes.
  for (auto *t : {&in.q, &in.k, &in.v})
    for (double &x : *t)
      x = roundTo(s.io, x);
  deltac_dtype betaType = c.betaF32 ? DELTAC_F32 : s.io;
  for (double &x : in.beta)
    x = roundTo(betaType, x);
  if (s.gate == ref::GateForm::Raw)
    for (double &x : in.g)
      x = roundTo(s.io, x);
  else
    for (double &x : in.g)
      x = roundTo(DELTAC_F32, x);
  for (auto *t : {&in.aLog, &in.dtBias})
    for (double &x : *t)
      x = roundTo(DELTAC_F32, x);
  if (in.initialState.empty())
    in.initialState.assign(sz.state, 0.0);
  for (double &x : in.initialState)
    x = roundTo(s.state, x);
  ref::Outputs out;
  std::string err = ref::run(p, in, out, /*wantStepStates=*/c.ckMode != 0);
  if (!err.empty()) {
    Run r;
    r.status = -1;
    r.error = err;
    return r;
  }

  // Pool of 2N + 2 rows: sequence n reads even row 2n and writes odd row
  // 2(N - 1 - n) + 1 (in place: no sequence writes a row another reads);
  // the last two rows are never named.
  int64_t per = sz.state / N;
  int64_t rows = c.pool ? 2 * N + 2 : N;
  std::vector<int32_t> inIdx(N), outIdx(N);
  for (int64_t n = 0; n < N; ++n) {
    inIdx[n] = int32_t(2 * n);
    outIdx[n] = int32_t(2 * (N - 1 - n) + 1);
  }
  std::vector<double> pool(rows * per);
  for (size_t i = 0; i < pool.size(); ++i)
    pool[i] = roundTo(s.state, std::sin(0.37 * double(i)));
  if (c.pool)
    for (int64_t n = 0; n < N; ++n)
      std::copy(in.initialState.begin() + n * per,
                in.initialState.begin() + (n + 1) * per,
                pool.begin() + inIdx[n] * per);
  else
    pool = in.initialState;

  DeviceBuffer q(sz.q * bytesOf(s.io)), k(sz.k * bytesOf(s.io)),
      v(sz.v * bytesOf(s.io)), beta(sz.beta * bytesOf(betaType));
  Guarded o(sz.o * bytesOf(s.io));
  deltac_dtype gType = s.gate == ref::GateForm::Raw ? s.io : DELTAC_F32;
  DeviceBuffer g(std::max<size_t>(sz.g, 1) * bytesOf(gType));
  DeviceBuffer aLog(std::max<size_t>(sz.aLog, 1) * 4),
      dt(std::max<size_t>(sz.dtBias, 1) * 4);
  Guarded states(pool.size() * bytesOf(s.state), 0);
  Guarded finals(pool.size() * bytesOf(s.state));
  DeviceBuffer dIn(N * 4), dOut(N * 4), flag(4, 0);
  DeviceBuffer cu((N + 1) * 8);
  auto up = [](DeviceBuffer &b, const std::vector<uint8_t> &x) {
    b.upload(x.data(), x.size());
  };
  up(q, encode(s.io, in.q));
  up(k, encode(s.io, in.k));
  up(v, encode(s.io, in.v));
  up(beta, encode(betaType, in.beta));
  if (sz.g)
    up(g, encode(gType, in.g));
  if (sz.aLog) {
    up(aLog, encode(DELTAC_F32, in.aLog));
    up(dt, encode(DELTAC_F32, in.dtBias));
  }
  {
    std::vector<uint8_t> bytes = encode(s.state, pool);
    states.upload(bytes.data(), bytes.size());
  }
  if (c.skipIndex >= 0)
    (c.skipOut ? outIdx : inIdx)[c.skipIndex] = int32_t(rows + 7);
  if (c.pool) {
    // In-place pool: the final states go into the same tensor.
    dIn.upload(inIdx.data(), N * 4);
    dOut.upload(outIdx.data(), N * 4);
  }
  std::vector<int64_t> cuHost = badCu ? *badCu : p.cuSeqlens;
  cuHost.resize(callN + 1);
  if (c.cu64) {
    cu.upload(cuHost.data(), (callN + 1) * 8);
  } else {
    std::vector<int32_t> c32(cuHost.begin(), cuHost.end());
    cu.upload(c32.data(), (callN + 1) * 4);
  }
  int64_t wsBytes = s.workspace(s.K, s.V, T, callN, c.HV);
  DeviceBuffer ws(std::max<int64_t>(wsBytes, 16));

  // Checkpoints: the expected rows (fp64; NaN for a row nothing names).
  int64_t perHead = s.K * s.V;
  std::vector<int64_t> ckStarts(callN + 1, 0);
  std::vector<double> ckRef;
  auto stateAfter = [&](int64_t n, int64_t tokens, double *dst) {
    // The state after `tokens` tokens of sequence n (0: its initial state).
    const double *src = tokens == 0 ? &in.initialState[n * per]
                                    : &out.stepStates[(p.cuSeqlens[n] + tokens - 1) * per];
    std::copy(src, src + per, dst);
  };
  if (c.ckMode) {
    for (int64_t n = 0; n < callN; ++n) {
      int64_t len = p.cuSeqlens[n + 1] - p.cuSeqlens[n];
      int64_t step = c.ckMode == 1 ? s.chunk : c.ckEvery * s.chunk;
      int64_t count = c.ckMode == 1 ? (len + s.chunk - 1) / s.chunk : len / step;
      int64_t row0 = int64_t(ckRef.size()) / per;
      ckStarts[n] = row0;
      ckRef.resize((row0 + count) * per);
      for (int64_t j = 0; j < count; ++j) {
        double *dst = &ckRef[(row0 + j) * per];
        if (n == c.skipIndex)
          std::fill(dst, dst + per, 0.0);
        else
          stateAfter(n, c.ckMode == 1 ? j * s.chunk : (j + 1) * step, dst);
      }
      if (c.ckMode == 2) // a row no sequence names
        ckRef.resize(ckRef.size() + per, std::nan(""));
    }
  }
  int64_t ckRows = int64_t(ckRef.size()) / std::max<int64_t>(per, 1);
  deltac_dtype ckType = c.ckF32 ? DELTAC_F32 : s.io;
  Guarded ck(std::max<int64_t>(ckRows * per, 1) * bytesOf(ckType));
  DeviceBuffer dStarts((callN + 1) * 8);
  dStarts.upload(ckStarts.data(), (callN + 1) * 8);
  (void)perHead;

  deltac_prefill_args a{};
  a.K = s.K;
  a.V = s.V;
  a.T = T;
  a.N = callN;
  a.H = c.H;
  a.HV = c.HV;
  a.io_dtype = s.io;
  a.state_dtype = s.state;
  a.q = q.ptr;
  a.k = k.ptr;
  a.v = v.ptr;
  a.o = o.ptr();
  a.g = sz.g ? g.ptr : nullptr;
  a.beta = beta.ptr;
  a.beta_f32 = c.betaF32;
  a.A_log = sz.aLog ? static_cast<float *>(aLog.ptr) : nullptr;
  a.dt_bias = sz.aLog ? static_cast<float *>(dt.ptr) : nullptr;
  a.initial_state = c.initialState || c.pool ? states.ptr() : nullptr;
  a.final_state = c.pool ? states.ptr() : finals.ptr();
  a.slots = rows;
  a.initial_state_indices = c.pool ? static_cast<int32_t *>(dIn.ptr) : nullptr;
  a.output_state_indices = c.pool ? static_cast<int32_t *>(dOut.ptr) : nullptr;
  a.cu_seqlens = cu.ptr;
  a.cu_seqlens_i64 = c.cu64;
  if (c.hintMaxSeqlen)
    a.max_seqlen = *std::max_element(c.lengths.begin(), c.lengths.end());
  a.workspace = ws.ptr;
  a.workspace_bytes = wsBytes;
  a.error_flag = static_cast<int32_t *>(flag.ptr);
  a.scale = float(p.scale);
  if (c.ckMode) {
    a.checkpoints = ck.ptr();
    a.checkpoint_rows = ckRows;
    a.checkpoint_dtype = ckType;
    if (c.ckMode == 2) {
      a.checkpoint_starts = static_cast<int64_t *>(dStarts.ptr);
      a.checkpoint_every_n_tokens = c.ckEvery * s.chunk;
    }
  }

  Run r;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  if (c.capture) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
    r.status = s.prefill(&a, stream);
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    if (r.status == DELTAC_OK) {
      check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
      check(cudaGraphLaunch(exec, stream), "replay");
      check(cudaGraphExecDestroy(exec), "destroy exec");
    }
    check(cudaGraphDestroy(graph), "destroy graph");
  } else {
    r.status = s.prefill(&a, stream);
  }
  check(cudaStreamSynchronize(stream), "prefill");
  check(cudaStreamDestroy(stream), "stream destroy");
  {
    char names[1024];
    s.lastLaunches(names, sizeof names);
    r.launches = names;
  }
  if (r.status != DELTAC_OK) {
    r.error = s.lastError();
    return r;
  }
  r.flag = flag.read<int32_t>(1)[0];
  r.guards = o.guardsIntact() && states.guardsIntact() && finals.guardsIntact() &&
             ck.guardsIntact();
  if (c.ckMode) {
    std::vector<double> got = decode(ckType, ck.read<uint8_t>(ckRows * per * bytesOf(ckType)));
    std::vector<double> want, mine;
    for (size_t i = 0; i < got.size(); ++i) {
      if (badCu) { // a skipped call: every row zero
        r.ckPoisonKept &= got[i] == 0.0;
      } else if (std::isnan(ckRef[i])) {
        r.ckPoisonKept &= std::isnan(got[i]);
      } else {
        want.push_back(ckRef[i]);
        mine.push_back(got[i]);
      }
    }
    r.ckErr = ref::relativeError(mine, want);
  }
  std::vector<double> oGot = decode(s.io, o.read<uint8_t>(o.bytes()));
  // Tokens [covered, T) (padding), or all of them for a bad cu_seqlens,
  // must be exactly 0; the reference is compared on the others.
  int64_t perToken = c.HV * s.V;
  int64_t zeroFrom = badCu ? 0 : covered;
  for (int64_t i = zeroFrom * perToken; i < T * perToken; ++i)
    r.oNonZero += oGot[i] != 0.0;
  if (badCu) {
    // Nothing read or written: the pool, or the final-state buffer (its
    // 0xFF fill), bit for bit.
    std::vector<uint8_t> now = (c.pool ? states : finals).read<uint8_t>(states.bytes());
    std::vector<uint8_t> before =
        c.pool ? encode(s.state, pool) : std::vector<uint8_t>(now.size(), 0xFF);
    r.statesUntouched = now == before;
    return r;
  }
  oGot.resize(covered * perToken);
  std::vector<double> oRef(out.o.begin(), out.o.begin() + covered * perToken);
  if (c.skipIndex >= 0) {
    // The skipped sequence's o must be exactly 0; it is left out of the
    // comparison with the reference (which ran it).
    int64_t from = p.cuSeqlens[c.skipIndex] * perToken, to = p.cuSeqlens[c.skipIndex + 1] * perToken;
    for (int64_t i = from; i < to; ++i)
      r.oNonZero += oGot[i] != 0.0;
    oGot.erase(oGot.begin() + from, oGot.begin() + to);
    oRef.erase(oRef.begin() + from, oRef.begin() + to);
  }
  r.oErr = ref::relativeError(oGot, oRef);
  std::vector<double> sGot =
      decode(s.state, (c.pool ? states : finals).read<uint8_t>(pool.size() * bytesOf(s.state)));
  std::vector<double> mine, sRef(out.finalState.begin(), out.finalState.begin() + callN * per);
  for (int64_t n = 0; n < callN; ++n) {
    if (n == c.skipIndex) {
      // Nothing written for it: its reference state is not compared.
      sRef.erase(sRef.begin() + mine.size(), sRef.begin() + mine.size() + per);
      continue;
    }
    int64_t row = c.pool ? outIdx[n] : n;
    mine.insert(mine.end(), sGot.begin() + row * per, sGot.begin() + (row + 1) * per);
  }
  r.sErr = ref::relativeError(mine, sRef);
  if (c.pool)
    for (int64_t row = 0; row < rows; ++row) {
      bool written = false;
      for (int64_t n = 0; n < callN; ++n)
        written |= outIdx[n] == row && n != c.skipIndex;
      if (written)
        continue;
      for (int64_t e = 0; e < per; ++e) {
        double expect = pool[row * per + e];
        // A row that was read is also unchanged unless it was written.
        if (sGot[row * per + e] != expect &&
            !(std::isnan(expect) && std::isnan(sGot[row * per + e])))
          r.untouched = false;
      }
    }
  return r;
}

/// Whether `launches` (comma-separated kernel names) has a kernel whose name
/// ends in `suffix`.
bool launched(const std::string &launches, const std::string &suffix) {
  size_t from = 0;
  while (from <= launches.size()) {
    size_t end = launches.find(',', from);
    std::string name = launches.substr(from, end == std::string::npos ? std::string::npos : end - from);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
    if (end == std::string::npos)
      break;
    from = end + 1;
  }
  return false;
}

/// The form a forcing switch of this process asked for, checked against
/// the kernels the call launched (run.sh reruns this test under each
/// switch): "" when it ran, else what is missing. Only where the library
/// has the form (sm90Forms) and the device runs sm_90a code.
/// Whether this device runs the spec's sm_90a forms (an sm_90 GPU, no
/// forced target, a spec that has them).
bool sm90FormsRun(const Spec &s) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  return prop.major == 9 && !std::getenv("DELTAC_FORCE_TARGET") && s.sm90Forms;
}

/// Whether the call runs the spec's context-parallel kernels (recur_cp,
/// cp_chain, cp_correct) where it takes them: the lowering builds them on
/// the recur of V tile 64 in every target's code (sm_90a's wgmma recur:
/// the transposed form for a scalar gate, the warpgroup form for kda;
/// sm_80's mma.sync recur with the state in registers, which
/// DELTAC_FORCE_TARGET=sm_80 runs here), so for chunk 64 and K up to 128
/// (not K = 256), whatever the rule.
bool cpFormsRun(const Spec &s) { return s.chunk == 64 && s.K <= 128; }

/// DELTAC_PREFILL_FORCE as this process has it: the form ("" unset) and
/// the V tile asked for (0: none).
struct Forced {
  std::string form;
  int tile = 0;
};
Forced forced() {
  Forced f;
  const char *e = std::getenv("DELTAC_PREFILL_FORCE");
  if (!e)
    return f;
  std::string text(e);
  f.form = text.substr(0, text.find(','));
  size_t at = text.find(",tile=");
  if (at != std::string::npos)
    f.tile = std::atoi(text.c_str() + at + 6);
  return f;
}

std::string forcedFormMissing(const Spec &s, const std::string &launches) {
  std::string missing;
  auto want = [&](bool cond, const char *suffix, bool present) {
    if (cond && launched(launches, suffix) != present)
      missing += std::string(present ? " no " : " unexpected ") + suffix;
  };
  Forced f = forced();
  bool has = sm90FormsRun(s);
  bool overlap = f.form == "overlap" || f.form == "overlap_shared";
  // Each forced form launches its kernels where the code run has them
  // (a call that cannot run it is refused: runCase's caller checks that).
  want(has && overlap, "_queue", true);
  want(has && f.form == "overlap_shared", "_recur_shared", true);
  want(f.form == "overlap", "_recur_shared", false);
  want(has && f.form == "shared_recur", "_recur_shared", true);
  // cp: the three context-parallel kernels and no other recur; the other
  // forced forms never launch them.
  bool cp = f.form == "cp";
  for (const char *part : {"_recur_cp", "_cp_chain", "_cp_correct"})
    want(!f.form.empty() && f.form != "dispatch", part, cp && cpFormsRun(s));
  want(cp, "_recur_shared", false);
  want(cp, "_queue", false);
  want(cp, "_chunks_raw", false);
  want(has && (f.form == "raw_qk" || f.form == "raw_qk_w"), "_chunks_raw", true);
  // The non-overlapped forms never launch the queue, and each only its own
  // chunks and recur.
  bool other = f.form == "ordinary" || f.form == "shared_recur" || f.form == "raw_qk" ||
               f.form == "raw_qk_w";
  want(other, "_queue", false);
  want(f.form == "ordinary" || f.form == "raw_qk" || f.form == "raw_qk_w", "_recur_shared",
       false);
  want(f.form == "ordinary" || f.form == "shared_recur", "_chunks_raw", false);
  // tile=64: the tile-64 recur (`_recur` or the shared one), never the 16-
  // or 32-wide variants.
  if (f.tile == 64)
    for (const char *narrow : {"_recur_v16", "_recur_v32"})
      want(true, narrow, false);
  // sm_80's code has none of the sm_90a forms (it has context
  // parallelism: cpFormsRun).
  const char *target = std::getenv("DELTAC_FORCE_TARGET");
  bool sm80 = target && std::string(target) == "sm_80";
  for (const char *form : {"_queue", "_chunks_raw", "_recur_shared"})
    want(sm80, form, false);
  return missing;
}

// --mismatch, in a process of its own (it needs kernels not yet loaded):
// recur must read the workspace in the layout chunks wrote, and a chunks
// image of one target beside a recur image of another is refused, not
// launched. DELTAC_FORCE_TARGET=sm_80 for a first call loads chunks (and
// the V tile 16 recur: one head) from the sm_80 PTX; a second call without
// it takes the V tile 64 recur (20 heads: deltac_prefill.cpp's table),
// which loads the device's own image. On a device whose own image is not
// sm_80's (sm_90 and above) that call must fail with DELTAC_UNSUPPORTED
// naming both targets; a third call forced to sm_80 again still works.
int mismatchTest() {
  Results results;
  const Spec *gkv = &kSpecs[1];
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  // Not overlapped (read once, at the first call): its probe would load
  // the V tile 64 recur from sm_80 as well.
  setenv("DELTAC_PREFILL_FORCE", "ordinary", 1);
  setenv("DELTAC_FORCE_TARGET", "sm_80", 1);
  Run first = runCase({"mismatch: chunks from sm_80", gkv, {100}, 1, 2, true, false, false});
  results.add("sm_80 chunks and recur (1 head)", first.status == DELTAC_OK && first.oErr < 1e-2,
              first.status ? first.error : fmt("o err %.2e", first.oErr));
  unsetenv("DELTAC_FORCE_TARGET");
  Run second = runCase({"mismatch: recur from the device's image", gkv, {100}, 4, 20, true, false, false});
  if (prop.major >= 9)
    results.add("chunks sm_80 beside recur " + std::string(prop.major == 9 ? "sm_90a" : "sm_100a") +
                    " refused",
                second.status == DELTAC_UNSUPPORTED &&
                    second.error.find("chunks loaded the sm_80 code") != std::string::npos &&
                    second.error.find("workspace layouts differ") != std::string::npos,
                fmt("status %d: ", second.status) + second.error);
  else
    results.add("sm_80 device: both images are sm_80's, no refusal", second.status == DELTAC_OK,
                second.error);
  setenv("DELTAC_FORCE_TARGET", "sm_80", 1);
  Run third = runCase({"mismatch: sm_80 again", gkv, {100}, 1, 2, true, false, false});
  results.add("a later sm_80 call still works", third.status == DELTAC_OK && third.oErr < 1e-2,
              third.status ? third.error : fmt("o err %.2e", third.oErr));
  return results.finish("prefill image mismatch");
}
} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--mismatch")
    return mismatchTest();
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  Results results;
  const double tol = 1e-2;
  std::vector<Case> cases;
  const Spec *qwen = &kSpecs[0], *gkv = &kSpecs[1], *dn = &kSpecs[2],
             *glin = &kSpecs[3], *d64 = &kSpecs[4], *kkv = &kSpecs[5], *kraw = &kSpecs[6],
             *k256 = &kSpecs[7], *k64 = &kSpecs[8];
  cases.push_back({"qwen3_next varlen pool", qwen, {37, 1, 64, 200, 130}, 2, 4, true, true, false});
  cases.push_back({"qwen3_next varlen graph", qwen, {300, 5, 64}, 2, 4, true, false, true, -1, 0, true});
  cases.push_back({"gkv T=512 H4/HV8", gkv, {512}, 4, 8, true, false, false});
  // N * HV * V/64 = 160 >= SMs: the dispatch table picks the 64-wide recur
  // and (sm_90a: the grid fills a wave) the raw q/k form.
  cases.push_back({"gkv wide grid H4/HV40", gkv, {70, 130}, 4, 40, true, false, false});
  cases.push_back({"gkv strong decay", gkv, {100, 77}, 1, 2, true, false, true, -17.0, -15.0});
  cases.push_back({"gkv weak decay no state", gkv, {256, 1}, 2, 2, false, false, false, -0.02, 0.0});
  cases.push_back({"dn varlen", dn, {33, 64, 1, 95}, 2, 4, true, true, false});
  cases.push_back({"glin varlen", glin, {31, 32, 33, 150}, 1, 3, true, false, true, -0.5, 0.0});
  // glin's state is f16: read and written as f16, here in a pool by index.
  cases.push_back({"glin f16 pool", glin, {31, 100, 7}, 1, 3, true, true, false, -0.5, 0.0});
  // Chunk 64, K = V = 64, no decay; the wide grid takes the V tile 64
  // recur (sm_90a: the transposed form) by the table.
  cases.push_back({"d64 varlen pool", d64, {37, 1, 64, 200, 130}, 2, 4, true, true, false});
  cases.push_back({"d64 wide grid H4/HV40", d64, {70, 130}, 4, 40, true, false, true});
  // KDA: decays per K channel (lengths 1, below, at and above the chunk).
  cases.push_back({"kkv varlen pool", kkv, {37, 1, 64, 200, 130}, 2, 4, true, true, false});
  cases.push_back({"kkv strong decay", kkv, {100, 77}, 1, 2, true, false, true, -17.0, -15.0});
  cases.push_back({"kkv weak decay no state", kkv, {256, 1}, 2, 2, false, false, false, -0.02, 0.0});
  // Decays of -6..0 per token: 16 rows span 45 on average, so about one
  // 16-row block in four exceeds kSteep (64) in some channel and is summed
  // elementwise, the others by the product form (both in one chunk).
  cases.push_back({"kkv mixed steep blocks", kkv, {300, 64, 17}, 1, 2, true, false, false, -6.0, 0.0});
  cases.push_back({"kraw varlen graph", kraw, {31, 32, 33, 150}, 1, 3, true, false, true, -1, 0, true});
  cases.push_back({"kraw pool", kraw, {64, 1, 95}, 2, 4, true, true, false});
  cases.push_back({"k256 varlen", k256, {70, 33, 1}, 1, 2, true, false, false, -0.5, 0.0});
  cases.push_back({"k64 varlen pool", k64, {37, 1, 64, 200, 130}, 2, 4, true, true, false});
  {
    // More sequences than the kernels scan inline: the prep kernel builds
    // the chunk map (lengths 1..150, some multiples of the chunk).
    std::vector<int64_t> many;
    for (int64_t i = 0; i < 41; ++i)
      many.push_back(i % 5 == 0 ? 64 * (1 + i % 3) : 1 + (i * 37) % 150);
    cases.push_back({"gkv 41 seqs (prep)", gkv, many, 2, 4, true, false, false});
  }
  if (!quick) {
    // More sequences than prep's threads (256 for gkv) can rank: recur
    // takes them in cu_seqlens order. Lengths 1..100, the longest last.
    std::vector<int64_t> past;
    for (int64_t i = 0; i < 300; ++i)
      past.push_back(i == 299 ? 700 : 1 + (i * 53) % 100);
    cases.push_back({"gkv 300 seqs (prep, unranked)", gkv, past, 1, 2, true, false, false});
    cases.push_back({"gkv T=4096 H2/HV4", gkv, {4096}, 2, 4, true, false, false});
    cases.push_back({"qwen3_next 8 seqs", qwen, {1000, 17, 512, 64, 63, 65, 2000, 3}, 2, 4, true, true, true});
    cases.push_back({"kkv T=4096 H2/HV4", kkv, {4096}, 2, 4, true, false, false, -0.3, 0.0});
  }
  // Context parallelism by the dispatch (the compiler's PrefillSegments.cpp):
  // one long sequence over few heads leaves recur's grid on a few SMs, so
  // it runs as 8 segments side by side (9000 tokens: 141 chunks, segments
  // of 18, the last shorter and partial). GDN kv, Qwen3-Next's raw gate
  // and sigmoid beta in a vk pool, strong decay, and DeltaNet (no decay:
  // the transfers do not contract).
  cases.push_back({"gkv T=9000 H1/HV2 (cp)", gkv, {9000}, 1, 2, true, false, false});
  cases.back().wantSegments = true;
  cases.push_back({"qwen3_next T=8300 pool H1/HV2 (cp)", qwen, {8300}, 1, 2, true, true, false});
  cases.back().wantSegments = true;
  cases.push_back({"gkv T=8192 strong decay (cp)", gkv, {8192}, 1, 1, true, false, true, -17.0,
                   -15.0});
  cases.back().wantSegments = true;
  cases.push_back({"d64 T=12000 H1/HV2 (cp)", d64, {12000}, 1, 2, true, false, false});
  cases.back().wantSegments = true;
  // KDA: per-channel decays, each state row (and M's) by its own factor;
  // a varlen pool with a sequence split in 3 and short ones whole.
  cases.push_back({"kkv T=9000 H1/HV2 (cp)", kkv, {9000}, 1, 2, true, false, false, -0.3, 0.0});
  cases.back().wantSegments = true;
  cases.push_back({"kkv varlen pool by the longest (cp)", kkv, {3000, 8500, 77, 1500}, 1, 2, true,
                   true, false, -1.0, 0.0});
  cases.back().wantSegments = cases.back().hintMaxSeqlen = true;
  // KDA at K = V = 64 with f16 activations and a v-first state in a pool:
  // one value and one transfer tile per segment.
  cases.push_back({"k64 T=9000 pool H1/HV2 (cp)", k64, {9000}, 1, 2, true, true, false, -0.3,
                   0.0});
  cases.back().wantSegments = true;
  // Varlen: the device splits by the longest sequence (9000 tokens, 141
  // chunks: segments of 18 at n = 8), so 2600 tokens take 3 segments,
  // 1300 take 2 and the rest run whole; with prep's map (41 sequences, n
  // = 2: segments of 71 chunks) the longest count comes from prep. A
  // count too small would leave chunks past the last segment unrun.
  cases.push_back({"gkv varlen by the longest (cp)", gkv, {700, 9000, 1, 2600, 64, 1300}, 1, 2,
                   true, false, false});
  cases.back().wantSegments = cases.back().hintMaxSeqlen = true;
  {
    std::vector<int64_t> many{9000};
    for (int64_t i = 1; i < 41; ++i)
      many.push_back(i == 20 ? 4600 : 1 + (i * 37) % 600);
    cases.push_back({"gkv 41 seqs by the longest (prep, cp)", gkv, many, 1, 2, true, true, false});
    cases.back().wantSegments = cases.back().hintMaxSeqlen = true;
  }
  // Padding past cu_seqlens[N] (a serving engine's): o = 0 there, the
  // sequences as usual, no flag; inline map and prep.
  cases.push_back({"qwen3_next pad tail (inline)", qwen, {64, 37, 50}, 2, 4, true, true, false});
  cases.back().padTail = true;
  {
    std::vector<int64_t> many;
    for (int64_t i = 0; i < 41; ++i)
      many.push_back(1 + (i * 29) % 90);
    many.push_back(77);
    cases.push_back({"gkv pad tail (prep, 41 seqs)", gkv, many, 2, 4, true, true, true});
    cases.back().padTail = true;
  }
  // A pool index past the pool skips that sequence alone (o = 0, no state
  // read or written, flag), the read index and the write index each, with
  // the inline map and prep's.
  for (bool out : {false, true}) {
    cases.push_back({std::string("qwen3_next pool index past the pool, ") + (out ? "out" : "in") +
                         " (inline)",
                     qwen, {64, 37, 50}, 2, 4, true, true, false});
    cases.back().skipIndex = 1;
    cases.back().skipOut = out;
  }
  {
    std::vector<int64_t> many;
    for (int64_t i = 0; i < 40; ++i)
      many.push_back(1 + (i * 23) % 80);
    cases.push_back({"gkv pool index past the pool (prep, 40 seqs)", gkv, many, 2, 4, true, true, true});
    cases.back().skipIndex = 17;
  }
  // State checkpoints (FLA's return_intermediate_states, FlashInfer's
  // state_checkpoints) against the fp64 states at the same boundaries, in
  // each recur form the dispatch takes (test-forced: every form); lengths
  // below, at and above the chunk and its multiples.
  auto checkpoints = [&](Case c, int mode, int64_t every, bool f32) {
    c.name += std::string(mode == 1 ? ", checkpoints every chunk" : ", checkpoints every ") +
              (mode == 1 ? "" : std::to_string(every) + " chunks") + (f32 ? " f32" : " io");
    c.ckMode = mode;
    c.ckEvery = every;
    c.ckF32 = f32;
    cases.push_back(c);
  };
  checkpoints({"gkv varlen", gkv, {37, 1, 64, 130}, 2, 4, true, false, false}, 1, 1, false);
  checkpoints({"gkv T=256 B=1", gkv, {256}, 1, 2, true, false, false}, 2, 1, true);
  checkpoints({"qwen3_next pool skip", qwen, {64, 130, 50, 200}, 1, 2, true, true, false}, 2, 1,
              true);
  cases.back().skipIndex = 1;
  checkpoints({"qwen3_next pool skip", qwen, {64, 130, 50, 200}, 1, 2, true, true, false}, 1, 1,
              false);
  cases.back().skipIndex = 1;
  checkpoints({"dn varlen", dn, {33, 64, 1, 95}, 2, 4, true, true, false}, 2, 1, false);
  checkpoints({"kraw varlen", kraw, {31, 32, 33, 150}, 1, 3, true, false, true}, 1, 1, true);
  checkpoints({"kkv varlen", kkv, {300, 64, 17}, 1, 2, true, false, false, -0.3, 0.0}, 2, 2, false);
  checkpoints({"k256 varlen", k256, {70, 33, 1}, 1, 2, true, false, false, -0.5, 0.0}, 1, 1, true);
  checkpoints({"d64 wide grid H4/HV40", d64, {70, 130}, 4, 40, true, false, true}, 1, 1, true);
  {
    std::vector<int64_t> many;
    for (int64_t i = 0; i < 41; ++i)
      many.push_back(i % 5 == 0 ? 64 * (1 + i % 3) : 1 + (i * 37) % 150);
    checkpoints({"d64 41 seqs (prep)", d64, many, 1, 2, true, false, false}, 2, 2, true);
    checkpoints({"d64 41 seqs (prep)", d64, many, 1, 2, true, false, false}, 1, 1, false);
  }
  // f32 beta (FLA's callers may pass it with bf16 q), read as given: the
  // given form, and the sigmoid of f32 logits.
  cases.push_back({"gkv varlen, f32 beta", gkv, {37, 1, 64, 130}, 2, 4, true, false, false});
  cases.back().betaF32 = true;
  cases.push_back({"qwen3_next varlen, f32 beta logits", qwen, {300, 5, 64}, 2, 4, true, false,
                   true});
  cases.back().betaF32 = true;
  cases.push_back({"kraw varlen, f32 beta logits", kraw, {31, 32, 33, 150}, 1, 3, true, false,
                   true});
  cases.back().betaF32 = true;
  for (const Case &c : cases) {
    Run r = runCase(c);
    // K = 256's recur keeps no checkpoints: refused before any launch.
    if (c.ckMode && c.spec->K > 128) {
      results.add(c.name + " refused", r.status == DELTAC_UNSUPPORTED &&
                                           r.error.find("need K <= 128") != std::string::npos &&
                                           r.launches.empty(),
                  r.error);
      continue;
    }
    // A forced form (DELTAC_PREFILL_FORCE) is refused with a message naming
    // the request exactly where the library has no recur of the forced
    // tile, or the code run has no sm_90a forms; everywhere else it runs.
    if (r.status == DELTAC_UNSUPPORTED && r.error.find("DELTAC_PREFILL_FORCE=") == 0) {
      bool lacksTile = r.error.find("has no recur of V tile") != std::string::npos;
      // The shared recur keeps no checkpoints: forcing it on such a call is
      // refused.
      bool noCheckpoints =
          c.ckMode && r.error.find("keeps no state checkpoints") != std::string::npos;
      // cp: only where the library has it, for at most kMaxSegmentHeads
      // (sequence, head, segment) transfers.
      bool cp = forced().form == "cp";
      bool tooManySegments = cp && r.error.find("segments exceeds") != std::string::npos;
      bool has = (cp ? cpFormsRun(*c.spec) && !tooManySegments : sm90FormsRun(*c.spec)) &&
                 !lacksTile && !noCheckpoints;
      results.add(c.name, !has,
                  (has ? "REFUSED though the library has the form: " : "forced form refused: ") +
                      r.error);
      continue;
    }
    std::string formMissing = r.status ? "" : forcedFormMissing(*c.spec, r.launches);
    // Unforced, the dispatch takes context parallelism where the case says.
    if (!r.status && forced().form.empty() && cpFormsRun(*c.spec) &&
        launched(r.launches, "_recur_cp") != c.wantSegments)
      formMissing += c.wantSegments ? " no _recur_cp" : " unexpected _recur_cp";
    int32_t wantFlag = c.skipIndex >= 0 ? 1 : 0;
    bool ok = r.status == DELTAC_OK && r.oErr < tol && r.sErr < tol && r.untouched &&
              r.flag == wantFlag && r.guards && r.oNonZero == 0 && formMissing.empty() &&
              r.ckErr < tol && r.ckPoisonKept &&
              !(c.ckMode && launched(r.launches, "_recur_shared"));
    results.add(c.name, ok,
                r.status ? "status " + std::to_string(r.status) + ": " + r.error
                         : fmt("o err %.2e, state err %.2e%s%s, %lld padding o != 0, flag %d",
                               r.oErr, r.sErr, r.untouched ? "" : ", UNLISTED POOL ROWS CHANGED",
                               r.guards ? "" : ", GUARDS OVERWRITTEN", (long long)r.oNonZero,
                               r.flag) +
                             (c.ckMode ? fmt(", checkpoint err %.2e%s", r.ckErr,
                                             r.ckPoisonKept ? "" : ", UNNAMED ROWS WRITTEN")
                                       : "") +
                             (formMissing.empty() ? "" : ", FORCED FORM NOT RUN:" + formMissing) +
                             " [" + r.launches + "]");
  }
  // Invalid cu_seqlens (negative, past T, decreasing, not starting at 0,
  // overlapping): the whole call is skipped. The flag is raised, o is 0 for
  // every token, no state is read or written (pool and final-state buffer
  // bit-identical), and the guard bytes around o and the states keep their
  // fill (under compute-sanitizer memcheck in run.sh: no access outside).
  {
    struct Bad {
      const char *what;
      std::vector<int64_t> cu;
    };
    // One skipped call's checks.
    auto skippedCall = [&](const Case &c, const std::vector<int64_t> &cu) {
      Run r = runCase(c, &cu);
      // A forced shared recur or cp keeps no checkpoints, and cp keeps at
      // most kMaxSegmentHeads transfers: the call is refused.
      bool refused = r.status == DELTAC_UNSUPPORTED && r.error.find("DELTAC_PREFILL_FORCE=") == 0;
      if (refused && c.ckMode && r.error.find("keeps no state checkpoints") != std::string::npos) {
        results.add(c.name + " (forced shared recur: refused)", true, r.error);
        return;
      }
      if (refused && forced().form == "cp" &&
          r.error.find("segments exceeds") != std::string::npos) {
        results.add(c.name + " (forced cp: refused)", true, r.error);
        return;
      }
      results.add(c.name,
                  r.status == DELTAC_OK && r.flag == 1 && r.oNonZero == 0 && r.statesUntouched &&
                      r.guards && r.ckPoisonKept,
                  fmt("status %d, flag %d, %lld o != 0%s%s%s", r.status, r.flag,
                      (long long)r.oNonZero, r.statesUntouched ? "" : ", STATES CHANGED",
                      r.guards ? "" : ", GUARDS OVERWRITTEN",
                      r.ckPoisonKept ? "" : ", CHECKPOINTS NOT ZEROED"));
    };
    // Two sequences of 64 and 86 tokens (T = 150): the inline map.
    const Bad inlineBad[] = {{"negative", {0, -64, 150}},
                             {"past T", {0, 100, 400}},
                             {"decreasing", {0, 120, 100}},
                             {"start not 0", {5, 64, 150}},
                             {"huge", {0, int64_t(1) << 40, 150}}};
    for (bool pool : {false, true})
      for (const Bad &bad : inlineBad) {
        Case c{std::string("bad cu_seqlens ") + bad.what + (pool ? " (inline, pool)" : " (inline)"),
               gkv, {64, 86}, 1, 2, true, pool, bad.cu.back() > 150 || bad.cu[1] > (1 << 30)};
        skippedCall(c, bad.cu);
      }
    // Three sequences of 50: [0, 100, 50, 150] passes a per-sequence check
    // for sequences 0 and 2, which would overlap.
    skippedCall({"bad cu_seqlens overlapping (inline, pool)", qwen, {50, 50, 50}, 2, 4, true, true,
                 false},
                {0, 100, 50, 150});
    // With checkpoints: every row zero (both forms).
    for (int mode : {1, 2}) {
      Case c{std::string("bad cu_seqlens past T, checkpoints ") + (mode == 1 ? "FLA" : "FlashInfer"),
             gkv, {64, 86}, 1, 2, true, false, true};
      c.ckMode = mode;
      skippedCall(c, {0, 100, 400});
    }
    // 40 sequences of 8 tokens: prep's map.
    auto prepCu = [](int64_t at, int64_t value) {
      std::vector<int64_t> cu;
      for (int64_t i = 0; i <= 40; ++i)
        cu.push_back(i == at ? value : 8 * i);
      return cu;
    };
    const Bad prepBad[] = {{"negative", prepCu(20, -64)},
                           {"past T", prepCu(40, 8 * 40 + 1000)},
                           {"decreasing", prepCu(20, 8 * 20 + 9)},
                           {"start not 0", prepCu(0, 3)},
                           {"overlapping", prepCu(10, 8 * 30)}};
    for (bool pool : {false, true})
      for (const Bad &bad : prepBad) {
        Case c{std::string("bad cu_seqlens ") + bad.what + (pool ? " (prep, pool)" : " (prep)"), gkv,
               std::vector<int64_t>(40, 8), 1, 2, true, pool, pool};
        skippedCall(c, bad.cu);
      }
  }
  // Host checks: a rejected call names the argument.
  {
    deltac_prefill_args a{};
    a.K = 128;
    a.V = 128;
    a.T = 64;
    a.N = 1;
    a.H = 2;
    a.HV = 3;
    a.io_dtype = DELTAC_BF16;
    a.state_dtype = DELTAC_F32;
    int rc = deltac_test_prefill_gkv_prefill(&a, nullptr);
    std::string msg = deltac_test_prefill_last_error();
    results.add("HV % H rejected", rc == DELTAC_INVALID_ARGUMENT && msg.find("HV = 3") == 0, msg);
    a.K = 96;
    rc = deltac_test_prefill_gkv_prefill(&a, nullptr);
    msg = deltac_test_prefill_last_error();
    results.add("unknown K rejected", rc == DELTAC_UNSUPPORTED && msg.find("K = 96") == 0, msg);
  }
  return results.finish("prefill");
}
