//===- PrefillRecurForms.h - recur's forms as builder types ------*- C++ -*-===//
//
// recur's body is one of three forms (PrefillPlan::recur). Each is a type
// over PrefillEmitter's primitives that holds the helpers only its form
// uses, and one builder function builds it from emitRecur's single
// dispatch, given the block's sequence (RecurSequence):
//
//   buildRecurRows         mma.sync: state warps (the state shared by rows,
//                          or in their registers) and output warps around
//                          the operand ring (RecurRowsBuilder;
//                          PrefillRecur.cpp, PrefillRecurState.cpp)
//   buildRecurWarpgroup    sm_90a: two wgmma warpgroups, S and V' handed
//                          over as swizzled images (PrefillRecurWarpgroup.cpp)
//   buildRecurTransposed   sm_90a: S^T and V'^T as wgmma's register A
//                          operand, with its raw q/k, overlapped and shared
//                          variants (PrefillRecurTransposed.cpp)
//
// The two wgmma forms share WgmmaRecurBuilder's ring of bulk copies.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLRECURFORMS_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLRECURFORMS_H

#include "codegen/gpu/prefill/PrefillEmitter.h"

namespace mlir::delta::prefill {

/// RecurForm::SharedRows and ::RegisterState.
void buildRecurRows(const PrefillEmitter &e, const RecurSequence &q);
/// RecurForm::Warpgroup.
void buildRecurWarpgroup(const PrefillEmitter &e, const RecurSequence &q);
/// RecurForm::Transposed, ::TransposedRawQK, ::TransposedOverlap and
/// ::TransposedShared.
void buildRecurTransposed(const PrefillEmitter &e, const RecurSequence &q);

/// recur's mma.sync forms: the state and output warp roles around the
/// operand ring (PrefillRecur.cpp); the state warps keep S in shared memory
/// by rows or, RecurForm::RegisterState, in their registers
/// (PrefillRecurState.cpp).
class RecurRowsBuilder : public PrefillEmitter {
public:
  /// Builds over `e`'s builder, kernel and thread ids.
  explicit RecurRowsBuilder(const PrefillEmitter &e) : PrefillEmitter(e) {}
  void build(const RecurSequence &q);

private:
  /// The state warps with S in shared memory, shared by rows
  /// (RecurForm::SharedRows, PrefillRecur.cpp).
  void recurStateShared(const RecurFrame &f);
  /// The state warps with S^T in their own registers, 16 columns a warp
  /// (RecurForm::RegisterState, PrefillRecurState.cpp).
  void recurStateRegisters(const RecurFrame &f);
  /// The state warps' end of chunk c: the next chunk's S (the state after
  /// c) goes to S copy `other` once the output warps are done with chunk
  /// c - 1's, and is announced (sReady).
  void handOverNextS(const RecurFrame &f, Value c, Value other,
                     function_ref<void(Value)> storeS);
};

/// What the two wgmma forms share: their ring of operand stages, filled by
/// one thread's bulk copies completing on an mbarrier per stage
/// (PrefillRecurWarpgroup.cpp).
class WgmmaRecurBuilder : public PrefillEmitter {
public:
  explicit WgmmaRecurBuilder(const PrefillEmitter &e) : PrefillEmitter(e) {}

protected:
  /// Chunk c's operands into its stage (at `base`, the aligned shared
  /// memory), one thread's five bulk copies (six for kda: e^G_last per
  /// channel) completing on the stage's mbarrier. rawQK (the transposed
  /// recur's raw form): no Qg and Kd, and P comes with the factors fq, fk
  /// after G_last. `tma` (rawQK only; i1, null: never): also copy the
  /// chunk's raw q and k rows into the stage, by TMA tensor copies (q_map,
  /// k_map). `rawW` (rawQK only): chunks wrote A_w's C x C image where W
  /// would be, and only that is copied (recur computes W).
  void copyStage(const RecurWarpgroupSmem &L, const RecurRing &ring, Value base,
                 const RecurSequence &q, Value c, bool rawQK = false, Value tma = {},
                 bool rawW = false);
  /// Thread 0 initialises the ring's three stage mbarriers at `base` (each
  /// phase completing after `arrivals` arrivals and its bytes), then a
  /// block barrier.
  void initRingBarriers(Value base, Value arrivals = Value());
  /// Thread 0 issues `copies` for the sequence's first chunks, one per
  /// stage the launch granted.
  void fillRing(const RecurRing &ring, Value c1, function_ref<void(Value)> copies);
  /// The last two rounds (or the only one) of a hand-over named barrier
  /// `id` + chunk parity that the loop over chunks [c0, c1) left pending:
  /// each waited for, so every round the other side signals completes.
  void syncLastRounds(int64_t id, Value c0, Value c1, int64_t threads);
};

} // namespace mlir::delta::prefill

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLRECURFORMS_H
