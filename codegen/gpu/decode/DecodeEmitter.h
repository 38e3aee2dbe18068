//===- DecodeEmitter.h - what the decode kernel emitters share -*- C++ -*-===//
//
// The parameter indices of the decode ABI and EmitterBase: constants, math,
// memory access, the prologue (ids, rows, slots, checks), gate and beta,
// the token loop and the staged form's copy of a call's token inputs
// (DecodeStage.cpp); VkEmitterBase adds vk's mapping of rows onto threads.
// The vk and kv emitters of DecodeKernel.cpp build on them.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_DECODE_DECODEEMITTER_H
#define DELTAC_CODEGEN_GPU_DECODE_DECODEEMITTER_H

#include "codegen/gpu/KernelEmitter.h"
#include "codegen/gpu/decode/DecodeSpec.h"
#include "templates/runtime/deltac_abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::delta::decode {

/// Indices of decodeKernelParams(), in order.
enum Param {
  pQ, pK, pV, pG, pBeta, pALog, pDtBias, pO, pState, pInIdx, pOutIdx,
  pStepStates, pErrorFlag, pT, pH, pHV, pSlots, pQStride, pKStride, pVStride,
  pOStride, pScale, pFlags, pStepSlots, pNumAccepted, pStepSlotsStride,
  pCuSeqlens, pStateIn, pSlotStride, pLowerBound, pGv, kNumParams
};

/// The most gv values a thread loads at once (kv: one 16-byte piece of a
/// 16-bit state row's columns).
constexpr int64_t kMaxGvPiece = 8;

/// The kernel's global array of kMaxGvPiece zeros, read in place of a null
/// gv (per_value specs) or a null log g (FLA's g=None: log decay 0, no
/// decay), chosen by selects of the address (a branch per token made a vk
/// kernel spill).
inline std::string zerosSymbol(StringRef kernel) { return (kernel + "_zeros").str(); }

/// Whether `spec`'s kernels carry zerosSymbol's array.
inline bool needsZeros(const DecodeSpec &spec) {
  return spec.perValue || spec.gate == GateForm::log || spec.gate == GateForm::call;
}

