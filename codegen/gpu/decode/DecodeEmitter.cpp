//===- DecodeEmitter.cpp - what the decode kernel emitters share -*- C++ -*-===//
//
// EmitterBase's out-of-line members: vector loads and stores, the prologue
// (row bounds, cu_seqlens and slot checks), gate and beta forms, entering
// states, per-step stores and the token loop.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/decode/DecodeEmitter.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::decode;
using namespace deltac_abi; // the flags' bits

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
  if (s.gate == GateForm::call) {
    // Log g (f32; null with kNullGate: the zeros) or raw a, f32 or with
    // kCallGate16 in the io dtype: one load of either width, no branch.
    Value noG = flag(deltac_abi::kNullGate);
    Value base = arith::SelectOp::create(
        b, noG, LLVM::AddressOfOp::create(b, ptr, zerosSymbol(func.getName())), param(pG));
    return KernelEmitter::loadBeta(base, sel64(noG, cI64(0), ghIndex),
                                   notI1(flag(deltac_abi::kCallGate16)), s.ioType);
  }
  if (s.gate != GateForm::log)
    return loadElems(param(pG), s.gate == GateForm::raw ? s.ioType : f32,
                     ghIndex, 1)[0];
  // A null log g (FLA's g=None) reads the kernel's zeros: no decay.
  Value noG = flag(deltac_abi::kNullGate);
  Value at = arith::SelectOp::create(
      b, noG, LLVM::AddressOfOp::create(b, ptr, zerosSymbol(func.getName())),
      gep(param(pG), f32, ghIndex));
  return loadElems(at, f32, cI64(0), 1)[0];
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
  // read zeros (exp(0) = 1) from zerosSymbol's array at index 0.
  Value noGv = isNull(param(pGv));
  Value gvBase = arith::SelectOp::create(
      b, noGv, LLVM::AddressOfOp::create(b, ptr, zerosSymbol(func.getName())),
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

Value EmitterBase::gateIsRaw() {
  if (isByCall(s.gate))
    return flag(deltac_abi::kCallGateRaw);
  return arith::ConstantIntOp::create(b, b.getI1Type(), isRaw(s.gate) ? 1 : 0);
}

void EmitterBase::loadHeadParams() {
  if (!takesRawParams(s.gate))
    return;
  // exp(A_log) and dt_bias of head hv, once per kernel (per-channel
  // dt_bias: loaded with each token's gate, see loadChannelGates). A null
  // A_log is a factor 1 (FLA's bounded gate without A_log; the host
  // requires A_log for the softplus form), a null dt_bias 0.
  aFactor = unlessNull(param(pALog), 1.0, [&] {
    return exp(loadElems(param(pALog), f32, hv, 1)[0]);
  });
  if (!channelBias())
    dtBias = unlessNull(param(pDtBias), 0.0,
                        [&] { return loadElems(param(pDtBias), f32, hv, 1)[0]; });
}

SmallVector<Value> EmitterBase::loadChannelGates(Value tok, Value key,
                                                int64_t count) {
  Value head = add(mul(tok, toI64(param(pHV))), hv);
  Value at = add(mul(head, cI64(s.k)), key);
  bool raw = s.gate == GateForm::channel_raw;
  SmallVector<Value> in;
  if (s.gate == GateForm::channel_call) {
    // f32, or with kCallGate16 the io dtype (a raw a only): vector loads of
    // either width in a branch.
    auto ifHalf = scf::IfOp::create(b, SmallVector<Type>(count, f32),
                                    flag(deltac_abi::kCallGate16), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifHalf.thenBlock());
    scf::YieldOp::create(b, loadElems(param(pG), s.ioType, at, count));
    b.setInsertionPointToStart(ifHalf.elseBlock());
    scf::YieldOp::create(b, loadElems(param(pG), f32, at, count));
    in.assign(ifHalf.getResults().begin(), ifHalf.getResults().end());
  } else {
    in = loadElems(param(pG), raw ? s.ioType : f32, at, count);
  }
  if (channelBias()) {
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
  if (s.gate == GateForm::channel_call) {
    // The call's form: log decays, or raw inputs with their dt_bias, in a
    // branch: computing the raw form's softplus for every channel and
    // selecting cost the log form 28 % at T = 1, B = 64 on an H200.
    auto ifRaw = scf::IfOp::create(b, SmallVector<Type>(n, f32), gateIsRaw(), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRaw.thenBlock());
    SmallVector<Value> raw, logForm;
    for (size_t i = 0; i < n; ++i)
      raw.push_back(rawDecay(inputs[i], inputs[n + i]));
    scf::YieldOp::create(b, raw);
    b.setInsertionPointToStart(ifRaw.elseBlock());
    for (size_t i = 0; i < n; ++i)
      logForm.push_back(exp(inputs[i]));
    scf::YieldOp::create(b, logForm);
    return SmallVector<Value>(ifRaw.getResults());
  }
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
  case GateForm::call:
    // The call's form: a log decay, or a raw input with dt_bias.
    decay = exp(arith::SelectOp::create(
        b, gateIsRaw(), rawLogDecay(fadd(g, dtBias), aFactor, param(pLowerBound)), g));
    break;
  case GateForm::channel_log:
  case GateForm::channel_raw:
  case GateForm::channel_call:
    break; // per key channel: channelDecay, applied by the emitters
  }
  return {decay, betaIn ? betaOf(betaIn) : Value()};
}

Value EmitterBase::normFactor(Value sumSquares) {
  Value x = fadd(sumSquares, cF32(1e-6));
  // Without the call's kCallL2Norm, 1 / sqrt(1) = 1 exactly: one select
  // before the root, not a second value live beside it.
  if (s.l2normCall)
    x = arith::SelectOp::create(b, flag(deltac_abi::kCallL2Norm), x, cF32(1.0));
  return fdiv(cF32(1.0), sqrt(x));
}

Value EmitterBase::callSigmoid(Value logits) {
  Value factor =
      arith::SelectOp::create(b, flag(deltac_abi::kCallBetaTwice), cF32(2.0), cF32(1.0));
  return scaledSigmoid(factor, logits);
}

Value EmitterBase::betaOf(Value beta) {
  if (s.beta == BetaForm::call && (s.perValue || perChannel())) {
    // A beta per value column, or KDA's: selects (a branch per column made
    // the per-value kernels spill; in KDA's kv kernel it took 128
    // registers to 165).
    return arith::SelectOp::create(b, flag(deltac_abi::kCallBetaSigmoid), callSigmoid(beta),
                                   beta);
  }
  if (s.beta == BetaForm::call) {
    // Logits where the call says so (times 2 with kCallBetaTwice), in a
    // branch (selects made the kv bulk kernel at 64 x 64 spill).
    auto ifSigmoid = scf::IfOp::create(b, TypeRange{f32}, flag(deltac_abi::kCallBetaSigmoid),
                                       /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifSigmoid.thenBlock());
    scf::YieldOp::create(b, callSigmoid(beta));
    b.setInsertionPointToStart(ifSigmoid.elseBlock());
    scf::YieldOp::create(b, beta);
    return ifSigmoid.getResult(0);
  }
  if (s.beta != BetaForm::given) {
    beta = scaledSigmoid(cF32(1.0), beta);
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
// vk: the rows of a block
//===----------------------------------------------------------------------===//

void VkEmitterBase::setupRows() {
  int64_t rowsPerPass = 32 / t.lanesPerRow;
  Value group = arith::DivUIOp::create(b, lane, cI32(t.lanesPerRow));
  laneInRow = toI64(arith::RemUIOp::create(b, lane, cI32(t.lanesPerRow)));
  Value rowBase = toI64(add(add(mul(bx, cI32(t.valuesPerBlock())),
                                mul(warp, cI32(rowsPerPass))),
                            group));
  rows.clear();
  for (int64_t r = 0; r < t.rowsPerThread; ++r)
    rows.push_back(add(rowBase, cI64(r * t.warps * rowsPerPass)));
}

void VkEmitterBase::storeTile(Value dst, Value base, ArrayRef<Value> tile) {
  for (auto [r, row] : llvm::enumerate(rows))
    for (int64_t j = 0; j < t.loadsPerLane; ++j)
      storeElems(dst, s.stateType,
                 add(add(base, mul(row, cI64(s.k))), elemIndex(j)),
                 tile.slice(r * perLane() + j * t.elemsPerLoad,
                            t.elemsPerLoad));
}

void VkEmitterBase::vkPrologue() {
  auto store = [&](Value dst, Value base, ArrayRef<Value> tile) {
    storeTile(dst, base, tile);
  };
  prologue([&] {
    setupRows();
    zeroSkippedState(int64_t(rows.size()) * perLane(), store);
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
  setupRows();
}

SmallVector<Value> VkEmitterBase::loadEnteringRows() {
  Value inBase = stateBase(inSlot);
  return enteringState(
      int64_t(rows.size()) * perLane(), [&](Value src, Type type) {
        SmallVector<Value> tile;
        for (Value row : rows)
          for (int64_t j = 0; j < t.loadsPerLane; ++j)
            llvm::append_range(
                tile, loadElems(src, type,
                                add(add(inBase, mul(row, cI64(s.k))),
                                    elemIndex(j)),
                                t.elemsPerLoad));
        return tile;
      });
}
