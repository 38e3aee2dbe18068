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
/// A threshold option: its value, and the target model's (replaced by the
/// option's where the option is not -1).
struct ThresholdOption {
  StringRef name;
  int64_t option;
  int64_t &value;
};

/// Applies `options` (each -1 by default: the target model's value); a
/// value below -1 is an error naming them all.
LogicalResult applyOptions(func::FuncOp func, ArrayRef<ThresholdOption> options) {
  if (llvm::all_of(options, [](const ThresholdOption &o) { return o.option >= -1; })) {
    for (const ThresholdOption &o : options)
      if (o.option >= 0)
        o.value = o.option;
    return success();
  }
  // "a and b", "a, b and c".
  auto list = [&](auto item) {
    std::string text;
    for (size_t i = 0; i < options.size(); ++i)
      text += (i == 0 ? "" : i + 1 == options.size() ? " and " : ", ") + item(options[i]);
    return text;
  };
  return func.emitError() << list([](const ThresholdOption &o) { return o.name.str(); })
                          << " must be non-negative (or -1: the target model's), got "
                          << list([](const ThresholdOption &o) { return std::to_string(o.option); });
}

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
    int64_t minTokens = target->segmentMinTokens(query),
            eighths = target->segmentEighthsPerSm(query);
    if (failed(applyOptions(func, {{"segment-min-tokens", segmentMinTokens, minTokens},
                                   {"segment-eighths-per-sm", segmentEighthsPerSm, eighths}})))
      return signalPassFailure();
    func->setAttr(DeltaDialect::kContextParallelAttrName,
                  ContextParallelAttr::get(b.getContext(), minTokens, eighths));
    // The shared overlapped launch's range: the options, else the target's.
    PlanTarget::SharedOverlapBounds shared = target->sharedOverlap(query);
    if (failed(applyOptions(func, {{"shared-min-tokens", sharedMinTokens, shared.minTokens},
                                   {"shared-max-tokens", sharedMaxTokens, shared.maxTokens},
                                   {"shared-quarters-per-sm", sharedQuartersPerSm,
                                    shared.quartersPerSm}})))
      return signalPassFailure();
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
