//===- DecodeHostTest.cpp - host-side checks of a generated library -------===//
//
// Calls the generated example library (generated/qwen3_next_gdn) without a
// GPU: every argument the host can see is checked before anything is
// launched, the status names the argument, and a rejected call writes
// nothing. Buffers are host memory standing in for device pointers: a
// rejected call must never touch them.
//
//===----------------------------------------------------------------------===//

#include "qwen3_next_gdn.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <vector>

namespace {
/// A valid call for the example spec (K = V = 128, bf16 io, fp32 state,
/// raw gate, max_t = 4), on 16-byte aligned host buffers filled with 0x5A.
struct ValidCall {
  static constexpr int64_t B = 2, T = 3, H = 2, HV = 4, K = 128, V = 128;
  std::vector<std::vector<unsigned char>> buffers;
  deltac_decode_args args{};

  void *buffer(size_t bytes) {
    buffers.emplace_back(bytes + 16, 0x5A);
    auto address = reinterpret_cast<uintptr_t>(buffers.back().data());
    return reinterpret_cast<void *>((address + 15) & ~uintptr_t(15));
  }

  ValidCall() {
    args.K = K;
    args.V = V;
    args.B = B;
    args.T = T;
    args.H = H;
    args.HV = HV;
    args.io_dtype = DELTAC_BF16;
    args.state_dtype = DELTAC_F32;
    args.q = buffer(B * T * H * K * 2);
    args.k = buffer(B * T * H * K * 2);
    args.v = buffer(B * T * HV * V * 2);
    args.o = buffer(B * T * HV * V * 2);
    args.g = buffer(B * T * HV * 2);
    args.beta = buffer(B * T * HV * 2);
    args.A_log = static_cast<const float *>(buffer(HV * 4));
    args.dt_bias = static_cast<const float *>(buffer(HV * 4));
    args.state = buffer(B * HV * K * V * 4);
    args.slots = B;
    args.scale = 0.088f;
  }

  /// True when no buffer changed since construction.
  bool untouched() const {
    for (const auto &b : buffers)
      for (unsigned char c : b)
        if (c != 0x5A)
          return false;
    return true;
  }
};

/// Runs `args` through the C++ and the C entry point; both must reject with
/// `code` and a message containing `text`, and write nothing.
void expectRejected(ValidCall &call, int code, const std::string &text) {
  deltac::Status status = qwen3_next_gdn::qwen3_next::decode(call.args, nullptr);
  EXPECT_EQ(status.code, code) << status.message;
  EXPECT_NE(status.message.find(text), std::string::npos)
      << "message: " << status.message << "\nexpected to contain: " << text;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(&call.args, nullptr), code);
  EXPECT_EQ(std::string(qwen3_next_gdn_last_error()), status.message);
  EXPECT_TRUE(call.untouched());
}
} // namespace

TEST(DecodeHost, NullArgs) {
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_decode(nullptr, nullptr),
            DELTAC_INVALID_ARGUMENT);
  EXPECT_STREQ(qwen3_next_gdn_last_error(), "args must not be null");
}

TEST(DecodeHost, NoSpecialization) {
  ValidCall c;
  c.args.K = 64;
  expectRejected(c, DELTAC_UNSUPPORTED,
                 "K = 64, V = 128: no specialization (available: 128x128)");
}

TEST(DecodeHost, Dtypes) {
  ValidCall c;
  c.args.io_dtype = DELTAC_F16;
  expectRejected(c, DELTAC_INVALID_ARGUMENT,
                 "io_dtype is f16; this library was generated for bf16");
  ValidCall s;
  s.args.state_dtype = DELTAC_BF16;
  expectRejected(s, DELTAC_INVALID_ARGUMENT,
                 "state_dtype is bf16; this library was generated for f32");
}

TEST(DecodeHost, Sizes) {
  for (int64_t t : {0, 5}) {
    ValidCall c;
    c.args.T = t;
    expectRejected(c, DELTAC_INVALID_ARGUMENT,
                   "T = " + std::to_string(t) +
                       " must lie in [1, 4] (max_t of the spec)");
  }
  ValidCall b;
  b.args.B = 0;
  expectRejected(b, DELTAC_INVALID_ARGUMENT, "B = 0 must lie in [1, 65535]");
  ValidCall heads;
  heads.args.H = 3;
  expectRejected(heads, DELTAC_INVALID_ARGUMENT,
                 "HV = 4 must be a multiple of H = 3");
  ValidCall zero;
  zero.args.H = 0;
  expectRejected(zero, DELTAC_INVALID_ARGUMENT, "must be positive");
  ValidCall slots;
  slots.args.slots = 0;
  expectRejected(slots, DELTAC_INVALID_ARGUMENT,
                 "slots = 0 must be positive");
}

