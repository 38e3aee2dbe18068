//===- DecodeKernel.cpp - the recurrent-step (decode) GPU kernel -*- C++ -*-===//
//
// Decode is pure bandwidth: the state (K*V*4 bytes per head in f32) dwarfs
// q, k, v and o. The kernel therefore
//   - reads each state element once with 16-byte loads, coalesced across the
//     lanes that share a row, all loads of a thread issued before first use;
//   - keeps the state in registers for all T tokens (T <= max_t), writing it
//     once at the end (and per step only when a step buffer is given);
//   - fuses gate, beta and q/k L2 norm, and does all arithmetic in f32,
//     rounding o and the state once.
// Per value row r (vk layout: row r of S^T, K contiguous) and token t:
//   d = decay, pk = S_r . k, pq = S_r . q       (one pass, both dots)
//   u = beta (v_r - d pk),  o_r = scale (d pq + u (k . q)),  S_r = d S_r + u k
// which equals the reference's decay-then-update order exactly in real
// arithmetic (o reads the updated state). per_value specs (FLA's gv and
// per-value beta) give row r its own beta_r and d_r = decay exp(gv_r).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/decode/DecodeKernel.h"
#include "codegen/gpu/KernelEmitter.h"
#include "templates/runtime/deltac_abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace mlir::delta;
using namespace deltac_abi; // the flags' bits

namespace {
enum Param {
  pQ, pK, pV, pG, pBeta, pALog, pDtBias, pO, pState, pInIdx, pOutIdx,
  pStepStates, pErrorFlag, pT, pH, pHV, pSlots, pQStride, pKStride, pVStride,
  pOStride, pScale, pFlags, pStepSlots, pNumAccepted, pStepSlotsStride,
  pCuSeqlens, pStateIn, pSlotStride, pLowerBound, pGv, kNumParams
};
} // namespace

ArrayRef<KernelParam> mlir::delta::decodeKernelParams() {
  static const KernelParam params[] = {
      {"q", ParamKind::Pointer},           {"k", ParamKind::Pointer},
      {"v", ParamKind::Pointer},           {"g", ParamKind::Pointer},
      {"beta", ParamKind::Pointer},        {"A_log", ParamKind::Pointer},
      {"dt_bias", ParamKind::Pointer},     {"o", ParamKind::Pointer},
      {"state", ParamKind::Pointer},       {"in_idx", ParamKind::Pointer},
      {"out_idx", ParamKind::Pointer},     {"step_states", ParamKind::Pointer},
      {"error_flag", ParamKind::Pointer},  {"T", ParamKind::I32},
      {"H", ParamKind::I32},               {"HV", ParamKind::I32},
      {"slots", ParamKind::I64},           {"q_stride", ParamKind::I64},
      {"k_stride", ParamKind::I64},        {"v_stride", ParamKind::I64},
      {"o_stride", ParamKind::I64},        {"scale", ParamKind::F32},
      {"flags", ParamKind::I32},           {"step_slots", ParamKind::Pointer},
      {"num_accepted", ParamKind::Pointer},
      {"step_slots_stride", ParamKind::I64},
      {"cu_seqlens", ParamKind::Pointer},  {"state_in", ParamKind::Pointer},
      {"slot_stride", ParamKind::I64},     {"lower_bound", ParamKind::F32},
      {"gv", ParamKind::Pointer}};
  static_assert(sizeof(params) / sizeof(params[0]) == kNumParams);
  return params;
}

/// vk: lanes per row as many as keep at least 16 elements per lane (64 bytes
/// of f32 in flight), a power of two dividing the row, and at least two so a
/// warp covers at most 16 rows (then V >= 16 divides evenly); 64 state
/// registers per thread, 32 when the next token's inputs are prefetched.
/// kv: a tile of 32 value columns (16 when V is not a multiple of 32), the
/// K rows split over lane groups and up to four warps, at most 64 state
/// registers per thread.
DecodeTiling mlir::delta::chooseDecodeTiling(const DecodeSpec &spec,
                                             const DecodeTuning &tuning) {
  DecodeTiling t;
  t.layout = spec.layout;
  t.elemsPerLoad = 16 / (spec.stateType.getIntOrFloatBitWidth() / 8);
  if (spec.layout == StateLayout::kv) {
    int64_t tile = spec.v % 32 == 0 ? 32 : 16;
    t.lanesPerRow = tile / t.elemsPerLoad;
    t.loadsPerLane = 1;
    int64_t groupsPerWarp = 32 / t.lanesPerRow;
    t.warps = 4;
    while (t.warps > 1 && spec.k % (groupsPerWarp * t.warps) != 0)
      t.warps /= 2;
    t.rowsPerThread = spec.k / (groupsPerWarp * t.warps);
    // An override trades rows per thread for warps per block (1 to 32).
    while (tuning.rowsPerThread > 0 && t.rowsPerThread > tuning.rowsPerThread &&
           t.rowsPerThread % 2 == 0 && t.warps < 32) {
      t.rowsPerThread /= 2;
      t.warps *= 2;
    }
    while (tuning.rowsPerThread > t.rowsPerThread && t.warps % 2 == 0) {
      t.rowsPerThread *= 2;
      t.warps /= 2;
    }
    return t;
  }
  int64_t pieces = spec.k / t.elemsPerLoad; // 16-byte pieces per row
  t.lanesPerRow = 1;
  while (t.lanesPerRow < 16 && pieces % (t.lanesPerRow * 2) == 0 &&
         ((pieces / (t.lanesPerRow * 2)) * t.elemsPerLoad >= 16 ||
          t.lanesPerRow < 2))
    t.lanesPerRow *= 2;
  t.loadsPerLane = pieces / t.lanesPerRow;
  int64_t elemsPerLane = t.loadsPerLane * t.elemsPerLoad;
  // 32 state registers per thread leave room for the prefetched inputs of
  // the next token without capping occupancy below 4 blocks per SM.
  // Without prefetch, 64 state registers per thread (measured best for
  // large batches); with it, 32, leaving room for the next token's inputs.
  int64_t maxRows = tuning.rowsPerThread > 0
                        ? tuning.rowsPerThread
                        : std::max<int64_t>(
                              1, (tuning.prefetch ? 32 : 64) / elemsPerLane);
  int64_t rowsPerPass = 32 / t.lanesPerRow;
  int64_t passes = spec.v / rowsPerPass; // warp-passes needed to cover V
  t.warps = 4;
  while (t.warps > 1 && passes % t.warps != 0)
    t.warps /= 2;
  t.rowsPerThread = 1;
  for (int64_t r = maxRows; r >= 1; --r)
    if ((passes / t.warps) % r == 0) {
      t.rowsPerThread = r;
      break;
    }
  return t;
}

