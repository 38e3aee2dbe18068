//===- ReferenceTest.cpp - tests of the fp64 delta-rule reference --------===//
//
// The reference is the ground truth of every other test, so it is checked
// here against numbers worked out by hand and against properties of the
// recurrence that do not depend on how it is coded: retrieval with
// orthonormal keys, pure decay at beta = 0, layout / varlen / GVA / gate-form
// / beta-form / L2-norm equivalences, and prefix consistency of the
// per-step states.
//
//===----------------------------------------------------------------------===//
#include "tests/reference/DeltaReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace deltac::ref;

namespace {

/// Differently computed fp64 results must agree to this relative error.
constexpr double kTol = 1e-12;

Problem makeProblem(Rule rule, int64_t B, int64_t T, int64_t H, int64_t HV,
                    int64_t K, int64_t V) {
  Problem p;
  p.rule = rule;
  p.B = B;
  p.T = T;
  p.H = H;
  p.HV = HV;
  p.K = K;
  p.V = V;
  p.gate = rule == Rule::Delta ? GateForm::None : GateForm::Log;
  p.beta = BetaForm::Given;
  p.scale = 1.0;
  return p;
}

/// Runs the reference and records a failure (with its message) on error.
Outputs mustRun(const Problem &p, const Inputs &in, bool steps = false) {
  Outputs out;
  std::string err = run(p, in, out, steps);
  if (!err.empty())
    ADD_FAILURE() << "run() rejected a valid call: " << err;
  return out;
}

/// Rows [begin, end) of a tensor whose leading axis is the flattened token
/// (or sequence) axis of `count` entries; absent tensors stay empty.
std::vector<double> rows(const std::vector<double> &x, int64_t count,
                         int64_t begin, int64_t end) {
  if (x.empty())
    return {};
  const size_t row = x.size() / static_cast<size_t>(count);
  return std::vector<double>(x.begin() + begin * row, x.begin() + end * row);
}

/// The inputs of tokens [begin, end) (of `tokens` in all) and of the
/// sequences [nBegin, nEnd) (of `seqs`) for the initial state.
Inputs sliceInputs(const Inputs &in, int64_t tokens, int64_t begin,
                   int64_t end, int64_t seqs, int64_t nBegin, int64_t nEnd) {
  Inputs s;
  s.q = rows(in.q, tokens, begin, end);
  s.k = rows(in.k, tokens, begin, end);
  s.v = rows(in.v, tokens, begin, end);
  s.g = rows(in.g, tokens, begin, end);
  s.beta = rows(in.beta, tokens, begin, end);
  s.aLog = in.aLog;
  s.dtBias = in.dtBias;
  s.initialState = rows(in.initialState, seqs, nBegin, nEnd);
  return s;
}

/// One point in the option space; the equivalence tests run over all.
struct Config {
  const char *name;
  Rule rule;
  GateForm gate;
  BetaForm beta;
  bool l2;
};

const Config kConfigs[] = {
    {"DeltaGiven", Rule::Delta, GateForm::None, BetaForm::Given, false},
    {"DeltaSigmoidL2", Rule::Delta, GateForm::None, BetaForm::Sigmoid, true},
    {"GatedLogGiven", Rule::Gated, GateForm::Log, BetaForm::Given, false},
    {"GatedLinearSigmoid2", Rule::Gated, GateForm::Linear, BetaForm::Sigmoid2,
     false},
    {"GatedRawSigmoidL2", Rule::Gated, GateForm::Raw, BetaForm::Sigmoid, true},
    {"KdaLogGiven", Rule::Kda, GateForm::Log, BetaForm::Given, false},
    {"KdaRawSigmoidL2", Rule::Kda, GateForm::Raw, BetaForm::Sigmoid, true},
};

Problem configure(const Config &c, int64_t B, int64_t T, int64_t H,
                  int64_t HV, int64_t K, int64_t V) {
  Problem p = makeProblem(c.rule, B, T, H, HV, K, V);
  p.gate = c.gate;
  p.beta = c.beta;
  p.qkL2Norm = c.l2;
  p.scale = 1.0 / std::sqrt(static_cast<double>(K));
  return p;
}

class ConfigTest : public ::testing::TestWithParam<Config> {};

std::string configName(const ::testing::TestParamInfo<Config> &info) {
  return info.param.name;
}

//===----------------------------------------------------------------------===//
// Hand-computed cases (numbers worked out on paper from the formula).
//===----------------------------------------------------------------------===//

// K = V = 2, one token. S0 = [[1, 2], [3, 4]] (rows = K), k = (0.6, 0.8),
// v = (1, -1), q = (1, 2), beta = 0.5, scale = 0.5.
struct HandCase {
  std::vector<double> S0kv = {1, 2, 3, 4};
  std::vector<double> q = {1, 2}, k = {0.6, 0.8}, v = {1, -1};
  std::vector<double> beta = {0.5};
};

std::vector<double> transpose2x2(const std::vector<double> &m) {
  return {m[0], m[2], m[1], m[3]};
}

void expectNear(const std::vector<double> &got,
                const std::vector<double> &want, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-14) << what << "[" << i << "]";
}

class HandGated : public ::testing::TestWithParam<Layout> {};

TEST_P(HandGated, OneToken) {
  // g = log 0.5:     S = 0.5 S0            = [[0.5, 1], [1.5, 2]]
  // S^T k          = (0.6*0.5 + 0.8*1.5, 0.6*1 + 0.8*2) = (1.5, 2.2)
  // u = 0.5 (v - S^T k) = 0.5 (-0.5, -3.2) = (-0.25, -1.6)
  // S += k u^T:  row0 += 0.6 u = (-0.15, -0.96) -> (0.35, 0.04)
  //              row1 += 0.8 u = (-0.2, -1.28)  -> (1.3, 0.72)
  // o = 0.5 S^T q = 0.5 (0.35 + 2*1.3, 0.04 + 2*0.72) = (1.475, 0.74)
  HandCase h;
  Problem p = makeProblem(Rule::Gated, 1, 1, 1, 1, 2, 2);
  p.layout = GetParam();
  p.scale = 0.5;
  Inputs in;
  in.q = h.q;
  in.k = h.k;
  in.v = h.v;
  in.beta = h.beta;
  in.g = {std::log(0.5)};
  in.initialState = p.layout == Layout::Kv ? h.S0kv : transpose2x2(h.S0kv);
  Outputs out = mustRun(p, in, /*steps=*/true);
  std::vector<double> finalKv = {0.35, 0.04, 1.3, 0.72};
  std::vector<double> final =
      p.layout == Layout::Kv ? finalKv : transpose2x2(finalKv);
  expectNear(out.o, {1.475, 0.74}, "o");
  expectNear(out.finalState, final, "finalState");
  expectNear(out.stepStates, final, "stepStates");
}

