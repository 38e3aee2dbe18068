//===- DeltaReference.h - fp64 token-by-token delta-rule reference -------===//
//
// The ground truth every deltac kernel is checked against: the recurrence of
// DESIGN.md "The math", evaluated one token at a time in double precision,
// for plain DeltaNet, Gated DeltaNet and KDA, with every option the kernels
// take (state layout, gate form, beta form, in-kernel L2 norm, GVA, varlen,
// initial / final / per-step states).
//
// It is deliberately naive and has no dependency beyond the C++17 standard
// library (no LLVM, no MLIR, no CUDA, no exceptions) so that the CPU unit
// tests, the chunked-math tests and the GPU tests can all link it.
//
// Per value head (K = key dim, V = value dim), state S is [K, V]:
//
//     S   = exp(g_t) * S          gated: scalar; kda: Diag(exp(g_t)) S, scales
//                                 the K axis; delta: no gate
//     u   = beta_t * (v_t - S^T k_t)
//     S   = S + k_t u^T
//     o_t = scale * S^T q_t       reads the updated state
//
//===----------------------------------------------------------------------===//
#ifndef DELTAC_TESTS_REFERENCE_DELTAREFERENCE_H
#define DELTAC_TESTS_REFERENCE_DELTAREFERENCE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace deltac {
namespace ref {

/// Which recurrence. Delta has no gate, Gated a scalar gate per token and
/// value head, Kda a K-vector gate per token and value head.
enum class Rule { Delta, Gated, Kda };

/// How a state matrix is stored. Kv is FLA's default [K, V]; Vk is S^T,
/// [V, K], the "v-first" layout of serving state pools. Initial, final and
/// per-step states all use the problem's layout; the math is the same.
enum class Layout { Kv, Vk };

/// What the g tensor holds.
///   None   - no gate (Rule::Delta only; g must be empty).
///   Log    - log-space decay g; the state is multiplied by exp(g).
///   Linear - alpha in (0, 1]; the state is multiplied by alpha
///            (log-space g = log(alpha)). Rule::Gated only.
///   Raw    - the raw projection a; g = -exp(A_log[hv]) * softplus(a + dt_bias)
///            with softplus(x) = x > 20 ? x : log1p(exp(x)) (Qwen3-Next).
/// Values are never checked: the reference computes whatever it is given.
enum class GateForm { None, Log, Linear, Raw };

/// What the beta tensor holds.
///   Given    - beta itself, used as is (it may lie anywhere, e.g. (0, 2);
///              the reference never clamps it).
///   Sigmoid  - logits b; beta = sigmoid(b).
///   Sigmoid2 - logits b; beta = 2 * sigmoid(b) (allows negative eigenvalues).
enum class BetaForm { Given, Sigmoid, Sigmoid2 };

/// Everything about a call except the data. All tensors are contiguous,
/// row-major, and indexed as documented on Inputs / Outputs.
struct Problem {
  Rule rule = Rule::Gated;
  /// Batch and tokens per batch entry. With cuSeqlens, B must be 1 and T is
  /// the total number of tokens of all sequences.
  int64_t B = 1, T = 1;
  /// Query/key heads (H) and value heads (HV); HV % H == 0 (GVA): value head
  /// hv reads q/k head hv / (HV / H).
  int64_t H = 1, HV = 1;
  /// Key and value dims.
  int64_t K = 1, V = 1;
  Layout layout = Layout::Kv;
  GateForm gate = GateForm::Log;
  BetaForm beta = BetaForm::Given;
  /// Normalise q and k per token and head inside the recurrence:
  /// x / sqrt(sum x^2 + 1e-6), as FLA's use_qk_l2norm_in_kernel does.
  bool qkL2Norm = false;
  /// beta is [B, T, HV, V], one per value column (FLA's fused_recurrent
  /// with a beta that is not head-wise): u_j = beta_j (v_j - (S^T k)_j).
  bool betaPerValue = false;
  /// Output scale; FLA's default is K^-0.5, the reference has no default
  /// opinion and uses what it is given.
  double scale = 1.0;
  /// Empty: N = B independent sequences of T tokens. Otherwise varlen:
  /// N + 1 offsets, cuSeqlens[0] = 0, non-decreasing, cuSeqlens[N] = T,
  /// B = 1. Sequence n is tokens [cuSeqlens[n], cuSeqlens[n+1]) and has its
  /// own state. Zero-length sequences are allowed (final = initial).
  std::vector<int64_t> cuSeqlens;
};

/// The data of a call (fp64). Shapes (N = numSequences(problem)):
///   q, k          [B, T, H, K]
///   v             [B, T, HV, V]
///   g             Gated: [B, T, HV]; Kda: [B, T, HV, K]; Delta: empty
///                 (holds log g, alpha or raw a per Problem::gate)
///   beta          [B, T, HV]   (beta or logits per Problem::beta);
///                 [B, T, HV, V] with Problem::betaPerValue
///   gv            [B, T, HV, V] log decays per value column (FLA's gv:
///                 S[:, j] *= e^gv_j after the gate's decay), or empty
///   aLog          [HV]         GateForm::Raw only, else empty
///   dtBias        Gated: [HV], Kda: [HV * K] (per channel); Raw only
///   initialState  [N, HV, K, V] (Kv) or [N, HV, V, K] (Vk); empty = zeros
struct Inputs {
  std::vector<double> q, k, v, g, beta, aLog, dtBias, initialState, gv;
};

/// What a call produces.
///   o           [B, T, HV, V]
///   finalState  [N, HV, K, V] or [N, HV, V, K] per Problem::layout
///   stepStates  the state after every token, [B, T, HV, K, V] (or
///               [B, T, HV, V, K]); with varlen B = 1, i.e. [T_total, HV, ...].
///               Filled only when run() is asked for it, else left empty.
struct Outputs {
  std::vector<double> o, finalState, stepStates;
};

/// Element counts every tensor of `p` must have (0 where the tensor is absent,
/// e.g. g for Rule::Delta, aLog unless GateForm::Raw). `state` is the size of
/// finalState and of initialState when one is given; `stepStates` of the
/// per-step states. Handy for allocating device copies.
struct Sizes {
  size_t q, k, v, g, beta, aLog, dtBias, state, o, stepStates;
  /// gv when given ([B, T, HV, V]).
  size_t gv;
};
Sizes sizesOf(const Problem &p);

/// Number of independent sequences: cuSeqlens.size() - 1 with varlen, else B.
int64_t numSequences(const Problem &p);

/// cuSeqlens for the given sequence lengths: {0, l0, l0 + l1, ...}.
std::vector<int64_t> cuSeqlensFromLengths(const std::vector<int64_t> &lengths);

/// Checks `p` and the sizes of `in` without computing anything. Returns an
/// empty string when the call is valid, else a message that starts with the
/// name of the offending argument, e.g. "q: has 15 elements, expected 16 ...",
/// "HV: 6 is not a multiple of H = 4", "gate: Linear is not allowed for rule
/// kda ...", "cuSeqlens: ...".
std::string validate(const Problem &p, const Inputs &in);

/// Runs the recurrence. Returns "" on success, else validate()'s message (and
/// leaves `out` untouched). On success `out.o` and `out.finalState` are
/// resized and filled; `out.stepStates` is filled when `wantStepStates`, and
/// cleared otherwise.
std::string run(const Problem &p, const Inputs &in, Outputs &out,
                bool wantStepStates = false);

/// The same call as run() computed in `segments` pieces the way context
/// parallelism splits a sequence (docs/context-parallelism.md): each piece
/// of every sequence is run from a zero state (its outputs O0 and final
/// state b) and, on K value columns of zeros, from the identity (its
/// transfer M and per-token outputs oM); the pieces are then chained,
/// S_start(s + 1) = M_s S_start(s) + b_s, and each output corrected,
/// o_t = O0_t + S_start^T oM_t. Pieces split every sequence's tokens as
/// evenly as they go (any length, odd ones too; an empty piece is the
/// identity). What the GPU's segmented forms must match; equal to run()
/// up to fp64 rounding. Errors as run()'s, for segments < 1, and for gv or
/// betaPerValue: with them each value column has its own transition, so no
/// one K x K transfer exists (they are decode options in FLA).
///
/// With rankSlices, the pieces are those of context parallelism across
/// ranks instead (docs/context-parallelism.md, "Across GPUs"; FLA's
/// partition): the flattened B * T tokens in `segments` slices of equal
/// size (floor), a piece being a sequence's tokens within one slice, so
/// that a sequence may span several ranks or sit inside one; the chain is
/// then the ranks' fold.
std::string runSegmented(const Problem &p, const Inputs &in, int64_t segments,
                         Outputs &out, bool rankSlices = false);

/// ||got - ref||_2 / ||ref||_2, the error measure of every numeric test. When
/// ref is all zeros it returns ||got||_2 (so an exact zero still gives 0).
/// The vector forms return +inf when the sizes differ; a NaN in got gives
/// NaN. Both fail any `EXPECT_LT(err, tol)`.
double relativeError(const double *got, const double *ref, size_t n);
double relativeError(const float *got, const double *ref, size_t n);
double relativeError(const std::vector<double> &got,
                     const std::vector<double> &ref);
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &ref);

