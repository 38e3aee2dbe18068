//===- ChunkRecurrence.cpp - the recurrence as a loop of chunk ops -*- C++ -*-===//
//
// `delta-chunk` rewrites `delta.chunked_recurrence` into the chunk level of
// DESIGN.md: a loop over sequences and value heads whose body walks the
// chunks of one sequence in order, carrying the [K, V] f32 state. Each chunk
// loads its tokens (padded to C rows), builds the transition I + L, inverts
// it, forms the WY factors, corrects the values by what the entering state
// predicts, emits the outputs and steps the state. Only the state is carried
// from chunk to chunk; everything else is a function of the chunk alone,
// which is what lets a lowering run chunks in parallel.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTACHUNK
#include "passes/Passes.h.inc"

namespace {
/// An empty tensor of `type` given the size of every dim; only the sizes
/// of dynamic dims are used.
Value emptyLike(OpBuilder &b, Location loc, RankedTensorType type,
                ArrayRef<Value> sizes) {
  SmallVector<Value> dyn;
  for (auto [i, size] : llvm::enumerate(sizes))
    if (type.isDynamicDim(i))
      dyn.push_back(size);
  return tensor::EmptyOp::create(b, loc, type, dyn);
}

Value dim(OpBuilder &b, Location loc, Value tensor, int64_t i) {
  return tensor::DimOp::create(b, loc, tensor, i);
}

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// A sequence-level value read at (tensor, index) as an index.
Value readIndex(OpBuilder &b, Location loc, Value tensor, Value i) {
  Value x = tensor::ExtractOp::create(b, loc, tensor, ValueRange{i});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
}

LogicalResult chunk(ChunkedRecurrenceOp op, int64_t segments) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto f32 = b.getF32Type();
  auto qType = cast<RankedTensorType>(op.getQ().getType());
  auto vType = cast<RankedTensorType>(op.getV().getType());
  auto oType = cast<RankedTensorType>(op.getO().getType());
  auto sType = cast<RankedTensorType>(op.getFinalState().getType());
  int64_t C = op.getChunkSize(), K = qType.getDimSize(3),
          V = vType.getDimSize(3);
  if (ShapedType::isDynamic(K) || ShapedType::isDynamic(V))
    return op.emitError("delta-chunk needs static K and V");
  StateLayout layout = op.getLayout();
  Value gamma = op.getGamma();
  bool perChannel =
      gamma && cast<RankedTensorType>(gamma.getType()).getRank() == 4;

  auto rowsK = RankedTensorType::get({C, K}, f32);
  auto rowsV = RankedTensorType::get({C, V}, f32);
  auto col = RankedTensorType::get({C}, f32);
  auto square = RankedTensorType::get({C, C}, f32);
  auto state = RankedTensorType::get({K, V}, f32);
  Type gammaType = perChannel ? Type(rowsK) : Type(col);

  Value zero = cst(b, loc, 0), one = cst(b, loc, 1), cC = cst(b, loc, C);
  Value q = op.getQ(), k = op.getK(), v = op.getV(), beta = op.getBeta();
  Value cu = op.getCuSeqlens();
  // Sequences: cu_seqlens segments of batch row 0, or the B rows.
  Value numSeqs = cu ? arith::SubIOp::create(b, loc, dim(b, loc, cu, 0), one)
                           .getResult()
                     : dim(b, loc, q, 0);
  Value numTokens = dim(b, loc, q, 1);
  Value heads = dim(b, loc, q, 2), valueHeads = dim(b, loc, v, 2);
  Value group = arith::DivUIOp::create(b, loc, valueHeads, heads);