INSTANTIATE_TEST_SUITE_P(Reference, HandGated,
                         ::testing::Values(Layout::Kv, Layout::Vk),
                         [](const ::testing::TestParamInfo<Layout> &info) {
                           return std::string(toString(info.param));
                         });

TEST(ReferenceHand, KdaOneToken) {
  // g = (log 0.5, log 0.25) scales rows: S = [[0.5, 1], [0.75, 1]]
  // S^T k = (0.6*0.5 + 0.8*0.75, 0.6*1 + 0.8*1) = (0.9, 1.4)
  // u = 0.5 ((1, -1) - (0.9, 1.4)) = (0.05, -1.2)
  // row0 += 0.6 u = (0.03, -0.72) -> (0.53, 0.28)
  // row1 += 0.8 u = (0.04, -0.96) -> (0.79, 0.04)
  // o = 0.5 (0.53 + 2*0.79, 0.28 + 2*0.04) = (1.055, 0.18)
  HandCase h;
  Problem p = makeProblem(Rule::Kda, 1, 1, 1, 1, 2, 2);
  p.scale = 0.5;
  Inputs in;
  in.q = h.q;
  in.k = h.k;
  in.v = h.v;
  in.beta = h.beta;
  in.g = {std::log(0.5), std::log(0.25)};
  in.initialState = h.S0kv;
  Outputs out = mustRun(p, in);
  expectNear(out.o, {1.055, 0.18}, "o");
  expectNear(out.finalState, {0.53, 0.28, 0.79, 0.04}, "finalState");
}

TEST(ReferenceHand, DeltaOneToken) {
  // No decay: S^T k = (0.6*1 + 0.8*3, 0.6*2 + 0.8*4) = (3, 4.4)
  // u = 0.5 ((1, -1) - (3, 4.4)) = (-1, -2.7)
  // row0 += 0.6 u = (-0.6, -1.62) -> (0.4, 0.38)
  // row1 += 0.8 u = (-0.8, -2.16) -> (2.2, 1.84)
  // o = 0.5 (0.4 + 2*2.2, 0.38 + 2*1.84) = (2.4, 2.03)
  HandCase h;
  Problem p = makeProblem(Rule::Delta, 1, 1, 1, 1, 2, 2);
  p.scale = 0.5;
  Inputs in;
  in.q = h.q;
  in.k = h.k;
  in.v = h.v;
  in.beta = h.beta;
  in.initialState = h.S0kv;
  Outputs out = mustRun(p, in);
  expectNear(out.o, {2.4, 2.03}, "o");
  expectNear(out.finalState, {0.4, 0.38, 2.2, 1.84}, "finalState");
}

TEST(ReferenceHand, DeltaTwoTokensFromZero) {
  // t=0: k = (1, 0), v = (1, 2), beta = 1, S0 = 0: u = v, S = [[1, 2], [0, 0]]
  //      q = (1, 1): o = (1, 2)
  // t=1: k = (0.6, 0.8), v = (0, 1), beta = 0.5: S^T k = (0.6, 1.2)
  //      u = 0.5 ((0, 1) - (0.6, 1.2)) = (-0.3, -0.1)
  //      row0 += 0.6 u -> (0.82, 1.94); row1 += 0.8 u -> (-0.24, -0.08)
  //      q = (0, 1): o = row1 = (-0.24, -0.08)
  Problem p = makeProblem(Rule::Delta, 1, 2, 1, 1, 2, 2);
  Inputs in;
  in.q = {1, 1, 0, 1};
  in.k = {1, 0, 0.6, 0.8};
  in.v = {1, 2, 0, 1};
  in.beta = {1, 0.5};
  Outputs out = mustRun(p, in, /*steps=*/true);
  expectNear(out.o, {1, 2, -0.24, -0.08}, "o");
  expectNear(out.finalState, {0.82, 1.94, -0.24, -0.08}, "finalState");
  expectNear(out.stepStates, {1, 2, 0, 0, 0.82, 1.94, -0.24, -0.08},
             "stepStates");
}

TEST(ReferenceHand, GvaHeadMapping) {
  // H = 1, HV = 2, K = V = 1, S0 = 0, beta = 1, scale = 1: S = k v, o = q k v.
  // Both value heads read the single q/k head: o = (2*3*5, 2*3*7).
  Problem p = makeProblem(Rule::Delta, 1, 1, 1, 2, 1, 1);
  Inputs in;
  in.q = {2};
  in.k = {3};
  in.v = {5, 7};
  in.beta = {1, 1};
  Outputs out = mustRun(p, in);
  expectNear(out.o, {30, 42}, "o");
  expectNear(out.finalState, {15, 21}, "finalState");
}

//===----------------------------------------------------------------------===//
// beta = 0: the state only decays.
//===----------------------------------------------------------------------===//

class BetaZero : public ::testing::TestWithParam<Rule> {};

TEST_P(BetaZero, OnlyDecays) {
  const Rule rule = GetParam();
  const int64_t B = 2, T = 5, H = 2, HV = 4, K = 3, V = 4;
  Problem p = makeProblem(rule, B, T, H, HV, K, V);
  p.scale = 0.7;
  Inputs in = randomInputs(p, 11);
  for (double &b : in.beta)
    b = 0.0;
  Outputs out = mustRun(p, in);

  const int64_t gk = rule == Rule::Kda ? K : 1; // gate entries per head
  std::vector<double> wantO(out.o.size()), wantFinal(out.finalState.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hv = 0; hv < HV; ++hv) {
      const double *S0 = &in.initialState[((b * HV + hv) * K) * V];
      std::vector<double> cum(K, 0.0); // sum of log gates so far, per row
      for (int64_t t = 0; t < T; ++t) {
        const int64_t tok = b * T + t;
        for (int64_t i = 0; i < K; ++i)
          cum[i] += in.g[(tok * HV + hv) * gk + (gk == 1 ? 0 : i)];
        const double *q = &in.q[(tok * H + hv / (HV / H)) * K];
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < K; ++i)
            acc += q[i] * std::exp(cum[i]) * S0[i * V + j];
          wantO[(tok * HV + hv) * V + j] = p.scale * acc;
        }
      }
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          wantFinal[((b * HV + hv) * K + i) * V + j] =
              std::exp(cum[i]) * S0[i * V + j];
    }
  EXPECT_LT(relativeError(out.o, wantO), kTol);
  EXPECT_LT(relativeError(out.finalState, wantFinal), kTol);
}

INSTANTIATE_TEST_SUITE_P(Reference, BetaZero,
                         ::testing::Values(Rule::Gated, Rule::Kda),
                         [](const ::testing::TestParamInfo<Rule> &info) {
                           return std::string(toString(info.param));
                         });