SmallVector<std::pair<std::string, DecodeTuning>>
mlir::delta::decodeVariants(const DecodeTuning &overrides, StringRef only) {
  // Measured on an H200 (docs/performance-journal.md, decode variants): at T = 4 the bulk
  // shape is 1.3x faster from B = 64 up, the small one 1.2x faster at B = 1.
  DecodeTuning bulk = overrides, small = overrides;
  bulk.prefetch = false;
  bulk.minBlocksPerSM = 4;
  small.prefetch = true;
  small.minBlocksPerSM = 0;
  SmallVector<std::pair<std::string, DecodeTuning>> variants;
  if (only.empty() || only == "bulk")
    variants.emplace_back("", bulk);
  if (only.empty() || only == "small")
    variants.emplace_back("_small", small);
  return variants;
}

namespace {
/// The most gv values a thread loads at once (kv: one 16-byte piece of a
/// 16-bit state row's columns).
constexpr int64_t kMaxGvPiece = 8;

/// per_value: the kernel's global array of kMaxGvPiece zeros, read in place
/// of a null gv.
std::string noGvSymbol(StringRef kernel) { return (kernel + "_no_gv").str(); }

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
  /// Loads what the gate needs per head (raw form: A_log and dt_bias).
  void loadHeadParams();
  bool perChannel() const {
    return s.gate == GateForm::channel_log || s.gate == GateForm::channel_raw;
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
    Value outOfPlace = arith::OrIOp::create(b, flag(kZeroState),
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
  /// Whether the call's index arrays are int64 (kIndicesI64; i1), emitted
  /// where it is used: the flags parameter stays in the constant bank
  /// instead of an i1 held in a register across the token loop (that one
  /// register made a kv decode kernel spill).
  Value indicesWide() { return flag(kIndicesI64); }
  // Set by loadHeadParams() for raw gates: exp(A_log[hv]) (1 for a null
  // A_log) and the scalar gates' dt_bias[hv].
  Value aFactor, dtBias;
  /// While enteringState loads 16-bit pieces: whether they are f16 (i1).
  Value halfIsF16;
};

SmallVector<Value> EmitterBase::loadElems(Value base, Type element,
                                          Value index, int64_t count) {
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  int64_t perPiece = std::min<int64_t>(count, 16 / bytes);
  SmallVector<Value> out;
  for (int64_t first = 0; first < count; first += perPiece) {
    Value at = gep(base, element, add(index, cI64(first)));
    auto vecType = VectorType::get({perPiece}, element);
    Value vec = LLVM::LoadOp::create(b, vecType, at, perPiece * bytes);
    for (int64_t e = 0; e < perPiece; ++e) {
      Value x = elt(vec, e);
      if (element.isInteger(16)) {
        // A 16-bit state element: bf16 (its bits are an f32's high half)
        // or f16 as halfIsF16 says.
        Value asBf16 = arith::BitcastOp::create(
            b, f32,
            arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i32, x),
                                  cI32(16)));
        Value asF16 = toF32(arith::BitcastOp::create(b, b.getF16Type(), x));
        out.push_back(arith::SelectOp::create(b, halfIsF16, asF16, asBf16));
        continue;
      }
      out.push_back(toF32(x));
    }
  }
  return out;
}

void EmitterBase::storeElems(Value base, Type element, Value index,
                             ArrayRef<Value> values) {
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  int64_t count = values.size();
  int64_t perPiece = std::min<int64_t>(count, 16 / bytes);
  for (int64_t first = 0; first < count; first += perPiece) {
    auto vecType = VectorType::get({perPiece}, element);
    Value vec = LLVM::PoisonOp::create(b, vecType);
    for (int64_t e = 0; e < perPiece; ++e) {
      Value x = values[first + e];
      if (element != f32)
        x = arith::TruncFOp::create(b, element, x);
      vec = LLVM::InsertElementOp::create(b, vec, x, cI32(e));
    }
    Value at = gep(base, element, add(index, cI64(first)));
    LLVM::StoreOp::create(b, vec, at, perPiece * bytes);
  }
}

