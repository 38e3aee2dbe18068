//===- DeltaReference.cpp - fp64 token-by-token delta-rule reference -----===//
//
// See DeltaReference.h. Written for clarity, not speed: the state of one
// (sequence, value head) lives in a [K, V] buffer (the Kv layout) and is
// converted only where it is read or written, so the update itself is the
// textbook formula in one layout.
//
//===----------------------------------------------------------------------===//
#include "tests/reference/DeltaReference.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <sstream>

namespace deltac {
namespace ref {

const char *toString(Rule r) {
  switch (r) {
  case Rule::Delta:
    return "delta";
  case Rule::Gated:
    return "gated";
  case Rule::Kda:
    return "kda";
  }
  return "?";
}

const char *toString(Layout l) {
  switch (l) {
  case Layout::Kv:
    return "kv";
  case Layout::Vk:
    return "vk";
  }
  return "?";
}

const char *toString(GateForm g) {
  switch (g) {
  case GateForm::None:
    return "none";
  case GateForm::Log:
    return "log";
  case GateForm::Linear:
    return "linear";
  case GateForm::Raw:
    return "raw";
  }
  return "?";
}

const char *toString(BetaForm b) {
  switch (b) {
  case BetaForm::Given:
    return "given";
  case BetaForm::Sigmoid:
    return "sigmoid";
  case BetaForm::Sigmoid2:
    return "sigmoid2";
  }
  return "?";
}

int64_t numSequences(const Problem &p) {
  if (p.cuSeqlens.empty())
    return p.B;
  return static_cast<int64_t>(p.cuSeqlens.size()) - 1;
}

std::vector<int64_t> cuSeqlensFromLengths(const std::vector<int64_t> &lengths) {
  std::vector<int64_t> cu(1, 0);
  for (int64_t l : lengths)
    cu.push_back(cu.back() + l);
  return cu;
}

namespace {

/// Product of dims as size_t, negative dims counting as 0 (validate() has
/// checked overflow before any size is used).
size_t prod(std::initializer_list<int64_t> dims) {
  size_t n = 1;
  for (int64_t d : dims)
    n *= d > 0 ? static_cast<size_t>(d) : 0;
  return n;
}

/// True when the product of the (positive) dims overflows int64_t's range
/// with a margin, so that every later size computation is exact.
bool productOverflows(std::initializer_list<int64_t> dims) {
  const int64_t limit = int64_t(1) << 52;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d > 0 && n > limit / d)
      return true;
    n *= d > 0 ? d : 1;
  }
  return false;
}

bool gateAllowed(Rule r, GateForm g) {
  switch (r) {
  case Rule::Delta:
    return g == GateForm::None;
  case Rule::Gated:
    return g == GateForm::Log || g == GateForm::Linear || g == GateForm::Raw;
  case Rule::Kda:
    return g == GateForm::Log || g == GateForm::Raw;
  }
  return false;
}

const char *allowedGates(Rule r) {
  switch (r) {
  case Rule::Delta:
    return "none";
  case Rule::Gated:
    return "log, linear or raw";
  case Rule::Kda:
    return "log or raw";
  }
  return "?";
}

std::string checkSize(const char *name, size_t got, size_t want,
                      const char *shape) {
  if (got == want)
    return "";
  std::ostringstream os;
  os << name << ": has " << got << " elements, expected " << want << " ("
     << shape << ")";
  return os.str();
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Index of element (i, j) of a [K, V] state stored in `layout`.
inline size_t stateIndex(Layout layout, int64_t K, int64_t V, int64_t i,
                         int64_t j) {
  return layout == Layout::Kv ? static_cast<size_t>(i * V + j)
                              : static_cast<size_t>(j * K + i);
}

/// splitmix64: tiny, fast, and the same stream on every platform.
struct Rng {
  uint64_t state;
  Rng(uint64_t seed, uint64_t stream) {
    state = seed;
    state = next() ^ (stream * 0xD1B54A32D192ED03ull);
  }
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in the open interval (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller, cosine branch only).
  double normal() {
    const double kTwoPi = 6.283185307179586476925286766559;
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  }
};

/// Stream ids of randomInputs(); fixed so that adding a tensor never shifts
/// the others.
enum Stream : uint64_t {
  kStreamQ = 1,
  kStreamK,
  kStreamV,
  kStreamG,
  kStreamBeta,
  kStreamALog,
  kStreamDtBias,
  kStreamState,
};

void normalRows(std::vector<double> &x, size_t n, Rng &rng) {
  x.resize(n);
  for (double &e : x)
    e = rng.normal();
}

void unitRows(std::vector<double> &x, int64_t dim) {
  for (size_t r = 0; r + static_cast<size_t>(dim) <= x.size(); r += dim) {
    double ss = 0;
    for (int64_t c = 0; c < dim; ++c)
      ss += x[r + c] * x[r + c];
    double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;
    for (int64_t c = 0; c < dim; ++c)
      x[r + c] *= inv;
  }
}

} // namespace

Sizes sizesOf(const Problem &p) {
  Sizes s{};
  const int64_t N = numSequences(p) > 0 ? numSequences(p) : 0;
  const int64_t B = p.B, T = p.T, H = p.H, HV = p.HV, K = p.K, V = p.V;
  s.q = s.k = prod({B, T, H, K});
  s.v = prod({B, T, HV, V});
  s.o = s.v;
  s.beta = p.betaPerValue ? prod({B, T, HV, V}) : prod({B, T, HV});
  s.gv = prod({B, T, HV, V});
  s.g = p.rule == Rule::Delta ? 0
        : p.rule == Rule::Kda ? prod({B, T, HV, K})
                              : prod({B, T, HV});
  const bool raw = p.gate == GateForm::Raw && p.rule != Rule::Delta;
  s.aLog = raw ? static_cast<size_t>(HV) : 0;
  s.dtBias = !raw ? 0 : p.rule == Rule::Kda ? prod({HV, K}) : prod({HV});
  s.state = prod({N, HV, K, V});
  s.stepStates = prod({B, T, HV, K, V});
  return s;
}

std::string validate(const Problem &p, const Inputs &in) {
  std::ostringstream os;
  // Dimensions first: every size below depends on them.
  struct Dim {
    const char *name;
    int64_t value, min;
  } dims[] = {{"B", p.B, 1},  {"T", p.T, 0}, {"H", p.H, 1},
              {"HV", p.HV, 1}, {"K", p.K, 1}, {"V", p.V, 1}};
  for (const Dim &d : dims) {
    if (d.value < d.min) {
      os << d.name << ": must be >= " << d.min << " (got " << d.value << ")";
      return os.str();
    }
  }
  if (productOverflows({p.B, p.T, p.HV, p.K, p.V}) ||
      productOverflows({p.B, p.T, p.H, p.K})) {
    os << "T: the tensors of B=" << p.B << " T=" << p.T << " H=" << p.H
       << " HV=" << p.HV << " K=" << p.K << " V=" << p.V
       << " are too large to index";
    return os.str();
  }
  if (p.HV % p.H != 0) {
    os << "HV: " << p.HV << " is not a multiple of H = " << p.H;
    return os.str();
  }
  if (!gateAllowed(p.rule, p.gate)) {
    os << "gate: " << toString(p.gate) << " is not allowed for rule "
       << toString(p.rule) << " (allowed: " << allowedGates(p.rule) << ")";
    return os.str();
  }
  if (p.beta != BetaForm::Given && p.beta != BetaForm::Sigmoid &&
      p.beta != BetaForm::Sigmoid2)
    return "beta: unknown beta form";
  if (p.layout != Layout::Kv && p.layout != Layout::Vk)
    return "layout: unknown state layout";
  if (!std::isfinite(p.scale)) {
    os << "scale: must be finite (got " << p.scale << ")";
    return os.str();
  }

  // Varlen offsets.
  if (!p.cuSeqlens.empty()) {
    const std::vector<int64_t> &cu = p.cuSeqlens;
    if (p.B != 1) {
      os << "B: must be 1 with cuSeqlens (got " << p.B << ")";
      return os.str();
    }
    if (cu.size() < 2) {
      os << "cuSeqlens: needs N + 1 >= 2 offsets (got " << cu.size() << ")";
      return os.str();
    }
    if (cu.front() != 0) {
      os << "cuSeqlens: cuSeqlens[0] must be 0 (got " << cu.front() << ")";
      return os.str();
    }
    for (size_t i = 1; i < cu.size(); ++i) {
      if (cu[i] < cu[i - 1]) {
        os << "cuSeqlens: not non-decreasing at " << i << " (" << cu[i - 1]
           << " then " << cu[i] << ")";
        return os.str();
      }
    }
    if (cu.back() != p.T) {
      os << "cuSeqlens: last offset " << cu.back() << " must equal T = "
         << p.T;
      return os.str();
    }
  }

  // Tensor sizes.
  const Sizes s = sizesOf(p);
  std::string err;
  if (!(err = checkSize("q", in.q.size(), s.q, "[B, T, H, K]")).empty() ||
      !(err = checkSize("k", in.k.size(), s.k, "[B, T, H, K]")).empty() ||
      !(err = checkSize("v", in.v.size(), s.v, "[B, T, HV, V]")).empty() ||
      !(err = checkSize("g", in.g.size(), s.g,
                        p.rule == Rule::Delta ? "absent for rule delta"
                        : p.rule == Rule::Kda ? "[B, T, HV, K]"
                                              : "[B, T, HV]"))
           .empty() ||
      !(err = checkSize("beta", in.beta.size(), s.beta,
                        p.betaPerValue ? "[B, T, HV, V]" : "[B, T, HV]"))
           .empty() ||
      !(err = checkSize("aLog", in.aLog.size(), s.aLog,
                        s.aLog ? "[HV]" : "only with gate form raw"))
           .empty() ||
      !(err = checkSize("dtBias", in.dtBias.size(), s.dtBias,
                        !s.dtBias              ? "only with gate form raw"
                        : p.rule == Rule::Kda ? "[HV * K]"
                                               : "[HV]"))
           .empty())
    return err;
  if (!in.gv.empty() &&
      !(err = checkSize("gv", in.gv.size(), s.gv, "[B, T, HV, V] or empty"))
           .empty())
    return err;
  if (!in.initialState.empty())
    return checkSize("initialState", in.initialState.size(), s.state,
                     p.layout == Layout::Kv ? "[N, HV, K, V] or empty"
                                            : "[N, HV, V, K] or empty");
  return "";
}

std::string run(const Problem &p, const Inputs &in, Outputs &out,
                bool wantStepStates) {
  std::string err = validate(p, in);
  if (!err.empty())
    return err;

  const int64_t N = numSequences(p);
  const int64_t T = p.T, H = p.H, HV = p.HV, K = p.K, V = p.V;
  const int64_t groups = HV / H;
  const size_t KV = prod({K, V});
  const Sizes sizes = sizesOf(p);

  out.o.assign(sizes.o, 0.0);
  out.finalState.assign(sizes.state, 0.0);
  if (wantStepStates)
    out.stepStates.assign(sizes.stepStates, 0.0);
  else
    out.stepStates.clear();

  std::vector<double> S(KV), q(K), k(K), decay(K), kS(V);

  for (int64_t n = 0; n < N; ++n) {
    // Tokens are numbered over the flattened [B, T] axis.
    const int64_t begin = p.cuSeqlens.empty() ? n * T : p.cuSeqlens[n];
    const int64_t end = p.cuSeqlens.empty() ? (n + 1) * T : p.cuSeqlens[n + 1];
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / groups;
      const size_t stateBase = static_cast<size_t>(n * HV + hv) * KV;

      // S lives in Kv here whatever the io layout.
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          S[i * V + j] = in.initialState.empty()
                             ? 0.0
                             : in.initialState[stateBase +
                                               stateIndex(p.layout, K, V, i, j)];

      for (int64_t t = begin; t < end; ++t) {
        const size_t qkBase = static_cast<size_t>(t * H + h) * K;
        const size_t head = static_cast<size_t>(t * HV + hv);
        for (int64_t i = 0; i < K; ++i) {
          q[i] = in.q[qkBase + i];
          k[i] = in.k[qkBase + i];
        }
        if (p.qkL2Norm) {
          double qq = 0, kk = 0;
          for (int64_t i = 0; i < K; ++i) {
            qq += q[i] * q[i];
            kk += k[i] * k[i];
          }
          const double qInv = 1.0 / std::sqrt(qq + 1e-6);
          const double kInv = 1.0 / std::sqrt(kk + 1e-6);
          for (int64_t i = 0; i < K; ++i) {
            q[i] *= qInv;
            k[i] *= kInv;
          }
        }

        // beta of value column j (one per head unless betaPerValue).
        auto betaOf = [&](int64_t j) {
          double x = in.beta[p.betaPerValue ? head * V + j : head];
          if (p.beta == BetaForm::Sigmoid)
            return sigmoid(x);
          if (p.beta == BetaForm::Sigmoid2)
            return 2.0 * sigmoid(x);
          return x;
        };

        // Per-row decay of S (the K axis); all rows alike unless kda.
        switch (p.rule) {
        case Rule::Delta:
          for (int64_t i = 0; i < K; ++i)
            decay[i] = 1.0;
          break;
        case Rule::Gated: {
          const double x = in.g[head];
          double d = 1.0;
          if (p.gate == GateForm::Log)
            d = std::exp(x);
          else if (p.gate == GateForm::Linear)
            d = x; // alpha itself: log-space g = log(alpha).
          else
            d = std::exp(-std::exp(in.aLog[hv]) * softplus(x + in.dtBias[hv]));
          for (int64_t i = 0; i < K; ++i)
            decay[i] = d;
          break;
        }
        case Rule::Kda:
          for (int64_t i = 0; i < K; ++i) {
            const double x = in.g[head * K + i];
            decay[i] = p.gate == GateForm::Log
                           ? std::exp(x)
                           : std::exp(-std::exp(in.aLog[hv]) *
                                      softplus(x + in.dtBias[hv * K + i]));
          }
          break;
        }

        // S = Diag(decay) S, and each value column by e^gv_j (FLA's gv).
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j)
            S[i * V + j] *= decay[i];
        if (!in.gv.empty())
          for (int64_t i = 0; i < K; ++i)
            for (int64_t j = 0; j < V; ++j)
              S[i * V + j] *= std::exp(in.gv[head * V + j]);
        // kS = S^T k.
        for (int64_t j = 0; j < V; ++j)
          kS[j] = 0.0;
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j)
            kS[j] += k[i] * S[i * V + j];
        // u = beta (v - S^T k);  S += k u^T.
        const double *v = &in.v[head * V];
        for (int64_t j = 0; j < V; ++j) {
          const double u = betaOf(j) * (v[j] - kS[j]);
          for (int64_t i = 0; i < K; ++i)
            S[i * V + j] += k[i] * u;
        }
        // o = scale S^T q, from the updated state.
        double *o = &out.o[head * V];
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < K; ++i)
            acc += q[i] * S[i * V + j];
          o[j] = p.scale * acc;
        }
        if (wantStepStates) {
          double *dst = &out.stepStates[head * KV];
          for (int64_t i = 0; i < K; ++i)
            for (int64_t j = 0; j < V; ++j)
              dst[stateIndex(p.layout, K, V, i, j)] = S[i * V + j];
        }
      }

      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          out.finalState[stateBase + stateIndex(p.layout, K, V, i, j)] =
              S[i * V + j];
    }
  }
  return "";
}