//===----------------------------------------------------------------------===//
// Associative-memory retrieval: S0 = 0, no decay, beta = 1, orthonormal keys.
// Writing k_s -> v_s never disturbs the other keys, so querying k_s after
// step s returns v_s exactly, and before step s returns 0.
//===----------------------------------------------------------------------===//

struct RetrievalCase {
  const char *name;
  Rule rule;
  GateForm gate;
};

class Retrieval : public ::testing::TestWithParam<RetrievalCase> {};

TEST_P(Retrieval, OrthonormalKeysReturnTheirValues) {
  const int64_t K = 4, V = 3, T = 4;
  // Rows of a normalised 4x4 Hadamard matrix: orthonormal.
  const double hK[4][4] = {{0.5, 0.5, 0.5, 0.5},
                           {0.5, -0.5, 0.5, -0.5},
                           {0.5, 0.5, -0.5, -0.5},
                           {0.5, -0.5, -0.5, 0.5}};
  Problem p = makeProblem(GetParam().rule, 1, T, 1, 1, K, V);
  p.gate = GetParam().gate;
  Inputs base = randomInputs(p, 5);
  base.initialState.clear();
  for (double &b : base.beta)
    b = 1.0;
  // No decay: g = 0 in log space, alpha = 1 in linear space.
  for (double &g : base.g)
    g = p.gate == GateForm::Linear ? 1.0 : 0.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < K; ++i)
      base.k[t * K + i] = hK[t][i];

  for (int64_t s = 0; s < T; ++s) {
    Inputs in = base;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < K; ++i)
        in.q[t * K + i] = hK[s][i]; // q_t = k_s
    Outputs out = mustRun(p, in);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < V; ++j) {
        const double want = t >= s ? in.v[s * V + j] : 0.0;
        EXPECT_NEAR(out.o[t * V + j], want, 1e-14)
            << "s=" << s << " t=" << t << " j=" << j;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reference, Retrieval,
    ::testing::Values(RetrievalCase{"Delta", Rule::Delta, GateForm::None},
                      RetrievalCase{"GatedLog", Rule::Gated, GateForm::Log},
                      RetrievalCase{"GatedLinear", Rule::Gated,
                                    GateForm::Linear},
                      RetrievalCase{"KdaLog", Rule::Kda, GateForm::Log}),
    [](const ::testing::TestParamInfo<RetrievalCase> &info) {
      return std::string(info.param.name);
    });

TEST(ReferenceProperties, BetaOneOverwritesTheSameKey) {
  // Writing the same unit key twice with beta = 1 replaces the value: the
  // delta rule's defining property (a plain linear attention would add).
  const int64_t K = 3, V = 2;
  Problem p = makeProblem(Rule::Delta, 1, 2, 1, 1, K, V);
  Inputs in;
  const double k[3] = {2.0 / 3, -1.0 / 3, 2.0 / 3};
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 3; ++i) {
      in.k.push_back(k[i]);
      in.q.push_back(k[i]);
    }
  in.v = {1, 2, -3, 5};
  in.beta = {1, 1};
  in.initialState = {1, 2, 3, 4, 5, 6}; // overwritten along k as well
  Outputs out = mustRun(p, in);
  EXPECT_NEAR(out.o[2], -3, 1e-14);
  EXPECT_NEAR(out.o[3], 5, 1e-14);
}

//===----------------------------------------------------------------------===//
// Equivalences over the whole option space.
//===----------------------------------------------------------------------===//

TEST_P(ConfigTest, KvAndVkLayoutsAgree) {
  Problem kv = configure(GetParam(), 2, 7, 2, 4, 3, 5);
  Inputs in = randomInputs(kv, 21);
  Outputs outKv = mustRun(kv, in, true);

  Problem vk = kv;
  vk.layout = Layout::Vk;
  Inputs inVk = in;
  inVk.initialState =
      convertStateLayout(in.initialState, 3, 5, Layout::Kv, Layout::Vk);
  Outputs outVk = mustRun(vk, inVk, true);

  EXPECT_LT(relativeError(outVk.o, outKv.o), kTol);
  EXPECT_LT(relativeError(convertStateLayout(outVk.finalState, 3, 5,
                                             Layout::Vk, Layout::Kv),
                          outKv.finalState),
            kTol);
  EXPECT_LT(relativeError(convertStateLayout(outVk.stepStates, 3, 5,
                                             Layout::Vk, Layout::Kv),
                          outKv.stepStates),
            kTol);
}

TEST_P(ConfigTest, VarlenEqualsSeparateCalls) {
  const std::vector<int64_t> lengths = {3, 1, 5, 1, 2};
  const int64_t N = 5, HV = 4, K = 3, V = 4;
  for (Layout layout : {Layout::Kv, Layout::Vk}) {
    Problem p = configure(GetParam(), 1, 12, 2, HV, K, V);
    p.layout = layout;
    p.cuSeqlens = cuSeqlensFromLengths(lengths);
    ASSERT_EQ(numSequences(p), N);
    Inputs in = randomInputs(p, 31);
    Outputs out = mustRun(p, in, true);

    for (int64_t n = 0; n < N; ++n) {
      const int64_t b = p.cuSeqlens[n], e = p.cuSeqlens[n + 1];
      Problem one = p;
      one.cuSeqlens.clear();
      one.T = e - b;
      Inputs oneIn = sliceInputs(in, p.T, b, e, N, n, n + 1);
      Outputs oneOut = mustRun(one, oneIn, true);
      SCOPED_TRACE("sequence " + std::to_string(n) + " layout " +
                   toString(layout));
      EXPECT_LT(relativeError(oneOut.o, rows(out.o, p.T, b, e)), kTol);
      EXPECT_LT(relativeError(oneOut.finalState,
                              rows(out.finalState, N, n, n + 1)),
                kTol);
      EXPECT_LT(relativeError(oneOut.stepStates, rows(out.stepStates, p.T, b, e)),
                kTol);
    }
  }
}

TEST_P(ConfigTest, VarlenOfEqualLengthsEqualsBatch) {
  // [B, T, ...] and [1, B*T, ...] are the same memory: only the sequence
  // boundaries differ, and cuSeqlens puts them at the same places.
  Problem batch = configure(GetParam(), 3, 4, 1, 2, 4, 3);
  Inputs in = randomInputs(batch, 41);
  Problem varlen = batch;
  varlen.B = 1;
  varlen.T = 12;
  varlen.cuSeqlens = {0, 4, 8, 12};
  Outputs a = mustRun(batch, in, true), b = mustRun(varlen, in, true);
  EXPECT_LT(relativeError(b.o, a.o), kTol);
  EXPECT_LT(relativeError(b.finalState, a.finalState), kTol);
  EXPECT_LT(relativeError(b.stepStates, a.stepStates), kTol);
}

