//===- PrefillChunks.cpp - the prefill chunks kernel -------------*- C++ -*-===//
//
// Everything of a chunk that does not read the state, all chunks in
// parallel (PrefillKernel.h).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillChunksForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;


void PrefillEmitter::emitChunks() {
  // recur may launch once every chunks block has started (it waits for
  // chunks' results itself): its blocks then take SMs as chunks' last
  // blocks leave them, instead of after the whole grid and a launch.
  if (plan.gridDependency())
    launchDependents();
  // One-dimensional grid, head-fastest: the value heads sharing a q/k head
  // run side by side, so the second reads q and k from L2, not DRAM.
  chunkItem(blockId(gpu::Dimension::x));
}

void PrefillEmitter::chunkItem(Value flat) {
  int64_t C = s.chunk;
  Value c = divu(flat, param(pHV)), hv = remu(flat, param(pHV));
  Value N = param(pN);
  // The chunk map: scanned here (the first block checks cu_seqlens) or
  // prep's offsets.
  ChunkMap map = chunkMap(cmp(arith::CmpIPredicate::eq, flat, cI32(0)));
  Value inlineMap = map.inlineMap, scan = map.scan;
  Value total = chunkOffsetOf(inlineMap, scan, N);
  // Inline: the sequence of chunk c is the number of sequences l whose
  // chunks end at or before c (a warp sum).
  Value ended = sequencesEndedBy(map, c);
  auto live = scf::IfOp::create(b, cmp(arith::CmpIPredicate::slt, c, total), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(live.thenBlock());
  Value n = sequenceOfChunk(map, c, ended);
  Value j = sub(c, chunkOffsetOf(inlineMap, scan, n));
  auto [bos, eos] = sequenceBounds(map, n);
  Value t0 = add(bos, mul(toI64(j), cI64(C)));
  Value rows = toI32(arith::MinSIOp::create(b, cI64(C), sub(eos, t0)));
  ChunkSite site{c, hv, keyHead(hv), t0, rows};
  // One builder per chunks form (PrefillChunksForms.h).
  switch (plan.chunks) {
  case ChunksForm::Warpgroup:
  case ChunksForm::WarpgroupRawQK:
    return buildChunksWarpgroup(*this, site);
  case ChunksForm::Rows:
  case ChunksForm::RowsForWarpgroupRecur:
    return buildChunksRows(*this, site);
  }
}

Value PrefillEmitter::sequenceOfChunk(const ChunkMap &map, Value c, Value ended) {
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value N = param(pN), inlineMap = map.inlineMap;
  // Otherwise the last n with offsets[n] <= c (binary search over [0, N]:
  // bit width of N steps, each a dependent load, so not 32).
  auto seqOf = scf::IfOp::create(b, TypeRange{i32}, inlineMap, true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(seqOf.thenBlock());
    scf::YieldOp::create(b, ended);
    b.setInsertionPointToStart(seqOf.elseBlock());
    Value steps = sub(cI32(32), LLVM::CountLeadingZerosOp::create(b, i32, N, b.getBoolAttr(false)));
    auto search = scf::ForOp::create(b, cI32(0), steps, cI32(1), ValueRange{cI32(0), N});
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(search.getBody());
      Value lo = search.getRegionIterArg(0), hi = search.getRegionIterArg(1);
      Value mid = divu(add(add(lo, hi), cI32(1)), cI32(2));
      Value open = cmp(arith::CmpIPredicate::slt, lo, hi);
      Value goUp = cmp(arith::CmpIPredicate::sle, load(i32, offsets, minS(mid, N), 4), c);
      Value nlo = sel(open, sel(goUp, mid, lo), lo);
      Value nhi = sel(open, sel(goUp, hi, sub(mid, cI32(1))), hi);
      scf::YieldOp::create(b, ValueRange{nlo, nhi});
    }
    scf::YieldOp::create(b, search.getResult(0));
  }
  return seqOf.getResult(0);
}

namespace {
/// ChunksForm::Rows and ::RowsForWarpgroupRecur.
class ChunksRowsBuilder : public ChunksBuilder {
public:
  using ChunksBuilder::ChunksBuilder;
  void build(const ChunkSite &site);
};
} // namespace

void mlir::delta::prefill::buildChunksRows(const PrefillEmitter &e, const ChunkSite &site) {
  ChunksRowsBuilder(e).build(site);
}