namespace {
template <typename T>
double relErr(const T *got, const double *ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  // NaN in got propagates through num; keep it visible.
  if (den == 0.0)
    return std::sqrt(num);
  return std::sqrt(num) / std::sqrt(den);
}
} // namespace

std::string runSegmented(const Problem &p, const Inputs &in, int64_t segments,
                         Outputs &out, bool rankSlices) {
  if (segments < 1)
    return "segments: must be >= 1 (got " + std::to_string(segments) + ")";
  if (p.betaPerValue || !in.gv.empty())
    return "segments: gv and a per-value beta give each value column its own "
           "transition (no K x K transfer)";
  std::string err = validate(p, in);
  if (!err.empty())
    return err;
  const int64_t N = numSequences(p), T = p.T, H = p.H, HV = p.HV, K = p.K,
                V = p.V;
  const Sizes sizes = sizesOf(p);
  const size_t KV = prod({K, V}), KK = prod({K, K});
  // The chain runs in the Kv layout; the io layout is converted at the ends.
  std::vector<double> start =
      in.initialState.empty()
          ? std::vector<double>(sizes.state, 0.0)
          : convertStateLayout(in.initialState, K, V, p.layout, Layout::Kv);
  out.o.assign(sizes.o, 0.0);
  out.finalState.assign(sizes.state, 0.0);
  out.stepStates.clear();
  const int64_t gPerToken =
      p.rule == Rule::Delta ? 0 : p.rule == Rule::Kda ? HV * K : HV;
  // Tokens [t0, t1) of the flattened [B, T] axis as a one-sequence call on
  // `cols` value columns: v as given (cols = V) or zeros (cols = K).
  auto piece = [&](int64_t t0, int64_t t1, int64_t cols, bool zeroV,
                   const std::vector<double> &init, Outputs &res) {
    Problem q = p;
    q.B = 1;
    q.T = t1 - t0;
    q.V = cols;
    q.layout = Layout::Kv;
    q.cuSeqlens.clear();
    Inputs x;
    auto slice = [&](const std::vector<double> &src, int64_t perToken) {
      return std::vector<double>(src.begin() + t0 * perToken,
                                 src.begin() + t1 * perToken);
    };
    x.q = slice(in.q, H * K);
    x.k = slice(in.k, H * K);
    x.v = zeroV ? std::vector<double>(prod({q.T, HV, cols}), 0.0)
                : slice(in.v, HV * V);
    if (gPerToken)
      x.g = slice(in.g, gPerToken);
    x.beta = slice(in.beta, HV);
    x.aLog = in.aLog;
    x.dtBias = in.dtBias;
    x.initialState = init;
    return run(q, x, res);
  };
  std::vector<double> identity(prod({HV, K, K}), 0.0);
  for (int64_t hv = 0; hv < HV; ++hv)
    for (int64_t i = 0; i < K; ++i)
      identity[hv * KK + i * K + i] = 1.0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t begin = p.cuSeqlens.empty() ? n * T : p.cuSeqlens[n];
    const int64_t end = p.cuSeqlens.empty() ? (n + 1) * T : p.cuSeqlens[n + 1];
    // This sequence's state entering the piece, [HV, K, V] (Kv).
    std::vector<double> S(start.begin() + n * HV * KV,
                          start.begin() + (n + 1) * HV * KV);
    for (int64_t s = 0; s < segments; ++s) {
      const int64_t total = p.B * T;
      const int64_t t0 = rankSlices ? std::max(begin, total * s / segments)
                                    : begin + (end - begin) * s / segments;
      const int64_t t1 = rankSlices ? std::min(end, total * (s + 1) / segments)
                                    : begin + (end - begin) * (s + 1) / segments;
      if (t0 >= t1)
        continue;
      Outputs zero, transfer;
      if (std::string e = piece(t0, t1, V, false, {}, zero); !e.empty())
        return e;
      if (std::string e = piece(t0, t1, K, true, identity, transfer); !e.empty())
        return e;
      // o_t = O0_t + S^T oM_t, per value head.
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t hv = 0; hv < HV; ++hv)
          for (int64_t j = 0; j < V; ++j) {
            double acc = zero.o[((t - t0) * HV + hv) * V + j];
            for (int64_t i = 0; i < K; ++i)
              acc += S[hv * KV + i * V + j] *
                     transfer.o[((t - t0) * HV + hv) * K + i];
            out.o[(t * HV + hv) * V + j] = acc;
          }
      // S <- M S + b.
      std::vector<double> next(zero.finalState);
      for (int64_t hv = 0; hv < HV; ++hv)
        for (int64_t i = 0; i < K; ++i)
          for (int64_t m = 0; m < K; ++m) {
            const double mim = transfer.finalState[hv * KK + i * K + m];
            for (int64_t j = 0; j < V; ++j)
              next[hv * KV + i * V + j] += mim * S[hv * KV + m * V + j];
          }
      S = std::move(next);
    }
    std::copy(S.begin(), S.end(), out.finalState.begin() + n * HV * KV);
  }
  out.finalState = convertStateLayout(out.finalState, K, V, Layout::Kv, p.layout);
  return "";
}

