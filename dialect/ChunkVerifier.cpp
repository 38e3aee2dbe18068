//===- ChunkVerifier.cpp - shape rules of the chunk-level ops ---*- C++ -*-===//
//
// Chunk-level ops carry static shapes: C rows (16, 32 or 64), K key columns,
// V value columns, a [K, V] state. Each verifier names the operand whose
// shape breaks the rule, so a hand-written or mis-lowered chunk IR fails at
// the op that is wrong rather than in a later lowering.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"

using namespace mlir;
using namespace mlir::delta;

namespace {
/// Checks operand shapes of one op against named dimensions, binding each
/// name at its first use.
class ChunkShapes {
public:
  explicit ChunkShapes(Operation *op) : op(op) {}

  /// `value` must be a static tensor of the given dims (names or numbers).
  LogicalResult expect(StringRef what, Value value,
                       ArrayRef<StringRef> dims) {
    auto type = cast<RankedTensorType>(value.getType());
    if (!type.hasStaticShape())
      return op->emitOpError() << "expects a static shape for '" << what
                               << "', got " << type;
    if (type.getRank() != static_cast<int64_t>(dims.size()))
      return op->emitOpError() << "expects '" << what << "' of rank "
                               << dims.size() << ", got " << type;
    for (auto [i, name] : llvm::enumerate(dims)) {
      int64_t size = type.getDimSize(i);
      auto [it, inserted] = bound.try_emplace(name, size);
      if (!inserted && it->second != size)
        return op->emitOpError()
               << "'" << what << "' dim " << i << " is " << size
               << " but " << name << " is " << it->second << " elsewhere";
    }
    if (bound.count("C") && !isSupportedChunkSize(bound.lookup("C")))
      return op->emitOpError() << "chunk of " << bound.lookup("C")
                               << " rows is not supported; use 16, 32 or 64";
    return success();
  }

  /// A decay operand: absent, [C] (gated) or [C, K] (kda).
  LogicalResult expectGamma(Value gamma) {
    if (!gamma)
      return success();
    auto type = cast<RankedTensorType>(gamma.getType());
    if (type.getRank() == 1)
      return expect("gamma", gamma, {"C"});
    return expect("gamma", gamma, {"C", "K"});
  }

private:
  Operation *op;
  llvm::StringMap<int64_t> bound;
};

/// Per-token tensors are [B, T, Hx] or [B, T, Hx, D]; their chunk is [C] or
/// [C, D].
LogicalResult verifyTokenChunk(Operation *op, RankedTensorType tokens,
                               RankedTensorType chunk) {
  if (tokens.getRank() != 3 && tokens.getRank() != 4)
    return op->emitOpError() << "expects a per-token tensor [B, T, H] or "
                                "[B, T, H, D], got "
                             << tokens;
  if (chunk.getRank() != tokens.getRank() - 2 || !chunk.hasStaticShape())
    return op->emitOpError() << "expects a static chunk of rank "
                             << tokens.getRank() - 2 << ", got " << chunk;
  if (!isSupportedChunkSize(chunk.getDimSize(0)))
    return op->emitOpError() << "chunk of " << chunk.getDimSize(0)
                             << " rows is not supported; use 16, 32 or 64";
  if (tokens.getRank() == 4 && tokens.getDimSize(3) != chunk.getDimSize(1))
    return op->emitOpError() << "chunk row of " << chunk.getDimSize(1)
                             << " elements does not match the tensor's "
                             << tokens.getDimSize(3);
  return success();
}

/// State tensors are [N, HV, K, V] (kv) or [N, HV, V, K] (vk); the chunk
/// level always holds [K, V].
LogicalResult verifyStatePair(Operation *op, RankedTensorType pool,
                              RankedTensorType state, StateLayout layout) {
  if (pool.getRank() != 4)
    return op->emitOpError() << "expects a state tensor of rank 4, got "
                             << pool;
  if (state.getRank() != 2 || !state.hasStaticShape())
    return op->emitOpError() << "expects a static [K, V] state, got "
                             << state;
  int64_t k = state.getDimSize(0), v = state.getDimSize(1);
  bool vk = layout == StateLayout::vk;
  if (pool.getDimSize(2) != (vk ? v : k) || pool.getDimSize(3) != (vk ? k : v))
    return op->emitOpError()
           << "state tensor " << pool << " does not hold [K, V] = [" << k
           << ", " << v << "] states in layout " << stringifyStateLayout(layout);
  return success();
}
} // namespace

LogicalResult ChunkLoadOp::verify() {
  return verifyTokenChunk(*this, getSource().getType(), getChunk().getType());
}

LogicalResult ChunkStoreOp::verify() {
  return verifyTokenChunk(*this, getDest().getType(), getChunk().getType());
}

LogicalResult StateLoadOp::verify() {
  return verifyStatePair(*this, getSource().getType(), getState().getType(),
                         getLayout());
}

LogicalResult StateStoreOp::verify() {
  return verifyStatePair(*this, getDest().getType(), getState().getType(),
                         getLayout());
}

LogicalResult ChunkKktOp::verify() {
  ChunkShapes s(*this);
  return failure(failed(s.expect("k", getK(), {"C", "K"})) ||
                 failed(s.expect("beta", getBeta(), {"C"})) ||
                 failed(s.expectGamma(getGamma())) ||
                 failed(s.expect("result", getL(), {"C", "C"})));
}

LogicalResult SolveTrilOp::verify() {
  ChunkShapes s(*this);
  return s.expect("l", getL(), {"C", "C"});
}

LogicalResult ChunkWyOp::verify() {
  ChunkShapes s(*this);
  return failure(failed(s.expect("a", getA(), {"C", "C"})) ||
                 failed(s.expect("k", getK(), {"C", "K"})) ||
                 failed(s.expect("v", getV(), {"C", "V"})) ||
                 failed(s.expect("beta", getBeta(), {"C"})) ||
                 failed(s.expectGamma(getGamma())) ||
                 failed(s.expect("w", getW(), {"C", "K"})) ||
                 failed(s.expect("u", getU(), {"C", "V"})));
}

LogicalResult ChunkResidualOp::verify() {
  ChunkShapes s(*this);
  return failure(failed(s.expect("u", getU(), {"C", "V"})) ||
                 failed(s.expect("w", getW(), {"C", "K"})) ||
                 failed(s.expect("state", getState(), {"K", "V"})) ||
                 failed(s.expect("result", getVNew(), {"C", "V"})));
}

LogicalResult ChunkOutputOp::verify() {
  ChunkShapes s(*this);
  return failure(failed(s.expect("q", getQ(), {"C", "K"})) ||
                 failed(s.expect("k", getK(), {"C", "K"})) ||
                 failed(s.expect("v_new", getVNew(), {"C", "V"})) ||
                 failed(s.expect("state", getState(), {"K", "V"})) ||
                 failed(s.expectGamma(getGamma())) ||
                 failed(s.expect("result", getO(), {"C", "V"})));
}

LogicalResult ChunkStateStepOp::verify() {
  ChunkShapes s(*this);
  return failure(failed(s.expect("state", getState(), {"K", "V"})) ||
                 failed(s.expect("k", getK(), {"C", "K"})) ||
                 failed(s.expect("v_new", getVNew(), {"C", "V"})) ||
                 failed(s.expectGamma(getGamma())) ||
                 failed(s.expect("result", getNewState(), {"K", "V"})));
}