void ChunksRowsBuilder::build(const ChunkSite &site) {
  int64_t C = s.chunk, K = s.k, V = s.v;
  ChunksSmem L(s);
  Value c = site.c, hv = site.hv, h = site.h, t0 = site.t0, rows = site.rows;
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
      Value to = gep(dst, opType, add(mul(r, cI32(width + kRowPad)), mul(piece, cI32(perPiece))));
      cpAsync16(to, from);
    }, /*unroll=*/true);
  };
  bool kda = s.rule == Rule::kda;
  Value gk = kda ? region(L.gk) : Value();
  // Element (row, channel) of gk.
  auto gAt = [&](Value row, Value d) { return add(mul(row, cI32(L.gkLd)), d); };
  // kda's f32 log decays: the rows of g go to gk by cp.async too (16-byte
  // pieces: the host requires g 16-byte aligned), as a copy group of their
  // own (the cumsum waits for it alone), and the cumsum zeroes the padding
  // rows. Loaded element by element, each waiting on its global load, they
  // took a fifth of the kernel. (The raw form's `a` is in the io dtype and
  // goes through channelGate.)
  bool gateCopied = kda && s.gate == GateForm::channel_log && s.gateType.isF32();
  if (gateCopied) {
    int64_t pieces = K / 4;
    Value rowStride = mul(toI64(param(pHV)), cI64(K));
    threadLoop(C * pieces, [&](Value e) {
      Value r = divu(e, cI32(pieces)), piece = remu(e, cI32(pieces));
      Value tok = add(t0, toI64(sel(cmp(arith::CmpIPredicate::slt, r, rows), r, cI32(0))));
      Value from = gep(param(pG), f32,
                       add(add(mul(tok, rowStride), mul(toI64(hv), cI64(K))),
                           toI64(mul(piece, cI32(4)))));
      cpAsync16(gep(gk, f32, gAt(r, mul(piece, cI32(4)))), from);
    }, /*unroll=*/true);
    commitCopies();
  }
  copyRows(kb, param(pK), param(pKStride), mul(toI64(h), cI64(K)), K);
  copyRows(qb, param(pQ), param(pQStride), mul(toI64(h), cI64(K)), K);
  copyRows(vb, param(pV), param(pVStride), mul(toI64(hv), cI64(V)), V);
  commitCopies();
  RowFactors rf{gam, gr, betaS, eG, eGL, bEG};
  if (kda) {
    threadLoop(C, [&](Value i) {
      Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
      Value tok = add(t0, toI64(sel(valid, i, cI32(0))));
      store(sel(valid, betaOf(tok, hv), cF32(0.0)), betaS, i, 4);
    }, /*unroll=*/true);
  } else {
    loadRowGates(ChunkSite{c, hv, h, t0, rows}, rf);
  }
  // kda: the decay of every (row, channel), 0 on padding rows; no block
  // slow yet.
  if (kda)
    threadLoop(C / 16, [&](Value blk) { store(cI32(0), region(L.slow), blk, 4); });
  if (kda && !gateCopied) {
    threadLoop(C * K, [&](Value e) {
      Value i = divu(e, cI32(K)), d = remu(e, cI32(K));
      Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
      Value tok = add(t0, toI64(sel(valid, i, cI32(0))));
      store(sel(valid, channelGate(tok, hv, d), cF32(0.0)), gk, gAt(i, d), 4);
    }, /*unroll=*/false); // unrolled, ptxas spilled 8 bytes here on sm_100a (kraw)
  }
  if (gateCopied)
    waitCopyGroups(1); // g's rows (q, k, v's are waited for after the cumsum)
  barrier();
  // (2) chunk_cumsum by warp 0 (C / 32 rows per lane, a shuffle scan;
  // padding rows have g = 0, so they repeat the last decay), and the per-row
  // factors every later step uses: e^G, e^(G_last - G), beta e^G.
  // kda: the cumsum per channel instead, one thread per channel down the
  // chunk (padding rows repeat the last row's G, so G_last is row C - 1).
  if (kda) {
    // Each 16-row block whose G strays more than kSteep from its first
    // row's, in any channel, is flagged slow (see (4, kda)).
    Value slow = region(L.slow);
    double steepBound = s.ioType.isF16() ? kSteepF16 : kSteep;
    threadLoop(K, [&](Value d) {
      Value run = cF32(0.0), first, steep;
      for (int64_t i = 0; i < C; ++i) {
        Value at = gAt(cI32(i), d);
        Value g = load(f32, gk, at, 4);
        if (gateCopied) // padding rows hold the first token's decays
          g = sel(cmp(arith::CmpIPredicate::slt, cI32(i), rows), g, cF32(0.0));
        run = fadd(run, g);
        store(run, gk, at, 4);
        if (i % 16 == 0) {
          first = run;
          steep = arith::ConstantIntOp::create(b, 0, 1);
          continue;
        }
        Value t = fsub(first, run);
        steep = orI(steep, orI(fcmp(arith::CmpFPredicate::UGT, t, cF32(steepBound)),
                               fcmp(arith::CmpFPredicate::ULT, t, cF32(-steepBound))));
        if (i % 16 == 15)
          ifThen(steep, [&] { store(cI32(1), slow, cI32(i / 16), 4); });
      }
    });
  } else {
    scalarGateCumsum(rf);
  }
  waitCopies();
  barrier();
  // (3) q and k rows L2-normalised in place (16-bit; padding rows zero), a
  // warp per row, K / 32 elements per lane; the recurrence's Qg = scale Q
  // e^G and Kd = K e^(G_last - G) go straight to the workspace (row-major,
  // one vector store per lane).
  int64_t epl = K / 32, warps = plan.threads / 32;
  {
    Value qg = gep(workRegion(4), opType, mul(ch, cI64(C * (K + kRowPad))));
    Value kd = gep(workRegion(5), opType, mul(ch, cI64(C * (K + kRowPad))));
    Value col = mul(lane, cI32(epl));
    // kda: this lane's channels of G, as one vector per row (and G_last's,
    // the same for every row, loaded once).
    auto gVec = VectorType::get({epl}, f32);
    auto gRow = [&](Value row) {
      return LLVM::LoadOp::create(b, gVec, gep(gk, f32, gAt(row, col)), epl * 4).getResult();
    };
    Value gLastV = kda ? gRow(cI32(C - 1)) : Value();
    auto rowLoop = scf::ForOp::create(b, warp, cI32(C), cI32(warps));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(rowLoop.getBody());
    Value i = rowLoop.getInductionVar();
    Value valid = cmp(arith::CmpIPredicate::slt, i, rows);
    Value gV = kda ? gRow(i) : Value();
    auto inVec = VectorType::get({epl}, s.ioType), outVec = VectorType::get({epl}, opType);
    for (int which = 0; which < 2; ++which) {
      Value buf = which ? qb : kb;
      Value at = add(mul(i, cI32(K + kRowPad)), col);
      Value vec = LLVM::LoadOp::create(b, inVec, gep(buf, opType, at), epl * 2);
      SmallVector<Value> x;
      Value ss = cF32(0.0);
      for (int64_t e = 0; e < epl; ++e) {
        x.push_back(toF32(elt(vec, e)));
        ss = fadd(ss, fmul(x.back(), x.back()));
      }
      Value scale = cF32(1.0);
      if (s.qkL2Norm || s.l2normCall) {
        // By call: 1 / sqrt(|x|^2 + 1e-6) where the call's bit asks for it.
        Value byCall = s.qkL2Norm ? Value() : callOption(deltac_abi::kCallL2Norm);
        Value norm = rsqrt(fadd(xorSum(ss, 1, 16), cF32(1e-6)));
        scale = byCall ? sel(byCall, norm, scale) : norm;
      }
      scale = sel(valid, scale, cF32(0.0));
      Value factor = kda ? Value()
                     : which ? fmul(load(f32, eG, i, 4), param(pScale))
                             : load(f32, eGL, i, 4);
      Value normed = LLVM::UndefOp::create(b, outVec), gatedRow = LLVM::UndefOp::create(b, outVec);
      for (int64_t e = 0; e < epl; ++e) {
        Value y = fmul(x[e], scale);
        Value f = factor;
        if (kda) { // per channel: scale e^G, or e^(G_last - G) (<= 0)
          Value gi = elt(gV, e);
          f = which ? fmul(exp(gi), param(pScale))
                    : exp(fsub(elt(gLastV, e), gi));
        }
        normed = LLVM::InsertElementOp::create(b, normed, toOp(y), cI32(e));
        gatedRow = LLVM::InsertElementOp::create(b, gatedRow, toOp(fmul(y, f)), cI32(e));
      }
      storeVec(normed, buf, opType, at, epl * 2);
      storeVec(gatedRow, which ? qg : kd, opType, workTileAt(which ? 4 : 5, i, col), epl * 2);
    }
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
  Operand kRow{kb, K + kRowPad}, qRow{qb, K + kRowPad};
  // Results bound for the workspace (P, W, U) are staged row by row in
  // shared memory (af's region, free before the solve and after the WY
  // factors) and leave in 16-byte, fully coalesced stores: written straight
  // from the mma fragments they would be scattered half sectors.
  Value stage = af;
  // Into chunk ch's tile of workspace region `which` (workTileAt).
  auto copyOut = [&](int64_t cols, int64_t which) {
    int64_t perChunk = prefillChunkRegionBytes(s)[which - 1] / 2;
    Value dst = gep(workRegion(which), opType, mul(ch, cI64(perChunk)));
    threadLoop(C * cols / 8, [&](Value e) {
      Value i = divu(e, cI32(cols / 8)), col = mul(remu(e, cI32(cols / 8)), cI32(8));
      auto vt = VectorType::get({8}, opType);
      Value v = LLVM::LoadOp::create(b, vt, gep(stage, opType, add(mul(i, cI32(cols + kRowPad)), col)), 16);
      storeVec(v, dst, opType, workTileAt(which, i, col), 16);
    }, /*unroll=*/true);
  };
  // (4, kda) P and L with per-channel decays: sum_d x_id k_jd e^(G_id - G_jd)
  // (x = q scaled, or k times beta_i), by 16-row blocks: block row I, rows
  // from r = 16 I, by mma.sync as (x ⊙ e^(G - G_r)) (k ⊙ e^(G_r - G))^T
  // (FLA's reference-row form). Left of the diagonal both factors are at
  // most 1. On the diagonal block the right factor is e^(G_r - G_j) >= 1 for
  // j > r: at most e^kSteep (no overflow) where the block's decays stay
  // within kSteep of row r in every channel (the cumsum flags the blocks
  // that do not), so such a
  // block is one more product, masked to i >= j; a flagged (`slow`) block
  // is summed elementwise in fp32 instead, the exponent's argument selected
  // first (no positive exponent). Blocks above the diagonal are zero.
  if (kda) {
    int64_t nb = C / 16, ld = K + kRowPad;
    Value kl = region(L.kl), rb = region(L.rb), slow = region(L.slow);
    auto slowBlock = [&](Value blk) {
      return cmp(arith::CmpIPredicate::ne, load(i32, slow, blk, 4), cI32(0));
    };
    auto vec4 = VectorType::get({4}, f32), op4 = VectorType::get({4}, opType);
    // Four channels d .. d + 3 of a row: of G (f32), of a 16-bit buffer,
    // and a 16-bit vector times a factor per channel.
    auto gamma4 = [&](Value row, Value d) {
      return LLVM::LoadOp::create(b, vec4, gep(gk, f32, gAt(row, d)), 16).getResult();
    };
    auto op4At = [&](Value buf, Value row, Value d) {
      return LLVM::LoadOp::create(b, op4, gep(buf, opType, add(mul(row, cI32(ld)), d)), 8).getResult();
    };
    auto scaled4 = [&](Value x4, function_ref<Value(int64_t)> factor) {
      Value v = LLVM::UndefOp::create(b, op4);
      for (int64_t x = 0; x < 4; ++x)
        v = LLVM::InsertElementOp::create(b, v, toOp(fmul(toF32(elt(x4, x)), factor(x))), cI32(x));
      return v;
    };
    // Blocks above the diagonal and the diagonal blocks' upper halves: 0.
    threadLoop(C * C, [&](Value e) {
      Value i = divu(e, cI32(C)), jj = remu(e, cI32(C));
      Value above = cmp(arith::CmpIPredicate::ugt, jj, i);
      ifThen(andI(above, cmp(arith::CmpIPredicate::uge, divu(jj, cI32(16)),
                             divu(i, cI32(16)))), [&] {
        store(toOp(cF32(0.0)), stage, add(mul(i, cI32(C + kRowPad)), jj), 2);
        store(cF32(0.0), lf, add(mul(i, cI32(C + 4)), jj), 4);
      });
    });
    // A slow diagonal block's lower half (i >= j), one thread per pair:
    // pair p of a block is row il = floor((sqrt(8p + 1) - 1) / 2), column
    // p - il (il + 1) / 2 (exact in fp32 for p < 136), so every lane works.
    threadLoop(nb * 136, [&](Value e) {
      Value blk = divu(e, cI32(136)), p = remu(e, cI32(136));
      auto isSlow = scf::IfOp::create(b, slowBlock(blk), false);
      OpBuilder::InsertionGuard g1(b);
      b.setInsertionPointToStart(isSlow.thenBlock());
      Value root = sqrt(arith::UIToFPOp::create(b, f32, add(mul(p, cI32(8)), cI32(1))));
      Value il = arith::FPToUIOp::create(b, i32, fmul(fsub(root, cF32(1.0)), cF32(0.5)));
      Value jl = sub(p, divu(mul(il, add(il, cI32(1))), cI32(2)));
      Value i = add(mul(blk, cI32(16)), il), jj = add(mul(blk, cI32(16)), jl);
      auto loop = scf::ForOp::create(b, cI32(0), cI32(K), cI32(4), ValueRange{cF32(0.0), cF32(0.0)});
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(loop.getBody());
        Value d = loop.getInductionVar();
        Value sp = loop.getRegionIterArg(0), sl = loop.getRegionIterArg(1);
        Value gi = gamma4(i, d), gj = gamma4(jj, d);
        Value qi = op4At(qb, i, d), ki = op4At(kb, i, d), kj = op4At(kb, jj, d);
        for (int64_t x = 0; x < 4; ++x) {
          // i >= j: the exponent is never positive.
          Value w = fmul(toF32(elt(kj, x)), exp(fsub(elt(gi, x), elt(gj, x))));
          sp = fma(toF32(elt(qi, x)), w, sp);
          sl = fma(toF32(elt(ki, x)), w, sl);
        }
        scf::YieldOp::create(b, ValueRange{sp, sl});
      }
      store(toOp(fmul(loop.getResult(0), param(pScale))), stage, add(mul(i, cI32(C + kRowPad)), jj), 2);
      Value below = cmp(arith::CmpIPredicate::ugt, i, jj);
      Value l = fmul(loop.getResult(1), load(f32, betaS, i, 4));
      store(sel(below, l, cF32(0.0)), lf, add(mul(i, cI32(C + 4)), jj), 4);
    });
    // Block row by block row, from r = 16 I: the left operands of block I's
    // rows, q (in place; the elementwise sums above are done) and k (to kl)
    // times e^(G - G_r), and R = k ⊙ e^(G_r - G) for the rows up to the
    // block's last; then the products of block I's rows (P from q, L from
    // k) with the r / 8 column tiles left of the diagonal and, unless the
    // block is slow, the two of the diagonal block; one 16x8 tile per warp
    // and item. The diagonal block carries each row's largest terms (i = j
    // and its neighbours), so its operands go as 16-bit pairs hi + lo (lo,
    // the rounding error of hi, in dl: q's, k's, then R's 16 rows) and its
    // tiles as hi hi + hi lo + lo hi: fp32-like products (with hi alone, o
    // was 17 % further from the fp64 reference than FLA's chunk_kda).
    barrier();
    Value dl = region(L.dl);
    // x4 ⊙ f as 16-bit hi (at hiAt) and lo (at loAt, where `storeLo`).
    auto split4 = [&](Value x4, Value f[4], Value hiAt, Value loAt, Value storeLo) {
      Value hi = LLVM::UndefOp::create(b, op4), lo = LLVM::UndefOp::create(b, op4);
      for (int64_t x = 0; x < 4; ++x) {
        Value y = fmul(toF32(elt(x4, x)), f[x]);
        Value h = toOp(y);
        hi = LLVM::InsertElementOp::create(b, hi, h, cI32(x));
        lo = LLVM::InsertElementOp::create(b, lo, toOp(fsub(y, toF32(h))), cI32(x));
      }
      storeVec(hi, hiAt, opType, cI32(0), 8);
      ifThen(storeLo, [&] { storeVec(lo, loAt, opType, cI32(0), 8); });
    };
    auto rowAt = [&](Value buf, Value row, Value d) {
      return gep(buf, opType, add(mul(row, cI32(ld)), d));
    };
    for (int64_t I = 0; I < nb; ++I) {
      int64_t r = 16 * I;
      threadLoop(16 * K / 4, [&](Value e) {
        Value il = divu(e, cI32(K / 4)), d = mul(remu(e, cI32(K / 4)), cI32(4));
        Value i = add(cI32(r), il);
        Value gi = gamma4(i, d), gr4 = gamma4(cI32(r), d);
        Value f[4];
        for (int64_t x = 0; x < 4; ++x)
          f[x] = exp(fsub(elt(gi, x), elt(gr4, x)));
        split4(op4At(qb, i, d), f, rowAt(qb, i, d), rowAt(dl, il, d), cTrue());
        split4(op4At(kb, i, d), f, rowAt(kl, il, d), rowAt(dl, add(il, cI32(16)), d), cTrue());
      });
      threadLoop((r + 16) * K / 4, [&](Value e) {
        Value j = divu(e, cI32(K / 4)), d = mul(remu(e, cI32(K / 4)), cI32(4));
        Value gj = gamma4(j, d), gr4 = gamma4(cI32(r), d);
        Value f[4];
        for (int64_t x = 0; x < 4; ++x)
          f[x] = exp(fsub(elt(gr4, x), elt(gj, x)));
        // The diagonal block's rows (j >= r) keep their lo too.
        Value diag = cmp(arith::CmpIPredicate::uge, j, cI32(r));
        Value loAt = rowAt(dl, add(cI32(32), sub(sel(diag, j, cI32(r)), cI32(r))), d);
        split4(op4At(kb, j, d), f, rowAt(rb, j, d), loAt, diag);
      });
      barrier();
      Value tiles = add(cI32(r / 8), sel(slowBlock(cI32(I)), cI32(0), cI32(2)));
      for (int64_t base = 0; base < 2 * (r / 8 + 2); base += nWarps) {
        Value item = add(warp, cI32(base));
        ifThen(cmp(arith::CmpIPredicate::ult, item, mul(tiles, cI32(2))), [&] {
          Value isL = cmp(arith::CmpIPredicate::uge, item, tiles);
          Value n0 = mul(sel(isL, sub(item, tiles), item), cI32(8));
          Value onDiagonal = cmp(arith::CmpIPredicate::uge, n0, cI32(r));
          // left: hi rows from leftRow, lo rows of dl from loRow.
          auto run = [&](Value left, Value leftRow, int64_t loRow, bool l) {
            Frag t = tileProduct(Operand{left, ld}, leftRow, Operand{rb, ld}, n0, K);
            auto split = scf::IfOp::create(b, TypeRange(SmallVector<Type>(4, f32)), onDiagonal, true);
            {
              OpBuilder::InsertionGuard g(b);
              b.setInsertionPointToStart(split.thenBlock());
              Value rLo = add(cI32(32), sub(n0, cI32(r)));
              Frag hl = tileProduct(Operand{left, ld}, leftRow, Operand{dl, ld}, rLo, K);
              Frag lh = tileProduct(Operand{dl, ld}, cI32(loRow), Operand{rb, ld}, n0, K);
              SmallVector<Value> sum;
              for (int e = 0; e < 4; ++e)
                sum.push_back(fadd(t.c[e], fadd(hl.c[e], lh.c[e])));
              scf::YieldOp::create(b, sum);
              b.setInsertionPointToStart(split.elseBlock());
              scf::YieldOp::create(b, ValueRange(t.c));
            }
            for (int e = 0; e < 4; ++e)
              t.c[e] = split.getResult(e);
            for (int e = 0; e < 4; ++e) {
              Value i = add(cI32(r), add(group, cI32(e >= 2 ? 8 : 0)));
              Value jj = add(n0, add(mul(quad, cI32(2)), cI32(e % 2)));
              // On the diagonal block: P keeps i >= j, L (strictly lower) i > j.
              Value keep = orI(notI(onDiagonal),
                               cmp(l ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::uge, i, jj));
              if (l)
                store(sel(keep, fmul(t.c[e], load(f32, betaS, i, 4)), cF32(0.0)), lf,
                      add(mul(i, cI32(C + 4)), jj), 4);
              else
                store(toOp(sel(keep, fmul(t.c[e], param(pScale)), cF32(0.0))), stage,
                      add(mul(i, cI32(C + kRowPad)), jj), 2);
            }
          };
          auto which = scf::IfOp::create(b, isL, true);
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(which.thenBlock());
          run(kl, cI32(0), 16, true);
          b.setInsertionPointToStart(which.elseBlock());
          run(qb, cI32(r), 0, false);
        });
      }
      barrier();
    }
    // P leaves; k becomes k ⊙ e^G, the W product's operand (L is done).
    copyOut(C, 6);
    threadLoop(C * K / 4, [&](Value e) {
      Value i = divu(e, cI32(K / 4)), d = mul(remu(e, cI32(K / 4)), cI32(4));
      Value gi = gamma4(i, d);
      Value ko = scaled4(op4At(kb, i, d), [&](int64_t x) { return exp(elt(gi, x)); });
      storeVec(ko, kb, opType, add(mul(i, cI32(ld)), d), 8);
    });
  }
  // (4) chunk_output, intra-chunk half: P = scale (Q K^T) ⊙ M,
  // M_ij = exp(Gi - Gj), i >= j. Q is dead afterwards: L takes its place.
  if (!kda) {
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
      storeVec(pack2(out[0], out[1], opType), stage, opType, add(mul(i, cI32(C + kRowPad)), jj), 4);
    });
  }
  if (!kda) {
    barrier();
    copyOut(C, 6);
    // chunk_kkt: L = strictly lower beta_i exp(Gi - Gj) <k_i, k_j>.
    SmallVector<Frag> acc = zeroFrags(C, C);
    mma(kRow, kRow, C, C, K, acc);
    forEachElement(C, C, acc, [&](Value i, Value jj, Value x) {
      Value below = cmp(arith::CmpIPredicate::ugt, i, jj);
      Value l = fmul(fmul(x, load(f32, betaS, i, 4)), decay(below, i, jj));
      store(sel(below, l, cF32(0.0)), lf, add(mul(i, cI32(C + 4)), jj), 4);
    });
  }
  barrier();
  // (5) solve_tril (solveTril), blocks above the diagonal zeroed.
  solveTril(lf, af, /*zeroAbove=*/true);
  int64_t ldL = C + 4;
  // (6) The WY products take the row factors on A's columns, so K and V
  // are used as loaded: W = (A diag(beta e^G)) K, U = (A diag(beta)) V.
  Value ab1 = region(L.ab1), ab2 = region(L.ab2);
  threadLoop(C * C / 4, [&](Value e) {
    Value i = divu(e, cI32(C / 4)), jj = mul(remu(e, cI32(C / 4)), cI32(4));
    Value a4 = loadF32x4(af, add(mul(i, cI32(ldL)), jj));
    Value at = add(mul(i, cI32(C + kRowPad)), jj);
    auto vt = VectorType::get({4}, opType);
    auto scaled = [&](Value factors) {
      Value f4 = loadF32x4(factors, jj);
      Value v = LLVM::UndefOp::create(b, vt);
      for (int64_t x = 0; x < 4; ++x)
        v = LLVM::InsertElementOp::create(b, v, toOp(fmul(elt(a4, x), elt(f4, x))), cI32(x));
      return v;
    };
    storeVec(scaled(kda ? betaS : bEG), ab1, opType, at, 8);
    storeVec(scaled(betaS), ab2, opType, at, 8);
  });
  barrier();
  auto product = [&](Value a, Operand rhs, int64_t cols, int64_t which) {
    SmallVector<Frag> acc = zeroFrags(C, cols);
    mma(Operand{a, C + kRowPad}, rhs, C, cols, C, acc);
    forEachPair(C, cols, acc, [&](Value i, Value col, Value x0, Value x1) {
      storeVec(pack2(x0, x1, opType), stage, opType, add(mul(i, cI32(cols + kRowPad)), col), 4);
    });
    barrier();
    copyOut(cols, which);
  };
  // A's fp32 rows are dead: the products' 16-bit results are staged there.
  product(ab1, Operand{kb, K + kRowPad, /*kRows=*/true}, K, 2);
  barrier();
  product(ab2, Operand{vb, V + kRowPad, /*kRows=*/true}, V, 3);
  if (kda) { // e^G_last per channel (recur multiplies by it: no exp on its state chain)
    threadLoop(K, [&](Value d) {
      store(exp(load(f32, gk, gAt(cI32(C - 1), d), 4)), gep(workRegion(1), f32, mul(ch, cI64(K))),
            d, 4);
    });
    return;
  }
  auto lead = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, tid, cI32(0)), false);
  b.setInsertionPointToStart(lead.thenBlock());
  Value gLast = load(f32, gam, cI32(C - 1), 4);
  store(gLast, gep(workRegion(1), f32, ch), cI32(0), 4);
  // The warpgroup recur receives it with P (the 16 bytes after P's image),
  // so that its loop reads nothing from global memory: a load in flight
  // would hold up its every proxy fence.
  if (plan.swizzledWorkspace()) {
    int64_t pElems = prefillChunkRegionBytes(s)[5] / 2;
    store(gLast, gep(gep(workRegion(6), opType, mul(ch, cI64(pElems))), opType, cI64(C * C)),
          cI32(0), 4);
  }
}