  Value o0 = emptyLike(b, loc, oType,
                       {dim(b, loc, v, 0), numTokens, valueHeads});
  Value s0 = emptyLike(b, loc, sType, {numSeqs, valueHeads});
  Value zeroState = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(state, b.getF32FloatAttr(0.0f)));
  // The segmented form's transfer runs on K columns from -I with zero
  // values.
  auto transfer = RankedTensorType::get({K, K}, f32);
  Value negIdentity, zeroRowsK;
  if (segments > 1) {
    SmallVector<float> minusI(K * K, 0.0f);
    for (int64_t i = 0; i < K; ++i)
      minusI[i * K + i] = -1.0f;
    negIdentity = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(transfer, ArrayRef<float>(minusI)));
    zeroRowsK = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(rowsK, b.getF32FloatAttr(0.0f)));
  }

  // The segmented form splits as the GPU's context parallelism does
  // (PrefillEmitter::segmentLength, segmentsOf): one segment length for
  // the call, L = ceil(longest sequence's chunks / segments), at least 1;
  // a sequence of N chunks fills ceil(N / L) segments (at least 1), so
  // one no longer than L runs whole, and the later ones are empty.
  // Sequence n's tokens [bos, eos) and chunks.
  struct Bounds {
    Value bos, eos, chunks;
  };
  auto boundsOf = [&](OpBuilder &b, Location loc, Value n) {
    Bounds s{zero, numTokens, Value()};
    if (cu) {
      s.bos = readIndex(b, loc, cu, n);
      s.eos = readIndex(b, loc, cu, arith::AddIOp::create(b, loc, n, one));
    }
    s.chunks = arith::CeilDivUIOp::create(
        b, loc, arith::SubIOp::create(b, loc, s.eos, s.bos), cC);
    return s;
  };
  Value segLen;
  if (segments > 1) {
    auto longest = scf::ForOp::create(
        b, loc, zero, numSeqs, one, ValueRange{zero},
        [&](OpBuilder &b, Location loc, Value n, ValueRange it) {
          scf::YieldOp::create(
              b, loc,
              ValueRange{arith::MaxUIOp::create(b, loc, it[0], boundsOf(b, loc, n).chunks)});
        });
    segLen = arith::MaxUIOp::create(
        b, loc,
        arith::CeilDivUIOp::create(b, loc, longest.getResult(0), cst(b, loc, segments)),
        one);
  }

  auto seqLoop = scf::ForOp::create(
      b, loc, zero, numSeqs, one, ValueRange{o0, s0},
      [&](OpBuilder &b, Location loc, Value n, ValueRange seqIter) {
        Value row = cu ? zero : n;
        Bounds seq = boundsOf(b, loc, n);
        Value bos = seq.bos, eos = seq.eos, numChunks = seq.chunks;
        auto headLoop = scf::ForOp::create(
            b, loc, zero, valueHeads, one, seqIter,
            [&](OpBuilder &b, Location loc, Value hv, ValueRange headIter) {
              Value h = arith::DivUIOp::create(b, loc, hv, group);
              Value entering =
                  op.getInitialState()
                      ? StateLoadOp::create(b, loc, state,
                                            op.getInitialState(), n, hv,
                                            layout)
                            .getResult()
                      : zeroState;
              // Chunk c's rows and the ops that do not read the state:
              // its loads, I + L, its inverse and the WY factors.
              struct Prepared {
                Value t0, rows, qc, kc, gc, w, u;
              };
              auto prepare = [&](OpBuilder &b, Location loc, Value c) {
                Prepared x;
                x.t0 = arith::AddIOp::create(
                    b, loc, bos, arith::MulIOp::create(b, loc, c, cC));
                x.rows = arith::MinUIOp::create(
                    b, loc, cC, arith::SubIOp::create(b, loc, eos, x.t0));
                auto load = [&](Type type, Value src, Value head,
                                bool edge = false) -> Value {
                  auto ld = ChunkLoadOp::create(b, loc, type, src, row, x.t0,
                                                head, x.rows);
                  if (edge)
                    ld.setEdge(true);
                  return ld;
                };
                x.qc = load(rowsK, q, h);
                x.kc = load(rowsK, k, h);
                Value vc = load(rowsV, v, hv), bc = load(col, beta, hv);
                x.gc = gamma ? load(gammaType, gamma, hv, /*edge=*/true)
                             : Value();
                Value l = ChunkKktOp::create(b, loc, square, x.kc, bc, x.gc);
                Value a = SolveTrilOp::create(b, loc, square, l);
                auto wy = ChunkWyOp::create(b, loc, rowsK, rowsV, a, x.kc, vc,
                                            bc, x.gc);
                x.w = wy.getW();
                x.u = wy.getU();
                return x;
              };
              // The ops that read the carried state s, with values u (`rows`
              // columns, a state of type `st`): the chunk's outputs and the
              // state leaving it.
              auto advance = [&](OpBuilder &b, Location loc, const Prepared &x,
                                 Value u, Value s, RankedTensorType rows,
                                 RankedTensorType st) -> std::pair<Value, Value> {
                Value vn = ChunkResidualOp::create(b, loc, rows, u, x.w, s);
                Value oc = ChunkOutputOp::create(b, loc, rows, x.qc, x.kc, vn,
                                                 s, op.getScale(), x.gc);
                Value next =
                    ChunkStateStepOp::create(b, loc, st, s, x.kc, vn, x.gc);
                return {oc, next};
              };
              Value leavingState, outputs;
              if (segments <= 1) {
                auto chunkLoop = scf::ForOp::create(
                    b, loc, zero, numChunks, one,
                    ValueRange{entering, headIter[0]},
                    [&](OpBuilder &b, Location loc, Value c, ValueRange it) {
                      Prepared x = prepare(b, loc, c);
                      auto [oc, next] =
                          advance(b, loc, x, x.u, it[0], rowsV, state);
                      Value o = ChunkStoreOp::create(b, loc, oType, oc, it[1],
                                                     row, x.t0, hv, x.rows);
                      scf::YieldOp::create(b, loc, ValueRange{next, o});
                    });
                leavingState = chunkLoop.getResult(0);
                outputs = chunkLoop.getResult(1);
              } else {
                // Segment j of the sequence's own: chunks [j L, (j + 1) L)
                // within its N.
                Value own = arith::MinUIOp::create(
                    b, loc,
                    arith::MaxUIOp::create(
                        b, loc, arith::CeilDivUIOp::create(b, loc, numChunks, segLen), one),
                    cst(b, loc, segments));
                auto segLoop = scf::ForOp::create(
                    b, loc, zero, own, one, ValueRange{entering, headIter[0]},
                    [&](OpBuilder &b, Location loc, Value j, ValueRange seg) {
                      Value start = seg[0];
                      Value c0 = arith::MinUIOp::create(
                          b, loc, arith::MulIOp::create(b, loc, j, segLen), numChunks);
                      Value c1 = arith::MinUIOp::create(
                          b, loc, arith::AddIOp::create(b, loc, c0, segLen), numChunks);
                      auto inner = scf::ForOp::create(
                          b, loc, c0, c1, one,
                          ValueRange{zeroState, negIdentity, seg[1]},
                          [&](OpBuilder &b, Location loc, Value c,
                              ValueRange it) {
                            Value s = it[0], x = it[1];
                            Prepared p = prepare(b, loc, c);
                            // From the zero state: O0 and b.
                            auto [o0, next] =
                                advance(b, loc, p, p.u, s, rowsV, state);
                            // The same ops on K columns of zero values from
                            // X = -Mpre: -Qh and -M Mpre.
                            auto [negQh, nextX] = advance(
                                b, loc, p, zeroRowsK, x, rowsK, transfer);
                            // O = O0 + Qh S_start.
                            Value oc = ChunkResidualOp::create(
                                b, loc, rowsV, o0, negQh, start);
                            Value o = ChunkStoreOp::create(
                                b, loc, oType, oc, it[2], row, p.t0, hv,
                                p.rows);
                            scf::YieldOp::create(b, loc,
                                                 ValueRange{next, nextX, o});
                          });
                      // S_end = b + M S_start.
                      Value end = ChunkResidualOp::create(
                          b, loc, state, inner.getResult(0),
                          inner.getResult(1), start);
                      scf::YieldOp::create(
                          b, loc, ValueRange{end, inner.getResult(2)});
                    });
                leavingState = segLoop.getResult(0);
                outputs = segLoop.getResult(1);
              }
              Value sf = StateStoreOp::create(b, loc, sType, leavingState,
                                              headIter[1], n, hv, layout);
              scf::YieldOp::create(b, loc, ValueRange{outputs, sf});
            });
        scf::YieldOp::create(b, loc, headLoop.getResults());
      });
  op->replaceAllUsesWith(seqLoop.getResults());
  op->erase();
  return success();
}

struct ChunkRecurrence : impl::DeltaChunkBase<ChunkRecurrence> {
  using DeltaChunkBase::DeltaChunkBase;
  void runOnOperation() override {
    SmallVector<ChunkedRecurrenceOp> work;
    getOperation()->walk([&](ChunkedRecurrenceOp op) { work.push_back(op); });
    for (ChunkedRecurrenceOp op : work)
      if (failed(chunk(op, segments)))
        return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::delta
