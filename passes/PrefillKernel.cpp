//===- PrefillKernel.cpp - the chunked (prefill) GPU kernels ------*- C++ -*-===//
//
// Emits the prep / chunks / recur kernels of PrefillKernel.h as gpu.func +
// llvm + nvvm. Tensor-core products use mma.sync.m16n8k16 with bf16
// operands read from shared memory as 32-bit fragments: every A operand is
// stored row-major and every B operand transposed (n-major), so each
// fragment register is one aligned 32-bit load of two consecutive k
// elements. Rows are padded by 8 elements, which keeps 16-byte alignment
// and spreads the rows of a fragment over banks.
//
//===----------------------------------------------------------------------===//

#include "passes/PrefillKernel.h"
#include "passes/KernelEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace mlir::delta;

namespace {
enum Param {
  pQ, pK, pV, pO, pG, pBeta, pALog, pDtBias, pInitial, pFinal, pInIdx,
  pOutIdx, pCu, pWork, pErrorFlag, pCuIsI64, pT, pN, pH, pHV, pMaxChunks,
  pQStride, pKStride, pVStride, pOStride, pSlots, pScale
};
const KernelParam kParams[] = {
    {"q", ParamKind::Pointer},           {"k", ParamKind::Pointer},
    {"v", ParamKind::Pointer},           {"o", ParamKind::Pointer},
    {"g", ParamKind::Pointer},           {"beta", ParamKind::Pointer},
    {"a_log", ParamKind::Pointer},       {"dt_bias", ParamKind::Pointer},
    {"initial_state", ParamKind::Pointer}, {"final_state", ParamKind::Pointer},
    {"in_idx", ParamKind::Pointer},      {"out_idx", ParamKind::Pointer},
    {"cu_seqlens", ParamKind::Pointer},  {"work", ParamKind::Pointer},
    {"error_flag", ParamKind::Pointer},  {"cu_is_i64", ParamKind::I32},
    {"T", ParamKind::I64},               {"N", ParamKind::I32},
    {"H", ParamKind::I32},               {"HV", ParamKind::I32},
    {"max_chunks", ParamKind::I32},      {"q_stride", ParamKind::I64},
    {"k_stride", ParamKind::I64},        {"v_stride", ParamKind::I64},
    {"o_stride", ParamKind::I64},        {"slots", ParamKind::I64},
    {"scale", ParamKind::F32},
};


/// Rows of q/k the chunks kernel loads per loop iteration (4 spills).
constexpr int64_t kRowsAtOnce = 2;
constexpr int64_t kPad = 8; // bf16 elements of row padding in shared memory
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

/// Shared-memory regions of the chunks kernel (byte offsets).
struct ChunksSmem {
  int64_t kb, qb, lf, af, ab, kst, vst, gam, gr, beta, tmp, eg, egl, beg,
      total;
  ChunksSmem(const PrefillSpec &s) {
    int64_t C = s.chunk, K = s.k, V = s.v, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    kb = take(C * (K + kPad) * 2);
    qb = take(C * (K + kPad) * 2);
    // Q is dead once Qg is written: the solve's bf16 result and its
    // off-diagonal products live in Q's place when they fit (K = V = 128,
    // C = 64: 2 blocks per SM instead of 1).
    int64_t abBytes = align256(C * (C + kPad) * 2), tmpBytes = 3 * 256 * 4;
    if (abBytes + tmpBytes <= align256(C * (K + kPad) * 2)) {
      ab = qb;
      tmp = qb + abBytes;
    } else {
      ab = take(abBytes);
      tmp = take(tmpBytes);
    }
    lf = take(C * (C + 1) * 4);
    af = take(C * (C + 1) * 4);
    kst = take(K * (C + kPad) * 2);
    vst = take(V * (C + kPad) * 2);
    gam = take(C * 4);
    gr = take(C * 4);
    beta = take(C * 4);
    eg = take(C * 4);
    egl = take(C * 4);
    beg = take(C * 4);
    total = off;
  }
};

/// Shared-memory regions of the recur kernel.
/// The chunk operands (wb, qgb, kdt, pb, the U tile ub, G_last gl) are
/// double-buffered: the second
/// copy of each sits `half` bytes after the first.
struct RecurSmem {
  int64_t st, vnt, wb, qgb, kdt, pb, ub, gl, half, total;
  RecurSmem(const PrefillSpec &s, int64_t bv) {
    int64_t C = s.chunk, K = s.k, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    st = take(bv * (K + kPad) * 2);
    vnt = take(bv * (C + kPad) * 2);
    int64_t first = off;
    wb = take(C * (K + kPad) * 2);
    qgb = take(C * (K + kPad) * 2);
    kdt = take(K * (C + kPad) * 2);
    pb = take(C * (C + kPad) * 2);
    ub = take(C * (bv + kPad) * 2);
    gl = take(4);
    half = off - first;
    off += half;
    total = off;
  }
};

/// One 16x8 accumulator tile of mma.m16n8k16: c0, c1 at (row g, cols 2t,
/// 2t+1), c2, c3 at (row g + 8, same cols); g = lane / 4, t = lane % 4.
struct Frag {
  Value c[4];
};

class PrefillEmitter : KernelEmitter {
public:
  PrefillEmitter(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                 const PrefillSpec &s, const PrefillPlan &plan, Value smem)
      : KernelEmitter(b), func(func), s(s), plan(plan), smem(smem) {
    bf16 = b.getBF16Type();
    tid = arith::IndexCastOp::create(b, i32, gpu::ThreadIdOp::create(b, gpu::Dimension::x));
    warp = arith::DivUIOp::create(b, tid, cI32(32));
    lane = arith::RemUIOp::create(b, tid, cI32(32));
    group = arith::DivUIOp::create(b, lane, cI32(4));
    quad = arith::RemUIOp::create(b, lane, cI32(4));
  }

  void emitPrep();
  void emitChunks();
  void emitRecur();

private:
  // Constants and arithmetic.
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value sel(Value c, Value x, Value y) { return arith::SelectOp::create(b, c, x, y); }
  Value toI32(Value v) { return v.getType() == i32 ? v : arith::TruncIOp::create(b, i32, v).getResult(); }
  Value toBf16(Value v) { return arith::TruncFOp::create(b, bf16, v); }
  Value param(Param p) { return func.getArgument(p); }
  void barrier() { gpu::BarrierOp::create(b); }

