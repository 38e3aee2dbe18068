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


constexpr int64_t kPad = 8; // bf16 elements of row padding in shared memory
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

/// Shared-memory regions of the chunks kernel (byte offsets). kb, qb, vb
/// first receive the raw k, q, v rows (cp.async) and are then normalised /
/// converted to bf16 in place; lf and af hold L and its inverse in fp32.
/// One region is reused three times: Q until Q K^T is done, then L (and,
/// after it, the solve's scratch), then the two bf16 factors of the WY
/// products, A diag(beta e^G) and A diag(beta). With K = V = 128, C = 64
/// that is 72 KiB: 3 blocks per SM.
struct ChunksSmem {
  int64_t kb, qb, lf, tmp, ab1, ab2, af, vb, gam, gr, beta, eg, egl, beg,
      total;
  ChunksSmem(const PrefillSpec &s) {
    int64_t C = s.chunk, K = s.k, V = s.v, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    kb = take(C * (K + kPad) * 2);
    int64_t qOrL = align256(std::max(C * (K + kPad) * 2, C * (C + 4) * 4));
    int64_t scratch = align256((C / 16 - 1) * 256 * 4);
    int64_t abBytes = align256(C * (C + kPad) * 2);
    qb = lf = ab1 = take(std::max(qOrL + scratch, 2 * abBytes));
    tmp = qb + qOrL;
    ab2 = ab1 + abBytes;
    // A's fp32 rows; also the staging area of the results (bf16 rows).
    af = take(std::max(C * (C + 4) * 4, C * (std::max({C, K, V}) + kPad) * 2));
    vb = take(C * (V + kPad) * 2);
    gam = take(C * 4);
    gr = take(C * 4);
    beta = take(C * 4);
    eg = take(C * 4);
    egl = take(C * 4);
    beg = take(C * 4);
    total = off;
  }
};

/// Shared-memory regions of the recur kernel: S and V' row-major (bf16
/// operands of the products), then `stages` copies of a chunk's operands
/// (W, Kd, the U tile, G_last, Qg, P), `stage` bytes apart, filled by
/// cp.async up to stages - 1 chunks ahead. The kernel reads the stage count
/// from its dynamic shared memory size: 2 (total), or 3 where the host could
/// add `stage` bytes (Hopper: up to 227 KiB per block).
struct RecurSmem {
  int64_t st, vn, wb, kd, ub, gl, qgb, pb, stage, total;
  RecurSmem(const PrefillSpec &s, int64_t bv) {
    int64_t C = s.chunk, K = s.k, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    st = take(K * (bv + kPad) * 2);
    vn = take(C * (bv + kPad) * 2);
    int64_t first = off;
    wb = take(C * (K + kPad) * 2);
    kd = take(C * (K + kPad) * 2);
    ub = take(C * (bv + kPad) * 2);
    gl = take(4);
    qgb = take(C * (K + kPad) * 2);
    pb = take(C * (C + kPad) * 2);
    stage = off - first;
    total = off + stage;
  }
};

/// One 16x8 accumulator tile of mma.m16n8k16: c0, c1 at (row g, cols 2t,
/// 2t+1), c2, c3 at (row g + 8, same cols); g = lane / 4, t = lane % 4.
struct Frag {
  Value c[4];
};

/// A bf16 mma operand in shared memory: row stride `ld` elements (a
/// multiple of 8, so every row of 8 is one aligned 16-byte ldmatrix row).
/// `kRows`: the rows are indexed by the reduction dimension (A stored as
/// [k][m], B as [k][n], i.e. row-major B); otherwise A is [m][k] and B
/// [n][k]. kRows operands are loaded with ldmatrix.trans, so no operand is
/// ever transposed in memory.
struct Operand {
  Value base;
  int64_t ld;
  bool kRows = false;
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
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
  /// Sum as a balanced tree (a short dependent chain).
  Value treeSum(SmallVector<Value> terms) {
    while (terms.size() > 1) {
      SmallVector<Value> half;
      for (size_t t = 0; t + 1 < terms.size(); t += 2)
        half.push_back(fadd(terms[t], terms[t + 1]));
      if (terms.size() % 2)
        half.push_back(terms.back());
      terms = half;
    }
    return terms.empty() ? cF32(0.0) : terms[0];
  }
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

