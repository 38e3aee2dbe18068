//===- RecurrenceVerifier.cpp - shapes of the sequence-level ops -*- C++ -*-===//
//
// delta.recurrence and delta.chunked_recurrence share one shape contract
// (see DeltaOps.td). Dynamic sizes are accepted; every pair of static sizes
// that names the same quantity (B, T, H, HV, K, V, N) must agree.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"

using namespace mlir;
using namespace mlir::delta;

namespace {
/// The operands both ops share, with the name each has in diagnostics.
struct SequenceOperands {
  Rule rule;
  StateLayout layout;
  Value q, k, v, g, beta, initialState, cuSeqlens, o, finalState;
  StringRef gName; // "g" or "gamma"
  /// delta.recurrence's per-value terms: gv, and whether beta may be
  /// [B, T, HV, V] (the chunked op has neither).
  Value gv = {};
  bool perValueTerms = false;
};

/// Collects static sizes of one quantity and reports the first mismatch.
class SizeChecker {
public:
  SizeChecker(Operation *op) : op(op) {}

  /// Records that `operand`'s axis `axis` holds quantity `what`.
  LogicalResult bind(StringRef what, StringRef operand, RankedTensorType type,
                     unsigned axis) {
    int64_t size = type.getDimSize(axis);
    if (ShapedType::isDynamic(size))
      return success();
    auto [it, inserted] = sizes.try_emplace(what, size, operand.str());
    if (inserted || it->second.first == size)
      return success();
    return op->emitOpError()
           << what << " differs between operands: '" << it->second.second
           << "' has " << it->second.first << ", '" << operand << "' has "
           << size;
  }

  std::optional<int64_t> get(StringRef what) const {
    auto it = sizes.find(what);
    if (it == sizes.end())
      return std::nullopt;
    return it->second.first;
  }

private:
  Operation *op;
  llvm::StringMap<std::pair<int64_t, std::string>> sizes;
};
} // namespace

static RankedTensorType tensorType(Value value) {
  return value ? cast<RankedTensorType>(value.getType()) : RankedTensorType();
}

static LogicalResult expectRank(Operation *op, StringRef name,
                                RankedTensorType type, int64_t rank,
                                StringRef shape) {
  if (type.getRank() != rank)
    return op->emitOpError() << "expects '" << name << "' of rank " << rank
                             << " " << shape << ", got " << type;
  return success();
}

