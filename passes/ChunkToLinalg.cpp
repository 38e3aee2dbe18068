//===- ChunkToLinalg.cpp - chunk-level IR for the CPU -------------*- C++ -*-===//
//
// `delta-chunk-to-linalg` lowers every delta op that can remain after
// `delta-chunk` (the chunk ops, the state and token movers, and the
// sequence-level preparation ops) into linalg.generic, scf, tensor, arith
// and math on tensors. Upstream passes then bufferize it and lower it to
// LLVM, so the exact IR that `delta-chunk` writes runs on the CPU, where CI
// compares it with the fp64 reference (tests/unit/ChunkCpuTest.cpp).
//
// The lowering mirrors the op definitions term by term (clarity over
// speed); like them it evaluates every exponential of a decay difference
// only where that difference is non-positive (i >= j), selecting the
// argument before `math.exp` so no inf is ever formed.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTACHUNKTOLINALG
#include "passes/Passes.h.inc"

namespace {
using utils::IteratorType;
constexpr IteratorType par = IteratorType::parallel;
constexpr IteratorType red = IteratorType::reduction;

/// Builds the linalg.generic ops of one lowering.
struct Gen {
  OpBuilder &b;
  Location loc;

  MLIRContext *ctx() { return b.getContext(); }
  Type f32() { return b.getF32Type(); }

  /// The map from `numDims` loops to the listed loop dims.
  AffineMap map(unsigned numDims, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(getAffineDimExpr(d, ctx()));
    return AffineMap::get(numDims, 0, exprs, ctx());
  }

  using Body = function_ref<Value(OpBuilder &, Location, ValueRange args,
                                  ArrayRef<Value> idx)>;

  /// One linalg.generic over `iters` writing `init` through `outMap`; the
  /// body gets the input elements, the current output element (last) and
  /// the loop indices.
  Value generic(Value init, ValueRange ins, ArrayRef<AffineMap> inMaps,
                AffineMap outMap, ArrayRef<IteratorType> iters, Body body) {
    SmallVector<AffineMap> maps(inMaps);
    maps.push_back(outMap);
    auto op = linalg::GenericOp::create(
        b, loc, TypeRange{init.getType()}, ins, ValueRange{init}, maps, iters,
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          SmallVector<Value> idx;
          for (unsigned d = 0; d < iters.size(); ++d)
            idx.push_back(linalg::IndexOp::create(nb, nloc, d));
          linalg::YieldOp::create(nb, nloc, body(nb, nloc, args, idx));
        });
    return op.getResult(0);
  }

  Value empty(RankedTensorType type, ValueRange dynSizes = {}) {
    return tensor::EmptyOp::create(b, loc, type, dynSizes);
  }
  Value filled(RankedTensorType type, double value,
               ValueRange dynSizes = {}) {
    Value c = arith::ConstantOp::create(
        b, loc, FloatAttr::get(type.getElementType(), value));
    return linalg::FillOp::create(b, loc, c, empty(type, dynSizes))
        .getResult(0);
  }
  /// An empty tensor of `type` whose dynamic dims are those of `like`.
  Value emptyLike(RankedTensorType type, Value like) {
    SmallVector<Value> dyn;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        dyn.push_back(tensor::DimOp::create(b, loc, like, i));
    return empty(type, dyn);
  }
};

