//===- KernelEmitter.h - building blocks of the GPU kernel emitters -*- C++ -*-===//
//
// What the decode and prefill emitters share: constants, integer and float
// arithmetic, NVVM math (ex2/lg2/sqrt/fma intrinsics: convert-gpu-to-nvvm
// would turn the generic llvm.intr.* forms into libdevice calls), warp
// reductions and global-pointer helpers, on an ImplicitLocOpBuilder.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_KERNELEMITTER_H
#define DELTAC_CODEGEN_GPU_KERNELEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::delta {

class KernelEmitter {
public:
  explicit KernelEmitter(ImplicitLocOpBuilder &b)
      : b(b), f32(b.getF32Type()), i32(b.getI32Type()), i64(b.getI64Type()),
        ptr(LLVM::LLVMPointerType::get(b.getContext(), 1)) {}

protected:
  Value cI32(int64_t v) { return arith::ConstantIntOp::create(b, i32, v); }
  Value cI64(int64_t v) { return arith::ConstantIntOp::create(b, i64, v); }
  Value cF32(double v) {
    return arith::ConstantFloatOp::create(b, cast<FloatType>(f32),
                                          APFloat((float)v));
  }
  Value cTrue() { return arith::ConstantIntOp::create(b, 1, 1); }
  /// Sign-extends to i64 (an i64 is returned as is).
  Value toI64(Value v) {
    return v.getType() == i64 ? v : arith::ExtSIOp::create(b, i64, v).getResult();
  }
  Value toF32(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, f32, v).getResult();
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value fdiv(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, p, x, y);
  }

  Value intrinsic(StringRef name, ValueRange args) {
    return LLVM::CallIntrinsicOp::create(b, f32, b.getStringAttr(name), args)
        .getResult(0);
  }
  /// log2 e: exp(x) = 2^(x log2 e).
  static constexpr double kLog2e = 1.4426950408889634;
  /// exp(x) as ex2.approx(x log2 e): the instruction Triton uses too.
  Value exp(Value x) {
    return intrinsic("llvm.nvvm.ex2.approx.f32", fmul(x, cF32(kLog2e)));
  }
  /// factor * sigmoid(x) = factor / (1 + exp(-x)): a beta from its logits.
  Value scaledSigmoid(Value factor, Value x) {
    return fdiv(factor, fadd(cF32(1.0), exp(fsub(cF32(0.0), x))));
  }
  /// log2(x) as lg2.approx (-inf at 0).
  Value lg2(Value x) { return intrinsic("llvm.nvvm.lg2.approx.f", x); }
  /// 2^x as ex2.approx.ftz: no denormal fix-up (a result below 2^-126 is 0).
  Value exp2Ftz(Value x) { return intrinsic("llvm.nvvm.ex2.approx.ftz.f", x); }
  /// log(x) as lg2.approx(x) ln 2.
  Value log(Value x) { return fmul(lg2(x), cF32(0.6931471805599453)); }
  Value sqrt(Value x) { return intrinsic("llvm.nvvm.sqrt.rn.f", x); }
  /// 1 / sqrt(x) as rsqrt.approx (2 ulp; the IEEE divide and square root
  /// branch into slow paths that keep independent rows from overlapping).
  Value rsqrt(Value x) { return intrinsic("llvm.nvvm.rsqrt.approx.f", x); }
  Value fma(Value x, Value y, Value z) {
    return intrinsic("llvm.nvvm.fma.rn.f", {x, y, z});
  }
  /// The log decay of a raw gate's input x = a + dt_bias, s = exp(A_log)
  /// (1 without A_log): FLA's -s softplus(x) (threshold 20), or where
  /// `lowerBound` is a number (not NaN) the bounded gate of FLA's KDA,
  /// lowerBound sigmoid(s x). The form is the call's (a kernel parameter),
  /// so one ex2 serves both: exp(-s x) or exp(x).
  Value rawLogDecay(Value x, Value s, Value lowerBound) {
    Value bounded = arith::CmpFOp::create(b, arith::CmpFPredicate::ORD,
                                          lowerBound, lowerBound);
    Value negSX = fsub(cF32(0.0), fmul(s, x));
    Value e = exp(arith::SelectOp::create(b, bounded, negSX, x));
    Value big = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, cF32(20.0));
    Value soft = arith::SelectOp::create(b, big, x, log(fadd(cF32(1.0), e)));
    // div.approx (2 ulp; 1 + e >= 1): both forms are computed and one
    // selected, and an IEEE divide per gate would cost the softplus form
    // a slow-path sequence it does not use.
    return arith::SelectOp::create(
        b, bounded,
        intrinsic("llvm.nvvm.div.approx.f", {lowerBound, fadd(cF32(1.0), e)}),
        fmul(fsub(cF32(0.0), s), soft));
  }
  /// Element i of vector v.
  Value elt(Value v, int64_t i) {
    return LLVM::ExtractElementOp::create(b, v, cI32(i)).getResult();
  }
  /// Butterfly reduction by `combine` over the lanes whose index differs
  /// in the bits of [first, last] (powers of two): every such lane gets the
  /// result.
  Value xorReduce(Value x, int64_t first, int64_t last,
                  function_ref<Value(Value, Value)> combine) {
    for (int64_t offset = first; offset <= last; offset *= 2)
      x = combine(x, gpu::ShuffleOp::create(b, x, offset, 32, gpu::ShuffleMode::XOR)
                         .getShuffleResult());
    return x;
  }
  /// The butterfly's sum (float or integer).
  Value xorSum(Value x, int64_t first, int64_t last) {
    return xorReduce(x, first, last, [&](Value a, Value o) {
      return isa<FloatType>(a.getType()) ? fadd(a, o) : add(a, o);
    });
  }

  /// &base[index] for `element`s (the index is sign-extended to i64).
  Value gep(Value base, Type element, Value index) {
    return LLVM::GEPOp::create(b, cast<LLVM::LLVMPointerType>(base.getType()),
                               element, base, ValueRange{toI64(index)});
  }
  Value isNull(Value p) {
    Value null = LLVM::ZeroOp::create(b, ptr);
    return LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::eq, p, null);
  }
  /// `load()` (an f32), emitted in the branch where `p` is not null, else
  /// `otherwise`: FLA's optional A_log and dt_bias (a null pointer is never
  /// dereferenced).
  Value unlessNull(Value p, double otherwise, function_ref<Value()> load) {
    auto ifNull = scf::IfOp::create(b, TypeRange{f32}, isNull(p), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifNull.thenBlock());
    scf::YieldOp::create(b, cF32(otherwise));
    b.setInsertionPointToStart(ifNull.elseBlock());
    scf::YieldOp::create(b, load());
    return ifNull.getResult(0);
  }
  /// beta[index] as f32 from an array of `ioType` (16-bit), or of f32
  /// where `isF32` (FLA's tests and layers may pass f32 beta with bf16 q;
  /// it is read as given, never rounded). No branch: two 16-bit loads serve
  /// both (a branch per token made the kv decode kernels spill). An f32 at
  /// byte 4i is its high half at 4i + 2 and low half at 4i; a 16-bit value
  /// at 2i is the high half of both loads (the low one is dropped), so
  /// neither reads past the array.
  Value loadBeta(Value base, Value index, Value isF32, Type ioType) {
    Type i16 = b.getI16Type();
    index = toI64(index);
    Value loHalf = arith::SelectOp::create(b, isF32, mul(index, cI64(2)), index);
    Value hiHalf = arith::SelectOp::create(b, isF32, add(loHalf, cI64(1)), index);
    Value lo = LLVM::LoadOp::create(b, i16, gep(base, i16, loHalf), 2);
    Value hi = LLVM::LoadOp::create(b, i16, gep(base, i16, hiHalf), 2);
    Value bits = arith::OrIOp::create(
        b, arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i32, hi), cI32(16)),
        arith::ExtUIOp::create(b, i32, lo));
    Value asF32 = arith::BitcastOp::create(b, f32, bits);
    Value asIo = toF32(arith::BitcastOp::create(b, ioType, hi));
    return arith::SelectOp::create(b, isF32, asF32, asIo);
  }
  Value blockId(gpu::Dimension d) {
    return arith::IndexCastOp::create(b, i32, gpu::BlockIdOp::create(b, d));
  }

  ImplicitLocOpBuilder &b;
  Type f32, i32, i64, ptr;
};

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_KERNELEMITTER_H
