//===- FakeDriverTest.cpp - the host API over a fake CUDA driver ----------===//
//
// The example library (generated from the current templates) with the fake
// driver of tests/fakecuda in place of libcuda.so.1: a valid call loads its
// kernels once and launches them with the parameters the host computed, the
// library reports exactly the kernels the driver saw (last_launches), debug
// mode reads only device memory that exists, and no exception crosses the
// API. No GPU needed.
//
//===----------------------------------------------------------------------===//

#include "qwen3_next_gdn.h"

#include "FakeCuda.h"
#include "deltac_decode.h"
#include "deltac_prefill.h"
#include "deltac_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
// Before any call: the runtime opens the fake instead of libcuda.so.1.
const bool injected = deltac_rt::useDriverLibrary(DELTAC_FAKECUDA_PATH);

/// A launch as the fake driver saw it: the kernel and its parameters
/// decoded with the runtime's own layout (decodeParamLayout /
/// prefillParamLayout), pointers and integers as int64.
struct Launch {
  std::string kernel;
  unsigned grid[3], block;
  std::map<std::string, int64_t> params;
};
std::vector<Launch> launches;

template <typename Layout>
void hook(const char *kernel, const unsigned grid[3], unsigned block,
          unsigned, void **params, void *layout) {
  int count = 0;
  const deltac_rt::ParamInfo *info =
      reinterpret_cast<Layout>(layout)(&count);
  Launch l{kernel, {grid[0], grid[1], grid[2]}, block, {}};
  for (int i = 0; i < count; ++i) {
    int64_t value = 0;
    if (info[i].kind != deltac_rt::ParamKind::TensorMap)
      std::memcpy(&value, params[i], info[i].bytes);
    if (info[i].kind == deltac_rt::ParamKind::I32 ||
        info[i].kind == deltac_rt::ParamKind::F32)
      value = info[i].kind == deltac_rt::ParamKind::I32
                  ? int64_t(*static_cast<int32_t *>(params[i]))
                  : int64_t(*static_cast<uint32_t *>(params[i]));
    l.params[info[i].name] = value;
  }
  launches.push_back(l);
}
using LayoutFn = const deltac_rt::ParamInfo *(*)(int *);

void watch(LayoutFn layout) {
  launches.clear();
  fakecuda_reset();
  fakecuda_set_launch_hook(&hook<LayoutFn>, reinterpret_cast<void *>(layout));
}

int64_t address(const void *p) { return int64_t(reinterpret_cast<uintptr_t>(p)); }

/// The Qwen3-Next prefill entry with its launches recorded afresh
/// (launches, by the prefill parameter layout); its status.
int watchedPrefill(const deltac_prefill_args &a) {
  watch(&deltac_rt::prefillParamLayout);
  return qwen3_next_gdn_qwen3_next_prefill(&a, nullptr);
}

/// Host buffers standing in for device memory (16-byte aligned).
struct Buffers {
  std::vector<std::vector<unsigned char>> all;
  void *get(size_t bytes, unsigned char fill = 0x5A) {
    all.emplace_back(bytes + 16, fill);
    auto a = reinterpret_cast<uintptr_t>(all.back().data());
    return reinterpret_cast<void *>((a + 15) & ~uintptr_t(15));
  }
};

deltac_decode_args decodeArgs(Buffers &m) {
  deltac_decode_args a{};
  a.K = a.V = 128;
  a.B = 2;
  a.T = 3;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  a.q = m.get(6 * 2 * 128 * 2);
  a.k = m.get(6 * 2 * 128 * 2);
  a.v = m.get(6 * 4 * 128 * 2);
  a.o = m.get(6 * 4 * 128 * 2);
  a.g = m.get(6 * 4 * 2);
  a.beta = m.get(6 * 4 * 2);
  a.A_log = static_cast<const float *>(m.get(16));
  a.dt_bias = static_cast<const float *>(m.get(16));
  a.state = m.get(2 * 4 * 128 * 128 * 4);
  a.slots = 2;
  a.scale = 0.088f;
  a.error_flag = static_cast<int32_t *>(m.get(4));
  return a;
}

std::string fakeNames() {
  std::string out;
  for (int i = 0; i < fakecuda_launches(); ++i)
    out += (i ? "," : "") + std::string(fakecuda_launch_name(i));
  return out;
}
} // namespace

