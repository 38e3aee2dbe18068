//===- NormalizeOptions.cpp - canonical recurrence options ------*- C++ -*-===//
//
// Later passes handle one option set: log-space decays, given beta, no in-op
// normalisation. Everything else becomes an explicit elementwise op whose
// result is f32, so no rounding sits between preparation and recurrence.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"
#include "templates/runtime/deltac_abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTANORMALIZEOPTIONS
#include "passes/Passes.h.inc"

namespace {
bool isCanonical(RecurrenceOp op) {
  GateForm gate = op.getGate();
  return (gate == GateForm::none || gate == GateForm::log ||
          gate == GateForm::channel_log) &&
         op.getBetaForm() == BetaForm::given && !op.getQkL2norm() &&
         !op.getL2normCall() && !isByCall(gate);
}

/// The same shape as `value` with f32 elements.
RankedTensorType asF32(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.clone(Float32Type::get(value.getContext()));
}

/// `x` as f32 (itself when it is f32 already).
Value toF32(OpBuilder &b, Location loc, Value x) {
  RankedTensorType f32 = asF32(x);
  return x.getType() == f32 ? x : arith::ExtFOp::create(b, loc, f32, x).getResult();
}

/// True when the call's `options` has `bit` set.
Value optionSet(OpBuilder &b, Location loc, Value options, int32_t bit) {
  Value mask = arith::ConstantIntOp::create(b, loc, b.getI32Type(), bit);
  Value zero = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                               arith::AndIOp::create(b, loc, options, mask), zero);
}

/// `set()` where the call's option `bit` is set, else `unset()`: an `= call`
/// option's preparation, chosen per call. The GPU lowering finds the
/// preparation op in the then-branch.
Value byCall(OpBuilder &b, Location loc, Value options, int32_t bit, Type type,
             function_ref<Value(OpBuilder &)> set, function_ref<Value(OpBuilder &)> unset) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, optionSet(b, loc, options, bit),
                                /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, set(b));
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, unset(b));
  return ifOp.getResult(0);
}

void normalize(RecurrenceOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQ(), k = op.getK(), g = op.getG(), beta = op.getBeta();
  Value options = op.getOptions();
  auto norm = [&](OpBuilder &ob, Value x) -> Value {
    return L2NormOp::create(ob, loc, asF32(x), x);
  };
  auto normByCall = [&](Value x) {
    return byCall(
        b, loc, options, deltac_abi::kCallL2Norm, asF32(x),
        [&](OpBuilder &ob) { return norm(ob, x); },
        [&](OpBuilder &ob) { return toF32(ob, loc, x); });
  };
  if (op.getQkL2norm()) {
    q = norm(b, q);
    k = norm(b, k);
  } else if (op.getL2normCall()) {
    q = normByCall(q);
    k = normByCall(k);
  }
  GateForm gate = op.getGate();
  if (gate == GateForm::linear)
    g = GateFromLinearOp::create(b, loc, asF32(g), g);
  if (isRaw(gate))
    g = GateFromRawOp::create(b, loc, asF32(g), g, op.getALog(),
                              op.getDtBias());
  if (isByCall(gate)) {
    Value input = g;
    g = byCall(
        b, loc, options, deltac_abi::kCallGateRaw, asF32(input),
        [&](OpBuilder &ob) -> Value {
          return GateFromRawOp::create(ob, loc, asF32(input), input, op.getALog(),
                                       op.getDtBias());
        },
        [&](OpBuilder &ob) { return toF32(ob, loc, input); });
  }
  Value logits = beta;
  auto sigmoid = [&](OpBuilder &ob, float factor) -> Value {
    return BetaSigmoidOp::create(ob, loc, asF32(logits), logits,
                                 ob.getF32FloatAttr(factor));
  };
  if (op.getBetaForm() == BetaForm::call) {
    // Given, sigmoid (kCallBetaSigmoid) or 2 sigmoid (and kCallBetaTwice).
    Type f32 = asF32(logits);
    beta = byCall(
        b, loc, options, deltac_abi::kCallBetaSigmoid, f32,
        [&](OpBuilder &ob) {
          return byCall(
              ob, loc, options, deltac_abi::kCallBetaTwice, f32,
              [&](OpBuilder &ib) { return sigmoid(ib, 2.0f); },
              [&](OpBuilder &ib) { return sigmoid(ib, 1.0f); });
        },
        [&](OpBuilder &ob) { return toF32(ob, loc, logits); });
  } else if (op.getBetaForm() != BetaForm::given) {
    beta = sigmoid(b, op.getBetaForm() == BetaForm::sigmoid2 ? 2.0f : 1.0f);
  }
  GateForm canonicalGate = gate == GateForm::none ? GateForm::none
                           : isPerChannel(gate)   ? GateForm::channel_log
                                                  : GateForm::log;
  auto canonical = RecurrenceOp::create(
      b, loc, op->getResultTypes(), op.getRule(), op.getLayout(),
      canonicalGate, BetaForm::given, /*qk_l2norm=*/false, /*l2norm_call=*/false, q, k,
      op.getV(), g, op.getGv(), beta, /*a_log=*/Value(), /*dt_bias=*/Value(),
      op.getInitialState(), op.getCuSeqlens(), op.getScale(), /*options=*/Value());
  op->replaceAllUsesWith(canonical->getResults());
  op->erase();
}

struct NormalizeOptions : impl::DeltaNormalizeOptionsBase<NormalizeOptions> {
  void runOnOperation() override {
    SmallVector<RecurrenceOp> work;
    getOperation()->walk([&](RecurrenceOp op) {
      if (!isCanonical(op))
        work.push_back(op);
    });
    for (RecurrenceOp op : work)
      normalize(op);
  }
};
} // namespace
} // namespace mlir::delta