  // Memory.
  Value region(int64_t byteOffset) { return gep(smem, b.getI8Type(), cI64(byteOffset)); }
  Value load(Type t, Value base, Value idx, int64_t align) {
    return LLVM::LoadOp::create(b, t, gep(base, t, idx), align);
  }
  void store(Value v, Value base, Value idx, int64_t align) {
    LLVM::StoreOp::create(b, v, gep(base, v.getType(), idx), align);
  }
  /// Stores a vector at element `idx` of `elt` (the GEP steps by `elt`, not
  /// by the vector).
  void storeVec(Value v, Value base, Type elt, Value idx, int64_t align) {
    LLVM::StoreOp::create(b, v, gep(base, elt, idx), align);
  }
  /// A global element converted to f32.
  Value loadF32(Value base, Type elt, Value idx) {
    return toF32(load(elt, base, idx, elt.getIntOrFloatBitWidth() / 8));
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value notNull(Value p) {
    return LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::ne, p, LLVM::ZeroOp::create(b, ptr));
  }
  /// cu_seqlens[n] as i64 (int32 or int64 per the call; null: n * T / N).
  Value cuAt(Value n) {
    Value cu = param(pCu);
    auto ifNull = scf::IfOp::create(b, TypeRange{i64}, isNull(cu), true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifNull.thenBlock());
      Value perSeq = arith::DivSIOp::create(b, param(pT), toI64(param(pN)));
      scf::YieldOp::create(b, mul(toI64(n), perSeq));
      b.setInsertionPointToStart(ifNull.elseBlock());
      Value wide = cmp(arith::CmpIPredicate::ne, param(pCuIsI64), cI32(0));
      Value as64 = load(i64, cu, n, 8);
      Value as32 = toI64(load(i32, cu, n, 4));
      scf::YieldOp::create(b, sel(wide, as64, as32));
    }
    return ifNull.getResult(0);
  }
  void raiseError() {
    LLVM::StoreOp::create(b, cI32(1), param(pErrorFlag), 4);
  }

  // Workspace regions (element offsets computed from the call's sizes).
  Value workRegion(int64_t which);
  Value chunkHead(Value c, Value hv) { return add(mul(toI64(c), toI64(param(pHV))), toI64(hv)); }

  /// Warp tiles of an M x N product: 16x8 tiles numbered row-major, tile
  /// `warp + r * warps` belongs to this warp (r = 0, 1, ...).
  int64_t tilesPerWarp(int64_t M, int64_t N) const {
    return (M / 16) * (N / 8) / (plan.threads / 32);
  }
  std::pair<Value, Value> tileOrigin(int64_t N, int64_t r) {
    Value tile = add(warp, cI32(r * (plan.threads / 32)));
    Value mt = divu(tile, cI32(N / 8)), nt = arith::RemUIOp::create(b, tile, cI32(N / 8));
    return {mul(mt, cI32(16)), mul(nt, cI32(8))};
  }
  /// acc += A[M x Kd] * B[Kd x N] for this warp's tiles; A row-major with row
  /// stride lda, B stored transposed (Bt[n][k], row stride ldb), bf16 in
  /// shared memory.
  void mma(Value A, int64_t lda, Value Bt, int64_t ldb, int64_t M, int64_t N,
           int64_t Kd, SmallVectorImpl<Frag> &acc);
  SmallVector<Frag> zeroFrags(int64_t M, int64_t N) {
    SmallVector<Frag> f(tilesPerWarp(M, N));
    for (Frag &x : f)
      for (Value &c : x.c)
        c = cF32(0.0);
    return f;
  }
  /// Calls fn(row, col, value) for every element of this warp's tiles.
  void forEachElement(int64_t N, ArrayRef<Frag> acc,
                      function_ref<void(Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(N, r);
      for (int e = 0; e < 4; ++e) {
        Value row = add(row0, add(group, cI32(e >= 2 ? 8 : 0)));
        Value col = add(col0, add(mul(quad, cI32(2)), cI32(e % 2)));
        fn(row, col, f.c[e]);
      }
    }
  }
  /// Calls fn(row, col, x0, x1) for every pair of adjacent elements (col
  /// even) of this warp's tiles: one 4-byte store instead of two.
  void forEachPair(int64_t N, ArrayRef<Frag> acc,
                   function_ref<void(Value, Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(N, r);
      Value col = add(col0, mul(quad, cI32(2)));
      fn(add(row0, group), col, f.c[0], f.c[1]);
      fn(add(row0, add(group, cI32(8))), col, f.c[2], f.c[3]);
    }
  }
  /// Two f32 as a vector of two `elt`.
  Value pack2(Value x0, Value x1, Type elt) {
    auto vt = VectorType::get({2}, elt);
    Value v = LLVM::UndefOp::create(b, vt);
    auto conv = [&](Value x) { return elt.isF32() ? x : arith::TruncFOp::create(b, elt, x).getResult(); };
    v = LLVM::InsertElementOp::create(b, v, conv(x0), cI32(0));
    return LLVM::InsertElementOp::create(b, v, conv(x1), cI32(1));
  }

  /// A loop over [0, count) in steps of the block's threads: a real loop
  /// (unrolling everything only raises register pressure and code size), or
  /// unrolled where the body's global loads should all be in flight.
  void threadLoop(int64_t count, function_ref<void(Value)> body,
                  bool unroll = false) {
    int64_t n = plan.threads;
    auto guarded = [&](Value i) {
      if (count % n == 0) {
        body(i);
        return;
      }
      auto inside = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, i, cI32(count)), false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(inside.thenBlock());
      body(i);
    };
    if (unroll) {
      for (int64_t base = 0; base < count; base += n)
        guarded(add(tid, cI32(base)));
      return;
    }
    auto loop = scf::ForOp::create(b, cI32(0), cI32(count), cI32(n));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    guarded(add(tid, loop.getInductionVar()));
  }
  /// Starts copying `rows` x `cols` bf16 (cols % 8 == 0) from global (row
  /// stride `cols`) to shared memory (row stride cols + pad) with cp.async,
  /// 16 bytes per instruction, all in flight; waitCopies() completes them.
  void copyTile(Value dst, Value src, Value srcBase, int64_t rows, int64_t cols,
                int64_t srcStride = 0) {
    int64_t vecs = cols / 8;
    if (srcStride == 0)
      srcStride = cols;
    threadLoop(rows * vecs, [&](Value i) {
      Value r = divu(i, cI32(vecs)), c = mul(arith::RemUIOp::create(b, i, cI32(vecs)), cI32(8));
      Value from = gep(src, bf16, add(srcBase, toI64(add(mul(r, cI32(srcStride)), c))));
      Value to = gep(dst, bf16, toI64(add(mul(r, cI32(cols + kPad)), c)));
      LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.cg.shared.global.16"),
                                    ValueRange{to, from});
    }, /*unroll=*/true);
  }
  void commitCopies() {
    LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.commit.group"), ValueRange{});
  }
  void waitCopies() {
    LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.wait.all"), ValueRange{});
  }
  /// The gate input of a token as a log decay, and its beta.
  std::pair<Value, Value> gateAndBeta(Value tok, Value hv);

  gpu::GPUFuncOp func;
  const PrefillSpec &s;
  const PrefillPlan &plan;
  Value smem;
  Type bf16;
  Value tid, warp, lane, group, quad;
};