void ChunksBuilder::loadRowGates(const ChunkSite &site, const RowFactors &f) {
  threadLoop(s.chunk, [&](Value i) {
    Value valid = cmp(arith::CmpIPredicate::slt, i, site.rows);
    Value tok = add(site.t0, toI64(sel(valid, i, cI32(0))));
    auto [gv, bv] = gateAndBeta(tok, site.hv);
    store(sel(valid, gv, cF32(0.0)), f.gr, i, 4);
    store(sel(valid, bv, cF32(0.0)), f.beta, i, 4);
  }, /*unroll=*/true);
}

void ChunksBuilder::scalarGateCumsum(const RowFactors &f) {
  // By warp 0: C / 32 rows per lane, a shuffle scan; padding rows have
  // g = 0, so they repeat the last decay.
  int64_t C = s.chunk;
  bool gated = s.rule == Rule::gated;
  int64_t per = C / 32;
  auto w0 = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq, warp, cI32(0)), false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(w0.thenBlock());
  SmallVector<Value> run;
  Value sum = cF32(0.0);
  for (int64_t e = 0; e < per; ++e) {
    sum = fadd(sum, load(f32, f.gr, add(mul(lane, cI32(per)), cI32(e)), 4));
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
    store(gm, f.gam, m, 4);
    store(e1, f.eg, m, 4);
    store(gated ? exp(fsub(last, gm)) : cF32(1.0), f.egl, m, 4);
    store(fmul(load(f32, f.beta, m, 4), e1), f.beg, m, 4);
  }
}

