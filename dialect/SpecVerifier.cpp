//===- SpecVerifier.cpp - every rule a delta.spec must satisfy --*- C++ -*-===//
//
// One diagnostic per inconsistency, at the spec's location. docs/verifier.md
// lists each rule beside the lit test that exercises it.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::delta;

/// Largest T one decode call may advance: speculative decoding verifies a
/// handful of draft tokens; beyond this prefill is the right entry.
static constexpr int64_t kMaxDecodeT = 64;

bool SpecOp::hasEntry(EntryKind kind) {
  return llvm::any_of(getEntries(), [&](Attribute attr) {
    return cast<EntryKindAttr>(attr).getValue() == kind;
  });
}

SmallVector<std::pair<int64_t, int64_t>> SpecOp::getDimPairs() {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (Attribute attr : getDims()) {
    auto dims = cast<DimsAttr>(attr);
    pairs.emplace_back(dims.getK(), dims.getV());
  }
  return pairs;
}

static LogicalResult verifyHeadDim(SpecOp op, StringRef what, int64_t dim) {
  if (dim < 16 || dim > 256 || dim % 16 != 0)
    return op.emitOpError() << what << " = " << dim
                            << " must be a multiple of 16 in [16, 256]";
  return success();
}

/// Two specs that agree on everything but their name and entry points and
/// share a (K, V) pair would emit the same kernels twice.
static bool sameConfiguration(SpecOp a, SpecOp b) {
  return a.getRule() == b.getRule() && a.getIoType() == b.getIoType() &&
         a.getStateType() == b.getStateType() &&
         a.getLayout() == b.getLayout() && a.getGate() == b.getGate() &&
         a.getBeta() == b.getBeta() && a.getQkL2norm() == b.getQkL2norm() &&
         a.getChunkSize() == b.getChunkSize();
}

static LogicalResult verifyNoDuplicateSibling(SpecOp op) {
  Operation *parent = op->getParentOp();
  if (!parent)
    return success();
  for (Operation &other : op->getBlock()->getOperations()) {
    if (&other == op.getOperation())
      break; // report on the later of the two specs
    auto earlier = dyn_cast<SpecOp>(other);
    if (!earlier || !sameConfiguration(op, earlier))
      continue;
    for (auto [k, v] : op.getDimPairs())
      if (llvm::is_contained(earlier.getDimPairs(), std::make_pair(k, v)))
        return op.emitOpError()
               << "duplicate specialization " << k << "x" << v
               << ": spec @" << earlier.getSymName()
               << " already emits it with the same options";
  }
  return success();
}

LogicalResult SpecOp::verify() {
  if (getDims().empty())
    return emitOpError("needs at least one (K, V) specialization");
  llvm::DenseSet<std::pair<int64_t, int64_t>> seen;
  for (auto [k, v] : getDimPairs()) {
    if (failed(verifyHeadDim(*this, "key dim K", k)) ||
        failed(verifyHeadDim(*this, "value dim V", v)))
      return failure();
    if (!seen.insert({k, v}).second)
      return emitOpError() << "duplicate specialization " << k << "x" << v;
  }

  Type io = getIoType();
  if (!io.isBF16() && !io.isF16() && !io.isF32())
    return emitOpError() << "io type must be bf16, f16 or f32, got " << io;
  Type state = getStateType();
  if (!state.isF32() && !state.isBF16())
    return emitOpError() << "state type must be f32 or bf16, got " << state;

  if (std::optional<std::string> why = checkRuleGate(getRule(), getGate()))
    return emitOpError() << *why;

  int64_t chunk = getChunkSize();
  if (!isSupportedChunkSize(chunk))
    return emitOpError() << "chunk size " << chunk
                         << " is not supported; use 16, 32 or 64";

  if (getEntries().empty())
    return emitOpError("needs at least one entry point (prefill, decode)");
  llvm::DenseSet<unsigned> entrySeen;
  for (Attribute attr : getEntries()) {
    EntryKind kind = cast<EntryKindAttr>(attr).getValue();
    if (!entrySeen.insert(static_cast<unsigned>(kind)).second)
      return emitOpError() << "entry point '" << stringifyEntryKind(kind)
                           << "' is listed twice";
  }
  std::optional<int64_t> maxT = getMaxT();
  if (hasEntry(EntryKind::decode) && !maxT)
    return emitOpError("entry point 'decode' needs max_t, the largest number "
                       "of tokens one decode call advances");
  if (!hasEntry(EntryKind::decode) && maxT)
    return emitOpError("max_t is only meaningful with the 'decode' entry "
                       "point");
  if (maxT && (*maxT < 1 || *maxT > kMaxDecodeT))
    return emitOpError() << "max_t = " << *maxT << " must lie in [1, "
                         << kMaxDecodeT << "]";

  return verifyNoDuplicateSibling(*this);
}