void PrefillEmitter::mma(Value A, int64_t lda, Value Bt, int64_t ldb,
                         int64_t M, int64_t N, int64_t Kd,
                         SmallVectorImpl<Frag> &acc) {
  MLIRContext *ctx = b.getContext();
  auto resType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  Value twoQuad = mul(quad, cI32(2));
  for (int64_t r = 0; r < static_cast<int64_t>(acc.size()); ++r) {
    auto [row0, col0] = tileOrigin(N, r);
    Value aRow = add(row0, group), bRow = add(col0, group);
    for (int64_t ks = 0; ks < Kd; ks += 16) {
      Value k0 = add(twoQuad, cI32(ks));
      auto frag = [&](Value base, int64_t ld, Value row, Value col) {
        return load(i32, gep(base, bf16, toI64(add(mul(row, cI32(ld)), col))), cI32(0), 4);
      };
      Value a0 = frag(A, lda, aRow, k0);
      Value a1 = frag(A, lda, add(aRow, cI32(8)), k0);
      Value a2 = frag(A, lda, aRow, add(k0, cI32(8)));
      Value a3 = frag(A, lda, add(aRow, cI32(8)), add(k0, cI32(8)));
      Value b0 = frag(Bt, ldb, bRow, k0);
      Value b1 = frag(Bt, ldb, bRow, add(k0, cI32(8)));
      Frag &f = acc[r];
      auto op = LLVM::InlineAsmOp::create(
          b, resType,
          ValueRange{a0, a1, a2, a3, b0, b1, f.c[0], f.c[1], f.c[2], f.c[3]},
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
          "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::TailCallKind::None,
          LLVM::AsmDialectAttr(), ArrayAttr());
      for (int e = 0; e < 4; ++e)
        f.c[e] = LLVM::ExtractValueOp::create(b, op.getResult(0), ArrayRef<int64_t>{e});
    }
  }
}

// Workspace: [0] chunk offsets i32 [N + 1]; then per (chunk, head):
// [1] gamma_last f32; [2] W [C, K]; [3] U [C, V]; [4] Qg [C, K];
// [5] KdT [K, C]; [6] P [C, C] (bf16). Regions start on 256-byte bounds.
Value PrefillEmitter::workRegion(int64_t which) {
  Value chunks = mul(toI64(param(pMaxChunks)), toI64(param(pHV)));
  int64_t C = s.chunk, K = s.k, V = s.v;
  int64_t perChunk[] = {4, C * K * 2, C * V * 2, C * K * 2, K * C * 2, C * C * 2};
  auto round = [&](Value bytes) { return mul(divu(add(bytes, cI64(255)), cI64(256)), cI64(256)); };
  Value off = round(mul(toI64(add(param(pN), cI32(1))), cI64(4)));
  for (int64_t r = 1; r < which; ++r)
    off = add(off, round(mul(chunks, cI64(perChunk[r - 1]))));
  if (which == 0)
    off = cI64(0);
  return gep(param(pWork), b.getI8Type(), off);
}

std::pair<Value, Value> PrefillEmitter::gateAndBeta(Value tok, Value hv) {
  Value at = add(mul(tok, toI64(param(pHV))), toI64(hv));
  Value g = cF32(0.0);
  switch (s.gate) {
  case GateForm::none: break;
  case GateForm::log: g = loadF32(param(pG), s.gateType, at); break;
  case GateForm::linear: g = log(loadF32(param(pG), s.gateType, at)); break;
  default: { // raw: -exp(A_log) * softplus(a + dt_bias), threshold 20
    Value x = fadd(loadF32(param(pG), s.gateType, at), loadF32(param(pDtBias), f32, hv));
    Value big = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, cF32(20.0));
    Value soft = log(fadd(cF32(1.0), exp(x)));
    g = fmul(fsub(cF32(0.0), exp(loadF32(param(pALog), f32, hv))), sel(big, x, soft));
  }
  }
  Value beta = loadF32(param(pBeta), s.betaType, at);
  if (s.beta != BetaForm::given) {
    Value factor = cF32(s.beta == BetaForm::sigmoid2 ? 2.0 : 1.0);
    beta = fdiv(factor, fadd(cF32(1.0), exp(fsub(cF32(0.0), beta))));
  }
  return {g, beta};
}