void EmitterBase::prologue(function_ref<void()> padding) {
  tid = arith::IndexCastOp::create(
      b, i32, gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  lane = arith::RemUIOp::create(b, tid, cI32(32));
  warp = arith::DivUIOp::create(b, tid, cI32(32));
  bx = blockId(gpu::Dimension::x);
  Value hv32 = blockId(gpu::Dimension::y);
  bb = blockId(gpu::Dimension::z);
  hv = toI64(hv32);
  // GVA: value head hv reads q/k head hv / (HV / H).
  h = toI64(arith::DivUIOp::create(
      b, hv32, arith::DivUIOp::create(b, param(pHV), param(pH))));

  // The row's tokens: [b T, b T + T), or with cu_seqlens (T = all tokens)
  // [cu[b], cu[b + 1]). cu_seqlens is valid only as a whole: 0 = cu[0] <=
  // cu[1] <= ... <= cu[B] <= T (checked by every warp over all B + 1
  // entries, so no row lies outside the tokens or overlaps another; tokens
  // past cu[B] get o = 0). An invalid one skips the whole call: o = 0 for
  // every token, no state read or written, the error flag raised. A valid
  // row with more than max_t tokens (or more than step_slots_stride with 2-D
  // slots) is skipped alone: o = 0 for its tokens, no state, the flag.
  Value bb64 = toI64(bb);
  Value rangeOk, zeroFrom;
  Value wide = indicesWide();
  {
    Value cu = param(pCuSeqlens), T = param(pT), T64 = toI64(T);
    auto ifFixed = scf::IfOp::create(
        b, TypeRange{i64, i32, b.getI1Type(), i64}, isNull(cu),
        /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFixed.thenBlock());
    scf::YieldOp::create(b, ValueRange{mul(bb64, T64), T, cTrue(),
                                       mul(toI64(arith::IndexCastOp::create(
                                               b, i32,
                                               gpu::GridDimOp::create(
                                                   b, gpu::Dimension::z))),
                                           T64)});
    b.setInsertionPointToStart(ifFixed.elseBlock());
    Value B = toI64(arith::IndexCastOp::create(
        b, i32, gpu::GridDimOp::create(b, gpu::Dimension::z)));
    // The whole-call check: lane l takes entries 16 l .. 16 l + 15 of each
    // 512, whose 17 loads (its entries and the next one) are all in flight
    // together: one round, one memory latency, up to B = 511, overlapping
    // the row's own loads. The loop is emitted once per index width, so no
    // load waits on a branch.
    constexpr int64_t kPerLane = 16, kPerRound = 32 * kPerLane;
    auto checkRounds = [&](Type elem) {
      auto rounds = scf::ForOp::create(b, cI64(0), add(B, cI64(1)),
                                       cI64(kPerRound), ValueRange{cTrue()});
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(rounds.getBody());
      Value base = add(rounds.getInductionVar(),
                       mul(toI64(lane), cI64(kPerLane)));
      SmallVector<Value> vals;
      for (int64_t u = 0; u <= kPerLane; ++u) {
        Value at = arith::MinSIOp::create(b, add(base, cI64(u)), B);
        Value x = LLVM::LoadOp::create(b, elem, gep(cu, elem, at),
                                       elem.getIntOrFloatBitWidth() / 8);
        vals.push_back(toI64(x));
      }
      Value ok = rounds.getRegionIterArg(0);
      for (int64_t u = 0; u < kPerLane; ++u) {
        Value e = add(base, cI64(u)), here = vals[u], next = vals[u + 1];
        Value inside = cmp(arith::CmpIPredicate::sle, e, B);
        Value hasNext = cmp(arith::CmpIPredicate::slt, e, B);
        Value good = andI1(cmp(arith::CmpIPredicate::sge, here, cI64(0)),
                           cmp(arith::CmpIPredicate::sle, here, T64));
        good = andI1(good, arith::OrIOp::create(
                               b, notI1(hasNext),
                               cmp(arith::CmpIPredicate::sle, here, next)));
        good = andI1(good, arith::OrIOp::create(
                               b, cmp(arith::CmpIPredicate::ne, e, cI64(0)),
                               cmp(arith::CmpIPredicate::eq, here, cI64(0))));
        ok = andI1(ok, arith::OrIOp::create(b, notI1(inside), good));
      }
      scf::YieldOp::create(b, ok);
      return rounds.getResult(0);
    };
    auto byWidth = scf::IfOp::create(b, TypeRange{b.getI1Type()}, wide, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(byWidth.thenBlock());
      scf::YieldOp::create(b, checkRounds(i64));
      b.setInsertionPointToStart(byWidth.elseBlock());
      scf::YieldOp::create(b, checkRounds(i32));
    }
    Value callOk = NVVM::VoteSyncOp::create(b, b.getI1Type(), cI32(-1),
                                            byWidth.getResult(0),
                                            NVVM::VoteSyncKind::all);
    // Bounds only from a valid cu_seqlens (else the loads are not used).
    Value start = sel64(callOk, loadIndex(cu, wide, bb64), cI64(0));
    Value end = sel64(callOk, loadIndex(cu, wide, add(bb64, cI64(1))),
                      cI64(0));
    Value covered = sel64(callOk, loadIndex(cu, wide, B), cI64(0));
    Value len = arith::SubIOp::create(b, end, start);
    Value fitsSlots = arith::OrIOp::create(
        b, isNull(param(pStepSlots)),
        cmp(arith::CmpIPredicate::sle, len, param(pStepSlotsStride)));
    Value ok = andI1(andI1(callOk, fitsSlots),
                     cmp(arith::CmpIPredicate::sle, len, cI64(s.maxT)));
    scf::YieldOp::create(
        b, ValueRange{start, arith::TruncIOp::create(b, i32, len), ok,
                      covered});
    rowStart = ifFixed.getResult(0);
    rowLen = ifFixed.getResult(1);
    rangeOk = ifFixed.getResult(2);
    zeroFrom = ifFixed.getResult(3);
  }
  // Tokens no row covers (past cu[B], or all of them in a skipped call):
  // o = 0, shared by the whole grid. Empty unless cu_seqlens says so.
  {
    Value T64 = toI64(param(pT));
    auto ifTail = scf::IfOp::create(
        b, cmp(arith::CmpIPredicate::slt, zeroFrom, T64), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifTail.thenBlock());
    auto dim = [&](gpu::Dimension d) {
      return toI64(arith::IndexCastOp::create(
          b, i32, gpu::GridDimOp::create(b, d)));
    };
    Value gx = dim(gpu::Dimension::x), gy = dim(gpu::Dimension::y),
          gz = dim(gpu::Dimension::z);
    Value threads = cI64(t.threads());
    Value flatBlock =
        add(mul(add(mul(bb64, gy), hv), gx), toI64(bx));
    Value perToken = mul(toI64(param(pHV)), cI64(s.v));
    auto loop = scf::ForOp::create(
        b, add(mul(flatBlock, threads), toI64(tid)),
        mul(arith::SubIOp::create(b, T64, zeroFrom), perToken),
        mul(mul(mul(gx, gy), gz), threads));
    b.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Value tok = add(zeroFrom, arith::DivUIOp::create(b, i, perToken));
    Value rest = arith::RemUIOp::create(b, i, perToken);
    Value at = add(mul(tok, param(pOStride)), rest);
    storeElems(param(pO), s.ioType, at, {cF32(0.0)});
  }

  // Slots: in_idx[b] (or b), out_idx[b] (or the slot read); int32, or
  // int64 with kIndicesI64 (never narrowed).
  auto loadSlot = [&](Value idxPtr, Value fallback) {
    auto ifNull = scf::IfOp::create(b, i64, isNull(idxPtr), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifNull.thenBlock());
    scf::YieldOp::create(b, fallback);
    b.setInsertionPointToStart(ifNull.elseBlock());
    scf::YieldOp::create(b, loadIndex(idxPtr, wide, bb64));
    return ifNull.getResult(0);
  };
  inSlot = loadSlot(param(pInIdx), bb64);
  outSlot = loadSlot(param(pOutIdx), inSlot);
  // vLLM's 2-D slots: the state is read from step_slots[b, accepted - 1]
  // (accepted = num_accepted[b], or 1) and written per token instead.
  // accepted must lie in [1, T] (varlen: [1, step_slots_stride]), the range
  // debug mode checks: checked before it forms the address; a row outside
  // it is skipped (o = 0, no state) and raises the flag.
  Value usesStepSlots = notI1(isNull(param(pStepSlots)));
  Value acceptedOk;
  {
    auto ifSteps = scf::IfOp::create(b, TypeRange{i64, b.getI1Type()},
                                     usesStepSlots, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifSteps.thenBlock());
    Value accepted = loadSlot(param(pNumAccepted), cI64(1));
    Value most = arith::SelectOp::create(b, isNull(param(pCuSeqlens)),
                                         toI64(param(pT)),
                                         param(pStepSlotsStride));
    Value inRange = andI1(cmp(arith::CmpIPredicate::sge, accepted, cI64(1)),
                          cmp(arith::CmpIPredicate::sle, accepted, most));
    Value column =
        arith::SubIOp::create(b, sel64(inRange, accepted, cI64(1)), cI64(1));
    Value at = add(mul(bb64, param(pStepSlotsStride)), column);
    scf::YieldOp::create(
        b, ValueRange{sel64(inRange, loadIndex(param(pStepSlots), wide, at),
                            cI64(-1)),
                      inRange});
    b.setInsertionPointToStart(ifSteps.elseBlock());
    scf::YieldOp::create(b, ValueRange{inSlot, cTrue()});
    inSlot = ifSteps.getResult(0);
    acceptedOk = ifSteps.getResult(1);
  }
  rangeOk = andI1(rangeOk, acceptedOk);
  Value slots = param(pSlots);
  Value inTooLarge = cmp(arith::CmpIPredicate::sge, inSlot, slots);
  Value outTooLarge = cmp(arith::CmpIPredicate::sge, outSlot, slots);
  Value inValid = andI1(cmp(arith::CmpIPredicate::sge, inSlot, cI64(0)),
                        notI1(inTooLarge));
  Value keepPool = cmp(arith::CmpIPredicate::ne,
                       arith::AndIOp::create(b, param(pFlags),
                                             cI32(kKeepPool)),
                       cI32(0));
  Value outInRange = andI1(cmp(arith::CmpIPredicate::sge, outSlot, cI64(0)),
                           notI1(outTooLarge));
  writePool = andI1(andI1(outInRange, notI1(keepPool)),
                    notI1(usesStepSlots));

  // An index past the pool is padding and raises the device error flag, as
  // does a bad varlen range.
  {
    Value bad = andI1(arith::OrIOp::create(
                          b, arith::OrIOp::create(b, inTooLarge, outTooLarge),
                          notI1(rangeOk)),
                      notI1(isNull(param(pErrorFlag))));
    auto ifBad = scf::IfOp::create(b, bad, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifBad.thenBlock());
    LLVM::StoreOp::create(b, cI32(1), param(pErrorFlag), 4);
  }

  // Padding (negative or out-of-range slot): no state read or written,
  // o = 0 for every token (none for a bad varlen range: rowLen = 0).
  auto ifValid =
      scf::IfOp::create(b, andI1(inValid, rangeOk), /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifValid.elseBlock());
    padding();
  }
  b.setInsertionPointToStart(ifValid.thenBlock());
}