// Scalar helpers used inside generic bodies.
Value fconst(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}
Value toF32(OpBuilder &b, Location loc, Value x) {
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
}
Value fromF32(OpBuilder &b, Location loc, Value x, Type to) {
  if (to.isF32())
    return x;
  return arith::TruncFOp::create(b, loc, to, x);
}
Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}
Value sub(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::SubFOp::create(b, loc, x, y);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}
Value exp(OpBuilder &b, Location loc, Value x) {
  return math::ExpOp::create(b, loc, x);
}
Value cmp(OpBuilder &b, Location loc, arith::CmpIPredicate p, Value x,
          Value y) {
  return arith::CmpIOp::create(b, loc, p, x, y);
}
Value select(OpBuilder &b, Location loc, Value c, Value x, Value y) {
  return arith::SelectOp::create(b, loc, c, x, y);
}
/// exp(gi - gj) where `keep` holds (i >= j, so gi - gj <= 0), else 0; the
/// argument is selected first so no positive exponent is ever evaluated.
Value decayWhere(OpBuilder &b, Location loc, Value keep, Value gi, Value gj) {
  Value zero = fconst(b, loc, 0.0);
  Value e = exp(b, loc, select(b, loc, keep, sub(b, loc, gi, gj), zero));
  return select(b, loc, keep, e, zero);
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

//===----------------------------------------------------------------------===//
// Token and state movers
//===----------------------------------------------------------------------===//

Value lower(Gen &g, ChunkLoadOp op) {
  RankedTensorType chunk = op.getChunk().getType();
  unsigned rank = chunk.getRank();
  Value src = op.getSource();
  bool edge = op.getEdge();
  Value len = op.getLength();
  return g.generic(
      g.empty(chunk), {}, {}, g.map(rank, rank == 2 ? ArrayRef<unsigned>{0, 1}
                                                    : ArrayRef<unsigned>{0}),
      SmallVector<IteratorType>(rank, par),
      [&](OpBuilder &b, Location loc, ValueRange, ArrayRef<Value> idx) {
        Value one = arith::ConstantIndexOp::create(b, loc, 1);
        Value last = arith::SubIOp::create(b, loc, len, one);
        Value row = arith::MinUIOp::create(b, loc, idx[0], last);
        Value t = arith::AddIOp::create(b, loc, op.getStart(), row);
        SmallVector<Value> at{op.getBatch(), t, op.getHead()};
        if (rank == 2)
          at.push_back(idx[1]);
        Value x = toF32(b, loc, tensor::ExtractOp::create(b, loc, src, at));
        if (edge)
          return x;
        Value inside =
            cmp(b, loc, arith::CmpIPredicate::ult, idx[0], len);
        return select(b, loc, inside, x, fconst(b, loc, 0.0));
      });
}

/// The first `rows` rows of a chunk, converted to `elt`, as a dynamic tensor.
Value convertRows(Gen &g, Value chunk, Value rows, Type elt) {
  RankedTensorType type = typeOf(chunk);
  unsigned rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, g.b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes{rows};
  SmallVector<OpFoldResult> strides(rank, g.b.getIndexAttr(1));
  SmallVector<int64_t> shape{ShapedType::kDynamic};
  if (rank == 2) {
    sizes.push_back(g.b.getIndexAttr(type.getDimSize(1)));
    shape.push_back(type.getDimSize(1));
  }
  Value slice = tensor::ExtractSliceOp::create(
      g.b, g.loc, RankedTensorType::get(shape, type.getElementType()), chunk,
      offsets, sizes, strides);
  if (elt.isF32())
    return slice;
  auto outType = RankedTensorType::get(shape, elt);
  SmallVector<unsigned> dims = rank == 2 ? SmallVector<unsigned>{0, 1}
                                         : SmallVector<unsigned>{0};
  return g.generic(g.empty(outType, ValueRange{rows}), {slice},
                   {g.map(rank, dims)}, g.map(rank, dims),
                   SmallVector<IteratorType>(rank, par),
                   [&](OpBuilder &b, Location loc, ValueRange args,
                       ArrayRef<Value>) {
                     return fromF32(b, loc, args[0], elt);
                   });
}

Value lower(Gen &g, ChunkStoreOp op) {
  RankedTensorType dest = op.getDest().getType();
  Value rows = convertRows(g, op.getChunk(), op.getLength(),
                           dest.getElementType());
  SmallVector<OpFoldResult> offsets{op.getBatch(), op.getStart(),
                                    op.getHead()};
  SmallVector<OpFoldResult> sizes{g.b.getIndexAttr(1), op.getLength(),
                                  g.b.getIndexAttr(1)};
  if (dest.getRank() == 4) {
    offsets.push_back(g.b.getIndexAttr(0));
    sizes.push_back(g.b.getIndexAttr(dest.getDimSize(3)));
  }
  SmallVector<OpFoldResult> strides(dest.getRank(), g.b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(g.b, g.loc, rows, op.getDest(),
                                       offsets, sizes, strides);
}

Value lower(Gen &g, StateLoadOp op) {
  bool vk = op.getLayout() == StateLayout::vk;
  return g.generic(
      g.empty(op.getState().getType()), {}, {}, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange, ArrayRef<Value> idx) {
        Value r = vk ? idx[1] : idx[0], c = vk ? idx[0] : idx[1];
        return toF32(b, loc,
                     tensor::ExtractOp::create(
                         b, loc, op.getSource(),
                         ValueRange{op.getSeq(), op.getHead(), r, c}));
      });
}

Value lower(Gen &g, StateStoreOp op) {
  RankedTensorType dest = op.getDest().getType();
  bool vk = op.getLayout() == StateLayout::vk;
  auto tile = RankedTensorType::get({dest.getDimSize(2), dest.getDimSize(3)},
                                    dest.getElementType());
  Value state = op.getState();
  Value converted = g.generic(
      g.empty(tile), {state}, {g.map(2, vk ? ArrayRef<unsigned>{1, 0}
                                           : ArrayRef<unsigned>{0, 1})},
      g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange args, ArrayRef<Value>) {
        return fromF32(b, loc, args[0], dest.getElementType());
      });
  SmallVector<OpFoldResult> offsets{op.getSeq(), op.getHead(),
                                    g.b.getIndexAttr(0), g.b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{g.b.getIndexAttr(1), g.b.getIndexAttr(1),
                                  g.b.getIndexAttr(tile.getDimSize(0)),
                                  g.b.getIndexAttr(tile.getDimSize(1))};
  SmallVector<OpFoldResult> strides(4, g.b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(g.b, g.loc, converted, op.getDest(),
                                       offsets, sizes, strides);
}

//===----------------------------------------------------------------------===//
// Chunk math
//===----------------------------------------------------------------------===//

bool perChannel(Value gamma) { return gamma && typeOf(gamma).getRank() == 2; }

/// sum_d x_id y_jd, with kda's exp(Gamma_id - Gamma_jd) inside the sum where
/// `keep(i, j)` holds, as a [C, C] tensor.
Value pairDots(Gen &g, Value x, Value y, Value gamma, arith::CmpIPredicate keep) {
  int64_t C = typeOf(x).getDimSize(0);
  auto square = RankedTensorType::get({C, C}, g.f32());
  SmallVector<Value> ins{x, y};
  SmallVector<AffineMap> maps{g.map(3, {0, 2}), g.map(3, {1, 2})};
  bool kda = perChannel(gamma);
  if (kda) {
    ins.append({gamma, gamma});
    maps.append({g.map(3, {0, 2}), g.map(3, {1, 2})});
  }
  return g.generic(
      g.filled(square, 0.0), ins, maps, g.map(3, {0, 1}), {par, par, red},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value> idx) {
        Value prod = mul(b, loc, a[0], a[1]);
        if (kda)
          prod = mul(b, loc, prod,
                     decayWhere(b, loc, cmp(b, loc, keep, idx[0], idx[1]),
                                a[2], a[3]));
        return add(b, loc, a.back(), prod);
      });
}

Value lower(Gen &g, ChunkKktOp op) {
  Value gamma = op.getGamma();
  bool gated = gamma && !perChannel(gamma);
  Value dots =
      pairDots(g, op.getK(), op.getK(), gamma, arith::CmpIPredicate::ugt);
  SmallVector<Value> ins{dots, op.getBeta()};
  SmallVector<AffineMap> maps{g.map(2, {0, 1}), g.map(2, {0})};
  if (gated) {
    ins.append({gamma, gamma});
    maps.append({g.map(2, {0}), g.map(2, {1})});
  }
  return g.generic(
      g.empty(op.getL().getType()), ins, maps, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value> idx) {
        Value below = cmp(b, loc, arith::CmpIPredicate::ugt, idx[0], idx[1]);
        Value x = mul(b, loc, a[1], a[0]);
        if (gated)
          x = mul(b, loc, x, decayWhere(b, loc, below, a[2], a[3]));
        return select(b, loc, below, x, fconst(b, loc, 0.0));
      });
}