void ChunksBuilder::solveTril(Value lf, Value af, bool zeroAbove) {
  int64_t C = s.chunk;
  int64_t nb = C / 16, ldL = C + 4; // fp32 rows of L and A, 16-byte aligned
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
      // Pairs of products as one multiply and one fma, then a tree: the
      // same depth as a tree of products, fewer instructions (not in the
      // queue form, whose 80 registers it made spill).
      SmallVector<Value> l;
      for (int64_t q = 0; q * 4 < i; ++q) {
        Value l4 = loadF32x4(lf, add(row, cI32(4 * q)));
        for (int64_t m = 4 * q; m < std::min<int64_t>(i, 4 * q + 4); ++m)
          l.push_back(elt(l4, m - 4 * q));
      }
      SmallVector<Value> terms;
      for (int64_t m = 0; m < i; m += queued ? 1 : 2)
        terms.push_back(m + 1 < i && !queued ? fma(l[m + 1], a[m + 1], fmul(l[m], a[m]))
                                             : fmul(l[m], a[m]));
      a[i] = sel(cmp(arith::CmpIPredicate::ugt, cI32(i), jl), fsub(cF32(0.0), treeSum(terms)), a[i]);
    }
    for (int64_t i = 0; i < 16; ++i)
      store(a[i], af, add(mul(add(base, cI32(i)), cI32(ldL)), add(base, jl)), 4);
  }
  barrier();
  // (b) Doubling: the inverses of the s x s diagonal blocks give those of
  // the 2s x 2s ones, A_21 = -A_22 (L_21 A_11), all pairs of a level at
  // once. T = L_21 A_11 is kept in the pair's block above the diagonal
  // (A_12's place, never read as A). Sums skip the 16-blocks that are zero
  // (above the diagonal), so each thread's range is fixed by its warp: the
  // items are ordered so the 16-block that sets it is warp-uniform.
  for (int64_t sz = 16; 2 * sz <= C; sz *= 2) {
    int64_t pairs = C / (2 * sz), perPair = sz * sz / 4, blocks = sz / 16;
    // Item e of a pair: its 16-block (of columns in (1), rows in (2)),
    // then the element's row and its four columns.
    auto forItems = [&](bool byColumn,
                        function_ref<void(Value, int64_t, Value, Value)> body) {
      threadLoop(pairs * perPair, [&](Value e) {
        Value p = divu(e, cI32(perPair)), inPair = remu(e, cI32(perPair));
        Value blk = divu(inPair, cI32(4 * sz)), rest = remu(inPair, cI32(4 * sz));
        Value r, c;
        if (byColumn) { // sz rows x 4 column quads of the 16-block
          r = divu(rest, cI32(4));
          c = add(mul(blk, cI32(16)), mul(remu(rest, cI32(4)), cI32(4)));
        } else { // 16 rows of the 16-block x sz / 4 column quads
          r = add(mul(blk, cI32(16)), divu(rest, cI32(sz / 4)));
          c = mul(remu(rest, cI32(sz / 4)), cI32(4));
        }
        Value p0 = mul(p, cI32(2 * sz)); // the pair's first row and column
        for (int64_t bc = 0; bc < blocks; ++bc)
          ifThen(cmp(arith::CmpIPredicate::eq, blk, cI32(bc)), [&] { body(p0, bc, r, c); });
      });
    };
    // sum_{k = kBegin}^{kEnd - 1} left[leftRow][left0 + k] right[right0 + k]
    // [col .. col + 3], four columns, by fma: the doubling's phases issue a
    // multiply and an add per term otherwise, and they were a third of
    // chunks_raw's warp samples at varlen (ncu, session 45). The queue form
    // keeps the multiply and add: with fma its 80 registers spilled.
    auto rowTimes = [&](Value left, Value leftRow, Value left0, Value right, Value right0,
                        Value col, int64_t kBegin, int64_t kEnd) {
      Value acc[4] = {cF32(0.0), cF32(0.0), cF32(0.0), cF32(0.0)};
      for (int64_t kq = kBegin / 4; kq < kEnd / 4; ++kq) {
        Value l4 = loadF32x4(left, add(mul(leftRow, cI32(ldL)), add(left0, cI32(4 * kq))));
        for (int64_t kk = 0; kk < 4; ++kk) {
          Value k = add(right0, cI32(4 * kq + kk));
          Value a4 = loadF32x4(right, add(mul(k, cI32(ldL)), col));
          Value l = elt(l4, kk);
          for (int64_t x = 0; x < 4; ++x)
            acc[x] = queued ? fadd(acc[x], fmul(l, elt(a4, x))) : fma(l, elt(a4, x), acc[x]);
        }
      }
      return f32x4(acc);
    };
    // (1) T = L_21 A_11: A_11's 16-block column bc is zero above row 16 bc.
    forItems(/*byColumn=*/true, [&](Value p0, int64_t bc, Value r, Value c) {
      Value t = rowTimes(lf, add(add(p0, cI32(sz)), r), p0, af, p0, add(p0, c), 16 * bc, sz);
      storeVec(t, af, f32, add(mul(add(p0, r), cI32(ldL)), add(add(p0, cI32(sz)), c)), 16);
    });
    barrier();
    // (2) A_21 = -A_22 T: A_22's 16-block row br is zero right of column
    // 16 br + 15. T's row k sits in row p0 + k, from column p0 + sz.
    forItems(/*byColumn=*/false, [&](Value p0, int64_t br, Value r, Value c) {
      Value rowG = add(add(p0, cI32(sz)), r);
      Value t = rowTimes(af, rowG, add(p0, cI32(sz)), af, p0, add(add(p0, cI32(sz)), c), 0,
                         16 * br + 16);
      Value neg = f32x4({fsub(cF32(0.0), elt(t, 0)), fsub(cF32(0.0), elt(t, 1)),
                         fsub(cF32(0.0), elt(t, 2)), fsub(cF32(0.0), elt(t, 3))});
      storeVec(neg, af, f32, add(mul(rowG, cI32(ldL)), add(p0, c)), 16);
    });
    barrier();
  }
  // Blocks above the diagonal are zero (four columns per thread); they
  // held the T's until now.
  if (zeroAbove) {
    threadLoop(C * C / 4, [&](Value e) {
      Value i = divu(e, cI32(C / 4)), jj = mul(remu(e, cI32(C / 4)), cI32(4));
      Value above = cmp(arith::CmpIPredicate::ult, divu(i, cI32(16)), divu(jj, cI32(16)));
      ifThen(above, [&] {
        storeVec(f32x4({cF32(0.0), cF32(0.0), cF32(0.0), cF32(0.0)}), af, f32,
                 add(mul(i, cI32(ldL)), jj), 16);
      });
    });
    barrier();
  }
}