/// What both layouts share: constants, math, memory access, slot handling,
/// gate and beta.
class EmitterBase : protected KernelEmitter {
public:
  EmitterBase(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
              const DecodeSpec &spec, const DecodeTiling &tiling,
              const DecodeTuning &tuning)
      : KernelEmitter(b), func(func), s(spec), t(tiling), tune(tuning) {}

protected:
  Value param(Param p) { return func.getArgument(p); }
  Value notI1(Value x) { return arith::XOrIOp::create(b, x, cTrue()); }
  Value andI1(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value sel64(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  /// Element i of an index array as i64: int64 where `wide` (the call's
  /// kIndicesI64), else int32 sign-extended. Only the chosen width is read.
  Value loadIndex(Value base, Value wide, Value i) {
    auto r = scf::IfOp::create(b, TypeRange{i64}, wide, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(r.thenBlock());
    scf::YieldOp::create(
        b, LLVM::LoadOp::create(b, i64, gep(base, i64, i), 8).getResult());
    b.setInsertionPointToStart(r.elseBlock());
    scf::YieldOp::create(
        b, toI64(LLVM::LoadOp::create(b, i32, gep(base, i32, i), 4)));
    return r.getResult(0);
  }
  /// Dot product in four interleaved partial sums: the dependent chain is
  /// a quarter as long, which is what limits a token's latency.
  Value sum(ArrayRef<Value> x, ArrayRef<Value> y) {
    size_t n = std::max<int64_t>(1, tune.dotPartials);
    SmallVector<Value, 8> partial = {fmul(x[0], y[0])};
    for (size_t e = 1; e < x.size(); ++e) {
      if (partial.size() < n)
        partial.push_back(fmul(x[e], y[e]));
      else
        partial[e % n] = fma(x[e], y[e], partial[e % n]);
    }
    while (partial.size() > 1) {
      SmallVector<Value, 8> halves;
      for (size_t i = 0; i + 1 < partial.size(); i += 2)
        halves.push_back(fadd(partial[i], partial[i + 1]));
      if (partial.size() % 2)
        halves.push_back(partial.back());
      partial = halves;
    }
    return partial.front();
  }

  SmallVector<Value> loadElems(Value base, Type element, Value index,
                               int64_t count);
  void storeElems(Value base, Type element, Value index,
                  ArrayRef<Value> values);

  /// Ids, GVA head, slots and the error flag; leaves the builder inside the
  /// branch taken by rows with a valid slot, after emitting `padding` in the
  /// other branch.
  void prologue(function_ref<void()> padding);
  /// The raw gate input of a token (null without a gate, or per channel).
  Value loadGate(Value tok);
  /// A token's beta inputs for the thread's value columns `columns`: the
  /// head's one, or with per_value one per column (per kBetaPerValue: the
  /// column's, else the head's) followed by gv of each column (0 where gv
  /// is null). `adjacent`: columns[i] = columns[0] + i (gv in one vector
  /// load). numBetaInputs() values in all.
  SmallVector<Value> loadBetas(Value tok, ArrayRef<Value> columns,
                               bool adjacent);
  int64_t numBetaInputs(int64_t columns) const {
    return s.perValue ? 2 * columns : 1;
  }
  /// beta of the token and head at `index`: the io dtype or f32
  /// (kBetaF32).
  Value loadBeta(Value index);
  /// beta from its input as the spec's beta form says.
  Value betaOf(Value input);
  /// The thread's entering state tile of `count` values: zeros with
  /// kZeroState, else `load(src, type)` from state_in (null: the pool) in
  /// the pool's dtype, or for f32 pools 16-bit pieces (type i16, converted
  /// by loadElems as halfIsF16 says) with kStateInHalf.
  SmallVector<Value>
  enteringState(int64_t count,
                function_ref<SmallVector<Value>(Value, Type)> load);
  /// Whether bit `bit` of the flags is set (i1), emitted at the use.
  Value flag(int32_t bit) {
    return cmp(arith::CmpIPredicate::ne,
               arith::AndIOp::create(b, param(pFlags), cI32(bit)), cI32(0));
  }
  /// Whether the kernel may normalise q and k (l2norm, or l2norm = call).
  bool mayNormalise() const { return s.qkL2Norm || s.l2normCall; }
  /// The factor that normalises a row whose squares sum to `sumSquares`:
  /// 1 / sqrt(sumSquares + 1e-6), or with l2norm = call that where the
  /// call's kCallL2Norm is set and 1 otherwise.
  Value normFactor(Value sumSquares);
  /// beta = call: sigmoid(logits), times 2 with the call's kCallBetaTwice.
  Value callSigmoid(Value logits);
  /// Loads what the gate needs per head (raw form: A_log and dt_bias).
  void loadHeadParams();
  /// Per-channel gates whose inputs come with a dt_bias per channel (the
  /// raw form, or the form the call chooses): two values per channel.
  bool channelBias() const {
    return s.gate == GateForm::channel_raw || s.gate == GateForm::channel_call;
  }
  /// Whether the gate is raw (i1): fixed by the spec, or the call's
  /// kCallGateRaw for gate = call / channel_call.
  Value gateIsRaw();
  bool perChannel() const {
    return isPerChannel(s.gate);
  }
  /// KDA: the gate inputs of `count` adjacent key channels from `key` (i64)
  /// of token `tok`: g [tokens, HV, K] (f32 log g, or the raw a in the io
  /// dtype) and, for raw gates, dt_bias [HV, K] (f32; a null dt_bias is 0).
  SmallVector<Value> loadChannelGates(Value tok, Value key, int64_t count);
  /// KDA: the decays of those channels from loadChannelGates' values:
  /// exp(g), or the raw gate's decay (rawDecay).
  SmallVector<Value> channelDecays(ArrayRef<Value> inputs);
  /// The decay of a raw gate input `a` with its dt_bias (aFactor loaded).
  Value rawDecay(Value a, Value bias);
  /// The decay factor and beta from the raw inputs (fused gate and beta).
  std::pair<Value, Value> gateAndBeta(Value g, Value beta);
  /// per_value: each column's beta (beta form applied) and decay factor
  /// exp(gv), from loadBetas' values.
  struct ValueTerms {
    SmallVector<Value> beta, factor;
  };
  ValueTerms valueTerms(ArrayRef<Value> inputs, int64_t columns);
  /// Writes the state after token `tInt` where the call asks for it: the
  /// per-step buffer and/or the pool slot step_slots[b, t] (an index past the
  /// pool is skipped and raises the error flag). `storeTile(dst, base)`
  /// stores the thread's part of the head state starting at element `base`.
  void storeStep(Value tInt, Value tok,
                 function_ref<void(Value, Value)> storeTile);
  using TokenBody = function_ref<SmallVector<Value>(
      Value t, ArrayRef<Value> state, ArrayRef<Value> inputs)>;
  using TileStore = function_ref<void(Value dst, Value base,
                                      ArrayRef<Value> tile)>;
  /// A row skipped by the checks leaves its pool slot as it was; out of
  /// place (state_in or kZeroState) its leaving state, a separate tensor,
  /// is written as zeros instead (never left unwritten).
  void zeroSkippedState(int64_t count, TileStore storeTile) {
    Value outOfPlace = arith::OrIOp::create(b, flag(deltac_abi::kZeroState),
                                            notI1(isNull(param(pStateIn))));
    auto ifWrite = scf::IfOp::create(b, andI1(writePool, outOfPlace), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifWrite.thenBlock());
    storeTile(param(pState), stateBase(outSlot),
              SmallVector<Value>(count, cF32(0.0)));
  }
  /// Advances the thread's state tile over the call's tokens and writes the
  /// result back to the pool: `loadInputs(tok)` loads a token's inputs,
  /// `body(t, state, inputs)` returns the next state, `storeTile` writes a
  /// tile at a head-state base. The loop is emitted twice, with and without
  /// per-step stores, chosen once per call: no per-token branch in the
  /// common case.
  void advanceTokens(ArrayRef<Value> state,
                     function_ref<SmallVector<Value>(Value)> loadInputs,
                     TokenBody body, TileStore storeTile);
  SmallVector<Value> tokenLoop(ArrayRef<Value> state,
                               function_ref<SmallVector<Value>(Value)>
                                   loadInputs,
                               TokenBody body, TileStore storeTile,
                               bool steps);
  /// Loads `count` q or k elements of token `tok` starting at `first`.
  SmallVector<Value> loadQK(Value base, Value stride, Value tok, Value first,
                            int64_t count) {
    Value at = add(add(mul(tok, stride), mul(h, cI64(s.k))), first);
    return loadElems(base, s.ioType, at, count);
  }
  /// Index of the first element of head hv's state in slot `slot`.
  Value stateBase(Value slot) {
    return add(mul(slot, param(pSlotStride)), mul(hv, cI64(s.k * s.v)));
  }
  /// Index of the first element of head hv's state after token `tok` in the
  /// per-step buffer [B, T, HV, state].
  Value stepBase(Value tok) {
    return mul(add(mul(tok, toI64(param(pHV))), hv), cI64(s.k * s.v));
  }
  /// Global index of the row's token t.
  Value token(Value t) { return add(rowStart, toI64(t)); }
  /// The row's token t clamped into the row (and to a real token when the
  /// row is empty): prefetches read it without a bounds branch.
  Value clampedToken(Value t) {
    Value last = arith::SubIOp::create(b, add(rowStart, toI64(rowLen)),
                                       cI64(1));
    Value tok = arith::MinSIOp::create(b, token(t), last);
    return arith::MaxSIOp::create(b, tok, cI64(0));
  }
  Value vIndex(Value tok, Value stride, Value column) {
    return add(add(mul(tok, stride), mul(hv, cI64(s.v))), column);
  }

  gpu::GPUFuncOp func;
  DecodeSpec s;
  DecodeTiling t;
  DecodeTuning tune;
  // Set by prologue().
  Value tid, lane, warp, bx, bb, hv, h, inSlot, outSlot, writePool;
  // The row's tokens: [rowStart, rowStart + rowLen) (i64, i32).
  Value rowStart, rowLen;
  /// The staged form (DecodeStage.cpp): copies every token's q, k, the
  /// block's v columns, g and beta (up to max_t tokens) to `shared`
  /// (stagedInputFloats), KDA's per-channel decays already exponentiated
  /// (K a token), then waits at a barrier. Raw gates need loadHeadParams()
  /// first.
  void stageInputs(Value shared);
  // The stage's layout in floats (stagedInputFloats).
  int64_t qAt(int64_t j) const { return j * s.k; }
  int64_t kAt(int64_t j) const { return (s.maxT + j) * s.k; }
  int64_t vAt(int64_t j) const {
    return 2 * s.maxT * s.k + j * t.valuesPerBlock();
  }
  int64_t gAt(int64_t j) const { return vAt(s.maxT) + j; }
  int64_t betaAt(int64_t j) const { return gAt(s.maxT) + j; }
  /// KDA: token j's K decays exp(g), from a 16-byte boundary.
  int64_t decaysAt(int64_t j) const {
    return (betaAt(s.maxT) + 3) / 4 * 4 + j * s.k;
  }
  /// `count` floats of the stage from `index`, in loads of up to 16 bytes
  /// (loadElems on the shared pointer); storeStage likewise.
  SmallVector<Value> loadStage(Value index, int64_t count) {
    return loadElems(stageBase, f32, index, count);
  }
  void storeStage(Value index, ArrayRef<Value> values) {
    storeElems(stageBase, f32, index, values);
  }
  /// The stage's shared memory (set by stageInputs).
  Value stageBase;

  /// Whether the call's index arrays are int64 (kIndicesI64; i1), emitted
  /// where it is used: the flags parameter stays in the constant bank
  /// instead of an i1 held in a register across the token loop (that one
  /// register made a kv decode kernel spill).
  Value indicesWide() { return flag(deltac_abi::kIndicesI64); }
  // Set by loadHeadParams() for raw gates: exp(A_log[hv]) (1 for a null
  // A_log) and the scalar gates' dt_bias[hv].
  Value aFactor, dtBias;
  /// While enteringState loads 16-bit pieces: whether they are f16 (i1).
  Value halfIsF16;
};

/// The vk layout's mapping of a block's value rows onto threads (rows of
/// S^T, [V, K], K contiguous), shared by the bulk, small and staged
/// emitters: `lanesPerRow` lanes share one row, each with `loadsPerLane`
/// 16-byte pieces of it, a thread keeping `rowsPerThread` rows.
class VkEmitterBase : protected EmitterBase {
protected:
  using EmitterBase::EmitterBase;
  Value rowSum(Value x) { return xorSum(x, 1, t.lanesPerRow / 2); }
  /// Element index (within a K-row) of piece j of the lane: lanes of a row
  /// read adjacent 16-byte pieces, so each load instruction is coalesced.
  Value elemIndex(int64_t j) {
    return add(cI64(j * t.lanesPerRow * t.elemsPerLoad),
               mul(laneInRow, cI64(t.elemsPerLoad)));
  }
  /// The lane's q or k pieces of token `tok`.
  SmallVector<Value> loadVector(Value base, Value stride, Value tok) {
    SmallVector<Value> x;
    for (int64_t j = 0; j < t.loadsPerLane; ++j)
      llvm::append_range(
          x, loadQK(base, stride, tok, elemIndex(j), t.elemsPerLoad));
    return x;
  }
  int64_t perLane() const { return t.loadsPerLane * t.elemsPerLoad; }
  /// Sets laneInRow and rows (the thread's value rows).
  void setupRows();
  /// Stores the thread's rows of a head state starting at element `base`.
  void storeTile(Value dst, Value base, ArrayRef<Value> tile);
  /// The prologue with vk's padding (o = 0 for the row's tokens, a skipped
  /// out-of-place state zeroed); leaves the builder in the valid branch with
  /// the rows set up again there.
  void vkPrologue();
  /// The thread's entering rows, all loads issued before any arithmetic.
  SmallVector<Value> loadEnteringRows();

  /// A token's inputs from the stage (stageInputs), laid out as the token
  /// loop's loadInputs lays out the global ones: q and k pieces, v of each
  /// row, beta, g.
  SmallVector<Value> stagedInputs(Value tok);

  Value laneInRow;
  SmallVector<Value> rows;
};

/// The staged form's shared memory, in floats (DecodeStage.cpp).
int64_t stagedInputFloats(const DecodeSpec &spec, const DecodeTiling &tiling);

} // namespace mlir::delta::decode

#endif // DELTAC_CODEGEN_GPU_DECODE_DECODEEMITTER_H
