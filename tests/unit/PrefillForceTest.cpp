//===- PrefillForceTest.cpp - DELTAC_PREFILL_FORCE over a fake driver -----===//
//
// The one switch of the prefill dispatch, as a user sets it: each case runs
// in a child process of its own (the runtime reads the switch once per
// process), sets DELTAC_PREFILL_FORCE and the fake device, makes one
// prefill call of the example library and reports the status, the kernels
// the fake driver saw and the message. A form the device can run must
// launch exactly its kernels; one it cannot, or a malformed request, must
// be refused with a message naming the request, and nothing launched.
// No GPU needed.
//
//===----------------------------------------------------------------------===//

#include "qwen3_next_gdn.h"

#include "FakeCuda.h"
#include "deltac_runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
/// Host buffers standing in for device memory (16-byte aligned).
struct Buffers {
  std::vector<std::vector<unsigned char>> all;
  void *get(size_t bytes) {
    all.emplace_back(bytes + 16, 0x5A);
    auto a = reinterpret_cast<uintptr_t>(all.back().data());
    return reinterpret_cast<void *>((a + 15) & ~uintptr_t(15));
  }
};

/// In the child: one prefill call (K = V = 128, N sequences of T / N
/// tokens, H = HV; `cpPhase` 1 or 2: a rank's phase call) under `force` on
/// a device of compute capability `major`.0; prints `status=S
/// launches=NAMES error=MESSAGE` to stderr and exits 0.
[[noreturn]] void callUnder(const char *force, int major, int64_t T = 128, int64_t N = 2,
                            int64_t HV = 4, int cpPhase = 0) {
  if (*force)
    setenv("DELTAC_PREFILL_FORCE", force, 1);
  deltac_rt::useDriverLibrary(DELTAC_FAKECUDA_PATH);
  if (major == 8)
    fakecuda_set_device(8, 0, 108, 166912, 167936); // an A100's limits
  Buffers m;
  deltac_prefill_args a{};
  a.K = a.V = 128;
  a.T = T;
  a.N = N;
  a.H = a.HV = HV;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  std::vector<int32_t> cu;
  for (int64_t n = 0; n <= N; ++n)
    cu.push_back(int32_t(n * T / N));
  a.cu_seqlens = cu.data();
  a.q = m.get(T * HV * 128 * 2);
  a.k = m.get(T * HV * 128 * 2);
  a.v = m.get(T * HV * 128 * 2);
  a.o = m.get(T * HV * 128 * 2);
  a.g = m.get(T * HV * 2);
  a.beta = m.get(T * HV * 2);
  a.A_log = static_cast<const float *>(m.get(HV * 4));
  a.dt_bias = static_cast<const float *>(m.get(HV * 4));
  a.workspace_bytes = qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(128, 128, T, N, HV);
  a.workspace = m.get(size_t(a.workspace_bytes));
  a.error_flag = static_cast<int32_t *>(m.get(4));
  a.scale = 0.088f;
  a.cp_phase = cpPhase;
  if (cpPhase == 1) // the transfers [b | M] per (sequence, head), f32
    a.cp_transfer = m.get(size_t(N * HV * 128 * 256 * 4));
  int status = qwen3_next_gdn_qwen3_next_prefill(&a, nullptr);
  std::string names;
  for (int i = 0; i < fakecuda_launches(); ++i)
    names += (i ? "," : "") + std::string(fakecuda_launch_name(i));
  std::fprintf(stderr, "status=%d launches=%s error=%s\n", status, names.c_str(),
               qwen3_next_gdn_last_error());
  std::exit(0);
}