Value EmitterBase::loadGate(Value tok) {
  if (s.gate == GateForm::none || perChannel())
    return Value();
  Value ghIndex = add(mul(tok, toI64(param(pHV))), hv);
  return loadElems(param(pG), s.gate == GateForm::raw ? s.ioType : f32,
                   ghIndex, 1)[0];
}

SmallVector<Value> EmitterBase::loadBetas(Value tok, ArrayRef<Value> columns,
                                          bool adjacent) {
  Value ghIndex = add(mul(tok, toI64(param(pHV))), hv);
  if (!s.perValue)
    return {loadBeta(ghIndex)};
  // beta [tokens, HV, V] with kBetaPerValue, else [tokens, HV]: a select
  // of the index, no branch.
  Value perValue = flag(kBetaPerValue);
  Value rowBase = mul(ghIndex, cI64(s.v));
  SmallVector<Value> in;
  for (Value column : columns)
    in.push_back(loadBeta(sel64(perValue, add(rowBase, toI64(column)),
                                ghIndex)));
  // gv may be null (FLA's gv=None with a per-value beta): the loads then
  // read zeros (exp(0) = 1) from the kernel's own zero array at index 0,
  // chosen by selects. (A branch per token made a vk kernel spill.)
  Value noGv = isNull(param(pGv));
  Value gvBase = arith::SelectOp::create(
      b, noGv, LLVM::AddressOfOp::create(b, ptr, noGvSymbol(func.getName())),
      param(pGv));
  auto gvIndex = [&](Value column) {
    return sel64(noGv, cI64(0), add(rowBase, toI64(column)));
  };
  if (adjacent) {
    llvm::append_range(in, loadElems(gvBase, f32, gvIndex(columns[0]),
                                     columns.size()));
  } else {
    for (Value column : columns)
      in.push_back(loadElems(gvBase, f32, gvIndex(column), 1)[0]);
  }
  return in;
}

Value EmitterBase::loadBeta(Value index) {
  // beta is the io dtype, or f32 with kBetaF32.
  return KernelEmitter::loadBeta(param(pBeta), index, flag(kBetaF32), s.ioType);
}

SmallVector<Value> EmitterBase::enteringState(
    int64_t count, function_ref<SmallVector<Value>(Value, Type)> load) {
  SmallVector<Type> types(count, f32);
  auto ifZero = scf::IfOp::create(b, types, flag(kZeroState), true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifZero.thenBlock());
  scf::YieldOp::create(b, SmallVector<Value>(count, cF32(0.0)));
  b.setInsertionPointToStart(ifZero.elseBlock());
  Value src = arith::SelectOp::create(b, isNull(param(pStateIn)),
                                      param(pState), param(pStateIn));
  // An f32 pool's entering states may be 16-bit (FLA reads a bf16 h0 and
  // writes an f32 final state): one branch loads 16-bit pieces, converted
  // as bf16 or f16 by a select (kStateInF16), not a branch per dtype (more
  // branches made kernels spill). Other pools read their own dtype.
  if (s.stateType != f32) {
    scf::YieldOp::create(b, load(src, s.stateType));
    return SmallVector<Value>(ifZero.getResults());
  }
  auto ifHalf = scf::IfOp::create(b, types, flag(kStateInHalf), true);
  b.setInsertionPointToStart(ifHalf.thenBlock());
  halfIsF16 = flag(kStateInF16);
  scf::YieldOp::create(b, load(src, b.getI16Type()));
  halfIsF16 = Value();
  b.setInsertionPointToStart(ifHalf.elseBlock());
  scf::YieldOp::create(b, load(src, f32));
  b.setInsertionPointAfter(ifHalf);
  scf::YieldOp::create(b, ifHalf.getResults());
  return SmallVector<Value>(ifZero.getResults());
}

void EmitterBase::loadHeadParams() {
  if (s.gate != GateForm::raw && s.gate != GateForm::channel_raw)
    return;
  // exp(A_log) and dt_bias of head hv, once per kernel (per-channel
  // dt_bias: loaded with each token's gate, see loadChannelGates). A null
  // A_log is a factor 1 (FLA's bounded gate without A_log; the host
  // requires A_log for the softplus form), a null dt_bias 0.
  aFactor = unlessNull(param(pALog), 1.0, [&] {
    return exp(loadElems(param(pALog), f32, hv, 1)[0]);
  });
  if (s.gate != GateForm::channel_raw)
    dtBias = unlessNull(param(pDtBias), 0.0,
                        [&] { return loadElems(param(pDtBias), f32, hv, 1)[0]; });
}

SmallVector<Value> EmitterBase::loadChannelGates(Value tok, Value key,
                                                int64_t count) {
  Value head = add(mul(tok, toI64(param(pHV))), hv);
  Value at = add(mul(head, cI64(s.k)), key);
  bool raw = s.gate == GateForm::channel_raw;
  SmallVector<Value> in = loadElems(param(pG), raw ? s.ioType : f32, at, count);
  if (raw) {
    Value bias = add(mul(hv, cI64(s.k)), key);
    auto ifNull = scf::IfOp::create(b, SmallVector<Type>(count, f32),
                                    isNull(param(pDtBias)), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifNull.thenBlock());
    scf::YieldOp::create(b, SmallVector<Value>(count, cF32(0.0)));
    b.setInsertionPointToStart(ifNull.elseBlock());
    scf::YieldOp::create(b, loadElems(param(pDtBias), f32, bias, count));
    llvm::append_range(in, ifNull.getResults());
  }
  return in;
}