/// Forward substitution, row by row: A_ii = 1 and, for j < i,
/// A_ij = -sum_{m=j}^{i-1} L_im A_mj (rows above i are final by then).
Value lower(Gen &g, SolveTrilOp op) {
  RankedTensorType type = op.getL().getType();
  int64_t C = type.getDimSize(0);
  Value l = op.getL();
  Value identity = g.generic(
      g.empty(type), {}, {}, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange, ArrayRef<Value> idx) {
        Value diag = cmp(b, loc, arith::CmpIPredicate::eq, idx[0], idx[1]);
        return select(b, loc, diag, fconst(b, loc, 1.0),
                      fconst(b, loc, 0.0));
      });
  OpBuilder &b = g.b;
  Location loc = g.loc;
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value cC = arith::ConstantIndexOp::create(b, loc, C);
  auto rows = scf::ForOp::create(
      b, loc, c1, cC, c1, ValueRange{identity},
      [&](OpBuilder &b, Location loc, Value i, ValueRange it) {
        auto cols = scf::ForOp::create(
            b, loc, c0, i, c1, it,
            [&](OpBuilder &b, Location loc, Value j, ValueRange it) {
              Value a = it[0];
              auto sum = scf::ForOp::create(
                  b, loc, j, i, c1, ValueRange{fconst(b, loc, 0.0)},
                  [&](OpBuilder &b, Location loc, Value m, ValueRange acc) {
                    Value lim = tensor::ExtractOp::create(b, loc, l,
                                                          ValueRange{i, m});
                    Value amj = tensor::ExtractOp::create(b, loc, a,
                                                          ValueRange{m, j});
                    scf::YieldOp::create(
                        b, loc, add(b, loc, acc[0], mul(b, loc, lim, amj)));
                  });
              Value neg = arith::NegFOp::create(b, loc, sum.getResult(0));
              scf::YieldOp::create(
                  b, loc,
                  tensor::InsertOp::create(b, loc, neg, a, ValueRange{i, j})
                      .getResult());
            });
        scf::YieldOp::create(b, loc, cols.getResults());
      });
  return rows.getResult(0);
}