TEST(FakeDriver, Injected) { ASSERT_TRUE(injected); }

// A valid decode launches one decode kernel with the values the host
// computed; the library names it (last_launches, C and C++).
TEST(FakeDriver, DecodeLaunchIsReported) {
  Buffers m;
  deltac_decode_args a = decodeArgs(m);
  a.v_stride = 4 * 128 + 8;
  watch(&deltac_rt::decodeParamLayout);
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_EQ(launches.size(), 1u);
  const Launch l = launches[0]; // a copy: later calls append
  EXPECT_EQ(l.kernel.rfind("qwen3_next_k128_v128_decode", 0), 0u) << l.kernel;
  EXPECT_EQ(qwen3_next_gdn::last_launches(), l.kernel);
  EXPECT_EQ(fakeNames(), l.kernel);
  EXPECT_EQ(l.grid[1], 4u); // HV
  EXPECT_EQ(l.grid[2], 2u); // B
  EXPECT_EQ(l.params.at("q"), address(a.q));
  EXPECT_EQ(l.params.at("o"), address(a.o));
  EXPECT_EQ(l.params.at("state"), address(a.state));
  EXPECT_EQ(l.params.at("error_flag"), address(a.error_flag));
  EXPECT_EQ(l.params.at("T"), 3);
  EXPECT_EQ(l.params.at("H"), 2);
  EXPECT_EQ(l.params.at("HV"), 4);
  EXPECT_EQ(l.params.at("slots"), 2);
  EXPECT_EQ(l.params.at("q_stride"), 256); // 0: contiguous
  EXPECT_EQ(l.params.at("v_stride"), 520);
  EXPECT_EQ(l.params.at("o_stride"), 512);
  EXPECT_EQ(l.params.at("flags"), 0);
  EXPECT_EQ(l.params.at("step_slots_stride"), 3); // 0: T
  // The C form: full length returned, truncated with a NUL.
  std::string name = l.kernel;
  EXPECT_EQ(qwen3_next_gdn_last_launches(nullptr, 0), name.size());
  char small[8];
  EXPECT_EQ(qwen3_next_gdn_last_launches(small, sizeof small), name.size());
  EXPECT_EQ(std::string(small), name.substr(0, 7));
  // A rejected call afterwards reports nothing: also one rejected by the
  // generated C wrapper before the runtime is reached (null args; found by
  // deltac-api-fuzzer: the previous call's kernels were reported).
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(nullptr, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_EQ(qwen3_next_gdn::last_launches(), "");
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK);
  EXPECT_EQ(qwen3_next_gdn::last_launches(), l.kernel);
  a.H = 3;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_EQ(qwen3_next_gdn::last_launches(), "");
  EXPECT_EQ(launches.size(), 2u);
}

// Decode dispatch (templates/runtime/deltac_decode.cpp, the variants'
// min_tokens and min_blocks_per_sm, in quarters of a block per SM): the
// staged kernel for 3 or more tokens a row once the grid has 3/4 of a block
// per SM (the fake has 132 SMs: 99 blocks), the bulk one from 4 blocks per
// SM, else the small one; with cu_seqlens the rows count on average.
TEST(FakeDriver, DecodeDispatchByTokensAndGrid) {
  Buffers m;
  deltac_decode_args a = decodeArgs(m);
  const int64_t B = 33, maxTokens = 4 * B; // 33 rows x HV 4 = 132 blocks
  a.B = B;
  a.slots = B;
  a.q = m.get(maxTokens * 2 * 128 * 2);
  a.k = m.get(maxTokens * 2 * 128 * 2);
  a.v = m.get(maxTokens * 4 * 128 * 2);
  a.o = m.get(maxTokens * 4 * 128 * 2);
  a.g = m.get(maxTokens * 4 * 2);
  a.beta = m.get(maxTokens * 4 * 2);
  a.state = m.get(B * 4 * 128 * 128 * 4);
  auto ran = [&](int64_t T, int64_t rows) {
    a.T = T;
    a.B = rows;
    EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
        << qwen3_next_gdn_last_error();
    return qwen3_next_gdn::last_launches();
  };
  const std::string staged = "qwen3_next_k128_v128_decode_staged",
                    small = "qwen3_next_k128_v128_decode_small";
  EXPECT_EQ(ran(3, B), staged);
  EXPECT_EQ(ran(4, B), staged);
  EXPECT_EQ(ran(2, B), small); // bulk needs 4 x 132 blocks
  EXPECT_EQ(ran(1, B), small);
  EXPECT_EQ(ran(4, 25), staged); // 100 blocks
  EXPECT_EQ(ran(4, 24), small);  // 96 blocks
  // Varlen: T tokens over B rows (the kernel reads the row bounds).
  a.cu_seqlens = static_cast<const int32_t *>(m.get((B + 1) * 4, 0));
  EXPECT_EQ(ran(3 * B, B), staged);
  EXPECT_EQ(ran(3 * B - 1, B), small);
}