TEST_P(ConfigTest, GvaEqualsDuplicatedQkHeads) {
  for (int64_t groups : {2, 3}) {
    const int64_t B = 2, T = 5, H = 2, HV = H * groups, K = 4, V = 3;
    Problem gva = configure(GetParam(), B, T, H, HV, K, V);
    Inputs in = randomInputs(gva, 51);
    Outputs a = mustRun(gva, in);

    Problem dup = gva;
    dup.H = HV;
    Inputs inDup = in;
    inDup.q.assign(static_cast<size_t>(B * T * HV * K), 0.0);
    inDup.k = inDup.q;
    for (int64_t tok = 0; tok < B * T; ++tok)
      for (int64_t hv = 0; hv < HV; ++hv)
        for (int64_t i = 0; i < K; ++i) {
          inDup.q[(tok * HV + hv) * K + i] = in.q[(tok * H + hv / groups) * K + i];
          inDup.k[(tok * HV + hv) * K + i] = in.k[(tok * H + hv / groups) * K + i];
        }
    Outputs b = mustRun(dup, inDup);
    SCOPED_TRACE("groups " + std::to_string(groups));
    EXPECT_LT(relativeError(b.o, a.o), kTol);
    EXPECT_LT(relativeError(b.finalState, a.finalState), kTol);
  }
}

TEST_P(ConfigTest, StepStatesLastEqualsFinal) {
  const int64_t HV = 2, K = 3, V = 2;
  // Batched: the last token of each batch entry.
  {
    Problem p = configure(GetParam(), 3, 4, 1, HV, K, V);
    Inputs in = randomInputs(p, 61);
    Outputs out = mustRun(p, in, true);
    ASSERT_EQ(out.stepStates.size(), static_cast<size_t>(3 * 4 * HV * K * V));
    for (int64_t b = 0; b < 3; ++b)
      EXPECT_EQ(rows(out.stepStates, 12, b * 4 + 3, b * 4 + 4),
                rows(out.finalState, 3, b, b + 1))
          << "batch " << b;
  }
  // Varlen: the last token of each sequence.
  {
    Problem p = configure(GetParam(), 1, 7, 1, HV, K, V);
    p.layout = Layout::Vk;
    p.cuSeqlens = {0, 1, 5, 7};
    Inputs in = randomInputs(p, 62);
    Outputs out = mustRun(p, in, true);
    for (int64_t n = 0; n < 3; ++n) {
      const int64_t last = p.cuSeqlens[n + 1] - 1;
      EXPECT_EQ(rows(out.stepStates, 7, last, last + 1),
                rows(out.finalState, 3, n, n + 1))
          << "sequence " << n;
    }
  }
  // Without the request there are none.
  {
    Problem p = configure(GetParam(), 1, 2, 1, 1, 2, 2);
    Outputs out;
    out.stepStates = {1, 2, 3};
    ASSERT_EQ(run(p, randomInputs(p, 63), out, false), "");
    EXPECT_TRUE(out.stepStates.empty());
  }
}

