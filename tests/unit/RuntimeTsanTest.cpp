//===- RuntimeTsanTest.cpp - first calls from eight threads at once -------===//
//
// Built with -fsanitize=thread (tests/unit/CMakeLists.txt): the example
// library generated from the current templates (wrapper and runtime
// instrumented, kernel images as plain data) over the fake driver of
// tests/fakecuda, whose library load sleeps a little so that the threads
// meet inside the lazy load. Eight threads released together make the first
// calls of the process: decode with few and many rows (both decode kernels;
// the dispatch reads the cached SM count) and prefill with 2 and 40
// sequences (the overlapped launch's queue and recur, the prep kernel, the
// shared-memory attributes). ThreadSanitizer fails the run on any data race
// (the kernel handle was read without the lock while another thread wrote
// it under the lock); the test also checks that every kernel was loaded
// once, that each call succeeded, and that each thread's last_launches
// names what that thread launched, the same as a later call of the same
// shape on one thread.
//
//===----------------------------------------------------------------------===//

#include "qwen3_next_gdn.h"

#include "FakeCuda.h"
#include "deltac_runtime.h"

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {
void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

// Never dereferenced: the fake driver only records launches.
deltac_decode_args decodeArgs(int64_t B) {
  deltac_decode_args a{};
  a.K = a.V = 128;
  a.B = B;
  a.T = 1;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  a.q = a.k = a.v = a.beta = at(0x100000);
  a.o = at(0x200000);
  a.g = at(0x300000);
  a.A_log = a.dt_bias = static_cast<const float *>(at(0x380000));
  a.state = at(0x400000);
  a.slots = B;
  a.scale = 0.088f;
  return a;
}

deltac_prefill_args prefillArgs(int64_t N) {
  deltac_prefill_args a{};
  a.K = a.V = 128;
  a.N = N;
  a.T = 64 * N;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  a.q = a.k = a.v = a.beta = at(0x100000);
  a.o = at(0x200000);
  a.g = at(0x300000);
  a.A_log = a.dt_bias = static_cast<const float *>(at(0x380000));
  a.workspace = at(0x500000);
  a.workspace_bytes = qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(
      a.K, a.V, a.T, a.N, a.HV);
  a.error_flag = static_cast<int32_t *>(at(0x600000));
  a.scale = 0.088f;
  return a;
}

/// Thread i's call: decode B = 2 or 66 (132 SMs: the bulk kernel from 4
/// blocks per SM), prefill N = 2 or 40.
std::string call(int i, int *rc) {
  switch (i % 4) {
  case 0: {
    deltac_decode_args a = decodeArgs(2);
    *rc = qwen3_next_gdn_qwen3_next_decode(&a, nullptr);
    break;
  }
  case 1: {
    deltac_decode_args a = decodeArgs(66);
    *rc = qwen3_next_gdn_qwen3_next_decode(&a, nullptr);
    break;
  }
  case 2: {
    deltac_prefill_args a = prefillArgs(2);
    *rc = qwen3_next_gdn_qwen3_next_prefill(&a, nullptr);
    break;
  }
  default: {
    deltac_prefill_args a = prefillArgs(40);
    *rc = qwen3_next_gdn_qwen3_next_prefill(&a, nullptr);
  }
  }
  return *rc == DELTAC_OK ? qwen3_next_gdn::last_launches()
                          : std::string("error: ") + qwen3_next_gdn_last_error();
}
} // namespace

int main() {
  if (!deltac_rt::useDriverLibrary(DELTAC_FAKECUDA_PATH)) {
    std::fprintf(stderr, "could not inject the fake driver\n");
    return 1;
  }
  fakecuda_set_load_delay_us(2000);
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::vector<std::string> results(kThreads);
  std::vector<int> codes(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      results[i] = call(i, &codes[i]);
    });
  for (std::thread &t : threads)
    t.join();
  int loads = fakecuda_library_loads();
  int failures = 0;
  for (int i = 0; i < kThreads; ++i) {
    int rc = 0;
    std::string again = call(i, &rc); // the same shape, alone
    if (codes[i] != DELTAC_OK || results[i].empty() || results[i] != again) {
      std::fprintf(stderr, "thread %d: rc %d, launched '%s'; alone: '%s'\n", i,
                   codes[i], results[i].c_str(), again.c_str());
      ++failures;
    }
  }
  if (fakecuda_kernels_loaded_twice() != 0 || fakecuda_library_loads() != loads) {
    std::fprintf(stderr, "%d kernels loaded twice; %d loads, %d after\n",
                 fakecuda_kernels_loaded_twice(), loads,
                 fakecuda_library_loads());
    ++failures;
  }
  std::printf("%s: %d threads, %d kernel loads, %d launches\n",
              failures ? "FAILED" : "passed", kThreads, loads,
              fakecuda_launches());
  for (int i = 0; i < 4; ++i)
    std::printf("  %s\n", results[i].c_str());
  return failures ? 1 : 0;
}
