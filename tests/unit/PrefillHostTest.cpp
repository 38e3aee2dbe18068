//===- PrefillHostTest.cpp - host-side checks of prefill() ----------------===//
//
// The prefill entry of the example library (K = V = 128, bf16, f32 state,
// raw gate, chunk 64), called without a GPU or driver: sizes, alignment,
// slots and size products are checked before anything is launched, the
// status names the argument, and a rejected call writes nothing.
//
//===----------------------------------------------------------------------===//

#include "qwen3_next_gdn.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

namespace {
struct ValidPrefill {
  static constexpr int64_t T = 128, N = 2, H = 2, HV = 4, K = 128, V = 128;
  std::vector<std::vector<unsigned char>> buffers;
  deltac_prefill_args args{};

  void *buffer(size_t bytes) {
    buffers.emplace_back(bytes + 16, 0x5A);
    auto address = reinterpret_cast<uintptr_t>(buffers.back().data());
    return reinterpret_cast<void *>((address + 15) & ~uintptr_t(15));
  }

  ValidPrefill() {
    args.K = K;
    args.V = V;
    args.T = T;
    args.N = N;
    args.H = H;
    args.HV = HV;
    args.io_dtype = DELTAC_BF16;
    args.state_dtype = DELTAC_F32;
    args.q = buffer(T * H * K * 2);
    args.k = buffer(T * H * K * 2);
    args.v = buffer(T * HV * V * 2);
    args.o = buffer(T * HV * V * 2);
    args.g = buffer(T * HV * 2);
    args.beta = buffer(T * HV * 2);
    args.A_log = static_cast<const float *>(buffer(HV * 4));
    args.dt_bias = static_cast<const float *>(buffer(HV * 4));
    args.initial_state = buffer(N * HV * K * V * 4);
    args.final_state = buffer(N * HV * K * V * 4);
    args.workspace_bytes =
        qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(K, V, T, N, HV);
    args.workspace = buffer(size_t(args.workspace_bytes));
    args.error_flag = static_cast<int32_t *>(buffer(4));
    args.scale = 0.088f;
  }

  bool untouched() const {
    for (const auto &b : buffers)
      for (unsigned char c : b)
        if (c != 0x5A)
          return false;
    return true;
  }
};

void expectRejected(ValidPrefill &call, int code, const std::string &text) {
  deltac::Status status =
      qwen3_next_gdn::qwen3_next::prefill(call.args, nullptr);
  EXPECT_EQ(status.code, code) << status.message;
  EXPECT_NE(status.message.find(text), std::string::npos)
      << "message: " << status.message << "\nexpected to contain: " << text;
  EXPECT_EQ(qwen3_next_gdn_qwen3_next_prefill(&call.args, nullptr), code);
  EXPECT_EQ(std::string(qwen3_next_gdn_last_error()), status.message);
  EXPECT_TRUE(call.untouched());
  EXPECT_EQ(qwen3_next_gdn::last_launches(), "");
}

template <typename T> T *offset(T *p, int bytes) {
  return reinterpret_cast<T *>(
      reinterpret_cast<uintptr_t>(p) + uintptr_t(bytes));
}

int64_t workspace(int64_t K, int64_t V, int64_t T, int64_t N, int64_t HV) {
  return qwen3_next_gdn_qwen3_next_prefill_workspace_bytes(K, V, T, N, HV);
}
} // namespace