//===----------------------------------------------------------------------===//
// prep: chunk offsets
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitPrep() {
  int64_t n = plan.threads, C = s.chunk;
  Value scan = gep(smem, i32, cI64(0));
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value N = param(pN);
  // cu_seqlens must start at 0, never decrease and end at T.
  auto first = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(first.thenBlock());
    store(cI32(0), offsets, cI32(0), 4);
    Value bad = arith::OrIOp::create(b, cmp(arith::CmpIPredicate::ne, cuAt(cI32(0)), cI64(0)),
                                     cmp(arith::CmpIPredicate::ne, cuAt(N), param(pT)));
    auto ifBad = scf::IfOp::create(b, bad, false);
    b.setInsertionPointToStart(ifBad.thenBlock());
    raiseError();
  }
  Value numTiles = divu(add(N, cI32(n - 1)), cI32(n));
  auto loop = scf::ForOp::create(b, cI32(0), numTiles, cI32(1), ValueRange{cI32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value tile = loop.getInductionVar(), carry = loop.getRegionIterArg(0);
    Value seq = add(mul(tile, cI32(n)), tid);
    Value inside = cmp(arith::CmpIPredicate::slt, seq, N);
    auto count = scf::IfOp::create(b, TypeRange{i32}, inside, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(count.thenBlock());
      Value len = sub(cuAt(add(seq, cI32(1))), cuAt(seq));
      Value negative = cmp(arith::CmpIPredicate::slt, len, cI64(0));
      auto ifNeg = scf::IfOp::create(b, negative, false);
      {
        OpBuilder::InsertionGuard g3(b);
        b.setInsertionPointToStart(ifNeg.thenBlock());
        raiseError();
      }
      Value clamped = arith::MaxSIOp::create(b, len, cI64(0));
      scf::YieldOp::create(b, toI32(arith::DivUIOp::create(b, add(clamped, cI64(C - 1)), cI64(C))));
      b.setInsertionPointToStart(count.elseBlock());
      scf::YieldOp::create(b, cI32(0));
    }
    // Inclusive scan over the block (Hillis-Steele, two buffers).
    Value x = count.getResult(0);
    store(x, scan, tid, 4);
    barrier();
    int64_t buf = 0;
    for (int64_t off = 1; off < n; off *= 2) {
      Value mine = load(i32, scan, add(tid, cI32(buf * n)), 4);
      Value has = cmp(arith::CmpIPredicate::uge, tid, cI32(off));
      Value other = load(i32, scan, add(sel(has, sub(tid, cI32(off)), tid), cI32(buf * n)), 4);
      Value sum = sel(has, add(mine, other), mine);
      buf = 1 - buf;
      store(sum, scan, add(tid, cI32(buf * n)), 4);
      barrier();
    }
    Value incl = load(i32, scan, add(tid, cI32(buf * n)), 4);
    auto write = scf::IfOp::create(b, inside, false);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(write.thenBlock());
      store(add(carry, incl), offsets, add(seq, cI32(1)), 4);
    }
    Value total = load(i32, scan, cI32(buf * n + n - 1), 4);
    barrier();
    scf::YieldOp::create(b, add(carry, total));
  }
}