double relativeError(const double *got, const double *ref, size_t n) {
  return relErr(got, ref, n);
}
double relativeError(const float *got, const double *ref, size_t n) {
  return relErr(got, ref, n);
}
double relativeError(const std::vector<double> &got,
                     const std::vector<double> &ref) {
  if (got.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  return relErr(got.data(), ref.data(), ref.size());
}
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &ref) {
  if (got.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  return relErr(got.data(), ref.data(), ref.size());
}

double maxAbsError(const std::vector<double> &got,
                   const std::vector<double> &ref) {
  if (got.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  double m = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(got[i] - ref[i]);
    if (std::isnan(d))
      return d;
    if (d > m)
      m = d;
  }
  return m;
}

std::vector<double> convertStateLayout(const std::vector<double> &states,
                                       int64_t K, int64_t V, Layout from,
                                       Layout to) {
  if (K <= 0 || V <= 0)
    return {};
  const size_t KV = prod({K, V});
  if (states.size() % KV != 0)
    return {};
  if (from == to)
    return states;
  std::vector<double> outStates(states.size());
  for (size_t base = 0; base < states.size(); base += KV)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j)
        outStates[base + stateIndex(to, K, V, i, j)] =
            states[base + stateIndex(from, K, V, i, j)];
  return outStates;
}