/// rows ⊙ scaleRow[i] (⊙ e^Gamma per row or per channel when given).
Value scaleRows(Gen &g, Value rows, Value beta, Value gamma) {
  RankedTensorType type = typeOf(rows);
  SmallVector<Value> ins{rows, beta};
  SmallVector<AffineMap> maps{g.map(2, {0, 1}), g.map(2, {0})};
  if (gamma) {
    ins.push_back(gamma);
    maps.push_back(perChannel(gamma) ? g.map(2, {0, 1}) : g.map(2, {0}));
  }
  return g.generic(
      g.empty(type), ins, maps, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        Value x = mul(b, loc, a[0], a[1]);
        return gamma ? mul(b, loc, x, exp(b, loc, a[2])) : x;
      });
}

/// acc + x y for x [M, R] and y [R, N] (acc [M, N]); `sign` -1 subtracts.
Value matmulAcc(Gen &g, Value acc, Value x, Value y, double sign = 1.0) {
  return g.generic(
      acc, {x, y}, {g.map(3, {0, 2}), g.map(3, {2, 1})}, g.map(3, {0, 1}),
      {par, par, red},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        Value p = mul(b, loc, a[0], a[1]);
        return sign < 0 ? sub(b, loc, a[2], p) : add(b, loc, a[2], p);
      });
}

Value matmul(Gen &g, Value x, Value y) {
  auto type = RankedTensorType::get(
      {typeOf(x).getDimSize(0), typeOf(y).getDimSize(1)}, g.f32());
  return matmulAcc(g, g.filled(type, 0.0), x, y);
}

std::pair<Value, Value> lower(Gen &g, ChunkWyOp op) {
  Value w = matmul(g, op.getA(),
                   scaleRows(g, op.getK(), op.getBeta(), op.getGamma()));
  Value u = matmul(g, op.getA(), scaleRows(g, op.getV(), op.getBeta(), {}));
  return {w, u};
}

Value lower(Gen &g, ChunkResidualOp op) {
  return matmulAcc(g, op.getU(), op.getW(), op.getState(), /*sign=*/-1.0);
}

