//===- PrefillWgmma.cpp - wgmma helpers of the prefill kernels ---*- C++ -*-===//
//
// The sm_90a warpgroup forms' tensor-core products (PrefillEmitter.h):
// wgmma.mma_async with both operands as shared-memory descriptors, fp32
// accumulators in registers.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

std::pair<Value, Value> PrefillEmitter::alignedSmem() {
  Value raw = sharedAddr(smem);
  Value aligned = andI(add(raw, cI32(1023)), cI32(~int64_t(1023)));
  return {gep(smem, b.getI8Type(), sub(aligned, raw)), aligned};
}

void PrefillEmitter::throughAsm(StringRef text, ArrayRef<Value> extra,
                                StringRef extraConstraints, SmallVector<Value> &acc,
                                SmallVector<Value> *frags) {
  int64_t n = acc.size(), m = frags ? frags->size() : 0;
  std::string constraints;
  SmallVector<Type> types;
  for (int64_t i = 0; i < n + m; ++i) {
    constraints += i < n ? "=f," : "=r,";
    types.push_back(i < n ? f32 : i32);
  }
  constraints += extraConstraints.str();
  for (int64_t i = 0; i < n + m; ++i)
    constraints += (constraints.back() == ',' ? "" : ",") + std::to_string(i);
  SmallVector<Value> operands(extra);
  operands.append(acc);
  if (frags)
    operands.append(*frags);
  auto type = LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  auto op = LLVM::InlineAsmOp::create(b, type, operands, text, constraints,
                                      /*has_side_effects=*/true, /*is_align_stack=*/false,
                                      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(),
                                      ArrayAttr());
  for (int64_t i = 0; i < n; ++i)
    acc[i] = LLVM::ExtractValueOp::create(b, op.getResult(0), i);
  for (int64_t i = 0; i < m; ++i)
    (*frags)[i] = LLVM::ExtractValueOp::create(b, op.getResult(0), n + i);
}

void PrefillEmitter::wgmmaAsm(SmallVector<Value> &acc, ArrayRef<Value> ab,
                              StringRef abConstraints, bool accumulate, StringRef trans) {
  int64_t n = acc.size(), m = ab.size();
  auto at = [&](int64_t i) { return "$" + std::to_string(n + i); };
  std::string type = opType.isBF16() ? "bf16" : "f16";
  std::string regs;
  for (int64_t i = 0; i < n; ++i)
    regs += (i ? ", $" : "$") + std::to_string(i);
  // A: a descriptor, or four registers of a fragment; B: a descriptor.
  std::string a = at(0);
  if (m == 5)
    a = "{" + at(0) + ", " + at(1) + ", " + at(2) + ", " + at(3) + "}";
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + at(m) +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(2 * n) +
                     "k16.f32." + type + "." + type + " {" + regs + "}, " + a + ", " +
                     at(m - 1) + ", p, 1, 1, " + trans.str() + ";\n}";
  SmallVector<Value> operands(ab);
  operands.push_back(cI32(accumulate ? 1 : 0));
  throughAsm(text, operands, (abConstraints + ",r").str(), acc);
}

void PrefillEmitter::wgmma(SmallVector<Value> &acc, Value da, Value db, bool accumulate,
                           bool transA, bool transB) {
  wgmmaAsm(acc, {da, db}, "l,l", accumulate,
           std::string(transA ? "1" : "0") + ", " + (transB ? "1" : "0"));
}

void PrefillEmitter::wgmmaRegA(SmallVector<Value> &acc, ArrayRef<Value> a, Value db,
                               bool accumulate, bool transB) {
  wgmmaAsm(acc, {a[0], a[1], a[2], a[3], db}, "r,r,r,r,l", accumulate, transB ? "1" : "0");
}

void PrefillEmitter::wgFenceAll(SmallVector<Value> &acc, SmallVector<Value> &frags) {
  throughAsm("wgmma.fence.sync.aligned;", {}, "", acc, &frags);
}

// Lane l addresses row l % 8 of matrix l / 8: (columns 8 (j0 + i / 2),
// rows 8 (i % 2) of the warp's 16) for matrix i.
void PrefillEmitter::stmatrixBlock(Value wl, ArrayRef<Value> x,
                                   function_ref<Value(Value, Value)> addrOf) {
  Value r = remu(lane, cI32(8)), mi = divu(lane, cI32(8));
  for (int64_t j0 = 0; j0 < 8; j0 += 2) {
    Value j = add(cI32(j0), divu(mi, cI32(2)));
    Value row = add(mul(wl, cI32(16)), add(mul(remu(mi, cI32(2)), cI32(8)), r));
    SmallVector<Value> ops{addrOf(row, j)};
    for (int64_t i = 0; i < 4; ++i) {
      int64_t at = 4 * (j0 + i / 2) + 2 * (i % 2);
      ops.push_back(packI32(x[at], x[at + 1]));
    }
    stmatrix(ops[0], ArrayRef<Value>(ops).drop_front(), /*trans=*/false);
  }
}