TEST(PrefillHost, ValidCallPassesTheHostChecks) {
  ValidPrefill c;
  ASSERT_GT(c.args.workspace_bytes, 0);
  deltac::Status s = qwen3_next_gdn::qwen3_next::prefill(c.args, nullptr);
  // Without a driver the call stops at the first driver use.
  EXPECT_NE(s.code, DELTAC_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(c.untouched());
}

// Every size the host would reject gives -1, never a negative or wrapped
// size (was: a negative T gave a negative size, a huge T overflowed).
TEST(PrefillHost, WorkspaceBytesIsMinusOneForInvalidSizes) {
  EXPECT_GT(workspace(128, 128, 4096, 1, 32), 0);
  EXPECT_GT(workspace(128, 128, 0, 1, 1), 0);
  for (auto [T, N, HV] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {-1, 1, 1},
           {-(int64_t(1) << 62), 1, 1},
           {64, 0, 1},
           {64, -3, 1},
           {64, 1, 0},
           {64, 1, -1},
           {64, 1, 65536},
           {(int64_t(1) << 40) + 1, 1, 1},
           {std::numeric_limits<int64_t>::max(), 1, 1},
           {std::numeric_limits<int64_t>::max(), 1, 65535},
           {int64_t(1) << 40, 1, 65535}, // (T / 64 + N) * HV >= 2^31
           {64, (int64_t(1) << 30) + 1, 1},
           {64, int64_t(1) << 28, 16}})  // N * HV * V / 16 >= 2^31
    EXPECT_EQ(workspace(128, 128, T, N, HV), -1)
        << "T=" << T << " N=" << N << " HV=" << HV;
  EXPECT_EQ(workspace(64, 128, 64, 1, 1), -1); // no specialization
}

TEST(PrefillHost, NaturalAlignmentOfScalarsAndIndices) {
  ValidPrefill g;
  g.args.g = offset(g.args.g, 1);
  expectRejected(g, DELTAC_INVALID_ARGUMENT,
                 "g must be 2-byte aligned (the io dtype)");
  ValidPrefill aLog;
  aLog.args.A_log = offset(aLog.args.A_log, 2);
  expectRejected(aLog, DELTAC_INVALID_ARGUMENT,
                 "A_log must be 4-byte aligned (f32)");
  ValidPrefill dt;
  dt.args.dt_bias = offset(dt.args.dt_bias, 3);
  expectRejected(dt, DELTAC_INVALID_ARGUMENT,
                 "dt_bias must be 4-byte aligned (f32)");
  ValidPrefill in;
  in.args.initial_state_indices =
      offset(static_cast<const int32_t *>(in.buffer(16)), 2);
  expectRejected(in, DELTAC_INVALID_ARGUMENT,
                 "initial_state_indices must be 4-byte aligned (int32)");
  ValidPrefill out;
  out.args.indices_i64 = 1;
  out.args.output_state_indices =
      offset(static_cast<const int32_t *>(out.buffer(32)), 4);
  expectRejected(out, DELTAC_INVALID_ARGUMENT,
                 "output_state_indices must be 8-byte aligned (int64)");
  ValidPrefill flag;
  flag.args.error_flag = offset(flag.args.error_flag, 2);
  expectRejected(flag, DELTAC_INVALID_ARGUMENT,
                 "error_flag must be 4-byte aligned (int32)");
  ValidPrefill v;
  v.args.v = offset(v.args.v, 8);
  expectRejected(v, DELTAC_INVALID_ARGUMENT, "v must be 16-byte aligned");
}

// Sequence n reads row n of initial_state without initial indices, even
// where output indices are given (was accepted with slots < N).
TEST(PrefillHost, RowNWithoutIndicesNeedsNSlots) {
  ValidPrefill c;
  c.args.slots = 1; // N = 2
  c.args.output_state_indices = static_cast<const int32_t *>(c.buffer(16));
  expectRejected(c, DELTAC_INVALID_ARGUMENT,
                 "slots = 1 is below N = 2 (without indices, sequence n uses "
                 "row n)");
  ValidPrefill none;
  none.args.slots = 1;
  expectRejected(none, DELTAC_INVALID_ARGUMENT, "slots = 1 is below N = 2");
  ValidPrefill indexed; // reads and writes through the indices: fine
  indexed.args.slots = 1;
  indexed.args.initial_state_indices =
      static_cast<const int32_t *>(indexed.buffer(16));
  deltac::Status s =
      qwen3_next_gdn::qwen3_next::prefill(indexed.args, nullptr);
  EXPECT_EQ(s.message.find("slots"), std::string::npos) << s.message;
}