Value lower(Gen &g, ChunkOutputOp op) {
  Value gamma = op.getGamma();
  bool gated = gamma && !perChannel(gamma);
  Value dots = pairDots(g, op.getQ(), op.getK(), gamma,
                        arith::CmpIPredicate::uge);
  SmallVector<Value> ins{dots};
  SmallVector<AffineMap> maps{g.map(2, {0, 1})};
  if (gated) {
    ins.append({gamma, gamma});
    maps.append({g.map(2, {0}), g.map(2, {1})});
  }
  Value masked = g.generic(
      g.empty(typeOf(dots)), ins, maps, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value> idx) {
        Value causal = cmp(b, loc, arith::CmpIPredicate::uge, idx[0], idx[1]);
        Value x = a[0];
        if (gated)
          x = mul(b, loc, x, decayWhere(b, loc, causal, a[1], a[2]));
        return select(b, loc, causal, x, fconst(b, loc, 0.0));
      });
  // Q ⊙ e^Gamma: a ones "beta" keeps scaleRows' shape.
  Value q = op.getQ();
  if (gamma) {
    auto colType = RankedTensorType::get({typeOf(q).getDimSize(0)}, g.f32());
    q = scaleRows(g, q, g.filled(colType, 1.0), gamma);
  }
  Value inter = matmul(g, q, op.getState());
  Value o = matmulAcc(g, inter, masked, op.getVNew());
  Value scale = op.getScale();
  return g.generic(g.empty(typeOf(o)), {o}, {g.map(2, {0, 1})},
                   g.map(2, {0, 1}), {par, par},
                   [&](OpBuilder &b, Location loc, ValueRange a,
                       ArrayRef<Value>) { return mul(b, loc, a[0], scale); });
}

Value lower(Gen &g, ChunkStateStepOp op) {
  Value gamma = op.getGamma(), state = op.getState(), k = op.getK();
  if (!gamma) {
    auto kt = g.generic(
        g.empty(RankedTensorType::get(
            {typeOf(k).getDimSize(1), typeOf(k).getDimSize(0)}, g.f32())),
        {k}, {g.map(2, {1, 0})}, g.map(2, {0, 1}), {par, par},
        [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
          return a[0];
        });
    return matmulAcc(g, state, kt, op.getVNew());
  }
  bool kda = perChannel(gamma);
  int64_t C = typeOf(k).getDimSize(0), K = typeOf(k).getDimSize(1);
  OpBuilder &b = g.b;
  Location loc = g.loc;
  Value lastRow = arith::ConstantIndexOp::create(b, loc, C - 1);
  // Gamma_last as [K] (kda) or a scalar broadcast to [K].
  auto colK = RankedTensorType::get({K}, g.f32());
  Value last = g.generic(
      g.empty(colK), {}, {}, g.map(1, {0}), {par},
      [&](OpBuilder &b, Location loc, ValueRange, ArrayRef<Value> idx) {
        SmallVector<Value> at{lastRow};
        if (kda)
          at.push_back(idx[0]);
        return tensor::ExtractOp::create(b, loc, gamma, at).getResult();
      });
  // e^Gamma_last S (rows of [K, V] scaled).
  Value decayed = g.generic(
      g.empty(op.getState().getType()), {state, last},
      {g.map(2, {0, 1}), g.map(2, {0})}, g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        return mul(b, loc, a[0], exp(b, loc, a[1]));
      });
  // (K ⊙ e^(Gamma_last - Gamma))^T as [K, C]; Gamma_last - Gamma_j <= 0.
  Value kt = g.generic(
      g.empty(RankedTensorType::get({K, C}, g.f32())),
      {k, gamma, last},
      {g.map(2, {1, 0}), kda ? g.map(2, {1, 0}) : g.map(2, {1}),
       g.map(2, {0})},
      g.map(2, {0, 1}), {par, par},
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        return mul(b, loc, a[0], exp(b, loc, sub(b, loc, a[2], a[1])));
      });
  return matmulAcc(g, decayed, kt, op.getVNew());
}

//===----------------------------------------------------------------------===//
// Sequence-level preparation
//===----------------------------------------------------------------------===//

SmallVector<unsigned> iota(unsigned n) {
  SmallVector<unsigned> v;
  for (unsigned i = 0; i < n; ++i)
    v.push_back(i);
  return v;
}

