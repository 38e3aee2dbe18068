//===- PrefillRecurTransposed.cpp - recur with S^T as a register operand -===//
//
// recur on sm_90a at a V tile of 64 with a scalar gate
// (RecurForm::Transposed): the recurrence transposed, so that the
// state and V' are wgmma's A operand, which wgmma reads from registers:
//
//   V'^T = U^T - S^T W^T        M = V tile, A = S^T (registers), B = W
//   S^T  = e^G_last S^T + V'^T Kd            A = V'^T (registers), B = Kd
//   O^T  = S^T Qg^T + V'^T P^T               (the same A fragments)
//
// One warpgroup holds S^T in its accumulators (fp32; M = 64 is the V tile)
// and rounds it, and V'^T, to 16-bit A fragments in place: an m64nNk16
// accumulator's n-tiles 2 ks and 2 ks + 1 are exactly the A fragment of k
// step ks. The state's chain therefore never touches shared memory: no
// stmatrix, no proxy fence and no barrier between its two products, where
// the warpgroup form (PrefillRecurWarpgroup.cpp) hands S^T and V'^T through
// swizzled images (what bounded it: performance-journal.md, session 13). The B
// operands are the images chunks writes for that form (W, Qg, P K-major;
// Kd read MN-major, i.e. transposed by the instruction), so the workspace
// and the ring's stages (RecurWarpgroupSmem) are the same; only the
// images before the ring give way to O^T's staging.
//
// The second warpgroup stores O: the chain's warpgroup stages O^T of chunk
// c transposed (stmatrix.trans) into buffer c % 2, the output warpgroup
// writes the chunk's rows to `o` and refills the stage chunk c read.
//
// Beside the warpgroup chunks (RecurForm::TransposedRawQK) the kernel has a
// second form of both loops, taken per call by `qk_raw`: Qg and Kd are q
// and k scaled per row, so the output warpgroup copies the raw rows into
// their images and the chain scales in registers,
//
//   S^T = e^G_last S^T + (V'^T diag(fk)) K     fk = e^(G_last - G) / |k|
//   O^T = (S^T Q^T) diag(fq) + V'^T P^T         fq = scale e^G / |q|
//
// with the factors chunks leaves where P's image would be; chunks then
// writes no Qg and Kd. Nor P: the output warpgroup computes it from the
// raw rows in the stage, two chunks ahead of the chain (computeP below).
// That saves 40 of the 72 KiB per (chunk, head) both kernels move, which
// pays where recur's grid fills the GPU and bytes bound it, and costs
// latency per chunk where one chain bounds it (the scalings sit on the
// chain), so the host chooses (performance-journal.md, sessions 15 and 20).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillRecurForms.h"

#include <limits>

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

// Named barriers (bar 0 is the block's), id + chunk parity:
//   oReady(c)  chain -> output  O^T of chunk c is staged, its stage is read
//   oDone(c)   output -> chain  the staging buffer c % 2 is free again
//   pReady(c)  output -> chain  (qk_raw) P of chunk c is in its stage
//   outputs    output warpgroup alone (qk_raw = 2): every warp's W product
//              has read A_w before W's stores overwrite it
enum TransposedBarrier : int64_t { kTrOReady = 2, kTrODone = 4, kTrPReady = 6, kTrOutputs = 8 };

namespace {
/// RecurForm::Transposed and its raw q/k, overlapped and shared variants.
class RecurTransposedBuilder : public WgmmaRecurBuilder {
public:
  using WgmmaRecurBuilder::WgmmaRecurBuilder;
  void build(const RecurSequence &q);
};
} // namespace

void mlir::delta::prefill::buildRecurTransposed(const PrefillEmitter &e, const RecurSequence &q) {
  RecurTransposedBuilder(e).build(q);
}