SmallVector<Value> EmitterBase::channelDecays(ArrayRef<Value> inputs) {
  SmallVector<Value> d;
  if (s.gate == GateForm::channel_log) {
    for (Value g : inputs)
      d.push_back(exp(g));
    return d;
  }
  size_t n = inputs.size() / 2;
  for (size_t i = 0; i < n; ++i)
    d.push_back(rawDecay(inputs[i], inputs[n + i]));
  return d;
}

Value EmitterBase::rawDecay(Value a, Value bias) {
  // exp(g) of the call's raw gate form (softplus, or bounded where the
  // lower_bound parameter is a number), as FLA.
  return exp(rawLogDecay(fadd(a, bias), aFactor, param(pLowerBound)));
}

std::pair<Value, Value> EmitterBase::gateAndBeta(Value g, Value betaIn) {
  Value decay = cF32(1.0);
  switch (s.gate) {
  case GateForm::none:
    break;
  case GateForm::log:
    decay = exp(g);
    break;
  case GateForm::linear:
    decay = g;
    break;
  case GateForm::raw:
    decay = rawDecay(g, dtBias);
    break;
  case GateForm::channel_log:
  case GateForm::channel_raw:
    break; // per key channel: channelDecay, applied by the emitters
  }
  return {decay, betaIn ? betaOf(betaIn) : Value()};
}

Value EmitterBase::betaOf(Value beta) {
  if (s.beta != BetaForm::given) {
    beta = fdiv(cF32(1.0), fadd(cF32(1.0), exp(fsub(cF32(0.0), beta))));
    if (s.beta == BetaForm::sigmoid2)
      beta = fmul(beta, cF32(2.0));
  }
  return beta;
}

EmitterBase::ValueTerms EmitterBase::valueTerms(ArrayRef<Value> inputs,
                                                int64_t columns) {
  ValueTerms terms;
  for (int64_t c = 0; c < columns; ++c) {
    terms.beta.push_back(betaOf(inputs[c]));
    terms.factor.push_back(exp(inputs[columns + c]));
  }
  return terms;
}

void EmitterBase::storeStep(Value tInt, Value tok,
                            function_ref<void(Value, Value)> storeTile) {
  {
    auto ifBuffer =
        scf::IfOp::create(b, notI1(isNull(param(pStepStates))), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifBuffer.thenBlock());
    storeTile(param(pStepStates), stepBase(tok));
  }
  auto ifSlots = scf::IfOp::create(b, notI1(isNull(param(pStepSlots))), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifSlots.thenBlock());
  Value slot = loadIndex(param(pStepSlots), indicesWide(),
                         add(mul(toI64(bb), param(pStepSlotsStride)), toI64(tInt)));
  Value tooLarge = cmp(arith::CmpIPredicate::sge, slot, param(pSlots));
  Value valid =
      andI1(cmp(arith::CmpIPredicate::sge, slot, cI64(0)), notI1(tooLarge));
  {
    auto ifValid = scf::IfOp::create(b, valid, false);
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(ifValid.thenBlock());
    storeTile(param(pState), stateBase(slot));
  }
  auto ifBad = scf::IfOp::create(
      b, andI1(tooLarge, notI1(isNull(param(pErrorFlag)))), false);
  b.setInsertionPointToStart(ifBad.thenBlock());
  LLVM::StoreOp::create(b, cI32(1), param(pErrorFlag), 4);
}

void EmitterBase::advanceTokens(
    ArrayRef<Value> state, function_ref<SmallVector<Value>(Value)> loadInputs,
    TokenBody body, TileStore storeTile) {
  SmallVector<Value> final;
  if (!tune.unswitchSteps) {
    final = tokenLoop(state, loadInputs, body, storeTile, true);
  } else {
    Value steps = arith::OrIOp::create(b, notI1(isNull(param(pStepStates))),
                                       notI1(isNull(param(pStepSlots))));
    SmallVector<Type> types(state.size(), f32);
    auto ifSteps = scf::IfOp::create(b, types, steps, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifSteps.thenBlock());
      scf::YieldOp::create(
          b, tokenLoop(state, loadInputs, body, storeTile, true));
      b.setInsertionPointToStart(ifSteps.elseBlock());
      scf::YieldOp::create(
          b, tokenLoop(state, loadInputs, body, storeTile, false));
    }
    final.assign(ifSteps.getResults().begin(), ifSteps.getResults().end());
  }
  auto ifWrite = scf::IfOp::create(b, writePool, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  storeTile(param(pState), stateBase(outSlot), final);
}