  /// How the warps share an M x N product of 16x8 tiles: a wm x wn grid of
  /// warps, each owning a block of (M/16/wm) x (N/8/wn) tiles, so that per
  /// k step a warp loads each A fragment (one per tile row of its block,
  /// 4 registers) and each B fragment (one per tile column, 2) once. The
  /// grid with the fewest fragment loads wins; {0, 0} when no grid divides
  /// the tiles (then tile `warp + r * warps` of the row-major numbering).
  std::pair<int64_t, int64_t> warpGrid(int64_t M, int64_t N) const {
    int64_t warps = plan.threads / 32, Mt = M / 16, Nt = N / 8;
    std::pair<int64_t, int64_t> best{0, 0};
    int64_t bestLoads = INT64_MAX;
    for (int64_t wm = 1; wm <= warps; wm *= 2) {
      int64_t wn = warps / wm;
      if (Mt % wm != 0 || Nt % wn != 0)
        continue;
      int64_t loads = Mt / wm * 4 + Nt / wn * 2;
      if (loads < bestLoads)
        best = {wm, wn}, bestLoads = loads;
    }
    return best;
  }
  int64_t tilesPerWarp(int64_t M, int64_t N) const {
    return (M / 16) * (N / 8) / (plan.threads / 32);
  }
  /// The (row, column) origin of this warp's r-th tile.
  std::pair<Value, Value> tileOrigin(int64_t M, int64_t N, int64_t r) {
    auto [wm, wn] = warpGrid(M, N);
    Value mt, nt;
    if (wm == 0) {
      Value tile = add(warp, cI32(r * (plan.threads / 32)));
      mt = divu(tile, cI32(N / 8));
      nt = remu(tile, cI32(N / 8));
    } else {
      int64_t tm = M / 16 / wm, tn = N / 8 / wn;
      mt = add(mul(divu(warp, cI32(wn)), cI32(tm)), cI32(r / tn));
      nt = add(mul(remu(warp, cI32(wn)), cI32(tn)), cI32(r % tn));
    }
    return {mul(mt, cI32(16)), mul(nt, cI32(8))};
  }
  /// acc += A[M x Kd] * B[Kd x N] for this warp's tiles, bf16 operands in
  /// shared memory loaded with ldmatrix (.trans where the operand's rows
  /// are the reduction index).
  void mma(Operand A, Operand B, int64_t M, int64_t N, int64_t Kd,
           SmallVectorImpl<Frag> &acc);
  /// ldmatrix of `num` 8x8 b16 matrices at this lane's row address.
  SmallVector<Value> ldsm(Value rowAddr, int num, bool trans);
  SmallVector<Frag> zeroFrags(int64_t M, int64_t N) {
    SmallVector<Frag> f(tilesPerWarp(M, N));
    for (Frag &x : f)
      for (Value &c : x.c)
        c = cF32(0.0);
    return f;
  }
  /// Calls fn(row, col, value) for every element of this warp's tiles.
  void forEachElement(int64_t M, int64_t N, ArrayRef<Frag> acc,
                      function_ref<void(Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(M, N, r);
      for (int e = 0; e < 4; ++e) {
        Value row = add(row0, add(group, cI32(e >= 2 ? 8 : 0)));
        Value col = add(col0, add(mul(quad, cI32(2)), cI32(e % 2)));
        fn(row, col, f.c[e]);
      }
    }
  }
  /// Calls fn(row, col, x0, x1) for every pair of adjacent elements (col
  /// even) of this warp's tiles: one 4-byte store instead of two.
  void forEachPair(int64_t M, int64_t N, ArrayRef<Frag> acc,
                   function_ref<void(Value, Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(M, N, r);
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
  /// Waits until at most `pending` of this thread's newest copy groups are
  /// still in flight.
  /// (Inline PTX: the intrinsic's immediate operand would be merged into a
  /// phi where two branches wait for different counts.)
  void waitCopyGroups(int64_t pending) {
    LLVM::InlineAsmOp::create(b, Type(), ValueRange{},
                              "cp.async.wait_group " + std::to_string(pending) + ";", "",
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
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

SmallVector<Value> PrefillEmitter::ldsm(Value rowAddr, int num, bool trans) {
  MLIRContext *ctx = b.getContext();
  Type res = num == 1 ? Type(i32)
                      : LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(num, i32));
  Value r = NVVM::LdMatrixOp::create(
      b, res, rowAddr, num, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8), NVVM::LdStMatrixEltType::B16);
  SmallVector<Value> out;
  for (int i = 0; i < num; ++i)
    out.push_back(num == 1 ? r : LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{i}).getResult());
  return out;
}

void PrefillEmitter::mma(Operand A, Operand B, int64_t M, int64_t N,
                         int64_t Kd, SmallVectorImpl<Frag> &acc) {
  MLIRContext *ctx = b.getContext();
  auto resType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  // This lane's row of the ldmatrix matrices: lanes 8j..8j+7 address the
  // rows of matrix j. A (x4): matrices (m, k), (m+8, k), (m, k+8),
  // (m+8, k+8) = fragment registers a0..a3; B (x2): (k, n), (k+8, n).
  Value r8 = remu(lane, cI32(8)), j = divu(lane, cI32(8));
  Value jLo = remu(j, cI32(2)), jHi = divu(j, cI32(2));
  auto addr = [&](const Operand &op, Value row, Value col) {
    return gep(op.base, bf16, toI64(add(mul(row, cI32(op.ld)), col)));
  };
  // A single accumulator chain is split in two (even and odd k steps) so
  // consecutive mma.sync do not wait on each other.
  auto [wm, wn] = warpGrid(M, N);
  int64_t tiles = acc.size(), tn = wm ? N / 8 / wn : 1;
  int64_t chains = tiles == 1 && Kd / 16 >= 4 ? 2 : 1;
  // Fragment slots: with a warp grid, tile r uses A row r / tn and B column
  // r % tn of its block; otherwise each tile loads its own.
  auto aSlot = [&](int64_t r) { return wm ? r / tn : r; };
  auto bSlot = [&](int64_t r) { return wm ? r % tn : r; };
  int64_t numA = wm ? tiles / tn : tiles, numB = wm ? tn : tiles;
  SmallVector<Value> aRow(numA), bCol(numB);
  for (int64_t r = 0; r < tiles; ++r) {
    auto [m0, n0] = tileOrigin(M, N, r);
    aRow[aSlot(r)] = m0;
    bCol[bSlot(r)] = n0;
  }
  SmallVector<SmallVector<Frag>> part(tiles, SmallVector<Frag>(chains));
  for (int64_t r = 0; r < tiles; ++r) {
    part[r][0] = acc[r];
    for (int64_t c = 1; c < chains; ++c)
      for (Value &x : part[r][c].c)
        x = cF32(0.0);
  }
  for (int64_t ks = 0; ks < Kd; ks += 16) {
    Value k0 = cI32(ks);
    SmallVector<SmallVector<Value>> a, bf;
    for (Value m0 : aRow)
      a.push_back(ldsm(A.kRows ? addr(A, add(k0, add(r8, mul(jHi, cI32(8)))), add(m0, mul(jLo, cI32(8))))
                               : addr(A, add(m0, add(r8, mul(jLo, cI32(8)))), add(k0, mul(jHi, cI32(8)))),
                       4, A.kRows));
    for (Value n0 : bCol)
      bf.push_back(ldsm(B.kRows ? addr(B, add(k0, add(r8, mul(jLo, cI32(8)))), n0)
                                : addr(B, add(n0, r8), add(k0, mul(jLo, cI32(8)))),
                        2, B.kRows));
    for (int64_t r = 0; r < tiles; ++r) {
      ArrayRef<Value> ar = a[aSlot(r)], br = bf[bSlot(r)];
      Frag &f = part[r][(ks / 16) % chains];
      auto op = LLVM::InlineAsmOp::create(
          b, resType,
          ValueRange{ar[0], ar[1], ar[2], ar[3], br[0], br[1], f.c[0], f.c[1], f.c[2], f.c[3]},
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
          "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::TailCallKind::None,
          LLVM::AsmDialectAttr(), ArrayAttr());
      for (int e = 0; e < 4; ++e)
        f.c[e] = LLVM::ExtractValueOp::create(b, op.getResult(0), ArrayRef<int64_t>{e});
    }
  }
  for (int64_t r = 0; r < tiles; ++r) {
    acc[r] = part[r][0];
    for (int64_t c = 1; c < chains; ++c)
      for (int e = 0; e < 4; ++e)
        acc[r].c[e] = fadd(acc[r].c[e], part[r][c].c[e]);
  }
}

// Workspace: [0] chunk offsets i32 [N + 1]; then per (chunk, head):
// [1] gamma_last f32; [2] W [C, K]; [3] U [C, V]; [4] Qg [C, K];
// [5] Kd [C, K]; [6] P [C, C] (bf16, all row-major). Regions start on 256-byte bounds.
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
  // One-dimensional grid, head-fastest: the value heads sharing a q/k head
  // run side by side, so the second reads q and k from L2, not DRAM.
  Value flat = blockId(gpu::Dimension::x);
  Value c = divu(flat, param(pHV)), hv = remu(flat, param(pHV));
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value N = param(pN);
  Value total = load(i32, offsets, N, 4);
  auto live = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, c, total), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(live.thenBlock());
  // The sequence of chunk c: the last n with offsets[n] <= c (binary search
  // over [0, N]: bit width of N steps, each a dependent load, so not 32).
  Value steps = sub(cI32(32), LLVM::CountLeadingZerosOp::create(b, i32, N, b.getBoolAttr(false)));
  auto search = scf::ForOp::create(b, cI32(0), steps, cI32(1), ValueRange{cI32(0), N});
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
        vb = region(L.vb), gam = region(L.gam), gr = region(L.gr), betaS = region(L.beta),
        eG = region(L.eg), eGL = region(L.egl), bEG = region(L.beg);
  Value ch = chunkHead(c, hv);
  bool gated = s.rule == Rule::gated;
  int64_t ioBytes = s.ioType.getIntOrFloatBitWidth() / 8;

