//===- RuntimeTsanTest.cpp - first calls from eight threads at once -------===//
//
// Built with -fsanitize=thread (tests/unit/CMakeLists.txt): the runtime of
// templates/runtime over the fake driver of tests/fakecuda, whose library
// load sleeps a little so that the threads meet inside the lazy load. Eight
// threads released together make the first decode calls of the process on
// two kernels (the dispatch also reads the cached SM count). ThreadSanitizer
// fails the run on any data race (the kernel handle was read without the
// lock while another thread wrote it under the lock); the test also checks
// that each kernel was loaded exactly once and that each thread's
// last_launches names the kernel it launched.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "deltac_decode.h"
#include "deltac_runtime.h"

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {
const deltac_rt::PtxImage bulkPtx[] = {{"sm_90a", "// fake bulk"}};
const deltac_rt::PtxImage smallPtx[] = {{"sm_90a", "// fake small"}};
const deltac_rt::KernelImages bulkImages = {"tsan_decode", bulkPtx, 1, nullptr};
const deltac_rt::KernelImages smallImages = {"tsan_decode_small", smallPtx, 1,
                                             nullptr};
deltac_rt::Kernel bulk(bulkImages), small(smallImages);
// The bulk kernel from 4 blocks per SM (132 SMs: B >= 66 at HV = 4).
const deltac_rt::DecodeVariant table[] = {
    {128, 128, DELTAC_BF16, DELTAC_F32, deltac_rt::GateKind::Log, true, 4, 2,
     128, 4, &bulk},
    {128, 128, DELTAC_BF16, DELTAC_F32, deltac_rt::GateKind::Log, true, 4, 4,
     128, 0, &small}};

void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

deltac_decode_args args(int64_t B) {
  deltac_decode_args a{};
  a.K = a.V = 128;
  a.B = B;
  a.T = 1;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  // Never dereferenced: the fake driver only records the launch.
  a.q = a.k = a.v = a.beta = at(0x100000);
  a.o = at(0x200000);
  a.g = at(0x300000);
  a.state = at(0x400000);
  a.slots = B;
  a.scale = 0.088f;
  return a;
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
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      int64_t B = i % 2 ? 66 : 2; // odd threads: bulk, even: small
      deltac_decode_args a = args(B);
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      deltac::Status s = deltac_rt::runDecode(table, 2, a, nullptr);
      results[i] = s.ok() ? deltac_rt::lastLaunches() : "error: " + s.message;
    });
  for (std::thread &t : threads)
    t.join();
  int failures = 0;
  for (int i = 0; i < kThreads; ++i) {
    std::string want = i % 2 ? "tsan_decode" : "tsan_decode_small";
    if (results[i] != want) {
      std::fprintf(stderr, "thread %d: launched '%s', expected '%s'\n", i,
                   results[i].c_str(), want.c_str());
      ++failures;
    }
  }
  if (fakecuda_library_loads() != 2) {
    std::fprintf(stderr, "%d library loads for 2 kernels\n",
                 fakecuda_library_loads());
    ++failures;
  }
  if (fakecuda_launches() != kThreads) {
    std::fprintf(stderr, "%d launches, expected %d\n", fakecuda_launches(),
                 kThreads);
    ++failures;
  }
  std::printf("%s: %d threads, %d loads, %d launches\n",
              failures ? "FAILED" : "passed", kThreads,
              fakecuda_library_loads(), fakecuda_launches());
  return failures ? 1 : 0;
}
