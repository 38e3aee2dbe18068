//===- NormalizeOptions.cpp - canonical recurrence options ------*- C++ -*-===//
//
// Later passes handle one option set: log-space decays, given beta, no in-op
// normalisation. Everything else becomes an explicit elementwise op whose
// result is f32, so no rounding sits between preparation and recurrence.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTANORMALIZEOPTIONS
#include "passes/Passes.h.inc"

namespace {
bool isCanonical(RecurrenceOp op) {
  GateForm gate = op.getGate();
  return (gate == GateForm::none || gate == GateForm::log ||
          gate == GateForm::channel_log) &&
         op.getBetaForm() == BetaForm::given && !op.getQkL2norm();
}

/// The same shape as `value` with f32 elements.
RankedTensorType asF32(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.clone(Float32Type::get(value.getContext()));
}

void normalize(RecurrenceOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q = op.getQ(), k = op.getK(), g = op.getG(), beta = op.getBeta();
  if (op.getQkL2norm()) {
    q = L2NormOp::create(b, loc, asF32(q), q);
    k = L2NormOp::create(b, loc, asF32(k), k);
  }
  GateForm gate = op.getGate();
  if (gate == GateForm::linear)
    g = GateFromLinearOp::create(b, loc, asF32(g), g);
  if (isRaw(gate))
    g = GateFromRawOp::create(b, loc, asF32(g), g, op.getALog(),
                              op.getDtBias());
  if (op.getBetaForm() != BetaForm::given) {
    float factor = op.getBetaForm() == BetaForm::sigmoid2 ? 2.0f : 1.0f;
    beta = BetaSigmoidOp::create(b, loc, asF32(beta), beta,
                                 b.getF32FloatAttr(factor));
  }
  GateForm canonicalGate = gate == GateForm::none ? GateForm::none
                           : isPerChannel(gate)   ? GateForm::channel_log
                                                  : GateForm::log;
  auto canonical = RecurrenceOp::create(
      b, loc, op->getResultTypes(), op.getRule(), op.getLayout(),
      canonicalGate, BetaForm::given, /*qk_l2norm=*/false, q, k, op.getV(),
      g, op.getGv(), beta, /*a_log=*/Value(), /*dt_bias=*/Value(), op.getInitialState(),
      op.getCuSeqlens(), op.getScale());
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
