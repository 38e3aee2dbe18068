//===- DecodeSpec.h - what a decode kernel is specialised for -*- C++ -*-===//
//
// The options of one decode kernel (DecodeSpec), its code-shape choices
// (DecodeTuning, the pass options of delta-lower-decode-to-gpu) and how it
// maps the state onto threads (DecodeTiling): below both the kernel's
// entry points (DecodeKernel.h) and its emitters (DecodeEmitter.h).
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_DECODE_DECODESPEC_H
#define DELTAC_CODEGEN_GPU_DECODE_DECODESPEC_H

#include "dialect/DeltaOps.h"

namespace mlir::delta {

/// How a decode kernel maps the state onto threads, from K, V, the state
/// type and layout. Every thread moves 16-byte pieces of state rows (the
/// contiguous axis: K for `vk`, V for `kv`).
///   vk: `lanesPerRow` lanes share one [K] row, each with `loadsPerLane`
///       pieces of it; a thread keeps `rowsPerThread` value rows. Dots over K
///       reduce with warp shuffles among the lanes of a row.
///   kv: `lanesPerRow` lanes cover a tile of V columns with one piece each;
///       the other lanes and warps split K, a thread keeping `rowsPerThread`
///       key rows. Dots over K reduce with shuffles, then across warps
///       through shared memory.
struct DecodeTiling {
  StateLayout layout;
  int64_t elemsPerLoad;  ///< state elements in 16 bytes (4 f32, 8 bf16)
  int64_t lanesPerRow;   ///< lanes along the contiguous axis (power of two)
  int64_t loadsPerLane;  ///< 16-byte pieces per lane per row
  int64_t rowsPerThread; ///< rows a thread keeps in registers
  int64_t warps;         ///< warps per block
  int64_t threads() const { return warps * 32; }
  /// Value rows (vk) or value columns (kv) one block owns.
  int64_t valuesPerBlock() const {
    return layout == StateLayout::vk
               ? warps * (32 / lanesPerRow) * rowsPerThread
               : lanesPerRow * elemsPerLoad;
  }
};

/// The options a decode kernel is specialised for.
struct DecodeSpec {
  Rule rule;
  GateForm gate;
  BetaForm beta;
  bool qkL2Norm;
  StateLayout layout;
  Type ioType, stateType;
  int64_t k, v, maxT;
  /// FLA's per-value terms (the recurrence's gv and [.., V] beta): the
  /// kernel reads gv and, per the call's kBetaPerValue, a beta per value
  /// column.
  bool perValue = false;
  /// `l2norm = call`: the call's flags (kCallL2Norm) say whether q and k
  /// are normalised. (`beta = call` is beta == BetaForm::call.)
  bool l2normCall = false;
};

/// Code-shape choices of the decode kernels. The defaults come from the
/// reasoning in DecodeKernel.cpp; the pass options of
/// delta-lower-decode-to-gpu (and deltac --decode-tuning) override them, to
/// measure alternatives without editing the compiler.
struct DecodeTuning {
  int64_t rowsPerThread = 0; ///< state rows per thread; 0 = chosen
  bool prefetch = true;      ///< load token t + 1 while computing token t
  /// Dispatch: the host uses this kernel when it launches at least this many
  /// quarters of a block per SM (0: always); variants are tried in order.
  int64_t minBlocksPerSM = 0;
  bool unswitchSteps = true; ///< separate loops with / without step stores
  int64_t dotPartials = 4;   ///< independent partial sums per dot product
  /// The staged form (DecodeStage.cpp): every token's inputs copied to
  /// shared memory in one round before the token loop.
  bool stageInputs = false;
  /// Dispatch: the host uses this kernel only for calls of at least this
  /// many tokens a row (0: any call).
  int64_t minTokens = 0;
};

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_DECODE_DECODESPEC_H