// Out of place (FLA's fused_recurrent): the kernel gets the entering
// states' tensor, their dtype and the zero / no-write choices as flags
// (DecodeFlags: kKeepPool 1, kZeroState 4, kBetaF32 8, kStateInHalf 16,
// kStateInF16 32), the slot stride, and in place reads the pool.
TEST(FakeDriver, DecodeOutOfPlaceParameters) {
  Buffers m;
  auto launch = [&](const deltac_decode_args &a) {
    watch(&deltac_rt::decodeParamLayout);
    EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
        << qwen3_next_gdn_last_error();
    return launches.empty() ? Launch{} : launches[0];
  };
  deltac_decode_args a = decodeArgs(m);
  Launch l = launch(a);
  EXPECT_EQ(l.params.at("state_in"), 0);
  EXPECT_EQ(l.params.at("slot_stride"), 4 * 128 * 128);
  // No entering state and no state written: zeros, nothing kept.
  a.state = nullptr;
  a.zero_initial_state = 1;
  l = launch(a);
  EXPECT_EQ(l.params.at("flags"), 1 | 4);
  EXPECT_EQ(l.params.at("state"), 0);
  // A bf16 / f16 initial state into an f32 pool, f32 beta.
  a = decodeArgs(m);
  void *h0 = m.get(2 * 4 * 128 * 128 * 2);
  a.initial_state = h0;
  a.initial_state_dtype = DELTAC_BF16;
  a.beta_f32 = 1;
  a.beta = m.get(6 * 4 * 4);
  l = launch(a);
  EXPECT_EQ(l.params.at("state_in"), address(h0));
  EXPECT_EQ(l.params.at("flags"), 8 | 16);
  a.initial_state_dtype = DELTAC_F16;
  EXPECT_EQ(launch(a).params.at("flags"), 8 | 16 | 32);
  // In place: initial_state is the pool (same dtype): the pool is read.
  a = decodeArgs(m);
  a.initial_state = a.state;
  a.initial_state_dtype = DELTAC_F32;
  l = launch(a);
  EXPECT_EQ(l.params.at("state_in"), 0);
  EXPECT_EQ(l.params.at("flags"), 0);
  // A pool whose slots hold more than one state.
  a = decodeArgs(m);
  a.slot_stride = 4 * 128 * 128 + 64;
  a.state = m.get(2 * a.slot_stride * 4);
  EXPECT_EQ(launch(a).params.at("slot_stride"), 4 * 128 * 128 + 64);
}

// Kernels load once, however many calls (and the lazy load publishes the
// handle it loaded).
TEST(FakeDriver, KernelsLoadOnce) {
  Buffers m;
  deltac_decode_args a = decodeArgs(m);
  watch(&deltac_rt::decodeParamLayout);
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK);
  int loads = fakecuda_library_loads();
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK);
  EXPECT_EQ(fakecuda_library_loads(), loads);
  EXPECT_EQ(fakecuda_launches(), 6);
}