Value lower(Gen &g, L2NormOp op) {
  Value x = op.getOperand();
  RankedTensorType type = op.getResult().getType();
  unsigned rank = type.getRank();
  SmallVector<unsigned> all = iota(rank), outer = iota(rank - 1);
  auto sumType = RankedTensorType::get(type.getShape().drop_back(), g.f32());
  SmallVector<Value> dyn;
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (sumType.isDynamicDim(i))
      dyn.push_back(tensor::DimOp::create(g.b, g.loc, x, i));
  SmallVector<IteratorType> iters(rank, par);
  iters.back() = red;
  Value sums = g.generic(
      g.filled(sumType, 0.0, dyn), {x}, {g.map(rank, all)},
      g.map(rank, outer), iters,
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        Value f = toF32(b, loc, a[0]);
        return add(b, loc, a[1], mul(b, loc, f, f));
      });
  return g.generic(
      g.emptyLike(type, x), {x, sums}, {g.map(rank, all), g.map(rank, outer)},
      g.map(rank, all), SmallVector<IteratorType>(rank, par),
      [&](OpBuilder &b, Location loc, ValueRange a, ArrayRef<Value>) {
        Value norm = math::SqrtOp::create(
            b, loc, add(b, loc, a[1], fconst(b, loc, 1e-6)));
        return arith::DivFOp::create(b, loc, toF32(b, loc, a[0]), norm)
            .getResult();
      });
}

Value lower(Gen &g, GateFromRawOp op) {
  Value a = op.getA();
  RankedTensorType type = op.getG().getType();
  unsigned rank = type.getRank();
  MLIRContext *ctx = g.ctx();
  AffineMap all = g.map(rank, iota(rank));
  AffineMap head = g.map(rank, {2});
  // Per channel, dt_bias is [HV * K]: element h * K + k.
  AffineMap bias = head;
  if (rank == 4)
    bias = AffineMap::get(rank, 0,
                          {getAffineDimExpr(2, ctx) * type.getDimSize(3) +
                           getAffineDimExpr(3, ctx)},
                          ctx);
  return g.generic(
      g.emptyLike(type, a), {a, op.getALog(), op.getDtBias()},
      {all, head, bias}, all, SmallVector<IteratorType>(rank, par),
      [&](OpBuilder &b, Location loc, ValueRange x, ArrayRef<Value>) {
        Value z = add(b, loc, toF32(b, loc, x[0]), toF32(b, loc, x[2]));
        Value big = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                          z, fconst(b, loc, 20.0));
        Value soft = math::Log1pOp::create(b, loc, exp(b, loc, z));
        Value sp = select(b, loc, big, z, soft);
        Value decay = exp(b, loc, toF32(b, loc, x[1]));
        return arith::NegFOp::create(b, loc, mul(b, loc, decay, sp))
            .getResult();
      });
}

Value lower(Gen &g, GateFromLinearOp op) {
  RankedTensorType type = op.getG().getType();
  unsigned rank = type.getRank();
  AffineMap all = g.map(rank, iota(rank));
  return g.generic(
      g.emptyLike(type, op.getAlpha()), {op.getAlpha()}, {all}, all,
      SmallVector<IteratorType>(rank, par),
      [&](OpBuilder &b, Location loc, ValueRange x, ArrayRef<Value>) {
        return math::LogOp::create(b, loc, toF32(b, loc, x[0])).getResult();
      });
}

Value lower(Gen &g, BetaSigmoidOp op) {
  RankedTensorType type = op.getBeta().getType();
  unsigned rank = type.getRank();
  AffineMap all = g.map(rank, iota(rank));
  double factor = op.getFactor().convertToDouble();
  return g.generic(
      g.emptyLike(type, op.getLogits()), {op.getLogits()}, {all}, all,
      SmallVector<IteratorType>(rank, par),
      [&](OpBuilder &b, Location loc, ValueRange x, ArrayRef<Value>) {
        Value e = exp(b, loc, arith::NegFOp::create(b, loc,
                                                    toF32(b, loc, x[0])));
        return arith::DivFOp::create(b, loc, fconst(b, loc, factor),
                                     add(b, loc, fconst(b, loc, 1.0), e))
            .getResult();
      });
}