//===----------------------------------------------------------------------===//
// chunks: everything that does not read the state
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitChunks() {
  int64_t C = s.chunk, K = s.k, V = s.v;
  ChunksSmem L(s);
  Value c = blockId(gpu::Dimension::x), hv = blockId(gpu::Dimension::y);
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value N = param(pN);
  Value total = load(i32, offsets, N, 4);
  auto live = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, c, total), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(live.thenBlock());
  // The sequence of chunk c: the last n with offsets[n] <= c (binary search).
  auto search = scf::ForOp::create(b, cI32(0), cI32(32), cI32(1), ValueRange{cI32(0), N});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(search.getBody());
    Value lo = search.getRegionIterArg(0), hi = search.getRegionIterArg(1);
    Value mid = divu(add(add(lo, hi), cI32(1)), cI32(2));
    Value open = cmp(arith::CmpIPredicate::slt, lo, hi);
    Value goUp = cmp(arith::CmpIPredicate::sle, load(i32, offsets, minS(mid, N), 4), c);
    Value nlo = sel(open, sel(goUp, mid, lo), lo);
    Value nhi = sel(open, sel(goUp, hi, sub(mid, cI32(1))), hi);
    scf::YieldOp::create(b, ValueRange{nlo, nhi});
  }
  Value n = search.getResult(0);
  Value j = sub(c, load(i32, offsets, n, 4));
  Value bos = cuAt(n), eos = cuAt(add(n, cI32(1)));
  Value t0 = add(bos, mul(toI64(j), cI64(C)));
  Value rows = toI32(arith::MinSIOp::create(b, cI64(C), sub(eos, t0)));
  Value h = divu(hv, divu(param(pHV), param(pH)));
  Value kb = region(L.kb), qb = region(L.qb), lf = region(L.lf), af = region(L.af),
        ab = region(L.ab), kst = region(L.kst), vst = region(L.vst), gam = region(L.gam),
        gr = region(L.gr), betaS = region(L.beta);

  // Rows: q, k (normalised), the decay and beta of each token; zero padding.
  int64_t epl = K / 32;
  int64_t warps = plan.threads / 32;
  // kRowsAtOnce rows per iteration, their loads in flight together.
  auto rowLoop = scf::ForOp::create(b, cI32(0), cI32(C), cI32(warps * kRowsAtOnce));
  OpBuilder::InsertionGuard rowGuard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  for (int64_t r = 0; r < kRowsAtOnce * warps; r += warps) {
    Value i = add(warp, add(rowLoop.getInductionVar(), cI32(r)));
    Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
    Value tok = add(t0, toI64(sel(valid, i, cI32(0))));
    for (int which = 0; which < 2; ++which) {
      Value base = which ? param(pQ) : param(pK);
      Value stride = which ? param(pQStride) : param(pKStride);
      Value at = add(add(mul(tok, stride), mul(toI64(h), cI64(K))), toI64(mul(lane, cI32(epl))));
      // One vector load per lane (epl contiguous elements).
      int64_t bytes = s.ioType.getIntOrFloatBitWidth() / 8;
      auto vt = VectorType::get({epl}, s.ioType);
      Value vec = LLVM::LoadOp::create(b, vt, gep(base, s.ioType, at), epl * bytes);
      SmallVector<Value> x;
      Value ss = cF32(0.0);
      for (int64_t e = 0; e < epl; ++e) {
        x.push_back(toF32(LLVM::ExtractElementOp::create(b, vec, cI32(e)).getResult()));
        ss = fadd(ss, fmul(x.back(), x.back()));
      }
      Value scale = cF32(1.0);
      if (s.qkL2Norm)
        scale = fdiv(cF32(1.0), sqrt(fadd(xorSum(ss, 1, 16), cF32(1e-6))));
      scale = sel(valid, scale, cF32(0.0));
      Value dst = which ? qb : kb;
      for (int64_t e = 0; e < epl; ++e)
        store(toBf16(fmul(x[e], scale)), dst, add(mul(i, cI32(K + kPad)), add(mul(lane, cI32(epl)), cI32(e))), 2);
    }
  }
  b.setInsertionPointAfter(rowLoop);
  // The decay and beta of each row, one thread per row (zero padding).
  threadLoop(C, [&](Value i) {
    Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
    Value tok = add(t0, toI64(sel(valid, i, cI32(0))));
    auto [gv, bv] = gateAndBeta(tok, hv);
    store(sel(valid, gv, cF32(0.0)), gr, i, 4);
    store(sel(valid, bv, cF32(0.0)), betaS, i, 4);
  }, /*unroll=*/true);
  barrier();
  // chunk_cumsum by warp 0 (C / 32 rows per lane, a shuffle scan); padding
  // rows have g = 0, so they repeat the last decay. Then the per-row
  // factors every later step uses: e^G, e^(G_last - G), beta e^G.
  {
    int64_t per = C / 32;
    auto w0 = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, warp, cI32(0)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(w0.thenBlock());
    SmallVector<Value> run;
    Value total = cF32(0.0);
    for (int64_t e = 0; e < per; ++e) {
      total = fadd(total, load(f32, gr, add(mul(lane, cI32(per)), cI32(e)), 4));
      run.push_back(total);
    }
    Value incl = total;
    for (int64_t off = 1; off < 32; off *= 2) {
      Value up = gpu::ShuffleOp::create(b, incl, off, 32, gpu::ShuffleMode::UP).getShuffleResult();
      incl = sel(cmp(arith::CmpIPredicate::uge, lane, cI32(off)), fadd(incl, up), incl);
    }
    Value before = fsub(incl, total);
    for (int64_t e = 0; e < per; ++e)
      store(fadd(before, run[e]), gam, add(mul(lane, cI32(per)), cI32(e)), 4);
  }
  barrier();
  Value eG = region(L.eg), eGL = region(L.egl), bEG = region(L.beg);
  {
    Value gLastRow = load(f32, gam, cI32(C - 1), 4);
    threadLoop(C, [&](Value m) {
      bool gatedRule = s.rule == Rule::gated;
      Value gm = load(f32, gam, m, 4);
      Value e1 = gatedRule ? exp(gm) : cF32(1.0);
      store(e1, eG, m, 4);
      store(gatedRule ? exp(fsub(gLastRow, gm)) : cF32(1.0), eGL, m, 4);
      store(fmul(load(f32, betaS, m, 4), e1), bEG, m, 4);
    });
  }
  barrier();
  bool gated = s.rule == Rule::gated;
  // exp(Gamma_i - Gamma_j) on keep (i >= j) only; the argument is selected
  // first so no positive exponent is evaluated.
  auto decay = [&](Value keep, Value i, Value jj) -> Value {
    if (!gated)
      return cF32(1.0);
    Value d = fsub(load(f32, gam, i, 4), load(f32, gam, jj, 4));
    return exp(sel(keep, d, cF32(0.0)));
  };
  // chunk_kkt: L = strictly lower beta_i exp(Gi - Gj) <k_i, k_j>.
  {
    SmallVector<Frag> acc = zeroFrags(C, C);
    mma(kb, K + kPad, kb, K + kPad, C, C, K, acc);
    forEachElement(C, acc, [&](Value i, Value jj, Value x) {
      Value below = cmp(arith::CmpIPredicate::ugt, i, jj);
      Value l = fmul(fmul(x, load(f32, betaS, i, 4)), decay(below, i, jj));
      store(sel(below, l, cF32(0.0)), lf, add(mul(i, cI32(C + 1)), jj), 4);
    });
  }
  // chunk_output, intra-chunk half: P = scale (Q K^T) ⊙ M, M_ij = exp(Gi - Gj), i >= j.
  Value ch = chunkHead(c, hv);
  {
    SmallVector<Frag> acc = zeroFrags(C, C);
    mma(qb, K + kPad, kb, K + kPad, C, C, K, acc);
    Value p = gep(workRegion(6), bf16, mul(ch, cI64(C * C)));
    forEachElement(C, acc, [&](Value i, Value jj, Value x) {
      Value causal = cmp(arith::CmpIPredicate::uge, i, jj);
      Value scaled = fmul(fmul(x, decay(causal, i, jj)), param(pScale));
      store(toBf16(sel(causal, scaled, cF32(0.0))), p, add(mul(i, cI32(C)), jj), 2);
    });
  }
  // Qg = scale Q ⊙ e^G for the recurrence: the last use of Q, whose shared
  // memory the solve reuses after the barrier.
  {
    Value qg = gep(workRegion(4), bf16, mul(ch, cI64(C * K)));
    threadLoop(C * K, [&](Value e) {
      Value m = divu(e, cI32(K)), d = arith::RemUIOp::create(b, e, cI32(K));
      Value qmd = toF32(load(bf16, qb, add(mul(m, cI32(K + kPad)), d), 2));
      store(toBf16(fmul(qmd, fmul(load(f32, eG, m, 4), param(pScale)))), qg, add(mul(m, cI32(K)), d), 2);
    });
  }
  barrier();
  // solve_tril, blocked by 16: (1) each diagonal 16x16 block inverted by
  // forward substitution, one lane per column with the column in
  // registers (A_ij = -sum_{m<i} L_im A_mj; entries above the diagonal are
  // zero, so the sum may start at the block's first row); blocks above the
  // diagonal set to zero. (2) Block rows below, by distance d from the
  // diagonal: A_rc = -A_rr sum_{k=c}^{r-1} L_rk A_kc. All in fp32.
  int64_t nb = C / 16;
  {
    Value blk = add(mul(warp, cI32(2)), divu(lane, cI32(16)));
    Value jl = arith::RemUIOp::create(b, lane, cI32(16));
    auto active = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, blk, cI32(nb)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(active.thenBlock());
    Value base = mul(blk, cI32(16));
    SmallVector<Value> a;
    for (int64_t m = 0; m < 16; ++m)
      a.push_back(sel(cmp(arith::CmpIPredicate::eq, jl, cI32(m)), cF32(1.0), cF32(0.0)));
    for (int64_t i = 1; i < 16; ++i) {
      Value row = mul(add(base, cI32(i)), cI32(C + 1));
      SmallVector<Value> terms;
      for (int64_t m = 0; m < i; ++m)
        terms.push_back(fmul(load(f32, lf, add(row, add(base, cI32(m))), 4), a[m]));
      while (terms.size() > 1) { // a tree: a short dependent chain
        SmallVector<Value> half;
        for (size_t t = 0; t + 1 < terms.size(); t += 2)
          half.push_back(fadd(terms[t], terms[t + 1]));
        if (terms.size() % 2)
          half.push_back(terms.back());
        terms = half;
      }
      a[i] = sel(cmp(arith::CmpIPredicate::ugt, cI32(i), jl), fsub(cF32(0.0), terms[0]), a[i]);
    }
    for (int64_t i = 0; i < 16; ++i)
      store(a[i], af, add(mul(add(base, cI32(i)), cI32(C + 1)), add(base, jl)), 4);
  }
  threadLoop(C * C, [&](Value e) {
    Value i = divu(e, cI32(C)), jj = arith::RemUIOp::create(b, e, cI32(C));
    Value above = cmp(arith::CmpIPredicate::ult, divu(i, cI32(16)), divu(jj, cI32(16)));
    auto ifAbove = scf::IfOp::create(b, above, false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifAbove.thenBlock());
    store(cF32(0.0), af, add(mul(i, cI32(C + 1)), jj), 4);
  });
  barrier();
  Value tmp = region(L.tmp);
  for (int64_t d = 1; d < nb; ++d) {
    int64_t pairs = nb - d;
    // T_p = sum_k L_rk A_kc over the block columns c .. r - 1 (r = p + d, c = p).
    threadLoop(pairs * 256, [&](Value e) {
      Value pIdx = divu(e, cI32(256)), ii = divu(arith::RemUIOp::create(b, e, cI32(256)), cI32(16));
      Value jl = arith::RemUIOp::create(b, e, cI32(16));
      Value rowG = add(mul(add(pIdx, cI32(d)), cI32(16)), ii), colG = add(mul(pIdx, cI32(16)), jl);
      Value first = mul(pIdx, cI32(16));
      auto sum = scf::ForOp::create(b, first, add(first, cI32(16 * d)), cI32(1), ValueRange{cF32(0.0)});
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(sum.getBody());
        Value m = sum.getInductionVar();
        Value x = fmul(load(f32, lf, add(mul(rowG, cI32(C + 1)), m), 4),
                       load(f32, af, add(mul(m, cI32(C + 1)), colG), 4));
        scf::YieldOp::create(b, fadd(sum.getRegionIterArg(0), x));
      }
      store(sum.getResult(0), tmp, e, 4);
    });
    barrier();
    // A_rc = -A_rr T_p.
    threadLoop(pairs * 256, [&](Value e) {
      Value pIdx = divu(e, cI32(256)), ii = divu(arith::RemUIOp::create(b, e, cI32(256)), cI32(16));
      Value jl = arith::RemUIOp::create(b, e, cI32(16));
      Value r0 = mul(add(pIdx, cI32(d)), cI32(16));
      Value acc = cF32(0.0);
      for (int64_t m = 0; m < 16; ++m)
        acc = fadd(acc, fmul(load(f32, af, add(mul(add(r0, ii), cI32(C + 1)), add(r0, cI32(m))), 4),
                             load(f32, tmp, add(mul(pIdx, cI32(256)), add(mul(cI32(m), cI32(16)), jl)), 4)));
      store(fsub(cF32(0.0), acc), af, add(mul(add(r0, ii), cI32(C + 1)), add(mul(pIdx, cI32(16)), jl)), 4);
    });
    barrier();
  }
  threadLoop(C * C, [&](Value e) {
    Value i = divu(e, cI32(C)), jj = arith::RemUIOp::create(b, e, cI32(C));
    store(toBf16(load(f32, af, add(mul(i, cI32(C + 1)), jj), 4)), ab, add(mul(i, cI32(C + kPad)), jj), 2);
  });
  // Operands of the WY products, transposed: (beta e^G K)^T and (beta V)^T;
  // and the recurrence's KdT = (K ⊙ e^(G_last - G))^T.
  Value gLast = load(f32, gam, cI32(C - 1), 4);
  Value kdt = gep(workRegion(5), bf16, mul(ch, cI64(K * C)));
  threadLoop(C * K, [&](Value e) {
    Value m = arith::RemUIOp::create(b, e, cI32(C)), d = divu(e, cI32(C));
    Value kmd = toF32(load(bf16, kb, add(mul(m, cI32(K + kPad)), d), 2));
    store(toBf16(fmul(kmd, load(f32, bEG, m, 4))), kst, add(mul(d, cI32(C + kPad)), m), 2);
    store(toBf16(fmul(kmd, load(f32, eGL, m, 4))), kdt, add(mul(d, cI32(C)), m), 2);
  });
  // (beta V)^T: 16-byte loads of v rows, all of a thread's in flight.
  int64_t perVec = 16 / (s.ioType.getIntOrFloatBitWidth() / 8);
  threadLoop(C * V / perVec, [&](Value e) {
    Value m = divu(e, cI32(V / perVec));
    Value vv = mul(arith::RemUIOp::create(b, e, cI32(V / perVec)), cI32(perVec));
    Value valid = cmp(arith::CmpIPredicate::slt, m, rows);
    Value tok = add(t0, toI64(sel(valid, m, cI32(0))));
    Value at = add(add(mul(tok, param(pVStride)), mul(toI64(hv), cI64(V))), toI64(vv));
    auto vt = VectorType::get({perVec}, s.ioType);
    Value vec = LLVM::LoadOp::create(b, vt, gep(param(pV), s.ioType, at), 16);
    Value bm = sel(valid, load(f32, betaS, m, 4), cF32(0.0));
    for (int64_t x = 0; x < perVec; ++x) {
      Value elt = toF32(LLVM::ExtractElementOp::create(b, vec, cI32(x)).getResult());
      store(toBf16(fmul(elt, bm)), vst, add(mul(add(vv, cI32(x)), cI32(C + kPad)), m), 2);
    }
  }, /*unroll=*/true);
  barrier();
  // chunk_wy: W = A (beta e^G K), U = A (beta V), to the workspace.
  auto product = [&](Value bt, int64_t cols, int64_t which) {
    SmallVector<Frag> acc = zeroFrags(C, cols);
    mma(ab, C + kPad, bt, C + kPad, C, cols, C, acc);
    Value dst = gep(workRegion(which), bf16, mul(ch, cI64(C * cols)));
    forEachPair(cols, acc, [&](Value i, Value col, Value x0, Value x1) {
      storeVec(pack2(x0, x1, bf16), dst, bf16, add(mul(i, cI32(cols)), col), 4);
    });
  };
  product(kst, K, 2);
  product(vst, V, 3);
  auto lead = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
  b.setInsertionPointToStart(lead.thenBlock());
  store(gLast, gep(workRegion(1), f32, ch), cI32(0), 4);
}

