//===- NvidiaTarget.cpp - what the NVIDIA targets can do ------------*- C++ -*-===//

#include "codegen/gpu/NvidiaTarget.h"
#include "passes/PlanTarget.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::delta;

bool mlir::delta::targetHasWarpgroupMma(StringRef chip) { return chip == "sm_90a"; }

/// The compute capability of "sm_90a" (90), 0 when unreadable.
static int64_t computeCapability(StringRef chip) {
  StringRef arch = chip.drop_front(3).take_while(llvm::isDigit);
  int64_t cc = 0;
  if (!chip.starts_with("sm_") || arch.getAsInteger(10, cc))
    return 0;
  return cc;
}

bool mlir::delta::targetHasBulkCopies(StringRef chip) {
  return computeCapability(chip) >= 90;
}

bool mlir::delta::targetIsBlackwellOrLater(StringRef chip) {
  return computeCapability(chip) >= 100;
}

int64_t mlir::delta::targetSharedLimit(StringRef chip) {
  int64_t cc = computeCapability(chip);
  if (cc == 0)
    return 48 * 1024;
  if (cc == 80 || cc == 87)
    return 163 * 1024;
  if (cc == 86 || cc == 89 || cc >= 120)
    return 99 * 1024;
  if (cc >= 90)
    return 227 * 1024;
  return 48 * 1024;
}

SmallVector<std::pair<KernelCode, SmallVector<Attribute>>>
mlir::delta::groupTargetsByCode(ArrayAttr targets,
                                function_ref<KernelCode(StringRef)> codeOf) {
  SmallVector<std::pair<KernelCode, SmallVector<Attribute>>> groups;
  for (Attribute t : targets) {
    KernelCode code = codeOf(cast<NVVM::NVVMTargetAttr>(t).getChip());
    auto *group = llvm::find_if(groups, [&](auto &g) { return g.first == code; });
    if (group == groups.end())
      group = &groups.emplace_back(code, SmallVector<Attribute>{});
    group->second.push_back(t);
  }
  return groups;
}

std::string mlir::delta::moduleSuffixOfCode(KernelCode code, size_t kinds) {
  if (kinds <= 1)
    return "";
  return code == KernelCode::bulk ? "_bulk" : code == KernelCode::wgmma ? "_wgmma" : "";
}

namespace {
/// The recurrence is sequential over chunks, so a call is as fast as its
/// busiest block; a block's work per chunk grows with its V tile, while
/// the number of blocks, N * HV * V / tile, must fill the GPU to use it.
/// Hence wide tiles (less redundant work on K) when the grid already covers
/// half the SMs, narrower ones when it does not: a block of half the width
/// is not twice as fast, and one wave of wide blocks beats two of narrow
/// ones (measured on the H200).
class NvidiaPlanTarget : public PlanTarget {
public:
  SmallVector<int64_t> valueTiles(const PlanQuery &q) const override {
    // Tile 64 only where recur's state fits its warps' registers (K <= 128).
    SmallVector<int64_t> tiles = {32, 16};
    if (q.k <= 128 && q.v % 64 == 0)
      tiles.insert(tiles.begin(), 64);
    return tiles;
  }
  int64_t launchQuartersPerSm(const PlanQuery &q, int64_t tile) const override {
    // Half a wave (2 quarters) for every tile but the narrowest; a quarter
    // for tile 64 of a scalar gate: there sm_90a's transposed recur (S^T
    // as a register operand) runs a chunk faster than tile 32's form does,
    // so it wins wherever the narrowest grid (four times as many blocks)
    // would overflow a wave (H200: T = 4K, HV = 32: 70.9 against 80.9 us).
    return tile == 64 && !q.perChannelDecay ? 1 : 2;
  }
  int64_t overlapQuartersPerSm(const PlanQuery &q, int64_t tile) const override {
    // Where the grid needs at most a quarter of the SMs, the transposed
    // recur's chain at tile 64 keeps up with chunks on the other three
    // quarters, and the call takes about as long as the longer of the two
    // instead of their sum.
    return tile == 64 && !q.perChannelDecay ? 1 : 0;
  }
  int64_t segmentMinTokens(const PlanQuery &) const override {
    // Below 8K tokens a sequence's chain is short next to chunks' time and
    // the segments' transfers (K more columns each) do not pay back.
    return 8192;
  }
  int64_t segmentEighthsPerSm(const PlanQuery &) const override {
    // Split only where recur's grid leaves at least seven eighths of the
    // SMs idle (H100, session 36: T = 32K at H2 3.2x, H4 2.0x, H8 1.25x
    // faster; at H16, a grid of a quarter of the SMs, chunks' SM time bounds
    // the call and the split loses, 0.78 -> 0.92 ms).
    return 1;
  }
  SharedOverlapBounds sharedOverlap(const PlanQuery &) const override {
    // H100, 2026-11-25, H16/HV32, 64 recur blocks: T = 512 loses 5 %, 1K-16K
    // win 3-11 % (above 16K not measured); a wave of recur blocks loses
    // (2 x 2K +6 %, 2 x 4K +3 %), so at most half the SMs.
    return {1024, 16384, 2};
  }
};
} // namespace

void mlir::delta::registerNvidiaPlanTarget() {
  registerPlanTarget("nvidia", std::make_unique<NvidiaPlanTarget>());
}
