//===- PlanTarget.h - what delta-plan-prefill asks of a target ---*- C++ -*-===//
//
// delta-plan-prefill decides which recur kernels a prefill entry ships and
// when the host launches each, but the costs behind that decision belong
// to the hardware: which V tiles a recur block can hold, and from how full
// a grid each one pays off. The pass asks a PlanTarget, looked up by name
// (its `target-model` option), so passes/ stays free of any target's code;
// codegen/gpu/NvidiaTarget.cpp registers the NVIDIA one.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_PASSES_PLANTARGET_H
#define DELTAC_PASSES_PLANTARGET_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mlir::delta {

/// The prefill entry the plan is for, as far as the costs depend on it.
struct PlanQuery {
  int64_t k, v;         ///< the state's K x V
  bool perChannelDecay; ///< rule kda (a K-vector decay per token)
};

class PlanTarget {
public:
  virtual ~PlanTarget();
  /// The V tiles worth a recur kernel when the user names none, widest
  /// first (each a multiple of 8 dividing V).
  virtual llvm::SmallVector<int64_t> valueTiles(const PlanQuery &q) const = 0;
  /// From how many blocks per SM, in quarters, a recur of V tile `tile`
  /// that is not the narrowest is worth launching (the narrowest is always
  /// launched where no wider one is).
  virtual int64_t launchQuartersPerSm(const PlanQuery &q, int64_t tile) const = 0;
  /// Up to how many blocks per SM, in quarters, the tile's recur runs
  /// overlapped with chunks (0: never).
  virtual int64_t overlapQuartersPerSm(const PlanQuery &q, int64_t tile) const = 0;
  /// Context parallelism: the fewest tokens of a busy sequence worth
  /// splitting into segments...
  virtual int64_t segmentMinTokens(const PlanQuery &q) const = 0;
  /// ... and the largest recur grid, in eighths of a block per SM, whose
  /// sequences are split (0: never).
  virtual int64_t segmentEighthsPerSm(const PlanQuery &q) const = 0;
  /// The shared overlapped launch (chunks' queue and a recur that fits an
  /// SM beside one of its blocks): the range of tokens per sequence, and
  /// the largest recur grid in quarters of a block per SM, where it pays.
  struct SharedOverlapBounds {
    int64_t minTokens, maxTokens, quartersPerSm;
  };
  virtual SharedOverlapBounds sharedOverlap(const PlanQuery &q) const = 0;
};

/// Registers `target` under `name`, replacing nothing: a second
/// registration of a name is ignored (registration functions may run more
/// than once).
void registerPlanTarget(llvm::StringRef name, std::unique_ptr<PlanTarget> target);

/// The target registered under `name`, or null.
const PlanTarget *lookupPlanTarget(llvm::StringRef name);

/// The registered names, comma-separated (for diagnostics).
std::string registeredPlanTargets();

} // namespace mlir::delta

#endif // DELTAC_PASSES_PLANTARGET_H