//===----------------------------------------------------------------------===//
// recur: the state from chunk to chunk
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitRecur() {
  int64_t C = s.chunk, K = s.k, V = s.v, BV = plan.valueTile;
  RecurSmem L(s, BV);
  Value n = blockId(gpu::Dimension::x), hv = blockId(gpu::Dimension::y),
        vt = blockId(gpu::Dimension::z);
  Value v0 = mul(vt, cI32(BV));
  // Slots: in_idx / out_idx (null: row n; out null: the slot read).
  // Negative = padding (no read / no write); >= slots raises the flag.
  auto slotOf = [&](Value idx, Value fallback) {
    auto r = scf::IfOp::create(b, TypeRange{i64}, isNull(idx), true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(r.thenBlock());
    scf::YieldOp::create(b, fallback);
    b.setInsertionPointToStart(r.elseBlock());
    scf::YieldOp::create(b, toI64(load(i32, idx, n, 4)));
    return r.getResult(0);
  };
  Value inSlot = slotOf(param(pInIdx), toI64(n));
  Value outSlot = slotOf(param(pOutIdx), inSlot);
  auto usable = [&](Value slot, Value pool) {
    Value tooBig = andI(cmp(arith::CmpIPredicate::sge, slot, param(pSlots)), notNull(pool));
    auto r = scf::IfOp::create(b, tooBig, false);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(r.thenBlock());
      raiseError();
    }
    return andI(andI(cmp(arith::CmpIPredicate::sge, slot, cI64(0)),
                     cmp(arith::CmpIPredicate::slt, slot, param(pSlots))),
                notNull(pool));
  };
  Value readOk = usable(inSlot, param(pInitial));
  Value writeOk = usable(outSlot, param(pFinal));
  bool vk = s.layout == StateLayout::vk;
  auto stateIndex = [&](Value slot, Value d, Value col) {
    Value head = mul(add(mul(slot, toI64(param(pHV))), toI64(hv)), cI64(K * V));
    Value vcol = toI64(add(v0, col));
    return add(head, vk ? add(mul(vcol, cI64(K)), toI64(d)) : add(mul(toI64(d), cI64(V)), vcol));
  };
  // The state tile [K, BV] as mma accumulators.
  SmallVector<Frag> S = zeroFrags(K, BV);
  {
    auto ifRead = scf::IfOp::create(b, TypeRange(SmallVector<Type>(S.size() * 4, f32)), readOk, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifRead.thenBlock());
    SmallVector<Value> vals;
    forEachElement(BV, S, [&](Value d, Value col, Value) {
      vals.push_back(loadF32(param(pInitial), s.stateType, stateIndex(inSlot, d, col)));
    });
    scf::YieldOp::create(b, vals);
    b.setInsertionPointToStart(ifRead.elseBlock());
    scf::YieldOp::create(b, SmallVector<Value>(S.size() * 4, cF32(0.0)));
    b.setInsertionPointAfter(ifRead);
    for (size_t i = 0; i < S.size() * 4; ++i)
      S[i / 4].c[i % 4] = ifRead.getResult(i);
  }
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value c0 = load(i32, offsets, n, 4), c1 = load(i32, offsets, add(n, cI32(1)), 4);
  Value bos = cuAt(n), eos = cuAt(add(n, cI32(1)));
  Value st = region(L.st), vnt = region(L.vnt);
  // The chunk's operands, double-buffered: chunk c + 1 is copied (cp.async)
  // while chunk c computes.
  auto startCopies = [&](Value c, Value parity) {
    Value ch = chunkHead(c, hv);
    auto buf = [&](int64_t at) {
      return LLVM::SelectOp::create(b, parity, region(at + L.half), region(at)).getResult();
    };
    copyTile(buf(L.wb), workRegion(2), mul(ch, cI64(C * K)), C, K);
    copyTile(buf(L.qgb), workRegion(4), mul(ch, cI64(C * K)), C, K);
    copyTile(buf(L.kdt), workRegion(5), mul(ch, cI64(K * C)), K, C);
    copyTile(buf(L.pb), workRegion(6), mul(ch, cI64(C * C)), C, C);
    copyTile(buf(L.ub), workRegion(3), add(mul(ch, cI64(C * V)), toI64(v0)), C, BV, V);
    auto first = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(first.thenBlock());
      LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.ca.shared.global.4"),
                                    ValueRange{buf(L.gl), gep(workRegion(1), f32, ch)});
    }
    commitCopies();
  };
  {
    auto any = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, c0, c1), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(any.thenBlock());
    startCopies(c0, arith::ConstantIntOp::create(b, 0, 1));
  }
  SmallVector<Value> init;
  for (Frag &f : S)
    init.append(f.c, f.c + 4);
  auto loop = scf::ForOp::create(b, c0, c1, cI32(1), init);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    for (size_t i = 0; i < S.size() * 4; ++i)
      S[i / 4].c[i % 4] = loop.getRegionIterArg(i);
    Value t0 = add(bos, mul(toI64(sub(c, c0)), cI64(C)));
    Value rows = toI32(arith::MinSIOp::create(b, cI64(C), sub(eos, t0)));
    Value odd = cmp(arith::CmpIPredicate::ne,
                    arith::RemUIOp::create(b, sub(c, c0), cI32(2)), cI32(0));
    // Chunk c's operands have landed for every thread, and every thread is
    // done with chunk c - 1 (whose buffer the next copies overwrite).
    waitCopies();
    barrier();
    {
      Value next = add(c, cI32(1));
      auto more = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, next, c1), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(more.thenBlock());
      startCopies(next, arith::XOrIOp::create(b, odd, arith::ConstantIntOp::create(b, 1, 1)));
    }
    auto cur = [&](int64_t at) {
      return LLVM::SelectOp::create(b, odd, region(at + L.half), region(at)).getResult();
    };
    Value wb = cur(L.wb), qgb = cur(L.qgb), kdt = cur(L.kdt), pb = cur(L.pb),
          ub = cur(L.ub), gl = cur(L.gl);
    // S^T in bf16: the B operand of W S and Qg S.
    forEachElement(BV, S, [&](Value d, Value col, Value x) {
      store(toBf16(x), st, add(mul(col, cI32(K + kPad)), d), 2);
    });
    barrier();
    // chunk_residual: V' = U - W S, stored transposed for the next products.
    {
      SmallVector<Frag> acc = zeroFrags(C, BV);
      mma(wb, K + kPad, st, K + kPad, C, BV, K, acc);
      forEachElement(BV, acc, [&](Value i, Value col, Value x) {
        Value uv = toF32(load(bf16, ub, add(mul(i, cI32(BV + kPad)), col), 2));
        store(toBf16(fsub(uv, x)), vnt, add(mul(col, cI32(C + kPad)), i), 2);
      });
    }
    barrier();
    // chunk_output: O = Qg S + P V'.
    {
      SmallVector<Frag> acc = zeroFrags(C, BV);
      mma(qgb, K + kPad, st, K + kPad, C, BV, K, acc);
      mma(pb, C + kPad, vnt, C + kPad, C, BV, C, acc);
      forEachPair(BV, acc, [&](Value i, Value col, Value x0, Value x1) {
        auto inside = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, i, rows), false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(inside.thenBlock());
        Value tok = add(t0, toI64(i));
        Value at = add(add(mul(tok, param(pOStride)), mul(toI64(hv), cI64(V))), toI64(add(v0, col)));
        storeVec(pack2(x0, x1, s.ioType), param(pO), s.ioType, at, 2 * s.ioType.getIntOrFloatBitWidth() / 8);
      });
    }
    // chunk_state_step: S = e^G_last S + KdT V'.
    Value decayLast = s.rule == Rule::gated ? exp(load(f32, gl, cI32(0), 4)) : cF32(1.0);
    for (Frag &f : S)
      for (Value &x : f.c)
        x = fmul(x, decayLast);
    mma(kdt, C + kPad, vnt, C + kPad, K, BV, C, S);
    SmallVector<Value> next;
    for (Frag &f : S)
      next.append(f.c, f.c + 4);
    scf::YieldOp::create(b, next);
  }
  for (size_t i = 0; i < S.size() * 4; ++i)
    S[i / 4].c[i % 4] = loop.getResult(i);
  auto ifWrite = scf::IfOp::create(b, writeOk, false);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  forEachElement(BV, S, [&](Value d, Value col, Value x) {
    Value y = s.stateType.isF32() ? x : arith::TruncFOp::create(b, s.stateType, x).getResult();
    store(y, param(pFinal), stateIndex(outSlot, d, col), s.stateType.getIntOrFloatBitWidth() / 8);
  });
}
} // namespace

