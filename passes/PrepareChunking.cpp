//===- PrepareChunking.cpp - decays summed inside chunks --------*- C++ -*-===//
//
// The chunked form needs Gamma, the inclusive sum of log decays inside each
// chunk (DESIGN.md, "The math"). Computing it up front keeps the chunk loop
// free of prefix sums and makes the chunk size explicit in the IR.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTAPREPARECHUNKING
#include "passes/Passes.h.inc"

namespace {
struct PrepareChunking : impl::DeltaPrepareChunkingBase<PrepareChunking> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto entry = func->getAttrOfType<EntryKindAttr>(DeltaDialect::kEntryAttrName);
    if (!entry || entry.getValue() != EntryKind::prefill)
      return;
    int64_t chunk = chunkSize;
    if (chunk == 0) {
      auto attr =
          func->getAttrOfType<IntegerAttr>(DeltaDialect::kChunkSizeAttrName);
      if (!attr) {
        func.emitError() << "prefill function has no '"
                         << DeltaDialect::kChunkSizeAttrName
                         << "'; give the pass a chunk-size";
        return signalPassFailure();
      }
      chunk = attr.getInt();
    }
    if (!isSupportedChunkSize(chunk)) {
      func.emitError() << "chunk size " << chunk
                       << " is not supported; use 16, 32 or 64";
      return signalPassFailure();
    }

    WalkResult result = func.walk([&](RecurrenceOp op) {
      if (takesRawParams(op.getGate()) || op.getGate() == GateForm::linear ||
          op.getBetaForm() != BetaForm::given || op.getQkL2norm() ||
          op.getL2normCall()) {
        op.emitError("recurrence has non-canonical options; run "
                     "delta-normalize-options before delta-prepare-chunking");
        return WalkResult::interrupt();
      }
      // Each value column with its own decay or beta has its own
      // transition: no K x K chunk transfer carries it.
      if (op.getGv() ||
          cast<RankedTensorType>(op.getBeta().getType()).getRank() == 4) {
        op.emitError("per-value terms (gv, a beta per value column) have no "
                     "chunked form; they lower to decode only");
        return WalkResult::interrupt();
      }
      OpBuilder b(op);
      Value gamma;
      if (Value g = op.getG())
        gamma = ChunkCumsumOp::create(b, op.getLoc(), g.getType(), g,
                                      op.getCuSeqlens(), chunk);
      auto chunked = ChunkedRecurrenceOp::create(
          b, op.getLoc(), op->getResultTypes(), op.getRule(), op.getLayout(),
          chunk, op.getQ(), op.getK(), op.getV(), gamma, op.getBeta(),
          op.getInitialState(), op.getCuSeqlens(), op.getScale());
      op->replaceAllUsesWith(chunked->getResults());
      op->erase();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::delta