TEST(PrefillHost, SizeProductsNeverWrap) {
  ValidPrefill q;
  q.args.q_stride = int64_t(1) << 60;
  expectRejected(q, DELTAC_INVALID_ARGUMENT,
                 "q would span more than 2^48 bytes");
  ValidPrefill o;
  o.args.o_stride = (int64_t(1) << 62) + 8;
  expectRejected(o, DELTAC_INVALID_ARGUMENT,
                 "o would span more than 2^48 bytes");
  ValidPrefill pool;
  pool.args.slots = int64_t(1) << 61;
  pool.args.initial_state_indices =
      static_cast<const int32_t *>(pool.buffer(16));
  expectRejected(pool, DELTAC_INVALID_ARGUMENT,
                 "the states (slots * slot_stride) would span more than 2^48");
  for (int64_t huge : {int64_t(1) << 60, (int64_t(1) << 62) + 4}) { // * 4 bytes wraps
    ValidPrefill stride;
    stride.args.slot_stride = huge;
    expectRejected(stride, DELTAC_INVALID_ARGUMENT,
                   "the states (slots * slot_stride) would span more than 2^48");
  }
  ValidPrefill negative;
  negative.args.T = -5;
  expectRejected(negative, DELTAC_INVALID_ARGUMENT,
                 "T = -5 must lie in [0, 2^40]");
}

// State pools whose slots hold more than one state (vLLM's hybrid cache):
// the stride covers a state and keeps every slot 16-byte aligned.
TEST(PrefillHost, SlotStride) {
  ValidPrefill small;
  small.args.slot_stride = ValidPrefill::HV * 128 * 128 - 4;
  expectRejected(small, DELTAC_INVALID_ARGUMENT,
                 "slot_stride = 65532 is smaller than one slot's HV * K * V = "
                 "65536 elements");
  ValidPrefill negative;
  negative.args.slot_stride = -1;
  expectRejected(negative, DELTAC_INVALID_ARGUMENT, "slot_stride = -1 is smaller");
  ValidPrefill misaligned;
  misaligned.args.slot_stride = ValidPrefill::HV * 128 * 128 + 1;
  expectRejected(misaligned, DELTAC_INVALID_ARGUMENT,
                 "slot_stride = 65537 must keep every slot 16-byte aligned");
}

// State checkpoints (FLA's every chunk; FlashInfer's every n tokens with
// per-sequence first rows): the arguments the host can see.
TEST(PrefillHost, Checkpoints) {
  constexpr int64_t perRow = ValidPrefill::HV * 128 * 128;
  // FLA's form, fixed length: N * ceil(T / N / 64) = 2 rows.
  ValidPrefill few;
  few.args.checkpoints = few.buffer(perRow * 4);
  few.args.checkpoint_rows = 1;
  few.args.checkpoint_dtype = DELTAC_F32;
  expectRejected(few, DELTAC_INVALID_ARGUMENT,
                 "checkpoint_rows = 1 is below the 2 chunks (N * ceil(T / N / 64)) "
                 "whose entering states this call keeps");
  ValidPrefill dtype;
  dtype.args.checkpoints = dtype.buffer(2 * perRow * 2);
  dtype.args.checkpoint_rows = 2;
  dtype.args.checkpoint_dtype = DELTAC_F16;
  expectRejected(dtype, DELTAC_INVALID_ARGUMENT,
                 "checkpoint_dtype f16 must be f32 or the io dtype bf16");
  ValidPrefill misaligned;
  misaligned.args.checkpoints =
      static_cast<char *>(misaligned.buffer(2 * perRow * 4 + 16)) + 4;
  misaligned.args.checkpoint_rows = 2;
  misaligned.args.checkpoint_dtype = DELTAC_F32;
  expectRejected(misaligned, DELTAC_INVALID_ARGUMENT, "checkpoints must be 16-byte aligned");
  ValidPrefill huge;
  huge.args.checkpoints = huge.buffer(16);
  huge.args.checkpoint_rows = int64_t(1) << 40;
  huge.args.checkpoint_dtype = DELTAC_F32;
  expectRejected(huge, DELTAC_INVALID_ARGUMENT,
                 "checkpoints (checkpoint_rows * HV * K * V) would span more than 2^48 bytes");
  ValidPrefill everyWithoutStarts;
  everyWithoutStarts.args.checkpoints = everyWithoutStarts.buffer(2 * perRow * 4);
  everyWithoutStarts.args.checkpoint_rows = 2;
  everyWithoutStarts.args.checkpoint_dtype = DELTAC_F32;
  everyWithoutStarts.args.checkpoint_every_n_tokens = 64;
  expectRejected(everyWithoutStarts, DELTAC_INVALID_ARGUMENT,
                 "checkpoint_every_n_tokens = 64 needs checkpoint_starts");
  ValidPrefill stray;
  stray.args.checkpoint_every_n_tokens = 128;
  expectRejected(stray, DELTAC_INVALID_ARGUMENT,
                 "checkpoint_every_n_tokens = 128 is set but checkpoints is null");
  // FlashInfer's form: a positive multiple of the chunk, int64 starts.
  for (int64_t n : {int64_t(0), int64_t(-64), int64_t(96)}) {
    ValidPrefill every;
    every.args.checkpoints = every.buffer(perRow * 4);
    every.args.checkpoint_rows = 1;
    every.args.checkpoint_dtype = DELTAC_F32;
    every.args.checkpoint_starts = static_cast<const int64_t *>(every.buffer(3 * 8));
    every.args.checkpoint_every_n_tokens = n;
    expectRejected(every, DELTAC_INVALID_ARGUMENT,
                   "checkpoint_every_n_tokens = " + std::to_string(n) +
                       " must be a positive multiple of the spec's chunk (64)");
  }
  ValidPrefill starts;
  starts.args.checkpoints = starts.buffer(perRow * 4);
  starts.args.checkpoint_rows = 1;
  starts.args.checkpoint_dtype = DELTAC_F32;
  starts.args.checkpoint_starts =
      reinterpret_cast<const int64_t *>(static_cast<char *>(starts.buffer(32)) + 4);
  starts.args.checkpoint_every_n_tokens = 64;
  expectRejected(starts, DELTAC_INVALID_ARGUMENT,
                 "checkpoint_starts must be 8-byte aligned (int64)");
  ValidPrefill noTensor;
  noTensor.args.checkpoint_rows = 3;
  noTensor.args.checkpoint_starts = static_cast<const int64_t *>(noTensor.buffer(3 * 8));
  noTensor.args.checkpoint_every_n_tokens = 64;
  expectRejected(noTensor, DELTAC_INVALID_ARGUMENT,
                 "checkpoints is null but checkpoint_starts is set and checkpoint_rows = 3");
}

