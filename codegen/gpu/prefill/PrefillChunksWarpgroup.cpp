//===- PrefillChunksWarpgroup.cpp - chunks as wgmma warpgroups ---*- C++ -*-===//
//
// chunks on sm_90a for scalar gates (ChunksForm::Warpgroup): the
// same steps as PrefillChunks.cpp, with every product a wgmma whose
// operands are shared-memory images (wgmma reads each operand once per
// warpgroup; mma.sync's 2 x 4 warp grid read Q 4 times and K twice through
// ldmatrix, and the products' operand traffic was most of the kernel's
// shared-memory traffic):
//
//   warpgroup 0   |q_i| from diag(Q Q^T), then
//                 P = scale (Q K^T) ⊙ D / (|q_i| |k_j|)   then W = A_w K
//   warpgroup 1   |k_i| from diag(K K^T), then
//                 L = beta_i (K K^T) ⊙ D / (|k_i| |k_j|)  then U = A_u V
//
// (D_ij = e^(G_i - G_j) below the diagonal; the `_chunks_raw` form has no
// P, so warpgroup 0 computes no Q K^T.) q, k and v land raw by cp.async, or
// by TMA tensor copies where the host passed tensor maps (`tma`), in wgmma's
// 128-byte-swizzled layout; the L2 norms scale the products'
// results rather than their operands (1 / |k_j| goes into the WY factor
// A_w = A diag(beta e^G / |k|)), so the second products run while the
// threads write Qg and Kd (the `_chunks_raw` form only their per-row
// factors: the transposed recur scales raw q and k itself,
// RecurForm::TransposedRawQK). P leaves through a staging image and a bulk
// copy (the `_chunks_raw` form writes only the per-token terms recur
// computes P from: rawPInputBytes), W and U through the images of k and
// v, which their products free block by block.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillChunksForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

namespace {
// Named barriers (bar 0 is the block's): each warpgroup's own.
enum ChunksBarrier : int64_t { kWarpgroup = 1 };
} // namespace

namespace {
/// ChunksForm::Warpgroup and ::WarpgroupRawQK.
class ChunksWarpgroupBuilder : public ChunksBuilder {
public:
  using ChunksBuilder::ChunksBuilder;
  void build(const ChunkSite &site);
};
} // namespace

void mlir::delta::prefill::buildChunksWarpgroup(const PrefillEmitter &e, const ChunkSite &site) {
  ChunksWarpgroupBuilder(e).build(site);
}