void RecurTransposedBuilder::build(const RecurSequence &q) {
  int64_t C = s.chunk, K = s.k, BV = plan.valueTile;
  RecurWarpgroupSmem L(s, BV, /*transposed=*/true);
  int64_t kBlocks = K / 64, both = 256;
  bool gated = s.rule == Rule::gated;
  Type i8 = b.getI8Type();
  const uint64_t kMajor = wgmmaKMajor, mnMajor = wgmmaDescHigh(C * 128, 1024);
  const int64_t oRow = L.oRow, oBytes = L.oBytes; // O^T's staging buffers

  Value wl = remu(warp, cI32(4)); // the warp in its warpgroup
  Value base, aligned;
  std::tie(base, aligned) = alignedSmem();
  Value c0 = q.c0, c1 = q.c1;
  RecurRing ring = recurRing(L.total, L.stage, c0);
  Value stages = ring.stages;
  auto stageOff = [&](Value c, int64_t at) { return add(cI32(at), mul(ringSlot(ring, c), cI32(L.stage))); };
  auto stagePtr = [&](Value c, int64_t at) { return gep(base, i8, stageOff(c, at)); };
  auto stageAddr = [&](Value c, int64_t at) { return add(aligned, stageOff(c, at)); };
  auto barOf = [&](Value c) { return gep(base, i64, ringSlot(ring, c)); };
  auto oStage = [&](Value parity) { return add(aligned, add(cI32(L.st), mul(parity, cI32(oBytes)))); };

  // recurRawQK: the output warpgroup fills a stage. One thread moves W, P
  // (with G_last and the factors fq, fk) and the U tile by bulk copies;
  // every thread copies 8 + 8 16-byte pieces of the raw q and k rows
  // (head h = hv / (HV / H)) into the swizzled images where the other form
  // receives Qg and Kd, and arrives on the stage's mbarrier when they land
  // (cp.async.mbarrier.arrive.noinc: 128 arrivals beside the bulk
  // copies' one). Rows past the sequence copy its chunk's first token,
  // whose factors are 0 there.
  // With `tma` set the host passed tensor maps of q and k instead, and for
  // a whole chunk the stage's one thread also moves the rows, by 2 K / 64
  // TMA tensor copies (async-proxy writes: no proxy fence before wgmma
  // reads them), while the others only arrive. A partial chunk (the
  // sequence's last) still copies by cp.async: a box would bring the next
  // sequence's tokens into its padding rows, and a non-finite one there
  // would cross into this sequence through the products that remove
  // padding rows by zero factors.
  bool hasRaw = plan.recurRawQK();
  Value rawOn = hasRaw ? qkRaw() : Value(), tmaOn = hasRaw ? tmaMaps() : Value();
  auto tmaFor = [&](Value c) { // TMA copies chunk c (a whole chunk)
    Value rows = chunkTokens(c, c0, q.bos, q.eos).second;
    return andI(tmaOn, cmp(arith::CmpIPredicate::eq, rows, cI32(C)));
  };
  // qk_raw = 2 (recurComputesW): chunks_raw wrote A_w instead of W, and
  // computeP also computes W = A_w K; a third form of both loops.
  Value rawW = hasRaw ? recurComputesW() : Value();
  int64_t rawArrivals = 128 + 1;
  auto rawCopies = [&](Value c, Value u, bool w) {
    Value tmaHere = tmaFor(c);
    ifThen(cmp(arith::CmpIPredicate::eq, u, cI32(0)),
           [&] { copyStage(L, ring, base, q, c, /*rawQK=*/true, tmaHere, w); });
    auto copied = scf::IfOp::create(b, tmaHere, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(copied.thenBlock());
    mbarArrive(barOf(c));
    b.setInsertionPointToStart(copied.elseBlock());
    {
      Value t0, rows;
      std::tie(t0, rows) = chunkTokens(c, c0, q.bos, q.eos);
      Value qkOffset = mul(toI64(keyHead(q.hv)), cI64(K));
      {
        WarpRole outputs(*this, 4, 4); // the output warpgroup's 128 threads
        // Stepped: this warpgroup's loop bounds the raw form's chunk
        // (performance-journal.md, session 20).
        copySwizzledRows(stagePtr(c, L.qgb), param(pQ), param(pQStride), qkOffset, K, t0, rows,
                         /*stepped=*/true);
        copySwizzledRows(stagePtr(c, L.kd), param(pK), param(pKStride), qkOffset, K, t0, rows,
                         /*stepped=*/true);
      }
      mbarArriveOnCopies(barOf(c));
    }
  };
  // Chunk c's q and k came by cp.async (not by TMA): generic-proxy writes
  // that wgmma reads through the async proxy.
  auto fenceRawRows = [&](Value c) { ifThen(notI(tmaFor(c)), [&] { fenceProxyAsync(); }); };
  auto copies = [&](Value c) { copyStage(L, ring, base, q, c); };
  // qk_raw: chunks wrote no P. The output warpgroup computes chunk c's
  //   P_ij = (q_i . k_j) 2^(a_i - b_j) on i >= j, 0 above
  // (a, b: rawPInputBytes) from the raw rows and the terms in its stage,
  // into the stage's P image, where the chain's last product of the chunk
  // reads it.
  auto computeP = [&](Value c, bool w) {
    mbarWait(barOf(c), ringPhase(ring, c));
    fenceRawRows(c);
    Value qDesc = smemDesc(stageAddr(c, L.qgb), kMajor), kDesc = smemDesc(stageAddr(c, L.kd), kMajor);
    SmallVector<Value> acc(C / 2, cF32(0.0));
    wgFence(acc);
    for (int64_t ks = 0; ks < K / 16; ++ks) {
      int64_t off = ks / 4 * C * 128 + ks % 4 * 32;
      wgmma(acc, descPlus(qDesc, off), descPlus(kDesc, off), /*accumulate=*/ks > 0,
            /*transA=*/false);
    }
    wgCommit();
    // qk_raw = 2: W = A_w K, in flight during P's epilogue, from A_w's
    // image (where W's goes) and the raw k rows (MN-major: k's rows are the
    // reduction index); every 64-column block's product is complete before
    // W overwrites A_w.
    SmallVector<Value> wAcc;
    if (w) {
      Value aDesc = smemDesc(stageAddr(c, L.wb), kMajor), bDesc = smemDesc(stageAddr(c, L.kd), mnMajor);
      wAcc.assign(kBlocks * C / 2, cF32(0.0));
      wgFence(wAcc);
      for (int64_t nb = 0; nb < kBlocks; ++nb) {
        SmallVector<Value> x(wAcc.begin() + nb * C / 2, wAcc.begin() + (nb + 1) * C / 2);
        for (int64_t ks = 0; ks < C / 16; ++ks)
          wgmma(x, descPlus(aDesc, ks * 32), descPlus(bDesc, nb * C * 128 + ks * 2048),
                /*accumulate=*/ks > 0, /*transA=*/false, /*transB=*/true);
        std::copy(x.begin(), x.end(), wAcc.begin() + nb * C / 2);
      }
      wgCommit();
    }
    Value terms = gep(stagePtr(c, L.pb), i8, cI32(pGLastBytes(C) + rawFactorBytes(C)));
    Value bTerms = gep(terms, f32, cI32(C));
    Value rowAt[2] = {wgRow(wl, 0), wgRow(wl, 2)}, aRow[2];
    for (int64_t h = 0; h < 2; ++h)
      aRow[h] = load(f32, terms, rowAt[h], 4);
    wgWait(w ? 1 : 0, acc);
    auto pairTy = VectorType::get({2}, f32);
    Value minusInf = cF32(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < C / 8; ++j) {
      Value col = wgCol(j, 0);
      Value bCol = LLVM::LoadOp::create(b, pairTy, gep(bTerms, f32, col), 8);
      for (int64_t e = 0; e < 4; ++e) {
        Value row = rowAt[e / 2], cj = add(col, cI32(e % 2));
        // 2^-inf = 0 above the diagonal (and on padding rows and columns,
        // whose terms are -inf and +inf).
        Value keep = cmp(arith::CmpIPredicate::uge, row, cj);
        Value arg = sel(keep, fsub(aRow[e / 2], elt(bCol, e % 2)), minusInf);
        acc[4 * j + e] = fmul(acc[4 * j + e], exp2Ftz(arg));
      }
    }
    Value img = stageAddr(c, L.pb);
    stmatrixBlock(wl, acc, [&](Value row, Value j) { return swizzledRow(img, row, j); });
    if (w) {
      wgWait(0, wAcc);
      namedSync(cI32(kTrOutputs), 128);
      for (int64_t nb = 0; nb < kBlocks; ++nb) {
        Value block = stageAddr(c, L.wb + nb * C * 128);
        stmatrixBlock(wl, ArrayRef<Value>(wAcc).slice(nb * C / 2, C / 2),
                      [&](Value row, Value j) { return swizzledRow(block, row, j); });
      }
    }
    fenceProxyAsync(); // the chain's wgmma reads them
    namedArrive(add(cI32(kTrPReady), remu(sub(c, c0), cI32(2))), both);
  };
  // The A fragment of k step ks from m64nN accumulators `acc` (n-tiles
  // 2 ks and 2 ks + 1), rounded to 16 bits.
  auto fragment = [&](ArrayRef<Value> acc, int64_t ks) -> std::array<Value, 4> {
    int64_t j = 2 * ks;
    return {packI32(acc[4 * j], acc[4 * j + 1]), packI32(acc[4 * j + 2], acc[4 * j + 3]),
            packI32(acc[4 * j + 4], acc[4 * j + 5]), packI32(acc[4 * j + 6], acc[4 * j + 7])};
  };

  // With recurRawQK the kernel has both forms of the loops below, chosen
  // per call by `qk_raw` (a uniform branch around each loop): the raw form
  // wins where recur's grid fills the GPU and its bytes bound it, the other
  // where one chain's latency does (performance-journal.md, session 15).
  // Emits body(raw, w) for the forms the kernel has: under `if (qk_raw)`
  // (then `if (qk_raw == 2)`, w) with the raw forms, the results (types
  // `types`) joined. Each form is its own loop, so that no loop body
  // branches on the form (a branch in the chain's loop changes how ptxas
  // schedules it).
  auto forms = [&](TypeRange types,
                   function_ref<SmallVector<Value>(bool, bool)> body) -> SmallVector<Value> {
    if (!hasRaw)
      return body(false, false);
    auto branch = [&](Value cond, function_ref<SmallVector<Value>()> then,
                      function_ref<SmallVector<Value>()> otherwise) {
      auto op = scf::IfOp::create(b, types, cond, true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(op.thenBlock());
      SmallVector<Value> r = then();
      if (!types.empty())
        scf::YieldOp::create(b, r);
      b.setInsertionPointToStart(op.elseBlock());
      r = otherwise();
      if (!types.empty())
        scf::YieldOp::create(b, r);
      return SmallVector<Value>(op.getResults());
    };
    return branch(
        rawOn,
        [&] {
          return branch(rawW, [&] { return body(true, true); }, [&] { return body(true, false); });
        },
        [&] { return body(false, false); });
  };
  initRingBarriers(base, hasRaw ? sel(rawOn, cI32(rawArrivals), cI32(1)) : Value());
  auto roles = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, warp, cI32(4)), true);

  // The chain's warpgroup: S^T in K / 64 accumulator blocks of m64n64
  // (row: column of the V tile, column: K index).
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    if (plan.sharedOverlap()) // the chain takes the registers the output gives up
      setMaxRegisters(kSharedChainRegisters, /*increase=*/true);
    int64_t nT = 8, sRegs = kBlocks * nT * 4;
    SmallVector<Value> S = initialStateOf(q, sRegs, [&](auto element) {
      for (int64_t kb = 0; kb < kBlocks; ++kb)
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t e = 0; e < 4; ++e)
            element(add(cI32(64 * kb), wgCol(j, e)), wgRow(wl, e));
    });
    if (plan.gridDependency()) // chunks' results are read from here on
      waitForChunks();
    if (hasRaw) // else the output warpgroup fills the ring
      ifThen(notI(rawOn), [&] { fillRing(ring, c1, copies); });
    else
      fillRing(ring, c1, copies);
    // The thread's state elements, for the checkpoints.
    auto elements = [&](function_ref<void(Value, Value, Value)> store) {
      for (int64_t kb = 0; kb < kBlocks; ++kb)
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t e = 0; e < 4; ++e)
            store(S[kb * nT * 4 + 4 * j + e], add(cI32(64 * kb), wgCol(j, e)), wgRow(wl, e));
    };
    SmallVector<Type> sTypes(sRegs, f32);
    SmallVector<Value> S0 = S; // each form's loop starts from these
    S = forms(sTypes, [&](bool raw, bool w) -> SmallVector<Value> {
      S = S0;
      auto bind = [&](ValueRange carried) { S.assign(carried.begin(), carried.end()); };
      return chainLoop(q.checkpoint, c0, c1, S, bind, elements,
                       [&](Value c, ValueRange carried) -> SmallVector<Value> {
        bind(carried);
        Value parity = remu(sub(c, c0), cI32(2));
        // S^T as A fragments, before the stage lands.
        SmallVector<Value> sFrag;
        for (int64_t ks = 0; ks < K / 16; ++ks)
          for (Value a : fragment(ArrayRef<Value>(S).slice((ks / 4) * nT * 4, nT * 4), ks % 4))
            sFrag.push_back(a);
        mbarWait(barOf(c), ringPhase(ring, c));
        if (raw) // q and k by cp.async: generic-proxy writes wgmma reads (kept
          fenceProxyAsync(); // after TMA copies too: one basic block for the chain)
        if (w) // W (with P) of chunk c is in its stage
          namedSync(add(cI32(kTrPReady), parity), both);
        // The decay, before any product is in flight (S^T's registers are
        // the next product's accumulators).
        if (gated) {
          Value decay = exp(load(f32, stagePtr(c, L.pb), cI32(C * C / 2), 4));
          for (Value &x : S)
            x = fmul(x, decay);
        }
        Value wDesc = smemDesc(stageAddr(c, L.wb), kMajor), qDesc = smemDesc(stageAddr(c, L.qgb), kMajor);
        SmallVector<Value> vacc(nT * 4, cF32(0.0)), oacc(nT * 4, cF32(0.0));
        wgFenceAll(vacc, sFrag);
        // V'^T = S^T W^T, then O^T = S^T Qg^T: two groups, V' first.
        for (int64_t ks = 0; ks < K / 16; ++ks)
          wgmmaRegA(vacc, ArrayRef<Value>(sFrag).slice(4 * ks, 4),
                    descPlus(wDesc, (ks / 4) * C * 128 + (ks % 4) * 32), ks > 0, false);
        wgCommit();
        for (int64_t ks = 0; ks < K / 16; ++ks)
          wgmmaRegA(oacc, ArrayRef<Value>(sFrag).slice(4 * ks, 4),
                    descPlus(qDesc, (ks / 4) * C * 128 + (ks % 4) * 32), ks > 0, false);
        wgCommit();
        // U^T (U: [V tile / 16][C][16], rows of 16 V columns) in the
        // accumulators' layout, while they run: ldmatrix.trans of the 8x8
        // tiles (t rows, 8 columns of v) gives n-tiles j and j + 1 of this
        // warp's 16 rows, lane l addressing row l % 8 of tile l / 8.
        SmallVector<Value> u(nT * 4);
        {
          Value r = remu(lane, cI32(8)), mi = divu(lane, cI32(8));
          Value ub = stagePtr(c, L.ub);
          for (int64_t j = 0; j < nT; j += 2) {
            Value t = add(mul(add(cI32(j), divu(mi, cI32(2))), cI32(8)), r);
            Value at = add(mul(wl, cI32(C * 16)), add(mul(t, cI32(16)), mul(remu(mi, cI32(2)), cI32(8))));
            SmallVector<Value> x = ldsm(gep(ub, opType, at), 4, /*trans=*/true);
            auto pairTy = VectorType::get({2}, opType);
            for (int64_t i = 0; i < 4; ++i) {
              Value pair = LLVM::BitcastOp::create(b, pairTy, x[i]);
              int64_t at2 = 4 * (j + i / 2) + 2 * (i % 2);
              u[at2] = toF32(elt(pair, 0));
              u[at2 + 1] = toF32(elt(pair, 1));
            }
          }
        }
        wgWait(1, vacc);
        if (q.transfer) // a transfer tile: U = 0, V'^T = -S^T W^T
          for (Value &x : u)
            x = sel(q.transfer, cF32(0.0), x);
        for (int64_t i = 0; i < nT * 4; ++i)
          vacc[i] = fsub(u[i], vacc[i]);
        SmallVector<Value> vFrag;
        for (int64_t ks = 0; ks < C / 16; ++ks)
          for (Value a : fragment(vacc, ks))
            vFrag.push_back(a);
        // recurRawQK: token t's factors, after P and G_last in the stage.
        Value factors = gep(stagePtr(c, L.pb), i8, cI32(pGLastBytes(C)));
        auto byColumn = [&](SmallVector<Value> &x, int64_t which) {
          for (int64_t j = 0; j < nT; ++j)
            for (int64_t e = 0; e < 4; ++e)
              x[4 * j + e] = fmul(x[4 * j + e],
                                  load(f32, factors, add(cI32(which * C), wgCol(j, e)), 4));
        };
        // The state step's A: V'^T, or V'^T diag(fk) where it meets raw k.
        SmallVector<Value> kFrag;
        if (raw) {
          byColumn(vacc, 1);
          for (int64_t ks = 0; ks < C / 16; ++ks)
            for (Value a : fragment(vacc, ks))
              kFrag.push_back(a);
        }
        // S^T = e^G_last S^T + V'^T Kd (Kd's 64-column blocks MN-major),
        // then O^T += V'^T P^T.
        SmallVector<Value> fenced(S), frags(vFrag);
        frags.append(kFrag);
        fenced.append(oacc);
        wgFenceAll(fenced, frags);
        std::copy(fenced.begin(), fenced.begin() + sRegs, S.begin());
        std::copy(fenced.begin() + sRegs, fenced.end(), oacc.begin());
        std::copy(frags.begin(), frags.begin() + vFrag.size(), vFrag.begin());
        if (raw)
          kFrag.assign(frags.begin() + vFrag.size(), frags.end());
        else
          kFrag = vFrag;
        Value kdDesc = smemDesc(stageAddr(c, L.kd), mnMajor), pDesc = smemDesc(stageAddr(c, L.pb), kMajor);
        // One m64nKk16 per k step over all K / 64 blocks of Kd: the
        // descriptor's leading offset (C * 128 bytes) is the distance from
        // one 64-column block to the next, and S's registers are the blocks'
        // accumulators in order. Half the instructions of a product per
        // block; no faster measured (the chain is not bound by how many
        // wgmma it issues: performance-journal.md, session 16).
        for (int64_t ks = 0; ks < C / 16; ++ks)
          wgmmaRegA(S, ArrayRef<Value>(kFrag).slice(4 * ks, 4), descPlus(kdDesc, ks * 2048), true,
                    /*transB=*/true);
        wgCommit();
        if (raw) {
          // O^T's first product (raw q) is complete once the state step is
          // the only group in flight: scale it by column (fq), then add V'^T P^T.
          wgWait(1, oacc);
          byColumn(oacc, 0);
          wgFenceAll(oacc, vFrag);
        }
        if (raw && !w) // P of chunk c is in its stage
          namedSync(add(cI32(kTrPReady), parity), both);
        for (int64_t ks = 0; ks < C / 16; ++ks)
          wgmmaRegA(oacc, ArrayRef<Value>(vFrag).slice(4 * ks, 4), descPlus(pDesc, ks * 32), true,
                    false);
        wgCommit();
        wgWait(1, S);
        wgWait(0, oacc);
        // O^T of chunk c, transposed, into buffer `parity` once the output
        // warpgroup has stored chunk c - 2 from it.
        ifThen(cmp(arith::CmpIPredicate::sge, sub(c, c0), cI32(2)),
               [&] { namedSync(add(cI32(kTrODone), parity), both); });
        {
          Value r = remu(lane, cI32(8)), mi = divu(lane, cI32(8));
          for (int64_t j0 = 0; j0 < nT; j0 += 2) {
            Value t = add(mul(add(cI32(j0), divu(mi, cI32(2))), cI32(8)), r);
            Value v = add(mul(wl, cI32(16)), mul(remu(mi, cI32(2)), cI32(8)));
            SmallVector<Value> ops{add(oStage(parity), add(mul(t, cI32(oRow)), mul(v, cI32(2))))};
            for (int64_t i = 0; i < 4; ++i) {
              int64_t at = 4 * (j0 + i / 2) + 2 * (i % 2);
              ops.push_back(packI32(oacc[at], oacc[at + 1]));
            }
            stmatrix(ops[0], ArrayRef<Value>(ops).drop_front(), /*trans=*/true);
          }
        }
        namedArrive(add(cI32(kTrOReady), parity), both);
        return S;
      });
    });
    syncLastRounds(kTrODone, c0, c1, both); // every oDone round completes
    auto ifWrite = scf::IfOp::create(b, q.writeOk, false);
    b.setInsertionPointToStart(ifWrite.thenBlock());
    for (int64_t kb = 0; kb < kBlocks; ++kb)
      for (int64_t j = 0; j < nT; ++j)
        for (int64_t e = 0; e < 4; ++e)
          storeFinalOf(q, S[kb * nT * 4 + 4 * j + e], add(cI32(64 * kb), wgCol(j, e)),
                       wgRow(wl, e));
  }

  // The output warpgroup: refills the stage chunk c read, then stores
  // chunk c's rows of O from the staging buffer.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.elseBlock());
    if (plan.sharedOverlap())
      setMaxRegisters(kSharedOutputRegisters, /*increase=*/false);
    if (plan.gridDependency()) // its refills read chunks' results
      waitForChunks();
    Value u = sub(tid, cI32(128));
    forms({}, [&](bool raw, bool w) -> SmallVector<Value> {
      if (raw) // the first chunks' stages, one per stage the launch granted
        for (int64_t i = 0; i < 3; ++i) {
          Value c = add(c0, cI32(i));
          ifThen(andI(cmp(arith::CmpIPredicate::slt, cI32(i), stages),
                      cmp(arith::CmpIPredicate::slt, c, c1)),
                 [&] { rawCopies(c, u, w); });
        }
      // P runs `lead` chunks ahead of the chain: two where the ring has
      // their stages in flight, so that the chain never waits for it.
      Value lead = sel(cmp(arith::CmpIPredicate::slt, stages, cI32(2)), cI32(1), cI32(2));
      if (raw)
        for (int64_t i = 0; i < 2; ++i) {
          Value c = add(c0, cI32(i));
          ifThen(andI(cmp(arith::CmpIPredicate::slt, cI32(i), lead),
                      cmp(arith::CmpIPredicate::slt, c, c1)),
                 [&] { computeP(c, w); });
        }
      auto loop = scf::ForOp::create(b, c0, c1, cI32(1));
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(loop.getBody());
      Value c = loop.getInductionVar();
      Value parity = remu(sub(c, c0), cI32(2));
      namedSync(add(cI32(kTrOReady), parity), both);
      if (raw) {
        Value ahead = add(c, stages);
        ifThen(cmp(arith::CmpIPredicate::slt, ahead, c1), [&] { rawCopies(ahead, u, w); });
      } else {
        ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(128)), [&] {
          Value ahead = add(c, stages);
          ifThen(cmp(arith::CmpIPredicate::slt, ahead, c1), [&] { copies(ahead); });
        });
      }
      Value t0, rows;
      std::tie(t0, rows) = chunkTokens(c, c0, q.bos, q.eos);
      // 16 bytes per lane, 8 lanes per row (o and its token stride are
      // 16-byte aligned: the host checks both).
      Value staged = gep(base, i8, add(cI32(L.st), mul(parity, cI32(oBytes))));
      Value seg = remu(u, cI32(8));
      Value outPtr = param(pO), outStride = param(pOStride), first;
      if (q.outTile) { // recur_cp: o, or a transfer tile's rows in the workspace
        Value at;
        std::tie(outPtr, at, outStride) = q.outTile(c, t0);
        first = add(at, toI64(mul(seg, cI32(8))));
      } else {
        first = add(add(mul(t0, param(pOStride)), mul(toI64(q.hv), cI64(s.v))),
                    toI64(add(q.v0, mul(seg, cI32(8)))));
      }
      auto vecTy = VectorType::get({8}, s.ioType);
      for (int64_t i = 0; i < C * BV / 8 / 128; ++i) {
        Value row = add(divu(u, cI32(8)), cI32(16 * i));
        ifThen(cmp(arith::CmpIPredicate::slt, row, rows), [&] {
          Value x = LLVM::LoadOp::create(
              b, vecTy, gep(staged, i8, add(mul(row, cI32(oRow)), mul(seg, cI32(16)))), 16);
          storeVec(x, outPtr, s.ioType, add(first, mul(toI64(row), outStride)), 16);
        });
      }
      namedArrive(add(cI32(kTrODone), parity), both);
      if (raw) { // P of chunk c + lead (oReady(c) freed its stage)
        Value next = add(c, lead);
        ifThen(cmp(arith::CmpIPredicate::slt, next, c1), [&] { computeP(next, w); });
      }
      return {};
    });
  }
}