/// Running sums along each sequence, restarting every `chunk` tokens from
/// its start; tokens outside every sequence are left unwritten.
Value lower(Gen &g, ChunkCumsumOp op) {
  OpBuilder &b = g.b;
  Location loc = g.loc;
  Value src = op.getG(), cu = op.getCuSeqlens();
  RankedTensorType type = op.getGamma().getType();
  bool kda = type.getRank() == 4;
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value cChunk = arith::ConstantIndexOp::create(b, loc, op.getChunkSize());
  Value numTokens = tensor::DimOp::create(b, loc, src, 1);
  Value heads = tensor::DimOp::create(b, loc, src, 2);
  Value channels = kda ? arith::ConstantIndexOp::create(b, loc,
                                                        type.getDimSize(3))
                             .getResult()
                       : c1;
  Value numSeqs =
      cu ? arith::SubIOp::create(b, loc, tensor::DimOp::create(b, loc, cu, 0),
                                 c1)
               .getResult()
         : tensor::DimOp::create(b, loc, src, 0).getResult();
  auto readIndex = [&](OpBuilder &b, Location loc, Value i) -> Value {
    Value x = tensor::ExtractOp::create(b, loc, cu, ValueRange{i});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
  };
  auto seqs = scf::ForOp::create(
      b, loc, c0, numSeqs, c1, ValueRange{g.emptyLike(type, src)},
      [&](OpBuilder &b, Location loc, Value n, ValueRange it) {
        Value row = cu ? c0 : n;
        Value bos = cu ? readIndex(b, loc, n) : c0;
        Value eos = cu ? readIndex(b, loc, arith::AddIOp::create(b, loc, n, c1))
                       : numTokens;
        auto tokens = scf::ForOp::create(
            b, loc, bos, eos, c1, it,
            [&](OpBuilder &b, Location loc, Value t, ValueRange it) {
              Value offset = arith::RemUIOp::create(
                  b, loc, arith::SubIOp::create(b, loc, t, bos), cChunk);
              Value restart =
                  cmp(b, loc, arith::CmpIPredicate::eq, offset, c0);
              // Read t - 1 only when continuing (t > bos then).
              Value prevT = arith::SelectOp::create(
                  b, loc, restart, t, arith::SubIOp::create(b, loc, t, c1));
              auto hs = scf::ForOp::create(
                  b, loc, c0, heads, c1, it,
                  [&](OpBuilder &b, Location loc, Value h, ValueRange it) {
                    auto cs = scf::ForOp::create(
                        b, loc, c0, channels, c1, it,
                        [&](OpBuilder &b, Location loc, Value d,
                            ValueRange it) {
                          SmallVector<Value> at{row, t, h}, prevAt{row, prevT,
                                                                   h};
                          if (kda) {
                            at.push_back(d);
                            prevAt.push_back(d);
                          }
                          Value x = toF32(
                              b, loc, tensor::ExtractOp::create(b, loc, src, at));
                          Value prev =
                              tensor::ExtractOp::create(b, loc, it[0], prevAt);
                          Value base = select(b, loc, restart,
                                              fconst(b, loc, 0.0), prev);
                          scf::YieldOp::create(
                              b, loc,
                              tensor::InsertOp::create(b, loc,
                                                       add(b, loc, base, x),
                                                       it[0], at)
                                  .getResult());
                        });
                    scf::YieldOp::create(b, loc, cs.getResults());
                  });
              scf::YieldOp::create(b, loc, hs.getResults());
            });
        scf::YieldOp::create(b, loc, tokens.getResults());
      });
  return seqs.getResult(0);
}

struct ChunkToLinalg : impl::DeltaChunkToLinalgBase<ChunkToLinalg> {
  void runOnOperation() override {
    SmallVector<Operation *> work;
    getOperation()->walk([&](Operation *op) {
      if (isa<DeltaDialect>(op->getDialect()) && !isa<SpecOp>(op))
        work.push_back(op);
    });
    for (Operation *op : work) {
      OpBuilder b(op);
      Gen g{b, op->getLoc()};
      SmallVector<Value> results;
      TypeSwitch<Operation *>(op)
          .Case<ChunkLoadOp, ChunkStoreOp, StateLoadOp, StateStoreOp,
                ChunkKktOp, SolveTrilOp, ChunkResidualOp, ChunkOutputOp,
                ChunkStateStepOp, L2NormOp, GateFromRawOp, GateFromLinearOp,
                BetaSigmoidOp, ChunkCumsumOp>(
              [&](auto typed) { results.push_back(lower(g, typed)); })
          .Case<ChunkWyOp>([&](ChunkWyOp wy) {
            auto [w, u] = lower(g, wy);
            results.append({w, u});
          })
          .Default([](Operation *) {});
      if (results.empty()) {
        op->emitError("delta-chunk-to-linalg cannot lower this op; run "
                      "delta-chunk first");
        return signalPassFailure();
      }
      op->replaceAllUsesWith(results);
      op->erase();
    }
  }
};
} // namespace
} // namespace mlir::delta