// Each EXPECT_EXIT forks a child with none of the parent's runtime state
// (the parent never calls prefill).
#define EXPECT_FORCED(force, major, pattern, ...)                                              \
  EXPECT_EXIT(callUnder(force, major, ##__VA_ARGS__), ::testing::ExitedWithCode(0), pattern)

const char *kPrefix = "qwen3_next_k128_v128_prefill";
std::string launches(std::initializer_list<const char *> parts) {
  std::string out = "status=0 launches=";
  bool first = true;
  for (const char *p : parts) {
    out += std::string(first ? "" : ",") + kPrefix + p;
    first = false;
  }
  return out + " error=\n";
}
} // namespace

TEST(PrefillForce, FormsRunWhereTheDeviceHasThem) {
  EXPECT_FORCED("ordinary", 9, launches({"_chunks", "_recur_v16"}));
  EXPECT_FORCED("ordinary,tile=64", 9, launches({"_chunks", "_recur"}));
  EXPECT_FORCED("shared_recur", 9, launches({"_chunks", "_recur_shared"}));
  EXPECT_FORCED("raw_qk,tile=64", 9, launches({"_chunks_raw", "_recur"}));
  EXPECT_FORCED("raw_qk_w,tile=64,tma=0", 9, launches({"_chunks_raw", "_recur"}));
  EXPECT_FORCED("overlap", 9, launches({"_queue", "_recur"}));
  EXPECT_FORCED("overlap_shared,stages=2", 9, launches({"_queue", "_recur_shared"}));
  EXPECT_FORCED("dispatch,stages=1", 9, "status=0 launches=.*_recur");
  // sm_80's code (an A100's shared memory): one stage at V tile 64.
  EXPECT_FORCED("ordinary,tile=64,stages=1", 8, launches({"_chunks", "_recur"}));
}

// Unforced, where the dispatch's rule picks the shared overlapped launch
// (one sequence of 1K tokens; recur blocks more than a quarter and at most
// half of the SMs: 64 of 132 at 32 heads, 32 of 108 at 16): sm_90a's code
// takes it; sm_80's, which has no queue form or shared recur, takes the
// ordinary launch instead of failing to load them.
TEST(PrefillForce, DispatchTakesOnlyFormsOfTheCodeLoaded) {
  EXPECT_FORCED("", 9, launches({"_queue", "_recur_shared"}), 1024, 1, 32);
  EXPECT_FORCED("", 8, launches({"_chunks", "_recur"}), 1024, 1, 16);
}

// Context parallelism runs in whatever code the device loads: sm_90a's
// wgmma recur, or sm_80's mma.sync recur (an A100). Forced on a short
// call; taken by the dispatch for one long sequence at few heads where the
// tile-64 ring has two stages (an H100), not on an A100, where it has one
// (not measured there): the ordinary launch.
TEST(PrefillForce, ContextParallelismOnEveryTarget) {
  auto cp = launches({"_chunks", "_recur_cp", "_cp_chain", "_cp_correct"});
  EXPECT_FORCED("cp", 9, cp);
  EXPECT_FORCED("cp", 8, cp);
  EXPECT_FORCED("", 9, cp, 32768, 1, 4);
  EXPECT_FORCED("", 8, launches({"_chunks", "_recur_v16"}), 32768, 1, 4);
  // A rank's two phases (cp_phase): an A100 runs them too.
  for (int major : {8, 9}) {
    EXPECT_FORCED("", major, launches({"_chunks", "_recur_cp", "_cp_chain"}), 4096, 1, 4, 1);
    EXPECT_FORCED("", major, launches({"_cp_chain", "_cp_correct"}), 4096, 1, 4, 2);
  }
}

TEST(PrefillForce, ImpossibleFormsAreRefused) {
  // sm_80's code has none of the sm_90a forms.
  EXPECT_FORCED("overlap", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=overlap: no overlapped launch");
  EXPECT_FORCED("overlap_shared", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=overlap_shared: no shared "
                "overlapped launch");
  EXPECT_FORCED("shared_recur", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=shared_recur: the code loaded "
                "for this GPU has no shared-launch recur for K = 128, V = 128");
  EXPECT_FORCED("raw_qk", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=raw_qk: the code loaded for this "
                "GPU has no raw q/k recur");
  EXPECT_FORCED("ordinary,tma=1", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=ordinary,tma=1: the tensor maps");
  EXPECT_FORCED("ordinary,tile=64,stages=3", 8,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=ordinary,tile=64,stages=3: "
                "recur's ring has room for 1 stage\\(s\\) here, not 3");
  // No V tile 24 in the library, on any device.
  EXPECT_FORCED("dispatch,tile=24", 9,
                "status=2 launches= error=DELTAC_PREFILL_FORCE=dispatch,tile=24: the library "
                "has no recur of V tile 24");
  // The overlapped launch keeps its tile-64 recur: no tile-16 form of it.
  EXPECT_FORCED("overlap,tile=16", 9, "status=2 launches= error=.*no overlapped launch");
}

TEST(PrefillForce, MalformedRequestsAreInvalid) {
  EXPECT_FORCED("fast", 9,
                "status=1 launches= error=DELTAC_PREFILL_FORCE=fast: unknown form 'fast'");
  EXPECT_FORCED("ordinary,stages=5", 9,
                "status=1 launches= error=DELTAC_PREFILL_FORCE=ordinary,stages=5: ");
  EXPECT_FORCED("overlap,tma=1", 9, "status=1 launches= error=.*cp.async");
}