  // (1) Every global read of the chunk in flight at once: the raw k, q, v
  // rows by cp.async (16 bytes each; padding rows copy the chunk's first
  // token and are zeroed below), the gate and beta of each row by one
  // thread each.
  auto copyRows = [&](Value dst, Value src, Value stride, Value headOffset, int64_t width) {
    int64_t pieces = width * ioBytes / 16, perPiece = 16 / ioBytes;
    threadLoop(C * pieces, [&](Value i) {
      Value r = divu(i, cI32(pieces)), piece = remu(i, cI32(pieces));
      Value tok = add(t0, toI64(sel(cmp(arith::CmpIPredicate::slt, r, rows), r, cI32(0))));
      Value from = gep(src, s.ioType,
                       add(add(mul(tok, stride), headOffset), toI64(mul(piece, cI32(perPiece)))));
      Value to = gep(dst, bf16, add(mul(r, cI32(width + kPad)), mul(piece, cI32(perPiece))));
      LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.cg.shared.global.16"),
                                    ValueRange{to, from});
    }, /*unroll=*/true);
  };
  copyRows(kb, param(pK), param(pKStride), mul(toI64(h), cI64(K)), K);
  copyRows(qb, param(pQ), param(pQStride), mul(toI64(h), cI64(K)), K);
  copyRows(vb, param(pV), param(pVStride), mul(toI64(hv), cI64(V)), V);
  commitCopies();
  threadLoop(C, [&](Value i) {
    Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
    Value tok = add(t0, toI64(sel(valid, i, cI32(0))));
    auto [gv, bv] = gateAndBeta(tok, hv);
    store(sel(valid, gv, cF32(0.0)), gr, i, 4);
    store(sel(valid, bv, cF32(0.0)), betaS, i, 4);
  }, /*unroll=*/true);
  barrier();
  // (2) chunk_cumsum by warp 0 (C / 32 rows per lane, a shuffle scan;
  // padding rows have g = 0, so they repeat the last decay), and the per-row
  // factors every later step uses: e^G, e^(G_last - G), beta e^G.
  {
    int64_t per = C / 32;
    auto w0 = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, warp, cI32(0)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(w0.thenBlock());
    SmallVector<Value> run;
    Value sum = cF32(0.0);
    for (int64_t e = 0; e < per; ++e) {
      sum = fadd(sum, load(f32, gr, add(mul(lane, cI32(per)), cI32(e)), 4));
      run.push_back(sum);
    }
    Value incl = sum;
    for (int64_t off = 1; off < 32; off *= 2) {
      Value up = gpu::ShuffleOp::create(b, incl, off, 32, gpu::ShuffleMode::UP).getShuffleResult();
      incl = sel(cmp(arith::CmpIPredicate::uge, lane, cI32(off)), fadd(incl, up), incl);
    }
    Value last = gpu::ShuffleOp::create(b, incl, 31, 32, gpu::ShuffleMode::IDX).getShuffleResult();
    Value before = fsub(incl, sum);
    for (int64_t e = 0; e < per; ++e) {
      Value m = add(mul(lane, cI32(per)), cI32(e));
      Value gm = fadd(before, run[e]);
      Value e1 = gated ? exp(gm) : cF32(1.0);
      store(gm, gam, m, 4);
      store(e1, eG, m, 4);
      store(gated ? exp(fsub(last, gm)) : cF32(1.0), eGL, m, 4);
      store(fmul(load(f32, betaS, m, 4), e1), bEG, m, 4);
    }
  }
  waitCopies();
  barrier();
  // (3) q and k rows L2-normalised in place (bf16; padding rows zero), a
  // warp per row, K / 32 elements per lane; the recurrence's Qg = scale Q
  // e^G and Kd = K e^(G_last - G) go straight to the workspace (row-major,
  // one vector store per lane).
  int64_t epl = K / 32, warps = plan.threads / 32;
  {
    Value qg = gep(workRegion(4), bf16, mul(ch, cI64(C * K)));
    Value kd = gep(workRegion(5), bf16, mul(ch, cI64(C * K)));
    auto rowLoop = scf::ForOp::create(b, warp, cI32(C), cI32(warps));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(rowLoop.getBody());
    Value i = rowLoop.getInductionVar();
    Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
    Value col = mul(lane, cI32(epl));
    auto inVec = VectorType::get({epl}, s.ioType), outVec = VectorType::get({epl}, bf16);
    for (int which = 0; which < 2; ++which) {
      Value buf = which ? qb : kb;
      Value at = add(mul(i, cI32(K + kPad)), col);
      Value vec = LLVM::LoadOp::create(b, inVec, gep(buf, bf16, at), epl * 2);
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
      Value factor = which ? fmul(load(f32, eG, i, 4), param(pScale)) : load(f32, eGL, i, 4);
      Value normed = LLVM::UndefOp::create(b, outVec), gatedRow = LLVM::UndefOp::create(b, outVec);
      for (int64_t e = 0; e < epl; ++e) {
        Value y = fmul(x[e], scale);
        normed = LLVM::InsertElementOp::create(b, normed, toBf16(y), cI32(e));
        gatedRow = LLVM::InsertElementOp::create(b, gatedRow, toBf16(fmul(y, factor)), cI32(e));
      }
      storeVec(normed, buf, bf16, at, epl * 2);
      storeVec(gatedRow, which ? qg : kd, bf16, add(mul(i, cI32(K)), col), epl * 2);
    }
  }
  // f16 v rows become bf16 operands in place.
  if (!s.ioType.isBF16()) {
    threadLoop(C * V / 8, [&](Value e) {
      Value at = add(mul(divu(e, cI32(V / 8)), cI32(V + kPad)), mul(remu(e, cI32(V / 8)), cI32(8)));
      Value vec = LLVM::LoadOp::create(b, VectorType::get({8}, s.ioType), gep(vb, bf16, at), 16);
      Value out = LLVM::UndefOp::create(b, VectorType::get({8}, bf16));
      for (int64_t x = 0; x < 8; ++x)
        out = LLVM::InsertElementOp::create(
            b, out, toBf16(toF32(LLVM::ExtractElementOp::create(b, vec, cI32(x)).getResult())), cI32(x));
      storeVec(out, vb, bf16, at, 16);
    });
  }
  barrier();
  // exp(Gamma_i - Gamma_j) on keep (i >= j) only; the argument is selected
  // first so no positive exponent is evaluated.
  auto decay = [&](Value keep, Value i, Value jj) -> Value {
    if (!gated)
      return cF32(1.0);
    Value d = fsub(load(f32, gam, i, 4), load(f32, gam, jj, 4));
    return exp(sel(keep, d, cF32(0.0)));
  };
  Operand kRow{kb, K + kPad}, qRow{qb, K + kPad};
  // Results bound for the workspace (P, W, U) are staged row by row in
  // shared memory (af's region, free before the solve and after the WY
  // factors) and leave in 16-byte, fully coalesced stores: written straight
  // from the mma fragments they would be scattered half sectors.
  Value stage = af;
  auto copyOut = [&](int64_t cols, Value dst) {
    threadLoop(C * cols / 8, [&](Value e) {
      Value i = divu(e, cI32(cols / 8)), col = mul(remu(e, cI32(cols / 8)), cI32(8));
      auto vt = VectorType::get({8}, bf16);
      Value v = LLVM::LoadOp::create(b, vt, gep(stage, bf16, add(mul(i, cI32(cols + kPad)), col)), 16);
      storeVec(v, dst, bf16, add(mul(i, cI32(cols)), col), 16);
    }, /*unroll=*/true);
  };
  // (4) chunk_output, intra-chunk half: P = scale (Q K^T) ⊙ M,
  // M_ij = exp(Gi - Gj), i >= j. Q is dead afterwards: L takes its place.
  {
    SmallVector<Frag> acc = zeroFrags(C, C);
    mma(qRow, kRow, C, C, K, acc);
    forEachPair(C, C, acc, [&](Value i, Value jj, Value x0, Value x1) {
      Value out[2];
      for (int e = 0; e < 2; ++e) {
        Value col = add(jj, cI32(e));
        Value causal = cmp(arith::CmpIPredicate::uge, i, col);
        Value scaled = fmul(fmul(e ? x1 : x0, decay(causal, i, col)), param(pScale));
        out[e] = sel(causal, scaled, cF32(0.0));
      }
      storeVec(pack2(out[0], out[1], bf16), stage, bf16, add(mul(i, cI32(C + kPad)), jj), 4);
    });
  }
  barrier();
  copyOut(C, gep(workRegion(6), bf16, mul(ch, cI64(C * C))));
  // chunk_kkt: L = strictly lower beta_i exp(Gi - Gj) <k_i, k_j>.
  {
    SmallVector<Frag> acc = zeroFrags(C, C);
    mma(kRow, kRow, C, C, K, acc);
    forEachElement(C, C, acc, [&](Value i, Value jj, Value x) {
      Value below = cmp(arith::CmpIPredicate::ugt, i, jj);
      Value l = fmul(fmul(x, load(f32, betaS, i, 4)), decay(below, i, jj));
      store(sel(below, l, cF32(0.0)), lf, add(mul(i, cI32(C + 4)), jj), 4);
    });
  }
  barrier();
  // (5) solve_tril, blocked by 16: (a) each diagonal 16x16 block inverted
  // by forward substitution, one lane per column with the column in
  // registers (A_ij = -sum_{m<i} L_im A_mj; entries above the diagonal are
  // zero, so the sum may start at the block's first row); blocks above the
  // diagonal set to zero. (b) Block rows below, by distance d from the
  // diagonal: A_rc = -A_rr sum_{k=c}^{r-1} L_rk A_kc. All in fp32, every
  // sum unrolled with its loads issued together.
  int64_t nb = C / 16, ldL = C + 4; // fp32 rows of L and A, 16-byte aligned
  auto vec4 = VectorType::get({4}, f32);
  auto load4 = [&](Value base, Value idx) { return LLVM::LoadOp::create(b, vec4, gep(base, f32, idx), 16).getResult(); };
  auto elt = [&](Value v, int64_t i) { return LLVM::ExtractElementOp::create(b, v, cI32(i)).getResult(); };
  auto build4 = [&](ArrayRef<Value> x) {
    Value v = LLVM::UndefOp::create(b, vec4);
    for (int64_t i = 0; i < 4; ++i)
      v = LLVM::InsertElementOp::create(b, v, x[i], cI32(i));
    return v;
  };
  {
    Value blk = add(mul(warp, cI32(2)), divu(lane, cI32(16)));
    Value jl = remu(lane, cI32(16));
    auto active = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, blk, cI32(nb)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(active.thenBlock());
    Value base = mul(blk, cI32(16));
    SmallVector<Value> a;
    for (int64_t m = 0; m < 16; ++m)
      a.push_back(sel(cmp(arith::CmpIPredicate::eq, jl, cI32(m)), cF32(1.0), cF32(0.0)));
    for (int64_t i = 1; i < 16; ++i) {
      Value row = add(mul(add(base, cI32(i)), cI32(ldL)), base);
      SmallVector<Value> terms;
      for (int64_t q = 0; q * 4 < i; ++q) {
        Value l4 = load4(lf, add(row, cI32(4 * q)));
        for (int64_t m = 4 * q; m < std::min<int64_t>(i, 4 * q + 4); ++m)
          terms.push_back(fmul(elt(l4, m - 4 * q), a[m]));
      }
      a[i] = sel(cmp(arith::CmpIPredicate::ugt, cI32(i), jl), fsub(cF32(0.0), treeSum(terms)), a[i]);
    }
    for (int64_t i = 0; i < 16; ++i)
      store(a[i], af, add(mul(add(base, cI32(i)), cI32(ldL)), add(base, jl)), 4);
  }
  // Blocks above the diagonal are zero (four columns per thread).
  threadLoop(C * C / 4, [&](Value e) {
    Value i = divu(e, cI32(C / 4)), jj = mul(remu(e, cI32(C / 4)), cI32(4));
    Value above = cmp(arith::CmpIPredicate::ult, divu(i, cI32(16)), divu(jj, cI32(16)));
    auto ifAbove = scf::IfOp::create(b, above, false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifAbove.thenBlock());
    storeVec(build4({cF32(0.0), cF32(0.0), cF32(0.0), cF32(0.0)}), af, f32,
             add(mul(i, cI32(ldL)), jj), 16);
  });
  barrier();
  // Each thread owns four adjacent columns of one row of a 16x16 block:
  // every 16-byte load of L or A feeds four (or sixteen) products.
  Value tmp = region(L.tmp);
  for (int64_t d = 1; d < nb; ++d) {
    int64_t pairs = nb - d;
    // T_p = sum_k L_rk A_kc over the block columns c .. r - 1 (r = p + d, c = p).
    threadLoop(pairs * 64, [&](Value e) {
      Value pIdx = divu(e, cI32(64)), ii = divu(remu(e, cI32(64)), cI32(4));
      Value jq = mul(remu(e, cI32(4)), cI32(4));
      Value rowG = add(mul(add(pIdx, cI32(d)), cI32(16)), ii), colG = add(mul(pIdx, cI32(16)), jq);
      Value first = mul(pIdx, cI32(16));
      Value acc[4] = {cF32(0.0), cF32(0.0), cF32(0.0), cF32(0.0)};
      for (int64_t kq = 0; kq < 4 * d; ++kq) {
        Value l4 = load4(lf, add(mul(rowG, cI32(ldL)), add(first, cI32(4 * kq))));
        for (int64_t kk = 0; kk < 4; ++kk) {
          Value a4 = load4(af, add(mul(add(first, cI32(4 * kq + kk)), cI32(ldL)), colG));
          Value l = elt(l4, kk);
          for (int64_t x = 0; x < 4; ++x)
            acc[x] = fadd(acc[x], fmul(l, elt(a4, x)));
        }
      }
      storeVec(build4(acc), tmp, f32, add(mul(pIdx, cI32(256)), add(mul(ii, cI32(16)), jq)), 16);
    });
    barrier();
    // A_rc = -A_rr T_p.
    threadLoop(pairs * 64, [&](Value e) {
      Value pIdx = divu(e, cI32(64)), ii = divu(remu(e, cI32(64)), cI32(4));
      Value jq = mul(remu(e, cI32(4)), cI32(4));
      Value r0 = mul(add(pIdx, cI32(d)), cI32(16));
      Value acc[4] = {cF32(0.0), cF32(0.0), cF32(0.0), cF32(0.0)};
      for (int64_t mq = 0; mq < 4; ++mq) {
        Value a4 = load4(af, add(mul(add(r0, ii), cI32(ldL)), add(r0, cI32(4 * mq))));
        for (int64_t mm = 0; mm < 4; ++mm) {
          Value t4 = load4(tmp, add(mul(pIdx, cI32(256)), add(mul(cI32(4 * mq + mm), cI32(16)), jq)));
          Value a = elt(a4, mm);
          for (int64_t x = 0; x < 4; ++x)
            acc[x] = fsub(acc[x], fmul(a, elt(t4, x)));
        }
      }
      storeVec(build4(acc), af, f32, add(mul(add(r0, ii), cI32(ldL)), add(mul(pIdx, cI32(16)), jq)), 16);
    });
    barrier();
  }
  // (6) The WY products take the row factors on A's columns, so K and V
  // are used as loaded: W = (A diag(beta e^G)) K, U = (A diag(beta)) V.
  Value ab1 = region(L.ab1), ab2 = region(L.ab2);
  threadLoop(C * C / 4, [&](Value e) {
    Value i = divu(e, cI32(C / 4)), jj = mul(remu(e, cI32(C / 4)), cI32(4));
    Value a4 = load4(af, add(mul(i, cI32(ldL)), jj));
    Value at = add(mul(i, cI32(C + kPad)), jj);
    auto vt = VectorType::get({4}, bf16);
    auto scaled = [&](Value factors) {
      Value f4 = load4(factors, jj);
      Value v = LLVM::UndefOp::create(b, vt);
      for (int64_t x = 0; x < 4; ++x)
        v = LLVM::InsertElementOp::create(b, v, toBf16(fmul(elt(a4, x), elt(f4, x))), cI32(x));
      return v;
    };
    storeVec(scaled(bEG), ab1, bf16, at, 8);
    storeVec(scaled(betaS), ab2, bf16, at, 8);
  });
  barrier();
  auto product = [&](Value a, Operand rhs, int64_t cols, int64_t which) {
    SmallVector<Frag> acc = zeroFrags(C, cols);
    mma(Operand{a, C + kPad}, rhs, C, cols, C, acc);
    forEachPair(C, cols, acc, [&](Value i, Value col, Value x0, Value x1) {
      storeVec(pack2(x0, x1, bf16), stage, bf16, add(mul(i, cI32(cols + kPad)), col), 4);
    });
    barrier();
    copyOut(cols, gep(workRegion(which), bf16, mul(ch, cI64(C * cols))));
  };
  // A's fp32 rows are dead: the products' bf16 results are staged there.
  product(ab1, Operand{kb, K + kPad, /*kRows=*/true}, K, 2);
  barrier();
  product(ab2, Operand{vb, V + kPad, /*kRows=*/true}, V, 3);
  auto lead = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
  b.setInsertionPointToStart(lead.thenBlock());
  store(load(f32, gam, cI32(C - 1), 4), gep(workRegion(1), f32, ch), cI32(0), 4);
}