ArrayRef<KernelParam> mlir::delta::prefillKernelParams() { return kParams; }

PrefillPlan mlir::delta::planPrefill(const PrefillSpec &spec, int64_t valueTile,
                                     int64_t threads) {
  PrefillPlan p;
  p.valueTile = valueTile > 0 ? valueTile : std::min<int64_t>(32, spec.v);
  // Eight warps when every product has a multiple of eight 16x8 tiles
  // (C = 64 with V tiles of 16 or more): twice the warps to hide latency.
  auto tiles = [](int64_t m, int64_t n) { return (m / 16) * (n / 8); };
  bool eight = tiles(spec.chunk, spec.chunk) % 8 == 0 &&
               tiles(spec.chunk, p.valueTile) % 8 == 0 &&
               tiles(spec.chunk, spec.k) % 8 == 0 &&
               tiles(spec.chunk, spec.v) % 8 == 0 &&
               tiles(spec.k, p.valueTile) % 8 == 0 && spec.chunk / 8 >= 4;
  p.threads = threads > 0 ? threads : eight ? 256 : 128;
  p.chunksSmem = ChunksSmem(spec).total;
  p.recurSmem = RecurSmem(spec, p.valueTile).total;
  p.prepSmem = 2 * p.threads * 4;
  return p;
}