// f32 beta (beta_f32) keeps beta's 16-byte alignment rule: a pointer 4
// bytes past one (an f32 boundary) is rejected before any launch.
TEST(PrefillHost, BetaF32) {
  ValidPrefill misaligned;
  misaligned.args.beta =
      static_cast<char *>(misaligned.buffer(ValidPrefill::T * ValidPrefill::HV * 4 + 16)) + 4;
  misaligned.args.beta_f32 = 1;
  expectRejected(misaligned, DELTAC_INVALID_ARGUMENT, "beta must be 16-byte aligned");
}

// qwen3_next fixes l2norm and the sigmoid beta: a call that asks for a
// choice refuses, never ignores it; a beta_form outside 0..2 is invalid.
TEST(PrefillHost, FixedCallOptions) {
  ValidPrefill norm;
  norm.args.qk_l2norm = 1;
  expectRejected(norm, DELTAC_UNSUPPORTED, "qk_l2norm: this spec fixes the q/k normalisation");
  ValidPrefill beta;
  beta.args.beta_form = 2;
  expectRejected(beta, DELTAC_UNSUPPORTED, "beta_form: this spec fixes the beta form");
  ValidPrefill bad;
  bad.args.beta_form = 3;
  expectRejected(bad, DELTAC_INVALID_ARGUMENT, "beta_form = 3 must be 0 (given), 1 (sigmoid)");
}

TEST(PrefillHost, ScaleAndDtypes) {
  ValidPrefill nan;
  nan.args.scale = std::numeric_limits<float>::quiet_NaN();
  expectRejected(nan, DELTAC_INVALID_ARGUMENT, "scale must be finite");
  ValidPrefill dtype;
  int bad = -3;
  std::memcpy(&dtype.args.state_dtype, &bad, sizeof bad);
  expectRejected(dtype, DELTAC_INVALID_ARGUMENT,
                 "state_dtype is unknown (-3); this library was generated "
                 "for f32");
}