TEST_P(ConfigTest, StepStateEqualsTruncatedRun) {
  const int64_t B = 2, T = 6, H = 1, HV = 2, K = 3, V = 4;
  Problem p = configure(GetParam(), B, T, H, HV, K, V);
  Inputs in = randomInputs(p, 71);
  Outputs full = mustRun(p, in, true);
  for (int64_t t = 0; t < T; ++t) {
    // Keep tokens [0, t] of every batch entry.
    Problem cut = p;
    cut.T = t + 1;
    Inputs cutIn = in;
    for (std::vector<double> *x :
         {&cutIn.q, &cutIn.k, &cutIn.v, &cutIn.g, &cutIn.beta}) {
      const std::vector<double> src = *x;
      x->clear();
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> r = rows(src, B * T, b * T, b * T + t + 1);
        x->insert(x->end(), r.begin(), r.end());
      }
    }
    Outputs out = mustRun(cut, cutIn);
    for (int64_t b = 0; b < B; ++b) {
      SCOPED_TRACE("t=" + std::to_string(t) + " b=" + std::to_string(b));
      EXPECT_LT(relativeError(rows(out.finalState, B, b, b + 1),
                              rows(full.stepStates, B * T, b * T + t,
                                   b * T + t + 1)),
                kTol);
      // Causality: the prefix of o does not depend on later tokens.
      EXPECT_LT(relativeError(rows(out.o, B * (t + 1), b * (t + 1),
                                   (b + 1) * (t + 1)),
                              rows(full.o, B * T, b * T, b * T + t + 1)),
                kTol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, ConfigTest, ::testing::ValuesIn(kConfigs),
                         configName);

TEST(ReferenceVarlen, ZeroLengthSequenceKeepsItsState) {
  Problem p = makeProblem(Rule::Gated, 1, 5, 1, 2, 3, 2);
  p.cuSeqlens = {0, 2, 2, 5};
  Inputs in = randomInputs(p, 81);
  Outputs out = mustRun(p, in);
  EXPECT_EQ(rows(out.finalState, 3, 1, 2), rows(in.initialState, 3, 1, 2));
  EXPECT_GT(relativeError(rows(out.finalState, 3, 0, 1),
                          rows(in.initialState, 3, 0, 1)),
            1e-3);
}

TEST(ReferenceVarlen, NoInitialStateMeansZeros) {
  Problem p = makeProblem(Rule::Kda, 1, 6, 2, 2, 3, 4);
  p.cuSeqlens = {0, 4, 6};
  Inputs in = randomInputs(p, 82);
  Inputs zeros = in;
  in.initialState.clear();
  for (double &x : zeros.initialState)
    x = 0.0;
  Outputs a = mustRun(p, in), b = mustRun(p, zeros);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.finalState, b.finalState);
}

//===----------------------------------------------------------------------===//
// Gate and beta forms, and the in-kernel L2 norm, against hand-transformed
// inputs.
//===----------------------------------------------------------------------===//

TEST(ReferenceForms, LinearAlphaEqualsLogOfAlpha) {
  Problem lin = makeProblem(Rule::Gated, 2, 6, 2, 4, 3, 5);
  lin.gate = GateForm::Linear;
  Inputs in = randomInputs(lin, 91);
  for (double a : in.g)
    ASSERT_TRUE(a > 0.0 && a <= 1.0) << a;
  Problem lg = lin;
  lg.gate = GateForm::Log;
  Inputs inLog = in;
  for (double &a : inLog.g)
    a = std::log(a);
  Outputs a = mustRun(lin, in), b = mustRun(lg, inLog);
  EXPECT_LT(relativeError(a.o, b.o), kTol);
  EXPECT_LT(relativeError(a.finalState, b.finalState), kTol);
}

class RawGate : public ::testing::TestWithParam<Rule> {};

TEST_P(RawGate, EqualsLogGateComputedByHand) {
  const Rule rule = GetParam();
  const int64_t B = 1, T = 8, H = 1, HV = 2, K = 3, V = 2;
  Problem raw = makeProblem(rule, B, T, H, HV, K, V);
  raw.gate = GateForm::Raw;
  Inputs in = randomInputs(raw, 101);
  ASSERT_EQ(in.aLog.size(), static_cast<size_t>(HV));
  ASSERT_EQ(in.dtBias.size(), static_cast<size_t>(rule == Rule::Kda ? HV * K : HV));
  // Exercise both softplus branches (threshold 20) and a strong decay.
  in.g[0] = 25.0;
  in.g[1] = -30.0;
  in.g[2] = 3.0;

  const int64_t gk = rule == Rule::Kda ? K : 1;
  Problem lg = raw;
  lg.gate = GateForm::Log;
  Inputs inLog = in;
  inLog.aLog.clear();
  inLog.dtBias.clear();
  for (int64_t tok = 0; tok < B * T; ++tok)
    for (int64_t hv = 0; hv < HV; ++hv)
      for (int64_t c = 0; c < gk; ++c) {
        const size_t idx = (tok * HV + hv) * gk + c;
        const double x = in.g[idx] + in.dtBias[hv * gk + c];
        const double sp = x > 20.0 ? x : std::log(1.0 + std::exp(x));
        inLog.g[idx] = -std::exp(in.aLog[hv]) * sp;
      }
  Outputs a = mustRun(raw, in), b = mustRun(lg, inLog);
  EXPECT_LT(relativeError(a.o, b.o), kTol);
  EXPECT_LT(relativeError(a.finalState, b.finalState), kTol);
}

INSTANTIATE_TEST_SUITE_P(Reference, RawGate,
                         ::testing::Values(Rule::Gated, Rule::Kda),
                         [](const ::testing::TestParamInfo<Rule> &info) {
                           return std::string(toString(info.param));
                         });

TEST(ReferenceForms, SoftplusThresholdIs20) {
  // One token, beta = 0, so final = exp(g) S0 with g = -A softplus(a).
  // Above 20 softplus is x itself: with A = 1/20.5, a = 20.5 the decay is
  // exactly e^-1; log1p(exp(20.5)) would add 1.2e-9 to softplus, i.e. a
  // relative 6e-11 to g, which the 1e-13 tolerance sees. Below the
  // threshold (a = 19.5) it is log1p(exp(a)) = a + 3.4e-9.
  for (double a : {20.5, 19.5}) {
    Problem p = makeProblem(Rule::Gated, 1, 1, 1, 1, 1, 1);
    p.gate = GateForm::Raw;
    Inputs in;
    in.q = {1};
    in.k = {1};
    in.v = {1};
    in.beta = {0};
    in.g = {a};
    in.dtBias = {0};
    in.aLog = {std::log(1 / 20.5)};
    in.initialState = {1};
    const double sp = a > 20 ? a : a + std::exp(-a) - std::exp(-2 * a) / 2;
    const double want = std::exp(-sp / 20.5);
    Outputs out = mustRun(p, in);
    EXPECT_NEAR(out.finalState[0] / want, 1.0, 1e-13) << "a = " << a;
  }
}

TEST(ReferenceForms, SigmoidBetasEqualGivenBeta) {
  for (BetaForm form : {BetaForm::Sigmoid, BetaForm::Sigmoid2}) {
    Problem sig = makeProblem(Rule::Gated, 2, 5, 1, 2, 3, 4);
    sig.beta = form;
    Inputs in = randomInputs(sig, 111, [] {
      RandomOptions o;
      o.betaLogitStd = 3.0;
      return o;
    }());
    Problem given = sig;
    given.beta = BetaForm::Given;
    Inputs inGiven = in;
    const double mult = form == BetaForm::Sigmoid2 ? 2.0 : 1.0;
    for (double &b : inGiven.beta)
      b = mult / (1.0 + std::exp(-b));
    Outputs a = mustRun(sig, in), b = mustRun(given, inGiven);
    SCOPED_TRACE(toString(form));
    EXPECT_LT(relativeError(a.o, b.o), kTol);
    EXPECT_LT(relativeError(a.finalState, b.finalState), kTol);
  }
}

TEST(ReferenceForms, GivenBetaIsNeverClamped) {
  // beta = 1.8 (legal with negative eigenvalues) must be used as is: with
  // S0 = 0 and one token, S = beta k v^T and o = beta <q, k> v.
  Problem p = makeProblem(Rule::Delta, 1, 1, 1, 1, 2, 1);
  Inputs in;
  in.q = {1, 0};
  in.k = {1, 0};
  in.v = {2};
  in.beta = {1.8};
  Outputs out = mustRun(p, in);
  EXPECT_NEAR(out.o[0], 3.6, 1e-14);
  in.beta = {-0.5};
  out = mustRun(p, in);
  EXPECT_NEAR(out.o[0], -1.0, 1e-14);
}

TEST(ReferenceForms, L2NormEqualsPrenormalisedInputs) {
  for (Rule rule : {Rule::Delta, Rule::Gated, Rule::Kda}) {
    const int64_t K = 4;
    Problem l2 = makeProblem(rule, 2, 5, 2, 4, K, 3);
    l2.qkL2Norm = true;
    Inputs in = randomInputs(l2, 121);
    // A short key makes the 1e-6 epsilon matter.
    for (int64_t i = 0; i < K; ++i)
      in.k[i] *= 1e-3;
    Problem plain = l2;
    plain.qkL2Norm = false;
    Inputs inPlain = in;
    for (std::vector<double> *x : {&inPlain.q, &inPlain.k})
      for (size_t r = 0; r < x->size(); r += K) {
        double ss = 0;
        for (int64_t i = 0; i < K; ++i)
          ss += (*x)[r + i] * (*x)[r + i];
        for (int64_t i = 0; i < K; ++i)
          (*x)[r + i] /= std::sqrt(ss + 1e-6);
      }
    Outputs a = mustRun(l2, in), b = mustRun(plain, inPlain);
    SCOPED_TRACE(toString(rule));
    EXPECT_LT(relativeError(a.o, b.o), kTol);
    EXPECT_LT(relativeError(a.finalState, b.finalState), kTol);
  }
}

//===----------------------------------------------------------------------===//
// Argument checking: every bad argument is named first in the message.
//===----------------------------------------------------------------------===//

struct BadCase {
  const char *what;
  const char *arg; // the message must start with "<arg>:"
  void (*mutate)(Problem &, Inputs &);
};

/// A valid gated GVA problem with raw gates; each case breaks one thing.
void validCall(Problem &p, Inputs &in) {
  p = makeProblem(Rule::Gated, 2, 3, 2, 4, 3, 2);
  p.gate = GateForm::Raw;
  in = randomInputs(p, 131);
}

const BadCase kBadCases[] = {
    {"HVNotMultipleOfH", "HV", [](Problem &p, Inputs &in) {
       p.HV = 3;
       in = randomInputs(p, 1);
     }},
    {"ZeroK", "K", [](Problem &p, Inputs &) { p.K = 0; }},
    {"NegativeT", "T", [](Problem &p, Inputs &) { p.T = -1; }},
    {"ZeroH", "H", [](Problem &p, Inputs &) { p.H = 0; }},
    {"ShortQ", "q", [](Problem &, Inputs &in) { in.q.pop_back(); }},
    {"LongK", "k", [](Problem &, Inputs &in) { in.k.push_back(0); }},
    {"ShortV", "v", [](Problem &, Inputs &in) { in.v.pop_back(); }},
    {"MissingG", "g", [](Problem &, Inputs &in) { in.g.clear(); }},
    {"KdaWithScalarGate", "g", [](Problem &p, Inputs &in) {
       p.rule = Rule::Kda;
       in.dtBias.resize(static_cast<size_t>(p.HV * p.K));
     }},
    {"GForDelta", "g", [](Problem &p, Inputs &in) {
       p.rule = Rule::Delta;
       p.gate = GateForm::None;
       in.aLog.clear();
       in.dtBias.clear();
     }},
    {"ShortBeta", "beta", [](Problem &, Inputs &in) { in.beta.pop_back(); }},
    {"MissingALog", "aLog", [](Problem &, Inputs &in) { in.aLog.clear(); }},
    {"ALogWithLogGate", "aLog", [](Problem &p, Inputs &) {
       p.gate = GateForm::Log;
     }},
    {"DtBiasNotPerChannelForKda", "dtBias", [](Problem &p, Inputs &in) {
       p.rule = Rule::Kda;
       in.g.resize(static_cast<size_t>(p.B * p.T * p.HV * p.K));
     }},
    {"ShortInitialState", "initialState",
     [](Problem &, Inputs &in) { in.initialState.pop_back(); }},
    {"LinearGateForKda", "gate", [](Problem &p, Inputs &) {
       p.rule = Rule::Kda;
       p.gate = GateForm::Linear;
     }},
    {"GateForDelta", "gate", [](Problem &p, Inputs &) {
       p.rule = Rule::Delta;
       p.gate = GateForm::Log;
     }},
    {"NoGateForGated", "gate",
     [](Problem &p, Inputs &) { p.gate = GateForm::None; }},
    {"VarlenWithBatch", "B",
     [](Problem &p, Inputs &) { p.cuSeqlens = {0, 3, 6}; }},
    {"CuSeqlensSingleOffset", "cuSeqlens", [](Problem &p, Inputs &) {
       p.B = 1;
       p.cuSeqlens = {0};
     }},
    {"CuSeqlensNotStartingAtZero", "cuSeqlens", [](Problem &p, Inputs &) {
       p.B = 1;
       p.T = 6;
       p.cuSeqlens = {1, 3, 6};
     }},
    {"CuSeqlensDecreasing", "cuSeqlens", [](Problem &p, Inputs &) {
       p.B = 1;
       p.T = 6;
       p.cuSeqlens = {0, 4, 3, 6};
     }},
    {"CuSeqlensNotEndingAtT", "cuSeqlens", [](Problem &p, Inputs &) {
       p.B = 1;
       p.T = 6;
       p.cuSeqlens = {0, 3, 5};
     }},
    {"VarlenInitialStateCountsSequences", "initialState",
     [](Problem &p, Inputs &) {
       // B*T tokens as one batch entry but three sequences: the initial
       // state of the batched problem (2 entries) is one short.
       p.B = 1;
       p.T = 6;
       p.cuSeqlens = {0, 1, 2, 6};
     }},
    {"NanScale", "scale", [](Problem &p, Inputs &) { p.scale = NAN; }},
};

class BadArgument : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadArgument, IsNamedInTheMessage) {
  Problem p;
  Inputs in;
  validCall(p, in);
  ASSERT_EQ(validate(p, in), "") << "the baseline call must be valid";
  GetParam().mutate(p, in);
  Outputs out;
  out.o = {42.0};
  const std::string err = run(p, in, out, true);
  EXPECT_EQ(err.rfind(std::string(GetParam().arg) + ":", 0), 0u)
      << "message: \"" << err << "\"";
  EXPECT_EQ(validate(p, in), err);
  EXPECT_EQ(out.o, std::vector<double>{42.0}) << "outputs touched on error";
}