/// max_i |got_i - ref_i| (+inf on a size mismatch, NaN on a NaN).
double maxAbsError(const std::vector<double> &got,
                   const std::vector<double> &ref);

/// Converts a run of states (any leading dims, e.g. [N, HV] or [B, T, HV])
/// between the Kv ([K, V]) and Vk ([V, K]) layouts; `states.size()` must be a
/// multiple of K * V (else an empty vector is returned). from == to copies.
std::vector<double> convertStateLayout(const std::vector<double> &states,
                                       int64_t K, int64_t V, Layout from,
                                       Layout to);

/// Knobs of randomInputs(). The defaults give realistic, well-conditioned
/// data: unit-norm keys keep every (I - beta k k^T) a contraction for
/// beta in (0, 2), so errors do not grow with T.
struct RandomOptions {
  /// Log-space gates (Log, and Linear through alpha = exp(g)) are uniform in
  /// the open interval (gMin, gMax). Raw gates ignore this (see
  /// randomInputs()).
  double gMin = -1.0, gMax = 0.0;
  /// BetaForm::Given draws beta uniform in (betaMin, betaMax); the logit
  /// forms draw b ~ N(0, 1) * betaLogitStd.
  double betaMin = 0.0, betaMax = 1.0, betaLogitStd = 1.0;
  /// Draw an initial state N(0, initialStateStd^2) (else leave it empty).
  bool initialState = true;
  double initialStateStd = 1.0;
};