// Prefill: the library's record is the driver's, kernel by kernel.
TEST(FakeDriver, PrefillLaunchesAreReported) {
  Buffers m;
  deltac_prefill_args a{};
  a.K = a.V = 128;
  a.T = 128;
  a.N = 2;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  a.q = m.get(128 * 2 * 128 * 2);
  a.k = m.get(128 * 2 * 128 * 2);
  a.v = m.get(128 * 4 * 128 * 2);
  a.o = m.get(128 * 4 * 128 * 2);
  a.g = m.get(128 * 4 * 2);
  a.beta = m.get(128 * 4 * 2);
  a.A_log = static_cast<const float *>(m.get(16));
  a.dt_bias = static_cast<const float *>(m.get(16));
  a.workspace_bytes =
      qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(128, 128, 128, 2, 4);
  ASSERT_GT(a.workspace_bytes, 0);
  a.workspace = m.get(size_t(a.workspace_bytes));
  a.error_flag = static_cast<int32_t *>(m.get(4));
  a.scale = 0.088f;
  ASSERT_EQ(watchedPrefill(a), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_GE(launches.size(), 2u);
  std::string names;
  for (const Launch &l : launches) {
    names += (names.empty() ? "" : ",") + l.kernel;
    EXPECT_EQ(l.params.at("T"), 128);
    EXPECT_EQ(l.params.at("N"), 2);
    EXPECT_EQ(l.params.at("work"), address(a.workspace));
  }
  EXPECT_EQ(qwen3_next_gdn::last_launches(), names);
  EXPECT_EQ(fakeNames(), names);
  EXPECT_NE(names.find("_prefill_recur"), std::string::npos) << names;
}

namespace {
deltac_prefill_args prefillArgs(Buffers &m) {
  deltac_prefill_args a{};
  a.K = a.V = 128;
  a.T = 128;
  a.N = 2;
  a.H = 2;
  a.HV = 4;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  a.q = m.get(128 * 2 * 128 * 2);
  a.k = m.get(128 * 2 * 128 * 2);
  a.v = m.get(128 * 4 * 128 * 2);
  a.o = m.get(128 * 4 * 128 * 2);
  a.g = m.get(128 * 4 * 2);
  a.beta = m.get(128 * 4 * 2);
  a.A_log = static_cast<const float *>(m.get(16));
  a.dt_bias = static_cast<const float *>(m.get(16));
  a.workspace_bytes =
      qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(128, 128, 128, 2, 4);
  a.workspace = m.get(size_t(a.workspace_bytes));
  a.error_flag = static_cast<int32_t *>(m.get(4));
  a.scale = 0.088f;
  return a;
}
} // namespace

namespace {
/// An F32 parameter as the hook recorded it (its bits).
float asFloat(int64_t bits) {
  uint32_t u = uint32_t(bits);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace

// The bounded raw gate reaches the kernels as the lower_bound parameter:
// NaN for the softplus form (the default of a zeroed struct), the bound
// with bounded_gate, where A_log (and, in prefill too, dt_bias) may be
// null. Decode and every prefill kernel.
TEST(FakeDriver, BoundedGateParameters) {
  Buffers m;
  deltac_decode_args a = decodeArgs(m);
  watch(&deltac_rt::decodeParamLayout);
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_TRUE(std::isnan(asFloat(launches[0].params.at("lower_bound"))));
  a.bounded_gate = 1;
  a.lower_bound = -5.0f;
  a.A_log = nullptr;
  watch(&deltac_rt::decodeParamLayout);
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(asFloat(launches[0].params.at("lower_bound")), -5.0f);
  EXPECT_EQ(launches[0].params.at("A_log"), 0);

  deltac_prefill_args p = prefillArgs(m);
  p.bounded_gate = 1;
  p.lower_bound = -2.5f;
  p.A_log = nullptr;
  p.dt_bias = nullptr;
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_GE(launches.size(), 2u);
  for (const Launch &l : launches) {
    EXPECT_EQ(asFloat(l.params.at("lower_bound")), -2.5f) << l.kernel;
    EXPECT_EQ(l.params.at("a_log"), 0) << l.kernel;
    EXPECT_EQ(l.params.at("dt_bias"), 0) << l.kernel;
  }
  p.bounded_gate = 0;
  p.A_log = static_cast<const float *>(m.get(16));
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  for (const Launch &l : launches)
    EXPECT_TRUE(std::isnan(asFloat(l.params.at("lower_bound")))) << l.kernel;
}

// Prefill on a pool whose slots hold more than one state: the kernels get
// the slot stride (0 in the struct: one state).
TEST(FakeDriver, PrefillSlotStride) {
  Buffers m;
  deltac_prefill_args p = prefillArgs(m);
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_GE(launches.size(), 2u);
  for (const Launch &l : launches)
    EXPECT_EQ(l.params.at("slot_stride"), 4 * 128 * 128) << l.kernel;
  p.slot_stride = 4 * 128 * 128 + 96;
  void *pool = m.get(2 * size_t(p.slot_stride) * 4);
  p.initial_state = pool;
  p.final_state = pool;
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  for (const Launch &l : launches)
    EXPECT_EQ(l.params.at("slot_stride"), 4 * 128 * 128 + 96) << l.kernel;
}

// State checkpoints reach every kernel as the C API describes them: none
// (null, 0 rows), FLA's every chunk (every = 1, no starts) and FlashInfer's
// every n tokens (every = n / chunk, the starts), f32 or the io dtype.
TEST(FakeDriver, PrefillCheckpoints) {
  Buffers m;
  deltac_prefill_args p = prefillArgs(m);
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_GE(launches.size(), 2u);
  for (const Launch &l : launches) {
    EXPECT_EQ(l.params.at("checkpoints"), 0) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_starts"), 0) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_rows"), 0) << l.kernel;
  }
  p.checkpoints = m.get(2 * 4 * 128 * 128 * 2);
  p.checkpoint_rows = 2;
  p.checkpoint_dtype = DELTAC_BF16;
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  for (const Launch &l : launches) {
    EXPECT_EQ(l.params.at("checkpoints"), address(p.checkpoints)) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_starts"), 0) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_every"), 1) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_rows"), 2) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_f32"), 0) << l.kernel;
  }
  p.checkpoint_dtype = DELTAC_F32;
  p.checkpoint_starts = static_cast<const int64_t *>(m.get(3 * 8));
  p.checkpoint_every_n_tokens = 192;
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  for (const Launch &l : launches) {
    EXPECT_EQ(l.params.at("checkpoint_starts"), address(p.checkpoint_starts)) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_every"), 3) << l.kernel;
    EXPECT_EQ(l.params.at("checkpoint_f32"), 1) << l.kernel;
  }
}