SmallVector<Value> EmitterBase::tokenLoop(
    ArrayRef<Value> state, function_ref<SmallVector<Value>(Value)> loadInputs,
    TokenBody body, TileStore storeTile, bool steps) {
  // Every load of a token is issued together, ahead of its stores; with
  // max_t > 1 the next token's loads are issued before this token's math
  // (its index clamped to T - 1), so DRAM latency overlaps the arithmetic.
  bool prefetch = s.maxT > 1 && tune.prefetch;
  SmallVector<Value> init(state);
  size_t numState = state.size();
  if (prefetch)
    llvm::append_range(init, loadInputs(clampedToken(cI32(0))));
  auto loop = scf::ForOp::create(b, cI32(0), rowLen, cI32(1), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value t = loop.getInductionVar();
  SmallVector<Value> args(loop.getRegionIterArgs());
  SmallVector<Value> inputs, next;
  if (prefetch) {
    inputs.assign(args.begin() + numState, args.end());
    next = loadInputs(clampedToken(add(t, cI32(1))));
  } else {
    inputs = loadInputs(token(t));
  }
  SmallVector<Value> yielded =
      body(t, ArrayRef<Value>(args).take_front(numState), inputs);
  // Per-step states (speculative decoding).
  if (steps)
    storeStep(t, token(t), [&](Value dst, Value base) {
      storeTile(dst, base, yielded);
    });
  llvm::append_range(yielded, next);
  scf::YieldOp::create(b, yielded);
  return SmallVector<Value>(loop.getResults().take_front(numState));
}

//===----------------------------------------------------------------------===//
// vk: rows of S^T ([V, K], K contiguous)
//===----------------------------------------------------------------------===//

/// Per value row r and token t:
///   d = decay, pk = S_r . k, pq = S_r . q   (one pass, both dots)
///   u = beta (v_r - d pk),  o_r = scale (d pq + u (k . q)),  S_r = d S_r + u k
/// which is the reference's decay-then-update order (o reads the new state).
class VkEmitter : EmitterBase {
public:
  using EmitterBase::EmitterBase;
  void emit();

private:
  Value rowSum(Value x) { return xorSum(x, 1, t.lanesPerRow / 2); }
  /// Element index (within a K-row) of piece j of lane laneInRow: lanes of a
  /// row read adjacent 16-byte pieces, so each load instruction is coalesced.
  Value elemIndex(int64_t j) {
    return add(cI64(j * t.lanesPerRow * t.elemsPerLoad),
               mul(laneInRow, cI64(t.elemsPerLoad)));
  }
  SmallVector<Value> loadVector(Value base, Value stride, Value tok) {
    SmallVector<Value> x;
    for (int64_t j = 0; j < t.loadsPerLane; ++j)
      llvm::append_range(
          x, loadQK(base, stride, tok, elemIndex(j), t.elemsPerLoad));
    return x;
  }
  Value laneInRow;
  SmallVector<Value> rows;
};

void VkEmitter::emit() {
  int64_t rowsPerPass = 32 / t.lanesPerRow;
  auto setupRows = [&]() {
    Value group = arith::DivUIOp::create(b, lane, cI32(t.lanesPerRow));
    laneInRow = toI64(arith::RemUIOp::create(b, lane, cI32(t.lanesPerRow)));
    Value rowBase = toI64(add(add(mul(bx, cI32(t.valuesPerBlock())),
                                  mul(warp, cI32(rowsPerPass))),
                              group));
    for (int64_t r = 0; r < t.rowsPerThread; ++r)
      rows.push_back(add(rowBase, cI64(r * t.warps * rowsPerPass)));
  };
  int64_t perLane = t.loadsPerLane * t.elemsPerLoad;
  auto rowIndex = [&](Value base, Value row, int64_t j) {
    return add(add(base, mul(row, cI64(s.k))), elemIndex(j));
  };
  // The thread's rows of a head state starting at element `base` of `dst`.
  auto storeTile = [&](Value dst, Value base, ArrayRef<Value> tile) {
    for (auto [r, row] : llvm::enumerate(rows))
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        storeElems(dst, s.stateType, rowIndex(base, row, j),
                   tile.slice(r * perLane + j * t.elemsPerLoad,
                              t.elemsPerLoad));
  };
  prologue([&] {
    setupRows();
    zeroSkippedState(int64_t(rows.size()) * perLane, storeTile);
    Value leader = cmp(arith::CmpIPredicate::eq, laneInRow, cI64(0));
    auto loop = scf::ForOp::create(b, cI32(0), rowLen, cI32(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value tok = token(loop.getInductionVar());
    auto ifLeader = scf::IfOp::create(b, leader, false);
    b.setInsertionPointToStart(ifLeader.thenBlock());
    for (Value row : rows)
      storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), row),
                 {cF32(0.0)});
  });
  // The mapping is emitted again for the valid branch rather than once
  // before the branch: hoisting it lengthens live ranges and made sm_80
  // kernels spill (ctest ptxas_generated_kernels caught it).
  rows.clear();
  setupRows();

  // Load the whole register tile before any arithmetic: all loads in flight.
  Value inBase = stateBase(inSlot);
  SmallVector<Value> state = enteringState(
      int64_t(rows.size()) * perLane, [&](Value src, Type type) {
        SmallVector<Value> tile;
        for (Value row : rows)
          for (int64_t j = 0; j < t.loadsPerLane; ++j)
            llvm::append_range(tile, loadElems(src, type,
                                               rowIndex(inBase, row, j),
                                               t.elemsPerLoad));
        return tile;
      });

  loadHeadParams();
  // Inputs of a token: q and k pieces, v of each row, g, beta.
  int64_t nQK = t.loadsPerLane * t.elemsPerLoad;
  auto loadInputs = [&](Value tok) {
    SmallVector<Value> in = loadVector(param(pQ), param(pQStride), tok);
    llvm::append_range(in, loadVector(param(pK), param(pKStride), tok));
    for (Value row : rows)
      in.push_back(loadElems(param(pV), s.ioType,
                             vIndex(tok, param(pVStride), row), 1)[0]);
    llvm::append_range(in, loadBetas(tok, rows, /*adjacent=*/false));
    if (Value g = loadGate(tok))
      in.push_back(g);
    // KDA: the gate inputs of the lane's key channels (the pieces of q, k).
    if (perChannel())
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        llvm::append_range(in,
                           loadChannelGates(tok, elemIndex(j), t.elemsPerLoad));
    return in;
  };
  auto body = [&](Value tInt, ArrayRef<Value> S, ArrayRef<Value> in) {
    Value tok = token(tInt);
    SmallVector<Value> q(in.take_front(nQK)),
        k(in.slice(nQK, nQK));
    ArrayRef<Value> vRows = in.slice(2 * nQK, rows.size());
    int64_t nBeta = numBetaInputs(rows.size());
    ArrayRef<Value> betaIn = in.slice(2 * nQK + rows.size(), nBeta);
    size_t gateAt = 2 * nQK + rows.size() + nBeta;
    Value gIn = s.gate != GateForm::none && !perChannel() ? in[gateAt]
                                                          : Value();
    // KDA: each key channel e decays by its own d_e, so the dots against
    // the decayed row are S_r . (d k) and S_r . (d q), and S_r = d S_r +
    // u k elementwise (the scalar decay below is then 1).
    SmallVector<Value> dk, dq, channel;
    if (perChannel()) {
      size_t per = s.gate == GateForm::channel_raw ? 2 * t.elemsPerLoad
                                                    : t.elemsPerLoad;
      ArrayRef<Value> gates = in.drop_front(gateAt);
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        llvm::append_range(channel,
                           channelDecays(gates.slice(j * per, per)));
    }
    if (s.qkL2Norm) {
      // x / sqrt(sum x^2 + 1e-6): the lanes of a row hold all K elements.
      for (SmallVector<Value> *x : {&q, &k}) {
        Value inv =
            fdiv(cF32(1.0), sqrt(fadd(rowSum(sum(*x, *x)), cF32(1e-6))));
        for (Value &e : *x)
          e = fmul(e, inv);
      }
    }
    Value kq = rowSum(sum(k, q));
    auto [decay, beta] = gateAndBeta(gIn, s.perValue ? Value() : betaIn[0]);
    // per_value: row r (value column r of S) has its own beta and decays by
    // a further exp(gv_r).
    ValueTerms terms;
    if (s.perValue)
      terms = valueTerms(betaIn, rows.size());
    if (perChannel())
      for (int64_t e = 0; e < nQK; ++e) {
        dk.push_back(fmul(channel[e], k[e]));
        dq.push_back(fmul(channel[e], q[e]));
      }
    SmallVector<Value> next;
    for (auto [r, row] : llvm::enumerate(rows)) {
      ArrayRef<Value> Sr = S.slice(r * perLane, perLane);
      Value pk = rowSum(sum(Sr, perChannel() ? dk : k));
      Value pq = rowSum(sum(Sr, perChannel() ? dq : q));
      Value rowDecay = s.perValue ? fmul(decay, terms.factor[r]) : decay;
      Value u = fmul(s.perValue ? terms.beta[r] : beta,
                     fsub(vRows[r], fmul(rowDecay, pk)));
      Value o = fmul(param(pScale), fma(u, kq, fmul(rowDecay, pq)));
      // Every lane of the row stores: the butterfly gives all of them the
      // same bits (each step adds the same two values), the stores to one
      // address merge, and no branch splits the token's code.
      storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), row), {o});
      for (int64_t e = 0; e < perLane; ++e) {
        Value d = rowDecay;
        if (perChannel())
          d = s.perValue ? fmul(channel[e], terms.factor[r]) : channel[e];
        next.push_back(fma(u, k[e], fmul(d, Sr[e])));
      }
    }
    return next;
  };
  advanceTokens(state, loadInputs, body, storeTile);
}