INSTANTIATE_TEST_SUITE_P(Reference, BadArgument, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return std::string(info.param.what);
                         });

//===----------------------------------------------------------------------===//
// Helpers.
//===----------------------------------------------------------------------===//

TEST(ReferenceHelpers, RelativeError) {
  const std::vector<double> ref = {3, 4};
  EXPECT_EQ(relativeError(ref, ref), 0.0);
  EXPECT_DOUBLE_EQ(relativeError(std::vector<double>{3, 5}, ref), 0.2);
  EXPECT_DOUBLE_EQ(relativeError(std::vector<float>{3, 3}, ref), 0.2);
  const double got[2] = {0, 0};
  EXPECT_DOUBLE_EQ(relativeError(got, ref.data(), 2), 1.0);
  EXPECT_TRUE(std::isinf(relativeError(std::vector<double>{3}, ref)));
  EXPECT_TRUE(std::isnan(relativeError(std::vector<double>{NAN, 4}, ref)));
  // Zero reference: the absolute norm of got.
  EXPECT_DOUBLE_EQ(relativeError(std::vector<double>{3, 4},
                                 std::vector<double>{0, 0}),
                   5.0);
  EXPECT_DOUBLE_EQ(maxAbsError(std::vector<double>{3, 5.5}, ref), 1.5);
  EXPECT_TRUE(std::isinf(maxAbsError(std::vector<double>{3}, ref)));
}

TEST(ReferenceHelpers, ConvertStateLayout) {
  // Two [K=2, V=3] matrices.
  const std::vector<double> kv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<double> vk = {1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12};
  EXPECT_EQ(convertStateLayout(kv, 2, 3, Layout::Kv, Layout::Vk), vk);
  EXPECT_EQ(convertStateLayout(vk, 2, 3, Layout::Vk, Layout::Kv), kv);
  EXPECT_EQ(convertStateLayout(kv, 2, 3, Layout::Kv, Layout::Kv), kv);
  EXPECT_TRUE(convertStateLayout({1, 2, 3}, 2, 3, Layout::Kv, Layout::Vk)
                  .empty());
}