// f32 beta with a 16-bit spec: the kernels get the flag (0 in the struct).
TEST(FakeDriver, PrefillBetaF32) {
  Buffers m;
  deltac_prefill_args p = prefillArgs(m);
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  ASSERT_GE(launches.size(), 2u);
  for (const Launch &l : launches)
    EXPECT_EQ(l.params.at("beta_f32"), 0) << l.kernel;
  p.beta = m.get(128 * 4 * 4);
  p.beta_f32 = 1;
  ASSERT_EQ(watchedPrefill(p), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  for (const Launch &l : launches) {
    EXPECT_EQ(l.params.at("beta_f32"), 1) << l.kernel;
    EXPECT_EQ(l.params.at("beta"), address(p.beta)) << l.kernel;
  }
}

// Prefill's debug mode: cu_seqlens (int32 or int64) and the indices read
// through the driver and checked entry by entry before any launch.
TEST(FakeDriver, PrefillDebugChecks) {
  Buffers m;
  deltac_prefill_args a = prefillArgs(m);
  a.debug_checks = 1;
  auto *cu64 = static_cast<int64_t *>(m.get(3 * 8));
  cu64[0] = 0;
  cu64[1] = 100;
  cu64[2] = 128;
  a.cu_seqlens = cu64;
  a.cu_seqlens_i64 = 1;
  watch(&deltac_rt::prefillParamLayout);
  fakecuda_register_memory(cu64, 3 * 8);
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  int launched = fakecuda_launches();
  EXPECT_GE(launched, 2);
  cu64[1] = 129; // past T
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "cu_seqlens[1] = 129 must not exceed T = 128");
  cu64[1] = -1;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "cu_seqlens decreases at 1 (0 then -1)");
  cu64[1] = 100;
  auto *idx = static_cast<int64_t *>(m.get(2 * 8));
  idx[0] = 1;
  idx[1] = 2; // slots = N = 2
  a.indices_i64 = 1;
  a.initial_state_indices = reinterpret_cast<const int32_t *>(idx);
  a.initial_state = m.get(16);
  fakecuda_register_memory(idx, 2 * 8);
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "initial_state_indices[1] = 2 is not below slots = 2");
  EXPECT_EQ(fakecuda_launches(), launched);
  EXPECT_EQ(qwen3_next_gdn::last_launches(), "");
  a.initial_state_indices = nullptr;
  a.initial_state = nullptr;
  // Checkpoints: FLA's form needs a row per chunk (sequences of 100 and 28
  // tokens: 2 + 1), FlashInfer's rows [start, start + len / n) inside.
  a.checkpoints = m.get(3 * 4 * 128 * 128 * 4);
  a.checkpoint_dtype = DELTAC_F32;
  a.checkpoint_rows = 2;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr), DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "checkpoint_rows = 2 is below the 3 chunks whose entering states this call "
               "keeps");
  auto *starts = static_cast<int64_t *>(m.get(2 * 8));
  starts[0] = 0;
  starts[1] = 1; // sequence 1 has no checkpoint of 64 tokens: any start
  fakecuda_register_memory(starts, 2 * 8);
  a.checkpoint_starts = starts;
  a.checkpoint_every_n_tokens = 64;
  a.checkpoint_rows = 1;
  ASSERT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  starts[0] = 1;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&a, nullptr), DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "checkpoint_starts[0] = 1 places sequence 0's 1 checkpoints outside [0, 1)");
}

