// CaptureTest.cpp - the first decode call of a process made inside CUDA
// graph capture (global mode), replayed; and same inputs, same bits.
//
// A fresh process, so the kernel is loaded during the capture. The graph's
// result must equal a direct call's bit for bit, and two direct calls must
// agree bit for bit too. o is poisoned (0xFF: NaN) before every run, so a
// run that writes nothing cannot pass for one that wrote the same bits, and
// every call's status is checked.
#include "GpuTestUtil.h"

#include "deltac_test_decode.h"

#include <cuda_runtime.h>

#include <cstring>
#include <cmath>
#include <memory>
#include <random>

using namespace gputest;

int main() {
  Results results;
  const int64_t B = 8, T = 2, H = 16, HV = 32, K = 128, V = 128;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  auto random = [&](size_t n, double scale) {
    std::vector<double> x(n);
    for (double &e : x)
      e = normal(rng) * scale;
    return x;
  };
  std::vector<uint8_t> q = encode(DELTAC_BF16, random(B * T * H * K, 0.1)),
                       k = encode(DELTAC_BF16, random(B * T * H * K, 0.1)),
                       v = encode(DELTAC_BF16, random(B * T * HV * V, 1.0)),
                       g = encode(DELTAC_F32, random(B * T * HV, 0.1)),
                       beta = encode(DELTAC_BF16, random(B * T * HV, 0.2)),
                       pool = encode(DELTAC_F32, random(B * HV * K * V, 1.0));
  for (size_t i = 0; i < g.size() / 4; ++i) { // log decays must be <= 0
    float f;
    std::memcpy(&f, &g[i * 4], 4);
    f = -std::fabs(f);
    std::memcpy(&g[i * 4], &f, 4);
  }
  auto upload = [](const std::vector<uint8_t> &x) {
    auto buf = std::make_unique<DeviceBuffer>(x.size());
    buf->upload(x.data(), x.size());
    return buf;
  };
  auto dq = upload(q), dk = upload(k), dv = upload(v), dg = upload(g),
       dbeta = upload(beta);
  DeviceBuffer o(v.size());
  std::vector<uint8_t> poison(v.size(), 0xFF);
  // The caller poisons o first: not inside the capture, where a
  // synchronous copy on the legacy stream is an error.
  auto run = [&](DeviceBuffer &state, cudaStream_t stream) {
    deltac_decode_args a{};
    a.K = K, a.V = V, a.B = B, a.T = T, a.H = H, a.HV = HV;
    a.io_dtype = DELTAC_BF16, a.state_dtype = DELTAC_F32;
    a.q = dq->ptr, a.k = dk->ptr, a.v = dv->ptr, a.o = o.ptr;
    a.g = dg->ptr, a.beta = dbeta->ptr;
    a.state = state.ptr, a.slots = B, a.scale = 0.088f;
    return deltac_test_decode_gdn_log_decode(&a, stream);
  };

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  auto captured = upload(pool);
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
        "begin capture");
  int rc = run(*captured, stream); // the process's first call
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  results.add("first call inside graph capture returns OK", rc == DELTAC_OK,
              rc == DELTAC_OK ? "" : deltac_test_decode_last_error());
  results.add("capture ends cleanly", end == cudaSuccess,
              cudaGetErrorString(end));
  if (rc == DELTAC_OK && end == cudaSuccess) {
    cudaGraphExec_t exec;
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    o.upload(poison.data(), poison.size()); // the captured call wrote nothing yet
    check(cudaGraphLaunch(exec, stream), "graph launch");
    check(cudaStreamSynchronize(stream), "sync");
    std::vector<uint8_t> oGraph = o.read<uint8_t>(v.size());
    std::vector<uint8_t> sGraph = captured->read<uint8_t>(pool.size());

    auto direct1 = upload(pool), direct2 = upload(pool);
    o.upload(poison.data(), poison.size());
    int rc1 = run(*direct1, stream);
    check(cudaStreamSynchronize(stream), "sync");
    std::vector<uint8_t> o1 = o.read<uint8_t>(v.size());
    o.upload(poison.data(), poison.size());
    int rc2 = run(*direct2, stream);
    check(cudaStreamSynchronize(stream), "sync");
    results.add("direct calls return OK", rc1 == DELTAC_OK && rc2 == DELTAC_OK,
                rc1 == DELTAC_OK && rc2 == DELTAC_OK ? "" : deltac_test_decode_last_error());
    std::vector<uint8_t> o2 = o.read<uint8_t>(v.size());
    std::vector<uint8_t> s1 = direct1->read<uint8_t>(pool.size()),
                         s2 = direct2->read<uint8_t>(pool.size());
    results.add("graph replay equals a direct call (o, state, bitwise)",
                oGraph == o1 && sGraph == s1, "");
    results.add("same inputs give the same bits (two direct calls)",
                o1 == o2 && s1 == s2, "");
    results.add("the state changed (the call did work)", s1 != pool, "");
    bool finite = true;
    for (double x : decode(DELTAC_BF16, oGraph))
      finite &= std::isfinite(x);
    results.add("the replay wrote every element of o (no poison left)", finite, "");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
  return results.finish("decode capture tests");
}