void ChunksWarpgroupBuilder::build(const ChunkSite &site) {
  int64_t C = s.chunk, K = s.k, V = s.v;
  assert(C == kWarpgroupChunk && "prefillWarpgroupFits holds this form to its chunk");
  // v is copied late, into a region the block frees (ChunksWarpgroupSmem's
  // lateV): in `_chunks_raw` with qk_raw = 2 (W is recur's) where k was,
  // once K K^T has read it, so that the solve hides the copy; otherwise
  // where A was, once the WY factors have read it (W = A_w K still needs
  // k). 53.5 KiB: four blocks an SM instead of three, whose items are
  // chains of barrier phases (ncu: 30 % of the warp samples waited at
  // barriers, session 45). The queue form keeps v's own region: its loop
  // takes three blocks an SM at 80 registers anyway.
  bool raw = plan.chunksRawQK(), lateV = !queued, vInK = raw && V <= K;
  ChunksWarpgroupSmem L(s, lateV);
  bool gated = s.rule == Rule::gated;
  Type i8 = b.getI8Type();
  Value base, aligned;
  std::tie(base, aligned) = alignedSmem();
  auto ptrAt = [&](int64_t off) { return gep(base, i8, cI32(off)); };
  auto addrAt = [&](int64_t off) { return add(aligned, cI32(off)); };
  Value wg = divu(warp, cI32(4)), wl = remu(warp, cI32(4));
  Value first = cmp(arith::CmpIPredicate::eq, wg, cI32(0));
  Value t0 = site.t0, rows = site.rows, hv = site.hv;
  Value ch = chunkHead(site.c, hv);
  RowFactors f{ptrAt(L.gam), ptrAt(L.gr), ptrAt(L.beta), ptrAt(L.eg), ptrAt(L.egl), ptrAt(L.beg)};
  Value rq = ptrAt(L.rq), rk = ptrAt(L.rk);
  std::array<int64_t, 6> perChunk = prefillChunkRegionBytes(s);
  auto tileOf = [&](int64_t which) {
    return gep(workRegion(which), i8, mul(ch, cI64(perChunk[which - 1])));
  };
  auto storeTile = [&](Value dst, int64_t from, int64_t bytes) {
    bulkStore(dst, addrAt(from), cI32(bytes));
    bulkCommit();
  };
  // fq [C], then fk [C] (f32) after P's image and G_last's 16 bytes, in
  // the padding of region 6's slot.
  auto rawFactorsAt = [&](int64_t which) { return pGLastBytes(C) / 4 + which * C; };
  assert(pGLastBytes(C) + rawFactorBytes(C) <= perChunk[5] && "no room for the raw q/k factors");

  // (1) The raw q and k rows (one copy group), then v's (another), by
  // cp.async into swizzled images. Padding rows copy the chunk's first
  // token: their norms' inverses and beta are 0, so nothing of them reaches
  // a result.
  auto copyImage = [&](int64_t to, Value src, Value stride, Value headOffset, int64_t width) {
    copySwizzledRows(ptrAt(to), src, stride, headOffset, width, t0, rows);
  };
  auto copyV = [&](int64_t to) {
    copyImage(to, param(pV), param(pVStride), mul(toI64(hv), cI64(V)), V);
    commitCopies();
  };
  auto copyRows = [&] {
    Value qkOffset = mul(toI64(site.h), cI64(K));
    copyImage(L.qs, param(pQ), param(pQStride), qkOffset, K);
    copyImage(L.ks, param(pK), param(pKStride), qkOffset, K);
    commitCopies();
    if (!lateV)
      copyV(L.vs);
  };
  // Or, where the host passed tensor maps (`tma`; not in the queue form,
  // whose items would need an mbarrier phase each), one thread moves them
  // by TMA tensor copies, a box of 64 columns x 1 head x C tokens per
  // 64-column block of an image, completing on two mbarriers (q and k, then
  // v) in the queue form's 16 bytes. Only for whole chunks: a box past the
  // sequence's end would bring the next sequence's tokens, which the zero
  // factors of padding rows remove by multiplying (inside the tensor
  // cores too), so a non-finite value there would reach this sequence; the
  // last, partial chunk copies its first token instead, as cp.async does.
  Value tma = queued ? Value() : andI(tmaMaps(), cmp(arith::CmpIPredicate::eq, rows, cI32(C)));
  Value qkBar = ptrAt(L.queue), vBar = ptrAt(L.queue + 8);
  if (!tma) {
    copyRows();
  } else {
    auto op = scf::IfOp::create(b, tma, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
      mbarInit(qkBar, 1);
      mbarInit(vBar, 1);
      mbarInitFence();
      Value t0 = toI32(site.t0);
      mbarArriveExpect(qkBar, 2 * C * K * 2);
      tensorCopyImage(ptrAt(L.qs), pQMap, site.h, t0, K, qkBar);
      tensorCopyImage(ptrAt(L.ks), pKMap, site.h, t0, K, qkBar);
      if (!lateV) {
        mbarArriveExpect(vBar, C * V * 2);
        tensorCopyImage(ptrAt(L.vs), pVMap, hv, t0, V, vBar);
      }
    });
    b.setInsertionPointToStart(op.elseBlock());
    copyRows();
  }
  loadRowGates(site, f);
  barrier();
  scalarGateCumsum(f);
  waitCopyGroups(lateV ? 0 : 1); // q and k (v is waited for before the WY products)
  if (tma)
    ifThen(tma, [&] { mbarWait(qkBar, cI32(0)); });
  fenceProxyAsync();
  barrier();

  // (2) The norms' inverses from the diagonals of Q Q^T (warpgroup 0) and
  // K K^T (warpgroup 1) on the tensor cores: a lane-per-element loop over
  // the rows (loads, squares, a butterfly per row) was a third of the
  // kernel's instructions. Then each row's scale, fq = scale e^G / |q| and
  // fk = e^(G_last - G) / |k| (0 on padding rows), for Qg = fq q and
  // Kd = fk k, or, in the `_chunks_raw` form (ChunksForm::WarpgroupRawQK:
  // recur scales raw q and k itself), straight to the workspace after P and
  // G_last in region 6.
  Value kDesc = smemDesc(addrAt(L.ks), wgmmaKMajor);
  Value aDesc = sel(first, smemDesc(addrAt(L.qs), wgmmaKMajor), kDesc);
  SmallVector<Value> acc(C / 2, cF32(0.0)); // m64n64: 32 per thread
  auto product = [&](Value bDesc) {
    wgFence(acc);
    for (int64_t ks = 0; ks < K / 16; ++ks) {
      int64_t off = ks / 4 * C * 128 + ks % 4 * 32;
      wgmma(acc, descPlus(aDesc, off), descPlus(bDesc, off), /*accumulate=*/ks > 0,
            /*transA=*/false);
    }
    wgCommit();
  };
  auto storeRowScale = [&](Value row, Value inverse) {
    Value valid = cmp(arith::CmpIPredicate::slt, row, rows);
    inverse = sel(valid, inverse, cF32(0.0));
    store(inverse, sel(first, rq, rk), row, 4);
    Value factor = fmul(inverse, fmul(load(f32, sel(first, f.eg, f.egl), row, 4),
                                      sel(first, param(pScale), cF32(1.0))));
    if (raw)
      store(factor, tileOf(6),
            add(sel(first, cI32(rawFactorsAt(0)), cI32(rawFactorsAt(1))), row), 4);
    else
      store(factor, sel(first, ptrAt(L.fq), ptrAt(L.fk)), row, 4);
    // The epilogues' factors as base-2 exponents: P_ij = (Q K^T)_ij
    // 2^(p_i - b_j) and L_ij = (K K^T)_ij 2^(l_i - b_j), with p_i = G_i
    // log2 e + lg2(scale / |q_i|), l_i = G_i log2 e + lg2(beta_i / |k_i|)
    // and b_j = G_j log2 e - lg2(1 / |k_j|): one ex2 and one multiply an
    // element, where two scale multiplies and an ex2 without .ftz (a
    // denormal fix-up) were (the raw form's L: varlen 16K 2.2-2.6 % faster
    // on an H100). A padding row's inverse 0 gives -inf row terms and a
    // +inf column term, so its elements are 0.
    // The raw form has no P: p_i and b_j go to region 6 instead, the
    // per-token terms recur computes P from (rawPInputBytes), b_j also to
    // xk for L.
    Value gl = gated ? fmul(load(f32, f.gam, row, 4), cF32(kLog2e)) : cF32(0.0);
    auto pair = scf::IfOp::create(b, first, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(pair.thenBlock());
    Value p = fadd(gl, lg2(fmul(inverse, param(pScale))));
    if (raw)
      store(p, tileOf(6), row, 4);
    else
      store(p, ptrAt(L.xq), row, 4);
    b.setInsertionPointToStart(pair.elseBlock());
    store(fadd(gl, lg2(fmul(inverse, load(f32, f.beta, row, 4)))), ptrAt(L.xl), row, 4);
    Value bj = fsub(gl, lg2(inverse));
    store(bj, ptrAt(L.xk), row, 4);
    if (raw)
      store(bj, tileOf(6), add(row, cI32(C)), 4);
  };
  bool norms = s.qkL2Norm || s.l2normCall;
  if (norms) {
    product(aDesc);
    wgWait(0, acc);
    // Element (r, r) of the accumulator: row 16 wl + 8 h + group sits in
    // column block j = 2 wl + h at column 2 quad + (group % 2) of its 8, so
    // the lane with quad = group / 2 holds it, in acc[4 j + 2 h + group % 2].
    Value odd = cmp(arith::CmpIPredicate::ne, remu(group, cI32(2)), cI32(0));
    Value holds = cmp(arith::CmpIPredicate::eq, quad, divu(group, cI32(2)));
    for (int64_t h = 0; h < 2; ++h) {
      Value d = cF32(0.0);
      for (int64_t w = 0; w < 4; ++w) {
        int64_t at = 4 * (2 * w + h) + 2 * h;
        d = sel(cmp(arith::CmpIPredicate::eq, wl, cI32(w)), sel(odd, acc[at + 1], acc[at]), d);
      }
      Value row = wgRow(wl, 2 * h);
      Value inverse = rsqrt(fadd(d, cF32(1e-6)));
      // l2norm = call: the norms' product runs either way (in a branch it
      // took chunks from 69 to 80 registers and made the queue form
      // spill); the call's kCallL2Norm picks the scale.
      if (s.l2normCall)
        inverse = sel(callOption(deltac_abi::kCallL2Norm), inverse, cF32(1.0));
      ifThen(holds, [&] { storeRowScale(row, inverse); });
    }
  } else {
    Value row = remu(tid, cI32(128)); // C = kWarpgroupChunk: a thread per row of its warpgroup's
    ifThen(cmp(arith::CmpIPredicate::ult, row, cI32(C)), [&] { storeRowScale(row, cF32(1.0)); });
  }

  // (3) Q K^T (warpgroup 0) and K K^T (warpgroup 1), in flight while the
  // rows Qg = fq q and Kd = fk k go to the workspace (not in the raw form),
  // 16 bytes per thread and step: the workspace tiles have the images'
  // swizzled layout, so each 16-byte group goes where it was.
  if (raw) {
    // Warpgroup 0's Q K^T would be P, which this form leaves to recur:
    // warpgroup 1 alone needs a product, K K^T for L. With the L2 norms its
    // product in (2) was that already (the norms scale results, not
    // operands), so it keeps it rather than multiplying again (an H100,
    // varlen 16K: 0.4780 -> 0.4707 ms). The other form multiplies again:
    // there warpgroup 0's Q K^T runs beside it, and keeping the 32 values
    // through (2) cost T = 4K's queue form 1.6 %.
    if (!norms) {
      auto op = scf::IfOp::create(b, TypeRange(SmallVector<Type>(acc.size(), f32)), first, true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(op.thenBlock());
      scf::YieldOp::create(b, acc);
      b.setInsertionPointToStart(op.elseBlock());
      product(kDesc);
      scf::YieldOp::create(b, acc);
      b.setInsertionPointAfter(op);
      acc.assign(op.getResults().begin(), op.getResults().end());
    }
  } else {
    product(kDesc);
  }
  barrier(); // the row scales are stored
  if (!raw) {
    int64_t groups = C * K / 8, n = nWarps * 32;
    assert(groups % n == 0 && "a step of 16-byte groups is not one image's");
    auto vec = VectorType::get({8}, opType);
    for (int64_t base = 0; base < 2 * groups; base += n) {
      bool q = base < groups;
      Value g = add(tid, cI32(base % groups));
      Value row = remu(divu(g, cI32(8)), cI32(C)), at = mul(g, cI32(8));
      Value x = LLVM::LoadOp::create(b, vec, gep(ptrAt(q ? L.qs : L.ks), opType, at), 16);
      Value factor = load(f32, ptrAt(q ? L.fq : L.fk), row, 4);
      Value y = LLVM::UndefOp::create(b, vec);
      for (int64_t e = 0; e < 8; ++e)
        y = LLVM::InsertElementOp::create(b, y, toOp(fmul(toF32(elt(x, e)), factor)), cI32(e));
      storeVec(y, tileOf(q ? 4 : 5), opType, toI64(at), 16);
    }
  }
  wgWait(0, acc);
  barrier(); // the inverses are stored; q's image is free

  // lateV: v's copy into region `to`, whose earlier readers have passed a
  // barrier. An async-proxy write (TMA) after generic-proxy accesses of the
  // same bytes needs the proxy fence first.
  auto copyVLate = [&](int64_t to) {
    if (!tma) {
      copyV(to);
      return;
    }
    auto op = scf::IfOp::create(b, tma, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
      fenceProxyAsync();
      mbarArriveExpect(vBar, C * V * 2);
      tensorCopyImage(ptrAt(to), pVMap, hv, toI32(site.t0), V, vBar);
    });
    b.setInsertionPointToStart(op.elseBlock());
    copyV(to);
  };
  // qk_raw = 2: k's image is free now (every product that reads it is
  // done), and the solve hides the copy.
  if (lateV && vInK)
    ifThen(recurComputesW(), [&] { copyVLate(L.ks); });

  // Row `row`, 8-column group j of the swizzled image at offset `img`
  // (accumulator blocks go there by stmatrixBlock).
  auto imageRow = [&](int64_t img, Value row, Value j) { return swizzledRow(addrAt(img), row, j); };

  // (4) The products' epilogues: this thread's two rows and 16 columns,
  // each element its product times 2^(a_i - b_j) on i >= j (P) or i > j (L).
  {
    auto pairTy = VectorType::get({2}, f32);
    auto pairAt = [&](Value arr, Value col) {
      return LLVM::LoadOp::create(b, pairTy, gep(arr, f32, col), 8).getResult();
    };
    Value rowAt[2] = {wgRow(wl, 0), wgRow(wl, 2)};
    // Column groups right of the warp's last row are all masked: only the
    // warp's first 2 wl + 2 of the 8 carry values (a uniform branch each).
    auto epilogue = [&](bool isP) {
      SmallVector<Value> out(acc.size());
      // 2^(a_i - b_j) from the exponents stored with the row scales
      // (storeRowScale). A positive exponent above the diagonal may give
      // inf (or NaN times 0); the select drops it.
      Value aRow[2];
      for (int64_t h = 0; h < 2; ++h)
        aRow[h] = load(f32, ptrAt(isP ? L.xq : L.xl), rowAt[h], 4);
      for (int64_t j = 0; j < C / 8; ++j) {
        Value live = cmp(arith::CmpIPredicate::ult, cI32(8 * j), mul(add(wl, cI32(1)), cI32(16)));
        auto ifLive = scf::IfOp::create(b, TypeRange(SmallVector<Type>(4, f32)), live, true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(ifLive.thenBlock());
          Value col = wgCol(j, 0);
          SmallVector<Value> x4;
          Value bCol = pairAt(ptrAt(L.xk), col);
          for (int64_t e = 0; e < 4; ++e) {
            // P keeps i >= j, L (strictly lower) i > j.
            Value keep = cmp(isP ? arith::CmpIPredicate::uge : arith::CmpIPredicate::ugt,
                             rowAt[e / 2], add(col, cI32(e % 2)));
            Value x = fmul(acc[4 * j + e], exp2Ftz(fsub(aRow[e / 2], elt(bCol, e % 2))));
            x4.push_back(sel(keep, x, cF32(0.0)));
          }
          scf::YieldOp::create(b, x4);
          b.setInsertionPointToStart(ifLive.elseBlock());
          scf::YieldOp::create(b, SmallVector<Value>(4, cF32(0.0)));
        }
        for (int64_t e = 0; e < 4; ++e)
          out[4 * j + e] = ifLive.getResult(e);
      }
      return out;
    };
    auto which = scf::IfOp::create(b, first, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(which.thenBlock());
    if (raw) {
      // No P: its per-token terms are in region 6 already (storeRowScale;
      // lg2 of 0 on padding rows gives their infinities); G_last beside.
      ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
        store(load(f32, f.gam, cI32(C - 1), 4), tileOf(6), cI32(C * C / 2), 4);
      });
    } else {
      // P as the swizzled image recur reads, staged in af's region, G_last
      // in the 16 bytes after it (recur's ring receives both in one copy).
      stmatrixBlock(wl, epilogue(true), [&](Value row, Value j) { return imageRow(L.af, row, j); });
      ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
        store(load(f32, f.gam, cI32(C - 1), 4), ptrAt(L.af + C * C * 2), cI32(0), 4);
      });
      fenceProxyAsync();
    }
    // L in fp32 rows for the solve, where q was.
    b.setInsertionPointToStart(which.elseBlock());
    SmallVector<Value> l = epilogue(false);
    for (int64_t j = 0; j < C / 8; ++j)
      for (int64_t h = 0; h < 2; ++h)
        storeVec(pack2(l[4 * j + 2 * h], l[4 * j + 2 * h + 1], f32), ptrAt(L.lf), f32,
                 add(mul(rowAt[h], cI32(C + 4)), wgCol(j, 0)), 8);
  }
  barrier();
  if (!raw) {
    // P leaves; its copy has read af before the solve stores A there.
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
      storeTile(tileOf(6), L.af, pGLastBytes(C));
      bulkWait(/*read=*/true);
    });
    barrier();
  }

  // (5) solve_tril (the blocks above the diagonal keep its intermediate
  // products: (6) drops them).
  solveTril(ptrAt(L.lf), ptrAt(L.af), /*zeroAbove=*/false);

  // (6) The WY factors as swizzled images where L was: A_w = A diag(beta
  // e^G / |k|) (W = A_w K on k as loaded), A_u = A diag(beta); four columns
  // per thread.
  threadLoop(C * C / 4, [&](Value e) {
    Value i = divu(e, cI32(C / 4)), jj = mul(remu(e, cI32(C / 4)), cI32(4));
    Value above = cmp(arith::CmpIPredicate::ult, divu(i, cI32(16)), divu(jj, cI32(16)));
    Value a4 = loadF32x4(ptrAt(L.af), add(mul(i, cI32(C + 4)), jj));
    Value bw = loadF32x4(f.beg, jj), nk = loadF32x4(rk, jj), bu = loadF32x4(f.beta, jj);
    auto vt = VectorType::get({4}, opType);
    Value w = LLVM::UndefOp::create(b, vt), u = LLVM::UndefOp::create(b, vt);
    for (int64_t x = 0; x < 4; ++x) {
      Value a = sel(above, cF32(0.0), elt(a4, x));
      w = LLVM::InsertElementOp::create(b, w, toOp(fmul(a, fmul(elt(bw, x), elt(nk, x)))), cI32(x));
      u = LLVM::InsertElementOp::create(b, u, toOp(fmul(a, elt(bu, x))), cI32(x));
    }
    Value to = swizzledAt(i, jj, C);
    storeVec(w, ptrAt(L.ab1), opType, to, 8);
    storeVec(u, ptrAt(L.ab2), opType, to, 8);
  });
  // Otherwise A's region, free once every thread has read it.
  if (lateV)
    ifThen(vInK ? notI(recurComputesW()) : cTrue(), [&] {
      barrier();
      copyVLate(L.af);
    });
  waitCopies(); // v
  if (tma)
    ifThen(tma, [&] { mbarWait(vBar, cI32(0)); });
  fenceProxyAsync();
  barrier();

  // (7) W = A_w K (warpgroup 0) and U = A_u V (warpgroup 1), 64 columns
  // at a time, B read MN-major (k and v rows are the reduction index). Each
  // block's result is staged over the B block it consumed (W as recur's
  // swizzled image, U in 16-column tiles), then the whole tile leaves by one
  // bulk copy.
  // split: both warpgroups run it, block nb in warpgroup nb % 2, and each
  // block leaves by its own bulk copy.
  auto wy = [&](int64_t abOff, int64_t bOff, int64_t width, int64_t which, bool split = false) {
    Value aD = smemDesc(addrAt(abOff), wgmmaKMajor);
    Value bD = smemDesc(addrAt(bOff), wgmmaDescHigh(C * 128, 1024));
    Value bar = add(cI32(kWarpgroup), wg);
    auto mine = [&](int64_t nb) { return cmp(arith::CmpIPredicate::eq, wg, cI32(nb % 2)); };
    for (int64_t nb = 0; nb < width / 64; ++nb) {
      auto block = [&] {
        SmallVector<Value> x(C / 2, cF32(0.0));
        wgFence(x);
        for (int64_t ks = 0; ks < C / 16; ++ks)
          wgmma(x, descPlus(aD, ks * 32), descPlus(bD, nb * C * 128 + ks * 2048),
                /*accumulate=*/ks > 0, /*transA=*/false, /*transB=*/true);
        wgCommit();
        wgWait(0, x);
        namedSync(bar, 128); // the warpgroup's product has read B block nb
        int64_t blockOff = bOff + nb * C * 128;
        stmatrixBlock(wl, x, [&](Value row, Value j) {
          if (which == 2)
            return imageRow(blockOff, row, j);
          // U: [V / 16][C][16], so tile 4 nb + j / 2, half j % 2 of its row.
          return add(addrAt(blockOff), add(mul(divu(j, cI32(2)), cI32(C * 32)),
                                           add(mul(row, cI32(32)), mul(remu(j, cI32(2)), cI32(16)))));
        });
      };
      if (split)
        ifThen(mine(nb), block);
      else
        block();
    }
    fenceProxyAsync();
    namedSync(bar, 128);
    ifThen(cmp(arith::CmpIPredicate::eq, remu(tid, cI32(128)), cI32(0)), [&] {
      if (split) // a 64-column block is C * 128 bytes in either layout
        for (int64_t nb = 0; nb < width / 64; ++nb)
          ifThen(mine(nb), [&] {
            storeTile(gep(tileOf(which), i8, cI64(nb * C * 128)), bOff + nb * C * 128, C * 128);
          });
      else
        storeTile(tileOf(which), bOff, C * width * 2);
      // The block's shared memory is the source: read before it exits.
      // The writes themselves complete with the grid, which is all recur
      // waits for (griddepcontrol.wait, or the stream), so a block leaves
      // without their round trip; only the overlapped launch's flag
      // (PrefillOverlap.cpp) needs them complete and visible beyond the
      // async proxy first.
      if (queued) {
        bulkWait(/*read=*/false);
        fenceProxyAsyncGlobal();
      } else {
        bulkWait(/*read=*/true);
      }
    });
  };
  auto wAndU = [&] { // W in warpgroup 0, U in warpgroup 1
    auto which = scf::IfOp::create(b, first, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(which.thenBlock());
    wy(L.ab1, L.ks, K, 2);
    b.setInsertionPointToStart(which.elseBlock());
    wy(L.ab2, lateV ? L.af : L.vs, V, 3);
  };
  if (raw) {
    // qk_raw = 2 (recurComputesW): recur computes W = A_w K itself from the
    // raw k rows it copies anyway, so A_w's image (C x C, half of W's bytes)
    // leaves instead, from where the solve left it (fenced for the async
    // proxy above), at the start of W's slot; its thread's wait for the
    // copies (in wy) covers it. The warpgroups share U's blocks.
    auto form = scf::IfOp::create(b, recurComputesW(), true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(form.thenBlock());
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)),
           [&] { storeTile(tileOf(2), L.ab1, C * C * 2); });
    wy(L.ab2, vInK ? L.ks : L.af, V, 3, /*split=*/true); // v where it landed
    b.setInsertionPointToStart(form.elseBlock());
    wAndU();
  } else {
    wAndU();
  }
  // G_last travels with P only: this chunks pairs with the warpgroup recur
  // (both sm_90a), which reads nothing else of workspace region 1.
}