// Debug mode copies indices through the driver: only memory that exists
// is read (a driver refuses the rest), a bad index rejects the call before
// any launch, and large 2-D strides cost no large host allocation.
TEST(FakeDriver, DebugChecksReadOnlyDeviceMemory) {
  Buffers m;
  deltac_decode_args a = decodeArgs(m);
  auto *idx = static_cast<int32_t *>(m.get(8));
  idx[0] = 1;
  idx[1] = 0;
  a.initial_state_indices = idx;
  a.debug_checks = 1;
  watch(&deltac_rt::decodeParamLayout);
  // Not registered as device memory: the copy fails, nothing launches.
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_CUDA_ERROR);
  EXPECT_NE(std::string(qwen3_next_gdn_last_error())
                .find("copying indices for the debug checks failed"),
            std::string::npos)
      << qwen3_next_gdn_last_error();
  EXPECT_EQ(fakecuda_launches(), 0);
  fakecuda_register_memory(idx, 8);
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  EXPECT_EQ(fakecuda_launches(), 1);
  idx[1] = 2; // slots = 2
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&a, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "initial_state_indices[1] = 2 is not below slots = 2");
  EXPECT_EQ(fakecuda_launches(), 1);

  // 2-D slots at the largest stride: only the T columns a row uses are
  // copied (row by row).
  deltac_decode_args s = decodeArgs(m);
  const int64_t stride = 65536;
  auto *slots2d = static_cast<int32_t *>(m.get(2 * stride * 4, 0xFF));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      slots2d[b * stride + t] = int32_t(b);
  s.state_indices_2d = slots2d;
  s.state_indices_2d_stride = stride;
  s.debug_checks = 1;
  fakecuda_register_memory(slots2d, 2 * stride * 4);
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&s, nullptr), DELTAC_OK)
      << qwen3_next_gdn_last_error();
  slots2d[stride + 2] = 7;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&s, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(),
               "state_indices_2d[65538] = 7 is not below slots = 2");
}

