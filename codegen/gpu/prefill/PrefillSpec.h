//===- PrefillSpec.h - what a prefill entry is specialised for ---*- C++ -*-===//
//
// The options of one chunked prefill entry as the GPU code generator reads
// them from the chunk IR: the input of the plan, the layouts and the
// kernel builders.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLSPEC_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLSPEC_H

#include "dialect/DeltaOps.h"

namespace mlir::delta {

/// What the prefill kernels are specialised for, read from the chunk IR.
struct PrefillSpec {
  Rule rule;         ///< gated, delta or kda (per-channel decays)
  GateForm gate;     ///< none, log, linear, raw, channel_log or channel_raw
  BetaForm beta;     ///< given, sigmoid, sigmoid2 or call
  bool qkL2Norm;
  StateLayout layout;
  Type ioType, stateType, gateType, betaType;
  int64_t k, v, chunk;
  /// `l2norm = call` (the call's kCallL2Norm says; `beta = call` is
  /// beta == BetaForm::call).
  bool l2normCall = false;
};

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLSPEC_H