TEST(ReferenceHelpers, SequencesAndSizes) {
  EXPECT_EQ(cuSeqlensFromLengths({3, 0, 2}),
            (std::vector<int64_t>{0, 3, 3, 5}));
  Problem p = makeProblem(Rule::Kda, 2, 3, 2, 4, 5, 6);
  p.gate = GateForm::Raw;
  EXPECT_EQ(numSequences(p), 2);
  Sizes s = sizesOf(p);
  EXPECT_EQ(s.q, 2u * 3 * 2 * 5);
  EXPECT_EQ(s.v, 2u * 3 * 4 * 6);
  EXPECT_EQ(s.g, 2u * 3 * 4 * 5);
  EXPECT_EQ(s.beta, 2u * 3 * 4);
  EXPECT_EQ(s.aLog, 4u);
  EXPECT_EQ(s.dtBias, 4u * 5);
  EXPECT_EQ(s.state, 2u * 4 * 5 * 6);
  EXPECT_EQ(s.stepStates, 2u * 3 * 4 * 5 * 6);
  p.B = 1;
  p.T = 6;
  p.cuSeqlens = {0, 1, 3, 6};
  EXPECT_EQ(numSequences(p), 3);
  EXPECT_EQ(sizesOf(p).state, 3u * 4 * 5 * 6);
}

TEST_P(ConfigTest, RandomInputsAreValidAndDeterministic) {
  Problem p = configure(GetParam(), 2, 6, 2, 4, 8, 3);
  Inputs a = randomInputs(p, 7), b = randomInputs(p, 7), c = randomInputs(p, 8);
  EXPECT_EQ(validate(p, a), "");
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.g, b.g);
  EXPECT_EQ(a.initialState, b.initialState);
  EXPECT_NE(a.q, c.q);
  EXPECT_NE(a.v, c.v);
  // Keys are unit vectors unless the kernel normalises them itself.
  if (!p.qkL2Norm) {
    for (size_t r = 0; r < a.k.size(); r += 8) {
      double ss = 0;
      for (int i = 0; i < 8; ++i)
        ss += a.k[r + i] * a.k[r + i];
      ASSERT_NEAR(ss, 1.0, 1e-12);
    }
  }
  if (p.beta == BetaForm::Given) {
    for (double x : a.beta)
      ASSERT_TRUE(x > 0.0 && x < 1.0) << x;
  }
  for (double x : a.g) {
    if (p.gate == GateForm::Log) {
      ASSERT_TRUE(x > -1.0 && x < 0.0) << x;
    } else if (p.gate == GateForm::Linear) {
      ASSERT_TRUE(x > std::exp(-1.0) && x <= 1.0) << x;
    }
  }
  // Changing an option that does not concern q/k/v leaves them alone.
  Problem other = p;
  other.layout = Layout::Vk;
  other.beta = p.beta == BetaForm::Given ? BetaForm::Sigmoid : BetaForm::Given;
  Inputs d = randomInputs(other, 7);
  EXPECT_EQ(d.q, a.q);
  EXPECT_EQ(d.v, a.v);
  // And the outputs of realistic inputs stay finite and moderate.
  Outputs out = mustRun(p, a);
  for (double x : out.o)
    ASSERT_TRUE(std::isfinite(x) && std::fabs(x) < 1e3) << x;
}

TEST(ReferenceHelpers, RandomInputsHonourOptions) {
  Problem p = makeProblem(Rule::Kda, 1, 4, 1, 2, 3, 2);
  RandomOptions o;
  o.gMin = -5;
  o.gMax = -4;
  o.betaMin = 1.0;
  o.betaMax = 2.0;
  o.initialState = false;
  Inputs in = randomInputs(p, 3, o);
  EXPECT_TRUE(in.initialState.empty());
  for (double x : in.g)
    ASSERT_TRUE(x > -5 && x < -4) << x;
  for (double x : in.beta)
    ASSERT_TRUE(x > 1 && x < 2) << x;
}

} // namespace

//===----------------------------------------------------------------------===//
// The segmented schedule of context parallelism (runSegmented; issue 35,
// docs/context-parallelism.md): every sequence in pieces run from a zero
// state and, on K more columns, from the identity, then chained and its
// outputs corrected, equals the token-by-token run for every rule, gate
// form and layout, with odd piece lengths and varlen sequences.
//===----------------------------------------------------------------------===//

namespace {

struct SegmentCase {
  const char *name;
  Rule rule;
  GateForm gate;
  BetaForm beta;
  Layout layout;
  bool l2;
};

class Segmented : public ::testing::TestWithParam<SegmentCase> {};

/// The case's problem over varlen sequences of `lengths` tokens.
Problem segmentProblem(const SegmentCase &c, const std::vector<int64_t> &lengths) {
  Problem p = makeProblem(c.rule, 1, 0, 2, 4, 8, 6);
  p.gate = c.gate;
  p.beta = c.beta;
  p.layout = c.layout;
  p.qkL2Norm = c.l2;
  p.scale = 0.35;
  p.cuSeqlens = cuSeqlensFromLengths(lengths);
  p.T = p.cuSeqlens.back();
  return p;
}

TEST_P(Segmented, EqualsTheSerialRun) {
  const SegmentCase &c = GetParam();
  // Varlen: a sequence shorter than the pieces, an empty one, odd lengths.
  Problem p = segmentProblem(c, {37, 2, 0, 61});
  Inputs in = randomInputs(p, 71);
  Outputs serial;
  ASSERT_EQ(run(p, in, serial), "");
  for (int64_t segments : {1, 2, 3, 7}) {
    Outputs seg;
    ASSERT_EQ(runSegmented(p, in, segments, seg), "");
    EXPECT_LT(relativeError(seg.o, serial.o), kTol) << segments << " segments";
    EXPECT_LT(relativeError(seg.finalState, serial.finalState), kTol)
        << segments << " segments";
  }
}

const SegmentCase kSegmentCases[] = {
    {"DeltaGiven", Rule::Delta, GateForm::None, BetaForm::Given, Layout::Kv, false},
    {"DeltaSigmoid2L2Vk", Rule::Delta, GateForm::None, BetaForm::Sigmoid2, Layout::Vk, true},
    {"GatedLog", Rule::Gated, GateForm::Log, BetaForm::Given, Layout::Kv, false},
    {"GatedRawSigmoidL2Vk", Rule::Gated, GateForm::Raw, BetaForm::Sigmoid, Layout::Vk, true},
    {"GatedLinear", Rule::Gated, GateForm::Linear, BetaForm::Given, Layout::Kv, false},
    {"KdaLogL2", Rule::Kda, GateForm::Log, BetaForm::Given, Layout::Kv, true},
    {"KdaRawSigmoidVk", Rule::Kda, GateForm::Raw, BetaForm::Sigmoid, Layout::Vk, false},
};

INSTANTIATE_TEST_SUITE_P(Reference, Segmented, ::testing::ValuesIn(kSegmentCases),
                         [](const auto &info) { return std::string(info.param.name); });

// DeltaNet has no decay, so M does not contract: a long sequence in 8
// pieces still equals the serial run (the chain of transfers is exact).
TEST(ReferenceSegmented, LongDeltaNetWithoutDecay) {
  Problem p = makeProblem(Rule::Delta, 1, 2048, 1, 2, 8, 8);
  Inputs in = randomInputs(p, 5);
  Outputs serial, seg;
  ASSERT_EQ(run(p, in, serial), "");
  ASSERT_EQ(runSegmented(p, in, 8, seg), "");
  EXPECT_LT(relativeError(seg.o, serial.o), 1e-10);
  EXPECT_LT(relativeError(seg.finalState, serial.finalState), 1e-10);
}

// A wrong chain is caught: dropping the correction of the outputs (the
// pieces' outputs from a zero state) differs from the serial run.
TEST(ReferenceSegmented, PiecesFromZeroAloneDiffer) {
  Problem p = makeProblem(Rule::Gated, 1, 40, 1, 1, 4, 4);
  Inputs in = randomInputs(p, 9);
  Outputs serial, seg;
  ASSERT_EQ(run(p, in, serial), "");
  ASSERT_EQ(runSegmented(p, in, 2, seg), "");
  // The second half from a zero state, as a segment would see it alone.
  Problem half = p;
  half.T = 20;
  Inputs second = in;
  auto tail = [](const std::vector<double> &x, size_t per) {
    return std::vector<double>(x.begin() + 20 * per, x.end());
  };
  second.q = tail(in.q, 4);
  second.k = tail(in.k, 4);
  second.v = tail(in.v, 4);
  second.g = tail(in.g, 1);
  second.beta = tail(in.beta, 1);
  second.initialState.clear();
  Outputs alone;
  ASSERT_EQ(run(half, second, alone), "");
  std::vector<double> serialTail(serial.o.begin() + 80, serial.o.end());
  std::vector<double> segTail(seg.o.begin() + 80, seg.o.end());
  EXPECT_LT(relativeError(segTail, serialTail), kTol);
  EXPECT_GT(relativeError(alone.o, serialTail), 1e-3);
  EXPECT_NE(runSegmented(p, in, 0, seg), "");
}

} // namespace