// No exception crosses the C API: the guard turns each into a status, and
// the last error is never empty for a failed call.
TEST(FakeDriver, ExceptionsBecomeStatuses) {
  deltac::Status s = deltac_rt::guarded(
      []() -> deltac::Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code, DELTAC_INTERNAL_ERROR);
  EXPECT_EQ(s.message, "host exception: out of host memory");
  s = deltac_rt::guarded(
      []() -> deltac::Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(s.code, DELTAC_INTERNAL_ERROR);
  EXPECT_EQ(s.message, "host exception: boom");
  s = deltac_rt::guarded([]() -> deltac::Status { throw 42; });
  EXPECT_EQ(s.message, "host exception: unknown");
  EXPECT_EQ(deltac_rt::setLastError({DELTAC_INTERNAL_ERROR, ""}),
            DELTAC_INTERNAL_ERROR);
  EXPECT_GT(std::strlen(deltac_rt::lastError()), 0u);
  EXPECT_EQ(deltac_rt::setLastError({}), DELTAC_OK);
  EXPECT_STREQ(deltac_rt::lastError(), "");
  EXPECT_EQ(deltac_rt::setLastError(DELTAC_INVALID_ARGUMENT,
                                    "args must not be null"),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(deltac_rt::lastError(), "args must not be null");
}

// Context parallelism across ranks (deltac_prefill_args::cp_phase): phase 1
// launches chunks, recur_cp and the chain over K more columns (M's), which
// writes cp_transfer; phase 2 only the chain and the correction, reading
// the entering state as initial_state. Both phases choose the same
// segments; an ordinary call rejects the phase arguments, and a phase call
// without a transfer buffer, tokens or with checkpoints is refused before
// any launch.
TEST(FakeDriver, PrefillRankPhases) {
  Buffers m;
  deltac_prefill_args a = prefillArgs(m);
  a.N = 1;
  a.workspace_bytes = qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(128, 128, 128, 1, 4);
  a.workspace = m.get(size_t(a.workspace_bytes));
  void *transfer = m.get(4 * 128 * 256 * 4);
  a.cp_phase = 1;
  a.cp_transfer = transfer;
  ASSERT_EQ(watchedPrefill(a), DELTAC_OK) << qwen3_next_gdn_last_error();
  std::vector<Launch> first = launches;
  ASSERT_EQ(first.size(), 3u) << qwen3_next_gdn::last_launches();
  EXPECT_NE(first[0].kernel.find("_prefill_chunks"), std::string::npos) << first[0].kernel;
  EXPECT_NE(first[1].kernel.find("_prefill_recur_cp"), std::string::npos) << first[1].kernel;
  EXPECT_NE(first[2].kernel.find("_prefill_cp_chain"), std::string::npos) << first[2].kernel;
  // One block per (sequence, value head, 4 of the V + K columns).
  EXPECT_EQ(first[2].grid[0], 1u * 4 * (256 / 4));
  int64_t segments = first[1].params.at("segments");
  // Every segment has its 2 value and 2 transfer tiles, in one wave of 132.
  EXPECT_EQ(segments, 8);
  EXPECT_EQ(first[1].grid[0], unsigned(4 * segments * 4));
  for (const Launch &l : first) {
    EXPECT_EQ(l.params.at("cp_phase"), 1) << l.kernel;
    EXPECT_EQ(l.params.at("cp_transfer"), address(transfer)) << l.kernel;
  }
  a.cp_phase = 2;
  ASSERT_EQ(watchedPrefill(a), DELTAC_OK) << qwen3_next_gdn_last_error();
  ASSERT_EQ(launches.size(), 2u) << qwen3_next_gdn::last_launches();
  EXPECT_NE(launches[0].kernel.find("_prefill_cp_chain"), std::string::npos);
  EXPECT_EQ(launches[0].grid[0], 1u * 4 * (128 / 4));
  EXPECT_NE(launches[1].kernel.find("_prefill_cp_correct"), std::string::npos);
  for (const Launch &l : launches) {
    EXPECT_EQ(l.params.at("cp_phase"), 2) << l.kernel;
    EXPECT_EQ(l.params.at("segments"), segments) << l.kernel;
    EXPECT_EQ(l.params.at("cp_transfer"), 0) << l.kernel; // phase 2 reads none
  }
  // cp_segments fixes the segments of both phases.
  a.cp_segments = 3;
  ASSERT_EQ(watchedPrefill(a), DELTAC_OK) << qwen3_next_gdn_last_error();
  EXPECT_EQ(launches[0].params.at("segments"), 3);

  auto rejected = [&](deltac_prefill_args bad, int code, const std::string &text) {
    EXPECT_EQ(watchedPrefill(bad), code) << text;
    EXPECT_NE(std::string(qwen3_next_gdn_last_error()).find(text), std::string::npos)
        << qwen3_next_gdn_last_error() << "\nexpected: " << text;
    EXPECT_TRUE(launches.empty()) << text;
  };
  deltac_prefill_args bad = a;
  bad.cp_phase = 3;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "cp_phase = 3 must be 0");
  bad = a;
  bad.cp_segments = 9;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "cp_segments = 9 must lie in [0, 8]");
  bad = a;
  bad.cp_phase = 0;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "cp_transfer and cp_segments are for cp_phase 1 and 2");
  bad = a;
  bad.cp_phase = 1;
  bad.cp_transfer = nullptr;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "cp_transfer must not be null");
  bad.cp_transfer = static_cast<char *>(transfer) + 4;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "cp_transfer must be 16-byte aligned");
  bad = a;
  bad.T = 0;
  rejected(bad, DELTAC_INVALID_ARGUMENT, "a cp_phase call needs tokens");
  bad = a;
  bad.checkpoints = m.get(16 * 4 * 128 * 128 * 4);
  bad.checkpoint_rows = 16;
  bad.checkpoint_dtype = DELTAC_F32;
  rejected(bad, DELTAC_UNSUPPORTED, "cp_phase calls keep no state checkpoints");
  fakecuda_reset();
}
