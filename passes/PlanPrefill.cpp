//===- PlanPrefill.cpp - kernel variants and their dispatch table -*- C++ -*-===//
//
// `delta-plan-prefill` decides, for each chunked prefill function, which
// recur kernels to emit and when the host launches each. The recurrence is
// sequential over chunks, so a call lasts as long as its busiest block, and
// the blocks, N * HV * V / tile, must fill the GPU to use it: the choice is
// between V tiles. What each tile costs on the hardware comes from a
// PlanTarget (passes/PlanTarget.h; the pass's `target-model` option names
// it): the candidate tiles, from how full a grid each is worth launching,
// and up to which grid it runs overlapped with chunks. The pass turns those
// answers into a dispatch table and drops every variant that could never
// be launched. The decision is written as `delta.recur_variants`, one
// #delta.recur_variant per kernel in dispatch order with its `value_tile` and
// `min_blocks_per_sm` (the first variant whose grid has at least a quarter
// that many blocks per SM is launched; 0: always; the grid counts N
// sequences, or T / max_seqlen where the host knows the longest: the call
// lasts as long as that sequence's chain), and `overlap_blocks_per_sm` (the
// overlapped launch, chunks and recur side by side, where the variant's
// N * HV * V / tile blocks are at most a quarter that many per SM; 0:
// never), which delta-lower-prefill-to-gpu and the host wrapper consume.
// Beside it, `delta.context_parallel`: from which sequence length and up
// to which recur grid the host splits sequences into segments; and
// `delta.shared_overlap`: where it takes the shared overlapped launch.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"
#include "passes/PlanTarget.h"

#include "mlir/IR/Builders.h"

#include <limits>

namespace mlir::delta {
#define GEN_PASS_DEF_DELTAPLANPREFILL
#include "passes/Passes.h.inc"

namespace {
struct PlanPrefill : impl::DeltaPlanPrefillBase<PlanPrefill> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto entry = func->getAttrOfType<EntryKindAttr>(DeltaDialect::kEntryAttrName);
    if (!entry || entry.getValue() != EntryKind::prefill)
      return;
    SmallVector<ChunkStateStepOp> steps;
    func.walk([&](ChunkStateStepOp op) { steps.push_back(op); });
    if (steps.size() != 1) {
      func.emitError("delta-plan-prefill expects the chunk IR of one "
                     "recurrence; run delta-chunk first");
      return signalPassFailure();
    }
    int64_t K = steps.front().getState().getType().getDimSize(0),
            V = steps.front().getState().getType().getDimSize(1);
    // Per-channel decays (rule kda): a gamma of [C][K].
    SmallVector<ChunkKktOp> kkts;
    func.walk([&](ChunkKktOp op) { kkts.push_back(op); });
    Value gamma = kkts.empty() ? Value() : kkts.front().getGamma();
    bool perChannel = gamma && cast<RankedTensorType>(gamma.getType()).getRank() == 2;
    const PlanTarget *target = lookupPlanTarget(targetModel);
    if (!target) {
      func.emitError() << "delta-plan-prefill: no target model '" << targetModel
                       << "' is registered (registered: " << registeredPlanTargets() << ")";
      return signalPassFailure();
    }
    PlanQuery query{K, V, perChannel};
    SmallVector<int64_t> tiles(valueTiles.begin(), valueTiles.end());
    if (tiles.empty())
      tiles = target->valueTiles(query);
    SmallVector<int64_t> usable;
    for (int64_t t : tiles) {
      if (t < 8 || t % 8 != 0 || V % t != 0) {
        func.emitError() << "value tile " << t
                         << " must be a multiple of 8 that divides V = " << V;
        return signalPassFailure();
      }
      if (!llvm::is_contained(usable, t))
        usable.push_back(t);
    }
    llvm::sort(usable, std::greater<int64_t>());
    OpBuilder b(func);
    SmallVector<Attribute> variants;
    // The host launches variant i where busy * HV >= min_blocks * tile *
    // SMs / (4 V) and no earlier one's bound holds: one whose min_blocks *
    // tile is not below an earlier variant's would never be launched (tile
    // 32 after a scalar gate's tile 64: 2 * 32 = 1 * 64), so it is not
    // emitted, rather than compiled and shipped for nothing.
    int64_t lowestBound = std::numeric_limits<int64_t>::max(), boundTile = 0;
    for (auto [i, t] : llvm::enumerate(usable)) {
      // In quarters of a block per SM; the narrowest tile is the fallback.
      int64_t minBlocks =
          i + 1 == usable.size() ? 0 : target->launchQuartersPerSm(query, t);
      int64_t overlap = target->overlapQuartersPerSm(query, t);
      if (minBlocks * t >= lowestBound) {
        // Tiles the user asked for by name are worth a word; the default
        // list's dead entry is not.
        if (!valueTiles.empty())
          func.emitRemark() << "value tile " << t << " is not emitted: tile " << boundTile
                            << " is launched on every grid it would be";
        continue;
      }
      lowestBound = minBlocks * t;
      boundTile = t;
      variants.push_back(RecurVariantAttr::get(b.getContext(), t, minBlocks, overlap));
    }
    func->setAttr(DeltaDialect::kRecurVariantsAttrName, b.getArrayAttr(variants));
    // Context parallelism's thresholds: the options, else the target's.
    if (segmentMinTokens < -1 || segmentEighthsPerSm < -1) {
      func.emitError() << "segment-min-tokens and segment-eighths-per-sm must be "
                          "non-negative (or -1: the target model's), got "
                       << int64_t(segmentMinTokens) << " and " << int64_t(segmentEighthsPerSm);
      return signalPassFailure();
    }
    int64_t minTokens = segmentMinTokens >= 0 ? int64_t(segmentMinTokens)
                                              : target->segmentMinTokens(query);
    int64_t eighths = segmentEighthsPerSm >= 0 ? int64_t(segmentEighthsPerSm)
                                               : target->segmentEighthsPerSm(query);
    func->setAttr(DeltaDialect::kContextParallelAttrName,
                  ContextParallelAttr::get(b.getContext(), minTokens, eighths));
    // The shared overlapped launch's range: the options, else the target's.
    if (sharedMinTokens < -1 || sharedMaxTokens < -1 || sharedQuartersPerSm < -1) {
      func.emitError() << "shared-min-tokens, shared-max-tokens and shared-quarters-per-sm "
                          "must be non-negative (or -1: the target model's), got "
                       << int64_t(sharedMinTokens) << ", " << int64_t(sharedMaxTokens)
                       << " and " << int64_t(sharedQuartersPerSm);
      return signalPassFailure();
    }
    PlanTarget::SharedOverlapBounds shared = target->sharedOverlap(query);
    if (sharedMinTokens >= 0)
      shared.minTokens = sharedMinTokens;
    if (sharedMaxTokens >= 0)
      shared.maxTokens = sharedMaxTokens;
    if (sharedQuartersPerSm >= 0)
      shared.quartersPerSm = sharedQuartersPerSm;
    if (shared.maxTokens < shared.minTokens) {
      func.emitError() << "the shared overlapped launch's range is empty: " << shared.minTokens
                       << " to " << shared.maxTokens << " tokens per sequence";
      return signalPassFailure();
    }
    func->setAttr(DeltaDialect::kSharedOverlapAttrName,
                  SharedOverlapAttr::get(b.getContext(), shared.minTokens, shared.maxTokens,
                                         shared.quartersPerSm));
  }
};
} // namespace
} // namespace mlir::delta