int64_t mlir::delta::prefillWorkspaceBytes(const PrefillSpec &s, int64_t maxChunks,
                                           int64_t valueHeads, int64_t numSeqs) {
  int64_t C = s.chunk, K = s.k, V = s.v, chunks = maxChunks * valueHeads;
  int64_t total = align256((numSeqs + 1) * 4);
  for (int64_t per : {int64_t(4), C * K * 2, C * V * 2, C * K * 2, K * C * 2, C * C * 2})
    total += align256(chunks * per);
  return total;
}

ArrayRef<StringRef> mlir::delta::prefillKernelParts() {
  static const StringRef parts[] = {"prep", "chunks", "recur"};
  return parts;
}

void mlir::delta::buildPrefillKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module, StringRef name,
                                     StringRef part, const PrefillSpec &spec,
                                     const PrefillPlan &plan,
                                     StringRef suffix) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> inputs = kernelParamTypes(builder, prefillKernelParams());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  // Dynamic shared memory: the kernels need more than the 48 KiB a static
  // array may have; the host raises the limit per kernel.
  std::string kernelName = (name + "_" + part + suffix).str();
  std::string smemName = kernelName + "_smem";
  LLVM::GlobalOp::create(builder, loc, LLVM::LLVMArrayType::get(builder.getI8Type(), 0),
                         /*isConstant=*/false, LLVM::Linkage::External, smemName,
                         Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  int64_t smemBytes = part == "prep"     ? plan.prepSmem
                      : part == "chunks" ? plan.chunksSmem
                                         : plan.recurSmem;
  auto func = gpu::GPUFuncOp::create(builder, loc, kernelName,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
  func->setAttr(DeltaDialect::kBlockThreadsAttrName, builder.getI64IntegerAttr(plan.threads));
  func->setAttr(DeltaDialect::kDynamicSmemAttrName, builder.getI64IntegerAttr(smemBytes));
  func->setAttr(DeltaDialect::kGridXAttrName, builder.getI64IntegerAttr(spec.v / plan.valueTile));
  for (auto [i, p] : llvm::enumerate(prefillKernelParams()))
    if (p.kind == ParamKind::Pointer)
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), builder.getUnitAttr());
  func.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr({(int32_t)plan.threads, 1, 1}));
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  Value smem = LLVM::AddressOfOp::create(b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  PrefillEmitter emitter(b, func, spec, plan, smem);
  if (part == "prep")
    emitter.emitPrep();
  else if (part == "chunks")
    emitter.emitChunks();
  else
    emitter.emitRecur();
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
}