Inputs randomInputs(const Problem &p, uint64_t seed, const RandomOptions &opts) {
  Inputs in;
  const Sizes s = sizesOf(p);
  {
    Rng rng(seed, kStreamQ);
    normalRows(in.q, s.q, rng);
  }
  {
    Rng rng(seed, kStreamK);
    normalRows(in.k, s.k, rng);
  }
  if (!p.qkL2Norm) {
    unitRows(in.q, p.K);
    unitRows(in.k, p.K);
  }
  {
    Rng rng(seed, kStreamV);
    normalRows(in.v, s.v, rng);
  }
  {
    Rng rng(seed, kStreamG);
    in.g.resize(s.g);
    for (double &x : in.g) {
      if (p.gate == GateForm::Raw)
        x = rng.normal();
      else if (p.gate == GateForm::Linear)
        x = std::exp(rng.uniform(opts.gMin, opts.gMax));
      else
        x = rng.uniform(opts.gMin, opts.gMax);
    }
  }
  {
    Rng rng(seed, kStreamBeta);
    in.beta.resize(s.beta);
    for (double &x : in.beta)
      x = p.beta == BetaForm::Given ? rng.uniform(opts.betaMin, opts.betaMax)
                                    : opts.betaLogitStd * rng.normal();
  }
  {
    // A = exp(A_log) in [1, 16], as Mamba2 / Qwen3-Next initialise it.
    Rng rng(seed, kStreamALog);
    in.aLog.resize(s.aLog);
    for (double &x : in.aLog)
      x = std::log(rng.uniform(1.0, 16.0));
  }
  {
    // dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 1e-1].
    Rng rng(seed, kStreamDtBias);
    in.dtBias.resize(s.dtBias);
    for (double &x : in.dtBias) {
      const double dt = std::exp(rng.uniform(std::log(1e-3), std::log(1e-1)));
      x = dt + std::log(-std::expm1(-dt));
    }
  }
  if (opts.initialState) {
    Rng rng(seed, kStreamState);
    normalRows(in.initialState, s.state, rng);
    for (double &x : in.initialState)
      x *= opts.initialStateStd;
  }
  return in;
}

} // namespace ref
} // namespace deltac