TEST(DecodeHost, NullPointers) {
  const char *names[] = {"q", "k", "v", "o", "beta", "state"};
  for (size_t i = 0; i < std::size(names); ++i) {
    ValidCall c;
    const void **fields[] = {&c.args.q, &c.args.k, &c.args.v,
                             const_cast<const void **>(&c.args.o),
                             &c.args.beta,
                             const_cast<const void **>(&c.args.state)};
    *fields[i] = nullptr;
    expectRejected(c, DELTAC_INVALID_ARGUMENT,
                   std::string(names[i]) + " must not be null");
  }
  ValidCall g;
  g.args.g = nullptr;
  expectRejected(g, DELTAC_INVALID_ARGUMENT, "g must not be null");
  ValidCall aLog;
  aLog.args.A_log = nullptr;
  expectRejected(aLog, DELTAC_INVALID_ARGUMENT,
                 "A_log must not be null (the spec's gate is raw)");
  ValidCall dt;
  dt.args.dt_bias = nullptr;
  expectRejected(dt, DELTAC_INVALID_ARGUMENT, "dt_bias must not be null");
}

TEST(DecodeHost, Alignment) {
  ValidCall c;
  c.args.q = static_cast<const char *>(c.args.q) + 2;
  expectRejected(c, DELTAC_INVALID_ARGUMENT, "q must be 16-byte aligned");
  ValidCall s;
  s.args.state = static_cast<char *>(s.args.state) + 4;
  expectRejected(s, DELTAC_INVALID_ARGUMENT, "state must be 16-byte aligned");
  ValidCall steps;
  steps.args.step_states = static_cast<char *>(steps.args.state) + 4;
  expectRejected(steps, DELTAC_INVALID_ARGUMENT,
                 "step_states must be 16-byte aligned");
}

TEST(DecodeHost, Strides) {
  ValidCall small;
  small.args.q_stride = 100; // one token holds H * K = 256 elements
  expectRejected(small, DELTAC_INVALID_ARGUMENT,
                 "q_stride = 100 is smaller than one token's 256 elements");
  ValidCall odd;
  odd.args.k_stride = 260; // 16-byte tokens need multiples of 8 bf16
  expectRejected(odd, DELTAC_INVALID_ARGUMENT,
                 "k_stride = 260 must be a multiple of 8 elements");
  ValidCall v;
  v.args.o_stride = 500;
  expectRejected(v, DELTAC_INVALID_ARGUMENT,
                 "o_stride = 500 is smaller than one token's 512 elements");
}

TEST(DecodeHost, KeepPoolNeedsSteps) {
  ValidCall c;
  c.args.keep_pool = 1;
  expectRejected(c, DELTAC_INVALID_ARGUMENT, "keep_pool needs step_states");
}

// Varlen decode: T is then the call's token count (no max_t bound on the
// host), cu_seqlens must be int32-aligned, and vLLM's 2-D slots need an
// explicit stride (rows have different lengths).
TEST(DecodeHost, VarlenArguments) {
  ValidCall zero;
  zero.args.cu_seqlens = static_cast<const int32_t *>(zero.buffer(12));
  zero.args.T = 0;
  expectRejected(zero, DELTAC_INVALID_ARGUMENT,
                 "T = 0 (all tokens, with cu_seqlens) must lie in [1, 2^31)");
  ValidCall odd;
  odd.args.cu_seqlens = reinterpret_cast<const int32_t *>(
      static_cast<char *>(odd.buffer(16)) + 2);
  expectRejected(odd, DELTAC_INVALID_ARGUMENT,
                 "cu_seqlens must be 4-byte aligned (int32)");
  ValidCall slots;
  slots.args.cu_seqlens = static_cast<const int32_t *>(slots.buffer(12));
  slots.args.state_indices_2d = static_cast<const int32_t *>(slots.buffer(32));
  expectRejected(slots, DELTAC_INVALID_ARGUMENT,
                 "state_indices_2d_stride = 0 must be given (>= 1) with "
                 "cu_seqlens");
}

// A valid call reaches the driver. Without one (CI) the status says so and
// names the library it looked for; nothing was written.
TEST(DecodeHost, NoDriver) {
  ValidCall c;
  deltac::Status status = qwen3_next_gdn::qwen3_next::decode(c.args, nullptr);
  if (status.message.find("libcuda.so.1") == std::string::npos)
    GTEST_SKIP() << "a CUDA driver is present: " << status.message;
  EXPECT_EQ(status.code, DELTAC_CUDA_ERROR);
  EXPECT_NE(status.message.find("cannot load the CUDA driver"),
            std::string::npos);
  EXPECT_TRUE(c.untouched());
}