//===----------------------------------------------------------------------===//
// kv: rows of S ([K, V], V contiguous)
//===----------------------------------------------------------------------===//

/// A thread holds `rowsPerThread` key rows of a tile of value columns. Per
/// token, the dots over K (S^T k and S^T q per column, and for the L2 norm
/// |q|^2, |k|^2, k . q) are partial sums over a thread's rows, reduced over
/// the lane groups of a warp with shuffles and across warps through shared
/// memory (double-buffered by token parity, so one barrier per token).
/// Normalisation is applied after the reduction: the dots of the raw vectors
/// scale by 1/|k| and 1/|q|.
class KvEmitter : EmitterBase {
public:
  using EmitterBase::EmitterBase;
  void emit(Value sharedBase);

private:
  Value column0, kGroup, laneInGroup;
  SmallVector<Value> keyRows;
};

void KvEmitter::emit(Value shared) {
  int64_t tile = t.valuesPerBlock();
  int64_t epl = t.elemsPerLoad;
  int64_t groupsPerWarp = 32 / t.lanesPerRow;
  int64_t groups = groupsPerWarp * t.warps;
  auto setup = [&]() {
    laneInGroup = arith::RemUIOp::create(b, lane, cI32(t.lanesPerRow));
    Value groupInWarp = arith::DivUIOp::create(b, lane, cI32(t.lanesPerRow));
    kGroup = add(mul(warp, cI32(groupsPerWarp)), groupInWarp);
    column0 = toI64(add(mul(bx, cI32(tile)), mul(laneInGroup, cI32(epl))));
    keyRows.clear();
    for (int64_t r = 0; r < t.rowsPerThread; ++r)
      keyRows.push_back(toI64(add(kGroup, cI32(r * groups))));
  };
  auto pieceIndex = [&](Value base, Value keyRow) {
    return add(add(base, mul(keyRow, cI64(s.v))), column0);
  };
  // The thread's pieces of a head state starting at element `base` of `dst`.
  auto storeTile = [&](Value dst, Value base, ArrayRef<Value> tile) {
    for (auto [r, row] : llvm::enumerate(keyRows))
      storeElems(dst, s.stateType, pieceIndex(base, row),
                 tile.slice(r * epl, epl));
  };
  prologue([&] {
    setup();
    zeroSkippedState(t.rowsPerThread * epl, storeTile);
    Value leader = cmp(arith::CmpIPredicate::eq, kGroup, cI32(0));
    auto loop = scf::ForOp::create(b, cI32(0), rowLen, cI32(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value tok = token(loop.getInductionVar());
    auto ifLeader = scf::IfOp::create(b, leader, false);
    b.setInsertionPointToStart(ifLeader.thenBlock());
    storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), column0),
               SmallVector<Value>(epl, cF32(0.0)));
  });
  setup(); // again for the valid branch: see VkEmitter::emit


  Value inBase = stateBase(inSlot);
  SmallVector<Value> state = enteringState(
      int64_t(keyRows.size()) * epl, [&](Value src, Type type) {
        SmallVector<Value> tile;
        for (Value row : keyRows)
          llvm::append_range(
              tile, loadElems(src, type, pieceIndex(inBase, row), epl));
        return tile;
      });

  // Partial sums exchanged per token: S^T k and S^T q for each column, then
  // |k|^2, |q|^2 and k . q.
  int64_t perThread = 2 * epl + 3;
  Type smemPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
  loadHeadParams();
  // Inputs of a token: q and k of each key row, v of the tile's columns,
  // g, beta.
  int64_t nRows = t.rowsPerThread;
  auto loadInputs = [&](Value tok) {
    SmallVector<Value> in;
    for (Value row : keyRows)
      in.push_back(loadQK(param(pQ), param(pQStride), tok, row, 1)[0]);
    for (Value row : keyRows)
      in.push_back(loadQK(param(pK), param(pKStride), tok, row, 1)[0]);
    llvm::append_range(in, loadElems(param(pV), s.ioType,
                                     vIndex(tok, param(pVStride), column0),
                                     epl));
    SmallVector<Value> columns;
    for (int64_t c = 0; c < epl; ++c)
      columns.push_back(add(column0, cI64(c)));
    llvm::append_range(in, loadBetas(tok, columns, /*adjacent=*/true));
    if (Value g = loadGate(tok))
      in.push_back(g);
    // KDA: the gate inputs of the thread's key rows.
    if (perChannel())
      for (Value row : keyRows)
        llvm::append_range(in, loadChannelGates(tok, row, 1));
    return in;
  };
  auto body = [&](Value tInt, ArrayRef<Value> S, ArrayRef<Value> in) {
    Value tok = token(tInt);
    ArrayRef<Value> q = in.take_front(nRows), k = in.slice(nRows, nRows);
    ArrayRef<Value> vals = in.slice(2 * nRows, epl);
    int64_t nBeta = numBetaInputs(epl);
    ArrayRef<Value> betaIn = in.slice(2 * nRows + epl, nBeta);
    size_t gateAt = 2 * nRows + epl + nBeta;
    Value gIn = s.gate != GateForm::none && !perChannel() ? in[gateAt]
                                                          : Value();
    // KDA: key row r decays by d_r: the column dots run against d k and
    // d q (|k|, |q| and k . q stay those of the raw vectors), and S_r = d_r
    // S_r + k_r u (the scalar decay below is then 1).
    SmallVector<Value> rowDecay, dk(k), dq(q);
    if (perChannel()) {
      size_t per = s.gate == GateForm::channel_raw ? 2 : 1;
      ArrayRef<Value> gates = in.drop_front(gateAt);
      for (int64_t r = 0; r < nRows; ++r) {
        rowDecay.push_back(channelDecays(gates.slice(r * per, per))[0]);
        dk[r] = fmul(rowDecay[r], k[r]);
        dq[r] = fmul(rowDecay[r], q[r]);
      }
    }
    SmallVector<Value> partial;
    for (int64_t c = 0; c < epl; ++c) {
      SmallVector<Value> column;
      for (int64_t r = 0; r < t.rowsPerThread; ++r)
        column.push_back(S[r * epl + c]);
      partial.push_back(sum(column, dk));
    }
    for (int64_t c = 0; c < epl; ++c) {
      SmallVector<Value> column;
      for (int64_t r = 0; r < t.rowsPerThread; ++r)
        column.push_back(S[r * epl + c]);
      partial.push_back(sum(column, dq));
    }
    partial.push_back(sum(k, k));
    partial.push_back(sum(q, q));
    partial.push_back(sum(k, q));
    // Over the lane groups of the warp (lanes with the same columns).
    for (Value &x : partial)
      x = xorSum(x, t.lanesPerRow, 16);
    // Across warps: warp w's group-0 lanes write, everyone sums all warps.
    Value parity = arith::RemUIOp::create(b, tInt, cI32(2));
    Value bufferBase = toI64(mul(parity, cI32(t.warps * t.lanesPerRow *
                                              perThread)));
    auto slotIndex = [&](Value w, int64_t e) {
      return add(bufferBase,
                 toI64(add(mul(add(mul(w, cI32(t.lanesPerRow)), laneInGroup),
                               cI32(perThread)),
                           cI32(e))));
    };
    if (t.warps > 1) {
      Value groupLeader = cmp(arith::CmpIPredicate::ult, lane,
                              cI32(t.lanesPerRow));
      {
        auto ifLeader = scf::IfOp::create(b, groupLeader, false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifLeader.thenBlock());
        for (int64_t e = 0; e < perThread; ++e)
          LLVM::StoreOp::create(
              b, partial[e],
              LLVM::GEPOp::create(b, smemPtr, f32, shared,
                                  ValueRange{slotIndex(warp, e)}),
              4);
      }
      gpu::BarrierOp::create(b);
      for (int64_t e = 0; e < perThread; ++e) {
        Value total;
        for (int64_t w = 0; w < t.warps; ++w) {
          Value x = LLVM::LoadOp::create(
              b, f32,
              LLVM::GEPOp::create(b, smemPtr, f32, shared,
                                  ValueRange{slotIndex(cI32(w), e)}),
              4);
          total = total ? fadd(total, x) : x;
        }
        partial[e] = total;
      }
    }
    Value invK = cF32(1.0), invQ = cF32(1.0);
    if (s.qkL2Norm) {
      invK = fdiv(cF32(1.0), sqrt(fadd(partial[2 * epl], cF32(1e-6))));
      invQ = fdiv(cF32(1.0), sqrt(fadd(partial[2 * epl + 1], cF32(1e-6))));
    }
    Value kq = fmul(partial[2 * epl + 2], fmul(invK, invQ));
    auto [decay, beta] = gateAndBeta(gIn, s.perValue ? Value() : betaIn[0]);
    // per_value: column c has its own beta and decays by a further
    // exp(gv_c).
    ValueTerms terms;
    if (s.perValue)
      terms = valueTerms(betaIn, epl);
    SmallVector<Value> u, o;
    Value scaleQ = fmul(param(pScale), invQ);
    for (int64_t c = 0; c < epl; ++c) {
      Value pk = fmul(partial[c], invK), pq = partial[epl + c];
      Value d = s.perValue ? fmul(decay, terms.factor[c]) : decay;
      u.push_back(fmul(s.perValue ? terms.beta[c] : beta,
                       fsub(vals[c], fmul(d, pk))));
      // scale (d S^T q_n + u (k_n . q_n)) with q_n = q / |q|.
      o.push_back(fma(param(pScale), fmul(u.back(), kq),
                      fmul(scaleQ, fmul(d, pq))));
    }
    {
      auto ifLeader = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq,
                                                  kGroup, cI32(0)),
                                        false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifLeader.thenBlock());
      storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), column0),
                 o);
    }
    SmallVector<Value> next;
    for (int64_t r = 0; r < t.rowsPerThread; ++r) {
      Value kn = fmul(k[r], invK);
      Value d = perChannel() ? rowDecay[r] : decay;
      for (int64_t c = 0; c < epl; ++c)
        next.push_back(fma(
            kn, u[c],
            fmul(s.perValue ? fmul(d, terms.factor[c]) : d, S[r * epl + c])));
    }
    return next;
  };
  advanceTokens(state, loadInputs, body, storeTile);
}

} // namespace