//===----------------------------------------------------------------------===//
// FLA's fused_recurrent options per value column: gv (log decays of each
// value column of S) and a beta per value column (issue 32).
//===----------------------------------------------------------------------===//

namespace {

// One token, K = 1, V = 2, g = 0: S_j = s_j e^gv_j, u_j = beta_j (v_j -
// S_j k), S_j += k u_j, o_j = scale S_j q.
TEST(ReferencePerValue, OneTokenByHand) {
  Problem p = makeProblem(Rule::Gated, 1, 1, 1, 1, 1, 2);
  p.betaPerValue = true;
  p.scale = 0.5;
  Inputs in;
  in.q = {2.0};
  in.k = {1.0};
  in.v = {1.0, -2.0};
  in.g = {0.0};
  in.beta = {0.25, 0.75};
  in.gv = {std::log(0.5), std::log(2.0)};
  in.initialState = {4.0, 1.0};
  Outputs out;
  ASSERT_EQ(run(p, in, out), "");
  // Column 0: S = 2, u = 0.25 (1 - 2) = -0.25, S = 1.75, o = 0.5 * 1.75 * 2.
  // Column 1: S = 2, u = 0.75 (-2 - 2) = -3, S = -1, o = 0.5 * -1 * 2.
  EXPECT_NEAR(out.finalState[0], 1.75, 1e-15);
  EXPECT_NEAR(out.finalState[1], -1.0, 1e-15);
  EXPECT_NEAR(out.o[0], 1.75, 1e-15);
  EXPECT_NEAR(out.o[1], -1.0, 1e-15);
}

// gv = 0 and a per-value beta equal to the head's beta in every column give
// the head-wise call's bits; gv on column 0 alone changes column 0 alone.
TEST(ReferencePerValue, ReducesToTheHeadWiseCall) {
  for (Layout layout : {Layout::Kv, Layout::Vk}) {
    Problem p = makeProblem(Rule::Kda, 1, 9, 2, 4, 8, 6);
    p.layout = layout;
    Inputs in = randomInputs(p, 13);
    Outputs base;
    ASSERT_EQ(run(p, in, base), "");
    Problem pv = p;
    pv.betaPerValue = true;
    Inputs wide = in;
    wide.beta.clear();
    for (double b : in.beta)
      wide.beta.insert(wide.beta.end(), p.V, b);
    wide.gv.assign(sizesOf(pv).gv, 0.0);
    Outputs same;
    ASSERT_EQ(run(pv, wide, same), "");
    EXPECT_EQ(same.o, base.o);
    EXPECT_EQ(same.finalState, base.finalState);
    for (size_t t = 0; t < wide.gv.size(); t += p.V)
      wide.gv[t] = -0.3;
    Outputs col0;
    ASSERT_EQ(run(pv, wide, col0), "");
    for (size_t i = 0; i < base.o.size(); ++i) {
      if (i % p.V == 0)
        EXPECT_NE(col0.o[i], base.o[i]) << i;
      else
        EXPECT_EQ(col0.o[i], base.o[i]) << i;
    }
  }
}

TEST(ReferencePerValue, SizesAreChecked) {
  Problem p = makeProblem(Rule::Gated, 1, 3, 1, 2, 4, 4);
  Inputs in = randomInputs(p, 3);
  in.gv.assign(5, 0.0);
  Outputs out;
  EXPECT_EQ(run(p, in, out).rfind("gv:", 0), 0u);
  in.gv.clear();
  p.betaPerValue = true; // beta still [B, T, HV]
  EXPECT_EQ(run(p, in, out).rfind("beta:", 0), 0u);
  // No K x K transfer with per-value terms: runSegmented refuses them.
  Inputs wide = randomInputs(p, 3);
  EXPECT_NE(runSegmented(p, wide, 2, out), "");
}

// Across ranks (issue 36): FLA's partition of the flattened tokens into R
// equal slices, a sequence spanning three ranks (100..600 at R = 4: slices
// of 210), one inside a rank and one cut at a slice's end, folded rank by
// rank, equals the serial run for every rule and both layouts.
TEST(ReferenceSegmented, RankSlicesEqualTheSerialRun) {
  for (const SegmentCase &c : kSegmentCases) {
    Problem p = segmentProblem(c, {100, 500, 30, 210});
    Inputs in = randomInputs(p, 13);
    Outputs serial;
    ASSERT_EQ(run(p, in, serial), "");
    for (int64_t ranks : {2, 3, 4, 7}) {
      Outputs cp;
      ASSERT_EQ(runSegmented(p, in, ranks, cp, /*rankSlices=*/true), "");
      EXPECT_LT(relativeError(cp.o, serial.o), kTol) << c.name << ", " << ranks << " ranks";
      EXPECT_LT(relativeError(cp.finalState, serial.finalState), kTol)
          << c.name << ", " << ranks << " ranks";
    }
  }
}

} // namespace
