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
// arithmetic (o reads the updated state).
//
//===----------------------------------------------------------------------===//

#include "passes/DecodeKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace mlir::delta;

namespace {
enum Param {
  pQ, pK, pV, pG, pBeta, pALog, pDtBias, pO, pState, pInIdx, pOutIdx,
  pStepStates, pErrorFlag, pT, pH, pHV, pSlots, pQStride, pKStride, pVStride,
  pOStride, pScale, pFlags, kNumParams
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
      {"flags", ParamKind::I32}};
  static_assert(sizeof(params) / sizeof(params[0]) == kNumParams);
  return params;
}

/// Lanes per row: as many as keep at least four 16-byte loads per lane (so
/// each thread has loads in flight), a power of two dividing the row, and at
/// least two so a warp covers at most 16 rows (V >= 16 then divides evenly).
DecodeTiling mlir::delta::chooseDecodeTiling(const DecodeSpec &spec) {
  DecodeTiling t;
  t.elemsPerLoad = 16 / (spec.stateType.getIntOrFloatBitWidth() / 8);
  int64_t pieces = spec.k / t.elemsPerLoad; // 16-byte pieces per row
  t.lanesPerRow = 1;
  while (t.lanesPerRow < 16 && pieces % (t.lanesPerRow * 2) == 0 &&
         (pieces / (t.lanesPerRow * 2) >= 4 || t.lanesPerRow < 2))
    t.lanesPerRow *= 2;
  t.loadsPerLane = pieces / t.lanesPerRow;
  int64_t elemsPerLane = t.loadsPerLane * t.elemsPerLoad;
  // About 64 state registers per thread: enough bytes in flight, no spills.
  int64_t maxRows = std::max<int64_t>(1, 64 / elemsPerLane);
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

namespace {
/// Emits the vk decode kernel into a gpu.func.
class DecodeEmitter {
public:
  DecodeEmitter(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                const DecodeSpec &spec, const DecodeTiling &tiling)
      : b(b), func(func), s(spec), t(tiling) {
    f32 = b.getF32Type();
    i32 = b.getI32Type();
    i64 = b.getI64Type();
    ptr = LLVM::LLVMPointerType::get(b.getContext(), 1);
  }

  void emit();

private:
  Value param(Param p) { return func.getArgument(p); }
  Value cI32(int64_t v) { return arith::ConstantIntOp::create(b, i32, v); }
  Value cI64(int64_t v) { return arith::ConstantIntOp::create(b, i64, v); }
  Value cF32(double v) {
    return arith::ConstantFloatOp::create(b, cast<FloatType>(f32),
                                         APFloat((float)v));
  }
  Value toI64(Value v) { return arith::ExtSIOp::create(b, i64, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value fdiv(Value x, Value y) { return arith::DivFOp::create(b, x, y); }

  /// exp(x) as ex2.approx(x log2 e): the instruction Triton uses too.
  Value exp(Value x) {
    Value scaled = fmul(x, cF32(1.4426950408889634));
    return intrinsic("llvm.nvvm.ex2.approx.f32", scaled);
  }
  /// log(x) as lg2.approx(x) ln 2.
  Value log(Value x) {
    Value l2 = intrinsic("llvm.nvvm.lg2.approx.f", x);
    return fmul(l2, cF32(0.6931471805599453));
  }
  // NVVM's own intrinsics: convert-gpu-to-nvvm would otherwise turn the
  // generic llvm.intr.* forms into libdevice calls.
  Value intrinsic(StringRef name, ValueRange args) {
    return LLVM::CallIntrinsicOp::create(b, f32, b.getStringAttr(name), args)
        .getResult(0);
  }
  Value sqrt(Value x) { return intrinsic("llvm.nvvm.sqrt.rn.f", x); }
  Value fma(Value x, Value y, Value z) {
    return intrinsic("llvm.nvvm.fma.rn.f", {x, y, z});
  }

  Value gep(Value base, Type element, Value index64) {
    return LLVM::GEPOp::create(b, ptr, element, base, ValueRange{index64});
  }
  Value isNull(Value p) {
    Value null = LLVM::ZeroOp::create(b, ptr);
    return LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::eq, p, null);
  }
  Value toF32(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, f32, v);
  }

  /// Loads `count` consecutive elements at base[index] as f32 scalars, in
  /// pieces of at most 16 bytes aligned to their size.
  SmallVector<Value> loadElems(Value base, Type element, Value index,
                               int64_t count);
  /// Stores f32 scalars as `element`s at base[index], same pieces.
  void storeElems(Value base, Type element, Value index,
                  ArrayRef<Value> values);

  /// Sums `x` over the `lanesPerRow` lanes that share a row (xor butterfly:
  /// every lane of the group gets the total).
  Value rowSum(Value x) {
    for (int64_t offset = t.lanesPerRow / 2; offset >= 1; offset /= 2)
      x = fadd(x, gpu::ShuffleOp::create(b, x, offset, 32,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult());
    return x;
  }

  /// Element index (within a K-row) of element e of piece j held by lane li.
  Value elemIndex(Value laneInRow, int64_t j) {
    return add(cI64(j * t.lanesPerRow * t.elemsPerLoad),
               mul(laneInRow, cI64(t.elemsPerLoad)));
  }

  void emitPaddingRow(Value bb, Value T, ArrayRef<Value> rows, Value laneInRow);

  ImplicitLocOpBuilder &b;
  gpu::GPUFuncOp func;
  DecodeSpec s;
  DecodeTiling t;
  Type f32, i32, i64, ptr;
};
} // namespace

SmallVector<Value> DecodeEmitter::loadElems(Value base, Type element,
                                            Value index, int64_t count) {
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  int64_t perPiece = std::min<int64_t>(count, 16 / bytes);
  SmallVector<Value> out;
  for (int64_t first = 0; first < count; first += perPiece) {
    Value at = gep(base, element, add(index, cI64(first)));
    auto vecType = VectorType::get({perPiece}, element);
    Value vec = LLVM::LoadOp::create(b, vecType, at, perPiece * bytes);
    for (int64_t e = 0; e < perPiece; ++e)
      out.push_back(toF32(
          LLVM::ExtractElementOp::create(b, vec, cI32(e)).getResult()));
  }
  return out;
}

void DecodeEmitter::storeElems(Value base, Type element, Value index,
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

/// A padding row (negative or out-of-range slot): no state read or written,
/// o = 0 for every token.
void DecodeEmitter::emitPaddingRow(Value bb, Value T, ArrayRef<Value> rows,
                                   Value laneInRow) {
  Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                         laneInRow, cI64(0));
  auto loop = scf::ForOp::create(b, cI32(0), T, cI32(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value tok = toI64(add(mul(bb, T), loop.getInductionVar()));
  Value hv = toI64(arith::IndexCastOp::create(
      b, i32, gpu::BlockIdOp::create(b, gpu::Dimension::y)));
  auto ifLeader = scf::IfOp::create(b, isLeader, /*withElse=*/false);
  b.setInsertionPointToStart(ifLeader.thenBlock());
  for (Value row : rows) {
    Value at = add(add(mul(tok, param(pOStride)), mul(hv, cI64(s.v))), row);
    storeElems(param(pO), s.ioType, at, {cF32(0.0)});
  }
}

void DecodeEmitter::emit() {
  Value T = param(pT), HV = param(pHV), H = param(pH);
  Value tid = arith::IndexCastOp::create(
      b, i32, gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  Value lane = arith::RemUIOp::create(b, tid, cI32(32));
  Value warp = arith::DivUIOp::create(b, tid, cI32(32));
  Value group = arith::DivUIOp::create(b, lane, cI32(t.lanesPerRow));
  Value laneInRow =
      toI64(arith::RemUIOp::create(b, lane, cI32(t.lanesPerRow)));
  auto blockId = [&](gpu::Dimension d) {
    return arith::IndexCastOp::create(b, i32, gpu::BlockIdOp::create(b, d))
        .getResult();
  };
  Value bx = blockId(gpu::Dimension::x), hv32 = blockId(gpu::Dimension::y),
        bb = blockId(gpu::Dimension::z);
  Value hv = toI64(hv32);
  // GVA: value head hv reads q/k head hv / (HV / H).
  Value h = toI64(arith::DivUIOp::create(
      b, hv32, arith::DivUIOp::create(b, HV, H)));

  int64_t rowsPerPass = 32 / t.lanesPerRow;
  Value rowBase = toI64(add(add(mul(bx, cI32(t.rowsPerBlock())),
                                mul(warp, cI32(rowsPerPass))),
                            group));
  SmallVector<Value> rows;
  for (int64_t r = 0; r < t.rowsPerThread; ++r)
    rows.push_back(add(rowBase, cI64(r * t.warps * rowsPerPass)));

  // Slots: in_idx[b] (or b), out_idx[b] (or the slot read).
  Value bb64 = toI64(bb);
  auto loadSlot = [&](Value idxPtr, Value fallback) {
    auto ifNull = scf::IfOp::create(b, i64, isNull(idxPtr), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifNull.thenBlock());
    scf::YieldOp::create(b, fallback);
    b.setInsertionPointToStart(ifNull.elseBlock());
    Value at = gep(idxPtr, i32, bb64);
    scf::YieldOp::create(b, toI64(LLVM::LoadOp::create(b, i32, at, 4)));
    return ifNull.getResult(0);
  };
  Value inSlot = loadSlot(param(pInIdx), bb64);
  Value outSlot = loadSlot(param(pOutIdx), inSlot);
  Value slots = param(pSlots);
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, p, x, y).getResult();
  };
  Value inTooLarge = cmp(arith::CmpIPredicate::sge, inSlot, slots);
  Value outTooLarge = cmp(arith::CmpIPredicate::sge, outSlot, slots);
  Value inValid = arith::AndIOp::create(
      b, cmp(arith::CmpIPredicate::sge, inSlot, cI64(0)),
      arith::XOrIOp::create(b, inTooLarge,
                            arith::ConstantIntOp::create(b, 1, 1)));
  Value keepPool = cmp(arith::CmpIPredicate::ne,
                       arith::AndIOp::create(b, param(pFlags),
                                             cI32(kKeepPool)),
                       cI32(0));
  Value outInRange = arith::AndIOp::create(
      b, cmp(arith::CmpIPredicate::sge, outSlot, cI64(0)),
      arith::XOrIOp::create(b, outTooLarge,
                            arith::ConstantIntOp::create(b, 1, 1)));
  Value writePool = arith::AndIOp::create(
      b, outInRange,
      arith::XOrIOp::create(b, keepPool,
                            arith::ConstantIntOp::create(b, 1, 1)));

  // An index past the pool is padding and raises the device error flag.
  {
    Value bad = arith::AndIOp::create(
        b, arith::OrIOp::create(b, inTooLarge, outTooLarge),
        arith::XOrIOp::create(b, isNull(param(pErrorFlag)),
                              arith::ConstantIntOp::create(b, 1, 1)));
    auto ifBad = scf::IfOp::create(b, bad, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifBad.thenBlock());
    LLVM::StoreOp::create(b, cI32(1), param(pErrorFlag), 4);
  }

  auto ifValid = scf::IfOp::create(b, inValid, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifValid.elseBlock());
    emitPaddingRow(bb, T, rows, laneInRow);
  }
  b.setInsertionPointToStart(ifValid.thenBlock());

  int64_t perLane = t.loadsPerLane * t.elemsPerLoad;
  Value headStride = cI64(s.k * s.v);
  auto stateRowIndex = [&](Value slot, Value row) {
    return add(mul(add(mul(slot, toI64(HV)), hv), headStride),
               mul(row, cI64(s.k)));
  };
  // Load the whole register tile before any arithmetic: all loads in flight.
  SmallVector<Value> state;
  for (Value row : rows) {
    Value rowAt = stateRowIndex(inSlot, row);
    for (int64_t j = 0; j < t.loadsPerLane; ++j)
      llvm::append_range(state, loadElems(param(pState), s.stateType,
                                          add(rowAt, elemIndex(laneInRow, j)),
                                          t.elemsPerLoad));
  }

  auto loop = scf::ForOp::create(b, cI32(0), T, cI32(1), state);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> S(loop.getRegionIterArgs());
    Value tInt = loop.getInductionVar();
    Value tok = toI64(add(mul(bb, T), tInt));

    // q and k pieces at the same element indices as the state pieces.
    auto loadVector = [&](Value base, Value stride) {
      SmallVector<Value> x;
      Value at = add(mul(tok, stride), mul(h, cI64(s.k)));
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        llvm::append_range(x, loadElems(base, s.ioType,
                                        add(at, elemIndex(laneInRow, j)),
                                        t.elemsPerLoad));
      return x;
    };
    SmallVector<Value> q = loadVector(param(pQ), param(pQStride));
    SmallVector<Value> k = loadVector(param(pK), param(pKStride));
    auto dot = [&](ArrayRef<Value> x, ArrayRef<Value> y) {
      Value sum = fmul(x[0], y[0]);
      for (size_t e = 1; e < x.size(); ++e)
        sum = fma(x[e], y[e], sum);
      return sum;
    };
    if (s.qkL2Norm) {
      // x / sqrt(sum x^2 + 1e-6): the row group holds all K elements.
      for (SmallVector<Value> *x : {&q, &k}) {
        Value inv = fdiv(cF32(1.0), sqrt(fadd(rowSum(dot(*x, *x)),
                                              cF32(1e-6))));
        for (Value &e : *x)
          e = fmul(e, inv);
      }
    }
    Value kq = rowSum(dot(k, q));

    Value ghIndex = add(mul(tok, toI64(HV)), hv);
    Value decay = cF32(1.0);
    switch (s.gate) {
    case GateForm::none:
      break;
    case GateForm::log:
      decay = exp(loadElems(param(pG), f32, ghIndex, 1)[0]);
      break;
    case GateForm::linear:
      decay = loadElems(param(pG), f32, ghIndex, 1)[0];
      break;
    case GateForm::raw: {
      // g = -exp(A_log) softplus(a + dt_bias), softplus threshold 20.
      Value a = loadElems(param(pG), s.ioType, ghIndex, 1)[0];
      Value x = fadd(a, loadElems(param(pDtBias), f32, hv, 1)[0]);
      Value soft = log(fadd(cF32(1.0), exp(x)));
      Value big = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x,
                                        cF32(20.0));
      soft = arith::SelectOp::create(b, big, x, soft);
      Value g = fmul(fsub(cF32(0.0),
                          exp(loadElems(param(pALog), f32, hv, 1)[0])),
                     soft);
      decay = exp(g);
      break;
    }
    case GateForm::channel_log:
    case GateForm::channel_raw:
      llvm_unreachable("per-channel decode is rejected before emission");
    }
    Value beta = loadElems(param(pBeta), s.ioType, ghIndex, 1)[0];
    if (s.beta != BetaForm::given) {
      beta = fdiv(cF32(1.0), fadd(cF32(1.0), exp(fsub(cF32(0.0), beta))));
      if (s.beta == BetaForm::sigmoid2)
        beta = fmul(beta, cF32(2.0));
    }

    Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                           laneInRow, cI64(0));
    Value scale = param(pScale);
    Value stepPresent = arith::XOrIOp::create(
        b, isNull(param(pStepStates)), arith::ConstantIntOp::create(b, 1, 1));
    SmallVector<Value> next;
    for (auto [r, row] : llvm::enumerate(rows)) {
      ArrayRef<Value> Sr = ArrayRef<Value>(S).slice(r * perLane, perLane);
      Value pk = rowSum(dot(Sr, k));
      Value pq = rowSum(dot(Sr, q));
      Value vAt = add(add(mul(tok, param(pVStride)), mul(hv, cI64(s.v))), row);
      Value vr = loadElems(param(pV), s.ioType, vAt, 1)[0];
      Value u = fmul(beta, fsub(vr, fmul(decay, pk)));
      Value o = fmul(scale, fma(u, kq, fmul(decay, pq)));
      {
        auto ifLeader = scf::IfOp::create(b, isLeader, false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifLeader.thenBlock());
        Value oAt =
            add(add(mul(tok, param(pOStride)), mul(hv, cI64(s.v))), row);
        storeElems(param(pO), s.ioType, oAt, {o});
      }
      for (int64_t e = 0; e < perLane; ++e)
        next.push_back(fma(u, k[e], fmul(decay, Sr[e])));
      // Per-step states (speculative decoding): [B, T, HV, state].
      auto ifStep = scf::IfOp::create(b, stepPresent, false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifStep.thenBlock());
      Value stepRow = add(mul(add(mul(tok, toI64(HV)), hv), headStride),
                          mul(row, cI64(s.k)));
      ArrayRef<Value> nr = ArrayRef<Value>(next).slice(r * perLane, perLane);
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        storeElems(param(pStepStates), s.stateType,
                   add(stepRow, elemIndex(laneInRow, j)),
                   nr.slice(j * t.elemsPerLoad, t.elemsPerLoad));
    }
    scf::YieldOp::create(b, next);
  }

  auto ifWrite = scf::IfOp::create(b, writePool, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  SmallVector<Value> final(loop.getResults());
  for (auto [r, row] : llvm::enumerate(rows)) {
    Value rowAt = stateRowIndex(outSlot, row);
    for (int64_t j = 0; j < t.loadsPerLane; ++j)
      storeElems(param(pState), s.stateType,
                 add(rowAt, elemIndex(laneInRow, j)),
                 ArrayRef<Value>(final).slice(
                     r * perLane + j * t.elemsPerLoad, t.elemsPerLoad));
  }
}

gpu::GPUFuncOp mlir::delta::buildDecodeKernel(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              StringRef name,
                                              const DecodeSpec &spec) {
  MLIRContext *ctx = builder.getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> inputs;
  for (const KernelParam &p : decodeKernelParams()) {
    switch (p.kind) {
    case ParamKind::Pointer: inputs.push_back(ptr); break;
    case ParamKind::I32: inputs.push_back(builder.getI32Type()); break;
    case ParamKind::I64: inputs.push_back(builder.getI64Type()); break;
    case ParamKind::F32: inputs.push_back(builder.getF32Type()); break;
    }
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  DecodeTiling tiling = chooseDecodeTiling(spec);
  func->setAttr(DeltaDialect::kBlockThreadsAttrName,
                builder.getI64IntegerAttr(tiling.threads()));
  func->setAttr(DeltaDialect::kRowsPerBlockAttrName,
                builder.getI64IntegerAttr(tiling.rowsPerBlock()));
  func->setAttr(DeltaDialect::kGridXAttrName,
                builder.getI64IntegerAttr(spec.v / tiling.rowsPerBlock()));
  func.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({(int32_t)tiling.threads(), 1, 1}));

  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  DecodeEmitter(b, func, spec, tiling).emit();
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
  return func;
}