gpu::GPUFuncOp mlir::delta::buildDecodeKernel(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              StringRef name,
                                              const DecodeSpec &spec,
                                              const DecodeTuning &tuning) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> inputs = kernelParamTypes(builder, decodeKernelParams());
  DecodeTiling tiling = chooseDecodeTiling(spec, tuning);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  // kv reduces across warps through shared memory: two token buffers of
  // (2 * elemsPerLoad + 3) floats per lane group leader of each warp.
  std::string sharedName = (name + "_partials").str();
  if (spec.layout == StateLayout::kv) {
    int64_t floats = 2 * tiling.warps * tiling.lanesPerRow *
                     (2 * tiling.elemsPerLoad + 3);
    LLVM::GlobalOp::create(
        builder, loc, LLVM::LLVMArrayType::get(builder.getF32Type(), floats),
        /*isConstant=*/false, LLVM::Linkage::Internal, sharedName,
        /*value=*/Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  }
  if (spec.perValue) {
    // Read in place of a null gv (EmitterBase::loadBetas).
    auto zeros = LLVM::LLVMArrayType::get(builder.getF32Type(), kMaxGvPiece);
    LLVM::GlobalOp::create(builder, loc, zeros, /*isConstant=*/true,
                           LLVM::Linkage::Internal, noGvSymbol(name),
                           builder.getZeroAttr(RankedTensorType::get(
                               {kMaxGvPiece}, builder.getF32Type())),
                           /*alignment=*/16, /*addrSpace=*/1);
  }
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  func->setAttr(DeltaDialect::kKernelAttrName,
                KernelAttr::get(builder.getContext(), KernelRole::decode, KernelCode::all,
                                spec.k, spec.v, tiling.valuesPerBlock(),
                                spec.v / tiling.valuesPerBlock(), tiling.threads(),
                                /*dynamicSmem=*/0, /*dynamicSmemStage=*/0,
                                tuning.minBlocksPerSM, /*overlapBlocksPerSm=*/0,
                                /*rawQk=*/false));
  // The buffers of one call never overlap (the host API documents it): let
  // loads move across stores and use the read-only path.
  for (auto [i, p] : llvm::enumerate(decodeKernelParams()))
    if (p.kind == ParamKind::Pointer)
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                      builder.getUnitAttr());
  func.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({(int32_t)tiling.threads(), 1, 1}));

  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  if (spec.layout == StateLayout::kv) {
    Value shared = LLVM::AddressOfOp::create(
        b, LLVM::LLVMPointerType::get(ctx, 3), sharedName);
    KvEmitter(b, func, spec, tiling, tuning).emit(shared);
  } else {
    VkEmitter(b, func, spec, tiling, tuning).emit();
  }
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
  return func;
}