//===----------------------------------------------------------------------===//
// recur: the state from chunk to chunk
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitRecur() {
  int64_t C = s.chunk, K = s.k, V = s.v, BV = plan.valueTile;
  RecurSmem L(s, BV);
  // One-dimensional grid, sequence-major: the blocks of sequence 0 (all
  // heads and V tiles) are dispatched first, so long sequences listed first
  // start in the first wave instead of the last.
  int64_t tiles = V / BV;
  Value flat = blockId(gpu::Dimension::x);
  Value vt = remu(flat, cI32(tiles)), rest = divu(flat, cI32(tiles));
  Value hv = remu(rest, param(pHV)), n = divu(rest, param(pHV));
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
    forEachElement(K, BV, S, [&](Value d, Value col, Value) {
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
  Value st = region(L.st), vn = region(L.vn);
  // The pipeline depth from the launch's dynamic shared memory: 2 stages,
  // or 3 where the host granted one more.
  Value dynSmem = LLVM::InlineAsmOp::create(
                      b, i32, ValueRange{}, "mov.u32 $0, %dynamic_smem_size;", "=r",
                      /*has_side_effects=*/false, /*is_align_stack=*/false,
                      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
                      .getResult(0);
  Value deep = cmp(arith::CmpIPredicate::sge, dynSmem, cI32(L.total + L.stage));
  Value stages = sel(deep, cI32(3), cI32(2));
  // A chunk's operands go to stage (c - c0) % stages as one cp.async group.
  // Every step commits exactly one group (empty past the last chunk), so
  // "chunk c has landed" is always "at most stages - 2 groups pending".
  auto stageAt = [&](Value c, int64_t at) {
    Value slot = remu(sub(c, c0), stages);
    return gep(region(at), b.getI8Type(), mul(slot, cI32(L.stage)));
  };
  auto copies = [&](Value c) {
    Value ch = chunkHead(c, hv);
    copyTile(stageAt(c, L.wb), workRegion(2), mul(ch, cI64(C * K)), C, K);
    copyTile(stageAt(c, L.kd), workRegion(5), mul(ch, cI64(C * K)), C, K);
    copyTile(stageAt(c, L.ub), workRegion(3), add(mul(ch, cI64(C * V)), toI64(v0)), C, BV, V);
    copyTile(stageAt(c, L.qgb), workRegion(4), mul(ch, cI64(C * K)), C, K);
    copyTile(stageAt(c, L.pb), workRegion(6), mul(ch, cI64(C * C)), C, C);
    auto first = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(first.thenBlock());
    LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.ca.shared.global.4"),
                                  ValueRange{stageAt(c, L.gl), gep(workRegion(1), f32, ch)});
  };
  auto ifThen = [&](Value cond, function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  };
  // Prologue: chunks c0 .. c0 + stages - 2 in flight.
  {
    ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] { copies(c0); });
    commitCopies();
    ifThen(deep, [&] {
      Value c = add(c0, cI32(1));
      ifThen(cmp(arith::CmpIPredicate::slt, c, c1), [&] { copies(c); });
      commitCopies();
    });
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
    // Chunk c has landed for every thread, and every thread is done with
    // chunk c - 1, whose stage the copies of chunk c + stages - 1 reuse.
    auto ifDeep = scf::IfOp::create(b, deep, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifDeep.thenBlock());
      waitCopyGroups(1);
      b.setInsertionPointToStart(ifDeep.elseBlock());
      waitCopyGroups(0);
    }
    barrier();
    Value ahead = add(c, sub(stages, cI32(1)));
    ifThen(cmp(arith::CmpIPredicate::slt, ahead, c1), [&] { copies(ahead); });
    commitCopies();
    Value wb = stageAt(c, L.wb), kd = stageAt(c, L.kd), ub = stageAt(c, L.ub),
          gl = stageAt(c, L.gl), qgb = stageAt(c, L.qgb), pb = stageAt(c, L.pb);
    // S in bf16, row-major: the B operand of W S and Qg S.
    forEachPair(K, BV, S, [&](Value d, Value col, Value x0, Value x1) {
      storeVec(pack2(x0, x1, bf16), st, bf16, add(mul(d, cI32(BV + kPad)), col), 4);
    });
    barrier();
    Operand sOp{st, BV + kPad, /*kRows=*/true}, vOp{vn, BV + kPad, /*kRows=*/true};
    // chunk_residual: V' = U - W S.
    {
      SmallVector<Frag> acc = zeroFrags(C, BV);
      mma(Operand{wb, K + kPad}, sOp, C, BV, K, acc);
      forEachPair(C, BV, acc, [&](Value i, Value col, Value x0, Value x1) {
        Value at = add(mul(i, cI32(BV + kPad)), col);
        Value u = LLVM::LoadOp::create(b, VectorType::get({2}, bf16), gep(ub, bf16, at), 4);
        Value u0 = toF32(LLVM::ExtractElementOp::create(b, u, cI32(0)).getResult());
        Value u1 = toF32(LLVM::ExtractElementOp::create(b, u, cI32(1)).getResult());
        storeVec(pack2(fsub(u0, x0), fsub(u1, x1), bf16), vn, bf16, at, 4);
      });
    }
    // V' complete for every warp.
    barrier();
    // chunk_output: O = Qg S + P V'.
    {
      SmallVector<Frag> acc = zeroFrags(C, BV);
      mma(Operand{qgb, K + kPad}, sOp, C, BV, K, acc);
      mma(Operand{pb, C + kPad}, vOp, C, BV, C, acc);
      forEachPair(C, BV, acc, [&](Value i, Value col, Value x0, Value x1) {
        ifThen(cmp(arith::CmpIPredicate::slt, i, rows), [&] {
          Value tok = add(t0, toI64(i));
          Value at = add(add(mul(tok, param(pOStride)), mul(toI64(hv), cI64(V))), toI64(add(v0, col)));
          storeVec(pack2(x0, x1, s.ioType), param(pO), s.ioType, at, 2 * s.ioType.getIntOrFloatBitWidth() / 8);
        });
      });
    }
    // chunk_state_step: S = e^G_last S + Kd^T V'.
    Value decayLast = s.rule == Rule::gated ? exp(load(f32, gl, cI32(0), 4)) : cF32(1.0);
    for (Frag &f : S)
      for (Value &x : f.c)
        x = fmul(x, decayLast);
    mma(Operand{kd, K + kPad, /*kRows=*/true}, vOp, K, BV, C, S);
    SmallVector<Value> nextS;
    for (Frag &f : S)
      nextS.append(f.c, f.c + 4);
    scf::YieldOp::create(b, nextS);
  }
  for (size_t i = 0; i < S.size() * 4; ++i)
    S[i / 4].c[i % 4] = loop.getResult(i);
  auto ifWrite = scf::IfOp::create(b, writeOk, false);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  forEachElement(K, BV, S, [&](Value d, Value col, Value x) {
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
  p.recurSmemStage = RecurSmem(spec, p.valueTile).stage;
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
  if (part == "recur")
    func->setAttr(DeltaDialect::kDynamicSmemStageAttrName,
                  builder.getI64IntegerAttr(plan.recurSmemStage));
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