/// Deterministic random inputs for `p` (the same seed gives the same numbers
/// on every platform: a splitmix64 stream and Box-Muller, not <random>'s
/// implementation-defined distributions). Each tensor has its own stream
/// derived from (seed, tensor), so changing e.g. the gate form does not
/// change q, k or v.
///   q, k   N(0, 1); when !p.qkL2Norm each (token, head) vector is scaled to
///          unit norm (what the kernel would see after its own L2 norm).
///   v      N(0, 1).
///   g      Log: uniform (gMin, gMax); Linear: exp of that; Raw: a ~ N(0, 1)
///          with A_log = log(U[1, 16]) and dt_bias = softplus^-1(dt),
///          dt = exp(U[log 1e-3, log 1e-1]) (Mamba2 / Qwen3-Next init).
///   beta   Given: uniform (betaMin, betaMax); Sigmoid*: logits.
/// Sizes follow sizesOf(p); cuSeqlens is taken from p (only N matters).
Inputs randomInputs(const Problem &p, uint64_t seed,
                    const RandomOptions &opts = RandomOptions());

/// Lower-case names for messages and test names ("delta", "kv", "raw", ...).
const char *toString(Rule r);
const char *toString(Layout l);
const char *toString(GateForm g);
const char *toString(BetaForm b);

} // namespace ref
} // namespace deltac

#endif // DELTAC_TESTS_REFERENCE_DELTAREFERENCE_H