static LogicalResult verifySequenceOperands(Operation *op,
                                            const SequenceOperands &s) {
  auto q = tensorType(s.q), k = tensorType(s.k), v = tensorType(s.v),
       g = tensorType(s.g), beta = tensorType(s.beta),
       s0 = tensorType(s.initialState), cu = tensorType(s.cuSeqlens),
       o = tensorType(s.o), sN = tensorType(s.finalState),
       gv = tensorType(s.gv);
  bool perChannel = s.rule == Rule::kda;
  // beta per value column ([B, T, HV, V], FLA's non-headwise beta) where
  // the op takes per-value terms.
  bool betaPerValue = s.perValueTerms && beta.getRank() == 4;

  if (failed(expectRank(op, "q", q, 4, "[B, T, H, K]")) ||
      failed(expectRank(op, "k", k, 4, "[B, T, H, K]")) ||
      failed(expectRank(op, "v", v, 4, "[B, T, HV, V]")) ||
      failed(expectRank(op, "beta", beta, betaPerValue ? 4 : 3,
                        s.perValueTerms ? "[B, T, HV] or [B, T, HV, V]"
                                        : "[B, T, HV]")) ||
      failed(expectRank(op, "o", o, 4, "[B, T, HV, V]")))
    return failure();
  StringRef stateShape =
      s.layout == StateLayout::kv ? "[N, HV, K, V]" : "[N, HV, V, K]";
  if (failed(expectRank(op, "final_state", sN, 4, stateShape)) ||
      (s0 && failed(expectRank(op, "initial_state", s0, 4, stateShape))))
    return failure();

  if (s.rule == Rule::delta && g)
    return op->emitOpError() << "rule 'delta' takes no '" << s.gName << "'";
  if (s.rule != Rule::delta && !g)
    return op->emitOpError() << "rule '" << stringifyRule(s.rule)
                             << "' needs '" << s.gName << "'";
  if (g && failed(expectRank(op, s.gName, g, perChannel ? 4 : 3,
                             perChannel ? "[B, T, HV, K]" : "[B, T, HV]")))
    return failure();
  if (cu && failed(expectRank(op, "cu_seqlens", cu, 1, "[N + 1]")))
    return failure();
  if (gv && failed(expectRank(op, "gv", gv, 4, "[B, T, HV, V]")))
    return failure();
  if (gv && !gv.getElementType().isF32())
    return op->emitOpError() << "expects 'gv' (log decays) of f32, got "
                             << gv.getElementType();

  if (q.getElementType() != k.getElementType())
    return op->emitOpError("expects 'q' and 'k' of one element type");
  if (v.getElementType() != o.getElementType())
    return op->emitOpError("expects 'v' and 'o' of one element type");
  if (s0 && s0 != sN)
    return op->emitOpError() << "expects the initial and final state of one "
                                "type, got "
                             << s0 << " and " << sN;

  SizeChecker sizes(op);
  unsigned kAxis = s.layout == StateLayout::kv ? 2 : 3;
  unsigned vAxis = s.layout == StateLayout::kv ? 3 : 2;
  struct Binding {
    StringRef what, operand;
    RankedTensorType type;
    unsigned axis;
  };
  SmallVector<Binding> bindings = {
      {"B", "q", q, 0},       {"T", "q", q, 1},       {"H", "q", q, 2},
      {"K", "q", q, 3},       {"B", "k", k, 0},       {"T", "k", k, 1},
      {"H", "k", k, 2},       {"K", "k", k, 3},       {"B", "v", v, 0},
      {"T", "v", v, 1},       {"HV", "v", v, 2},      {"V", "v", v, 3},
      {"B", "beta", beta, 0}, {"T", "beta", beta, 1}, {"HV", "beta", beta, 2},
      {"B", "o", o, 0},       {"T", "o", o, 1},       {"HV", "o", o, 2},
      {"V", "o", o, 3},       {"HV", "final_state", sN, 1},
      {"K", "final_state", sN, kAxis}, {"V", "final_state", sN, vAxis}};
  if (g) {
    bindings.push_back({"B", s.gName, g, 0});
    bindings.push_back({"T", s.gName, g, 1});
    bindings.push_back({"HV", s.gName, g, 2});
    if (perChannel)
      bindings.push_back({"K", s.gName, g, 3});
  }
  if (betaPerValue)
    bindings.push_back({"V", "beta", beta, 3});
  if (gv) {
    static constexpr StringLiteral kGvAxes[] = {"B", "T", "HV", "V"};
    for (auto [axis, what] : llvm::enumerate(kGvAxes))
      bindings.push_back({what, "gv", gv, unsigned(axis)});
  }
  if (s0) {
    bindings.push_back({"N", "initial_state", s0, 0});
    bindings.push_back({"HV", "initial_state", s0, 1});
  }
  bindings.push_back({"N", "final_state", sN, 0});
  for (const Binding &b : bindings)
    if (failed(sizes.bind(b.what, b.operand, b.type, b.axis)))
      return failure();

  std::optional<int64_t> h = sizes.get("H"), hv = sizes.get("HV");
  // Heads, K and V are never empty (the fuzzer found H = 0 dividing HV).
  for (StringRef what : {"H", "HV", "K", "V"})
    if (std::optional<int64_t> size = sizes.get(what); size && *size == 0)
      return op->emitOpError() << what << " must be positive, got 0";
  if (h && hv && *hv % *h != 0)
    return op->emitOpError() << "value heads HV = " << *hv
                             << " must be a multiple of the query heads H = "
                             << *h;
  std::optional<int64_t> batch = sizes.get("B"), n = sizes.get("N");
  if (cu) {
    if (batch && *batch != 1)
      return op->emitOpError() << "with 'cu_seqlens' the batch must be 1, "
                                  "got B = "
                               << *batch;
    int64_t entries = cu.getDimSize(0);
    if (!ShapedType::isDynamic(entries) && n && entries - 1 != *n)
      return op->emitOpError() << "'cu_seqlens' has " << entries
                               << " entries for N = " << *n
                               << " sequences; expected N + 1";
  } else if (batch && n && *batch != *n) {
    return op->emitOpError() << "without 'cu_seqlens' the state holds one "
                                "entry per batch row: N = "
                             << *n << " but B = " << *batch;
  }
  return success();
}

LogicalResult RecurrenceOp::verify() {
  if (std::optional<std::string> why = checkRuleGate(getRule(), getGate()))
    return emitOpError() << *why;
  bool raw = takesRawParams(getGate());
  if (raw && (!getALog() || !getDtBias()))
    return emitOpError() << "gate '" << stringifyGateForm(getGate())
                         << "' needs 'a_log' and 'dt_bias'";
  if (!raw && (getALog() || getDtBias()))
    return emitOpError() << "'a_log' and 'dt_bias' are only taken by the "
                            "raw gate forms";
  if (raw) {
    auto aLog = tensorType(getALog()), dtBias = tensorType(getDtBias());
    if (aLog.getRank() != 1 || dtBias.getRank() != 1)
      return emitOpError("expects 'a_log' [HV] and 'dt_bias' of rank 1");
  }
  if (getQkL2norm() && getL2normCall())
    return emitOpError("'l2norm' and 'l2norm = call' exclude each other");
  bool byCall = takesCallOptions(getGate(), getBetaForm(), getL2normCall());
  if (byCall && !getOptions())
    return emitOpError("'gate = call', 'beta = call' and 'l2norm = call' need "
                       "the call's 'options'");
  if (!byCall && getOptions())
    return emitOpError("'options' are only taken with 'gate = call', "
                       "'beta = call' or 'l2norm = call'");
  return verifySequenceOperands(
      *this, {getRule(), getLayout(), getQ(), getK(), getV(), getG(),
              getBeta(), getInitialState(), getCuSeqlens(), getO(),
              getFinalState(), "g", getGv(), /*perValueTerms=*/true});
}

LogicalResult ChunkedRecurrenceOp::verify() {
  int64_t chunk = getChunkSize();
  if (!isSupportedChunkSize(chunk))
    return emitOpError() << "chunk size " << chunk
                         << " is not supported; use 16, 32 or 64";
  return verifySequenceOperands(
      *this, {getRule(), getLayout(), getQ(), getK(), getV(), getGamma(),
              getBeta(), getInitialState(), getCuSeqlens(), getO(),
              getFinalState(), "gamma"});
}
