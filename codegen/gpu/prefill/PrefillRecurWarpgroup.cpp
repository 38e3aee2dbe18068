//===- PrefillRecurWarpgroup.cpp - recur as wgmma warpgroups -----*- C++ -*-===//
//
// recur on sm_90a (RecurForm::Warpgroup): two warpgroups per block
// over the whole V tile (N = V tile), every product a wgmma with its
// operands in shared memory:
//
//   state warpgroup   V' = U - W S              M = C;  A = W,  B = S^T image
//                     S  = e^G_last S + Kd^T V'  M = K, by 64 rows; A = Kd
//                                               (transposed by the
//                                               instruction), B = V'^T image
//   output warpgroup  O  = Qg S + P V'          M = C;  A = Qg, then P
//
// The state lives in the state warpgroup's accumulators (fp32, K / 64
// blocks of V tile / 2 registers per thread). After each product the
// warpgroup rounds V' or the next S to 16 bits and stores it transposed
// (stmatrix.trans) as a swizzled B image, then a proxy fence makes it
// visible to wgmma; the output warpgroup reads the same images, stores O and
// refills the ring, so the state chain carries neither the output's
// products nor global memory operations (a fence waits for those in
// flight). At V tile 16 a chunk step is 16 wgmma on the chain where the
// mma.sync state warp issued ~600 instructions on one SM sub-partition;
// what bounds it now is in performance-journal.md (session 11). chunks writes W,
// Qg, Kd and P as the 128-byte-swizzled images wgmma reads
// (PrefillEmitter::workTileAt; G_last after P's image) and U in 16-column
// tiles, so one thread fills a stage with one bulk copy per tile.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillRecurForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

// recur's named barriers (bar 0 is the block's): the state warpgroup's
// own, and its hand-overs with the output warpgroup, one per signal and
// chunk parity (id + parity; the two are never more than a chunk apart):
//   sReady(c)  state -> output  S^T of chunk c is in image c % 2
//   vReady(c)  state -> output  V'^T of chunk c is in image c % 2
//   done(c)    output -> state  chunk c's images are read
//   aDone(c)   state -> output  the state warpgroup is done with chunk c's
//                               stage (the output warpgroup refills it)
enum WarpgroupBarrier : int64_t { kStateOnly = 1, kWgSReady = 2, kWgVReady = 4, kWgDone = 6,
                                  kWgADone = 8 };

void WgmmaRecurBuilder::copyStage(const RecurWarpgroupSmem &L, const RecurRing &ring, Value base,
                               const RecurSequence &q, Value c, bool rawQK, Value tma,
                               bool rawW) {
  int64_t C = s.chunk, K = s.k, BV = plan.valueTile;
  bool kda = s.rule == Rule::kda;
  Type i8 = b.getI8Type();
  auto stagePtr = [&](Value c, int64_t at) {
    return gep(base, i8, add(cI32(at), mul(ringSlot(ring, c), cI32(L.stage))));
  };
  Value ch = chunkHead(c, q.hv);
  std::array<int64_t, 6> perChunk = prefillChunkRegionBytes(s);
  auto from = [&](int64_t which) {
    return gep(workRegion(which), i8, mul(ch, cI64(perChunk[which - 1])));
  };
  // rawQK: no P (the output warpgroup computes it), but G_last, the
  // factors and P's inputs (rawPInputBytes) after them.
  int64_t pOff = rawQK ? C * C * 2 : 0, kBytes = C * K * 2,
          pBytes = rawQK ? pGLastBytes(C) - pOff + rawFactorBytes(C) : pGLastBytes(C),
          pInBytes = rawQK ? rawPInputBytes(C) : 0, uBytes = C * BV * 2;
  Value bar = gep(base, i64, ringSlot(ring, c));
  if (plan.chunkFlags())
    awaitChunk(ch); // overlapped: chunks may still be computing this chunk
  int64_t wBytes = rawW ? C * C * 2 : kBytes; // A_w's image instead of W's
  Value bytes = cI32(wBytes + (rawQK ? 0 : 2 * kBytes) + pBytes + pInBytes + uBytes +
                     (kda ? K * 4 : 0));
  if (tma) // the raw q and k rows: whole boxes count, zero-filled rows too
    bytes = add(bytes, sel(tma, cI32(2 * kBytes), cI32(0)));
  mbarArriveExpect(bar, bytes);
  if (tma)
    ifThen(tma, [&] {
      // Box {64 columns, 1 head, C tokens} from the chunk's first token
      // (a whole chunk: the caller copies a partial one by cp.async): one
      // swizzled [C][64] block of the image per 64 columns, as the cp.async
      // form lays them out.
      Value t0 = toI32(chunkTokens(c, ring.c0, q.bos, q.eos).first);
      tensorCopyImage(stagePtr(c, L.qgb), pQMap, keyHead(q.hv), t0, K, bar);
      tensorCopyImage(stagePtr(c, L.kd), pKMap, keyHead(q.hv), t0, K, bar);
    });
  bulkCopy(stagePtr(c, L.wb), from(2), wBytes, bar);
  if (!rawQK) {
    bulkCopy(stagePtr(c, L.kd), from(5), kBytes, bar);
    bulkCopy(stagePtr(c, L.qgb), from(4), kBytes, bar);
  }
  bulkCopy(stagePtr(c, L.pb + pOff), gep(from(6), i8, cI64(pOff)), pBytes, bar);
  if (rawQK)
    bulkCopy(stagePtr(c, L.pb + pOff + pBytes), from(6), pInBytes, bar);
  // U in 16-column tiles: the V tile's are one block at column v0.
  bulkCopy(stagePtr(c, L.ub), gep(from(3), opType, mul(toI64(q.v0), cI64(C))), uBytes, bar);
  if (kda)
    bulkCopy(stagePtr(c, L.gl), from(1), K * 4, bar);
}

void WgmmaRecurBuilder::initRingBarriers(Value base, Value arrivals) {
  if (!arrivals)
    arrivals = cI32(1);
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    for (int64_t i = 0; i < 3; ++i)
      mbarInit(gep(base, i64, cI32(i)), arrivals);
    mbarInitFence();
  });
  barrier(); // the mbarriers are initialised
}

void WgmmaRecurBuilder::fillRing(const RecurRing &ring, Value c1,
                              function_ref<void(Value)> copies) {
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    for (int64_t i = 0; i < 3; ++i) {
      Value c = add(ring.c0, cI32(i));
      ifThen(andI(cmp(arith::CmpIPredicate::slt, cI32(i), ring.stages),
                  cmp(arith::CmpIPredicate::slt, c, c1)),
             [&] { copies(c); });
    }
  });
}

void WgmmaRecurBuilder::syncLastRounds(int64_t id, Value c0, Value c1, int64_t threads) {
  ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] {
    Value last = sub(c1, cI32(1));
    ifThen(cmp(arith::CmpIPredicate::sgt, last, c0), [&] {
      namedSync(add(cI32(id), remu(sub(sub(last, c0), cI32(1)), cI32(2))), threads);
    });
    namedSync(add(cI32(id), remu(sub(last, c0), cI32(2))), threads);
  });
}

namespace {
/// RecurForm::Warpgroup.
class RecurWarpgroupBuilder : public WgmmaRecurBuilder {
public:
  using WgmmaRecurBuilder::WgmmaRecurBuilder;
  void build(const RecurSequence &q);
};
} // namespace

void mlir::delta::prefill::buildRecurWarpgroup(const PrefillEmitter &e, const RecurSequence &q) {
  RecurWarpgroupBuilder(e).build(q);
}

void RecurWarpgroupBuilder::build(const RecurSequence &q) {
  int64_t C = s.chunk, K = s.k, BV = plan.valueTile;
  RecurWarpgroupSmem L(s, BV);
  int64_t nT = BV / 8, mBlocks = K / 64, both = 256;
  bool kda = s.rule == Rule::kda, gated = s.rule == Rule::gated;
  Type i8 = b.getI8Type();
  const uint64_t kMajor = wgmmaKMajor, mnMajor = wgmmaDescHigh(C * 128, 1024);

  Value wl = remu(warp, cI32(4)); // the warp in its warpgroup
  Value base, aligned;
  std::tie(base, aligned) = alignedSmem();

  // The ring, as in the mma.sync form.
  Value c0 = q.c0, c1 = q.c1;
  RecurRing ring = recurRing(L.total, L.stage, c0);
  Value stages = ring.stages;
  auto slotOfChunk = [&](Value c) { return ringSlot(ring, c); };
  auto phaseOf = [&](Value c) { return ringPhase(ring, c); };
  auto stageOff = [&](Value c, int64_t at) { return add(cI32(at), mul(slotOfChunk(c), cI32(L.stage))); };
  auto stagePtr = [&](Value c, int64_t at) { return gep(base, i8, stageOff(c, at)); };
  auto stageAddr = [&](Value c, int64_t at) { return add(aligned, stageOff(c, at)); };
  auto barOf = [&](Value c) { return gep(base, i64, slotOfChunk(c)); };

  auto copies = [&](Value c) { copyStage(L, ring, base, q, c); };

  // Stores accumulator blocks (64 rows each, BV columns) transposed as the
  // swizzled K-major B image at shared address `img`: block mb's rows are
  // the columns of the [BV][64] image mb (BV * 128 bytes apart).
  // stmatrix.trans writes an 8x8 tile's column as one 16-byte image row;
  // lane l gives the address of row l % 8 of tile l / 8 of the four.
  auto storeTransposed = [&](ArrayRef<Value> acc, int64_t blocks, Value img) {
    Value r = remu(lane, cI32(8)), mi = divu(lane, cI32(8));
    for (int64_t mb = 0; mb < blocks; ++mb)
      for (int64_t j0 = 0; j0 < nT; j0 += 2) {
        // Tile i of the four: columns 8 (j0 + i / 2) .., rows 8 (i % 2) ..
        // of this warp's 16.
        Value v = add(mul(add(cI32(j0), divu(mi, cI32(2))), cI32(8)), r);
        Value group16 = arith::XOrIOp::create(b, add(mul(wl, cI32(2)), remu(mi, cI32(2))), r);
        Value addr = add(img, add(cI32(mb * BV * 128), add(mul(v, cI32(128)), mul(group16, cI32(16)))));
        SmallVector<Value> ops{addr};
        for (int64_t i = 0; i < 4; ++i) {
          int64_t at = mb * nT * 4 + 4 * (j0 + i / 2) + 2 * (i % 2);
          ops.push_back(packI32(acc[at], acc[at + 1]));
        }
        stmatrix(ops[0], ArrayRef<Value>(ops).drop_front(), /*trans=*/true);
      }
  };
  auto sImage = [&](Value which) { return add(aligned, add(cI32(L.st), mul(which, cI32(L.sBytes)))); };
  auto vImage = [&](Value which) { return add(aligned, add(cI32(L.vn), mul(which, cI32(L.vBytes)))); };
  auto barrierId = [&](int64_t base, Value parity) { return add(cI32(base), parity); };

  initRingBarriers(base);
  auto roles = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, warp, cI32(4)), true);

  // The state warpgroup: V' = U - W S and S = e^G_last S + Kd^T V', chunk
  // after chunk, the state in its accumulators.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    int64_t sRegs = mBlocks * nT * 4;
    SmallVector<Value> S = initialStateOf(q, sRegs, [&](auto element) {
      for (int64_t mb = 0; mb < mBlocks; ++mb)
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t e = 0; e < 4; ++e)
            element(add(cI32(64 * mb), wgRow(wl, e)), wgCol(j, e));
    });
    // A programmatic dependent of chunks: its results are read from here on.
    if (plan.gridDependency())
      waitForChunks();
    fillRing(ring, c1, copies);
    ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] {
      storeTransposed(S, mBlocks, sImage(cI32(0)));
      fenceProxyAsync();
      namedSync(cI32(kStateOnly), 128);
      namedArrive(barrierId(kWgSReady, cI32(0)), both);
    });
    // The thread's state elements, for the checkpoints.
    auto elements = [&](function_ref<void(Value, Value, Value)> store) {
      for (int64_t mb = 0; mb < mBlocks; ++mb)
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t e = 0; e < 4; ++e)
            store(S[mb * nT * 4 + 4 * j + e], add(cI32(64 * mb), wgRow(wl, e)), wgCol(j, e));
    };
    auto bind = [&](ValueRange carried) { S.assign(carried.begin(), carried.end()); };
    SmallVector<Value> last = chainLoop(q.checkpoint, c0, c1, S, bind, elements,
                                        [&](Value c, ValueRange carried) {
      bind(carried);
      Value parity = remu(sub(c, c0), cI32(2)), other = sub(cI32(1), parity);
      mbarWait(barOf(c), phaseOf(c));
      // V' = U - W S (U: [V tile / 16][C][16], read while W S runs).
      SmallVector<Value> vacc(nT * 4, cF32(0.0));
      Value wDesc = smemDesc(stageAddr(c, L.wb), kMajor), sDesc = smemDesc(sImage(parity), kMajor);
      wgFence(vacc);
      for (int64_t ks = 0; ks < K / 16; ++ks) {
        int64_t half = ks / 4, kk = ks % 4;
        wgmma(vacc, descPlus(wDesc, half * C * 128 + kk * 32), descPlus(sDesc, half * BV * 128 + kk * 32),
              /*accumulate=*/ks > 0, /*transA=*/false);
      }
      wgCommit();
      SmallVector<Value> u;
      {
        Value ub = stagePtr(c, L.ub);
        auto pairTy = VectorType::get({2}, opType);
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t h = 0; h < 2; ++h) {
            Value col = wgCol(j, 0), row = wgRow(wl, 2 * h);
            Value at = add(mul(divu(col, cI32(16)), cI32(C * 16)),
                           add(mul(row, cI32(16)), remu(col, cI32(16))));
            Value pair = LLVM::LoadOp::create(b, pairTy, gep(ub, opType, at), 4);
            u.push_back(toF32(elt(pair, 0)));
            u.push_back(toF32(elt(pair, 1)));
          }
      }
      Value decayLast = gated ? exp(load(f32, stagePtr(c, L.pb), cI32(C * C / 2), 4)) : Value();
      if (q.transfer) // a transfer tile (recur_cp): U = 0, V' = -W S
        for (Value &x : u)
          x = sel(q.transfer, cF32(0.0), x);
      wgWait(0, vacc);
      for (int64_t i = 0; i < nT * 4; ++i)
        vacc[i] = fsub(u[i], vacc[i]);
      // V'^T image `parity` was last read by chunk c - 2's output, which
      // the done round waited for during chunk c - 1.
      storeTransposed(vacc, 1, vImage(parity));
      fenceProxyAsync();
      namedSync(cI32(kStateOnly), 128); // the whole image, for this warpgroup's product
      namedArrive(barrierId(kWgVReady, parity), both);
      // S = e^G_last S + Kd^T V' (kda: row d decays by e^G_last[d]).
      for (int64_t mb = 0; mb < mBlocks && (gated || kda); ++mb)
        for (int64_t j = 0; j < nT; ++j)
          for (int64_t e = 0; e < 4; ++e) {
            Value decay = decayLast;
            if (kda)
              decay = load(f32, stagePtr(c, L.gl), add(cI32(64 * mb), wgRow(wl, e)), 4);
            Value &x = S[mb * nT * 4 + 4 * j + e];
            x = fmul(x, decay);
          }
      wgFence(S);
      Value kdDesc = smemDesc(stageAddr(c, L.kd), mnMajor), vDesc = smemDesc(vImage(parity), kMajor);
      for (int64_t mb = 0; mb < mBlocks; ++mb) {
        SmallVector<Value> block(S.begin() + mb * nT * 4, S.begin() + (mb + 1) * nT * 4);
        for (int64_t ks = 0; ks < C / 16; ++ks)
          wgmma(block, descPlus(kdDesc, mb * C * 128 + ks * 2048), descPlus(vDesc, ks * 32),
                /*accumulate=*/true, /*transA=*/true);
        std::copy(block.begin(), block.end(), S.begin() + mb * nT * 4);
      }
      wgCommit();
      wgWait(0, S);
      namedArrive(barrierId(kWgADone, parity), both); // chunk c's stage is read
      // The next S^T goes to image `other` once chunk c - 1's output has
      // read it.
      ifThen(cmp(arith::CmpIPredicate::slt, add(c, cI32(1)), c1), [&] {
        ifThen(cmp(arith::CmpIPredicate::sgt, c, c0),
               [&] { namedSync(barrierId(kWgDone, other), both); });
        storeTransposed(S, mBlocks, sImage(other));
        fenceProxyAsync();
        namedSync(cI32(kStateOnly), 128);
        namedArrive(barrierId(kWgSReady, other), both);
      });
      return S;
    });
    bind(last);
    syncLastRounds(kWgDone, c0, c1, both); // every done round completes
    auto ifWrite = scf::IfOp::create(b, q.writeOk, false);
    b.setInsertionPointToStart(ifWrite.thenBlock());
    for (int64_t mb = 0; mb < mBlocks; ++mb)
      for (int64_t j = 0; j < nT; ++j)
        for (int64_t e = 0; e < 4; ++e) {
          storeFinalOf(q, S[mb * nT * 4 + 4 * j + e], add(cI32(64 * mb), wgRow(wl, e)),
                       wgCol(j, e));
        }
  }

  // The output warpgroup: O = Qg S + P V' from the images the state
  // warpgroup leaves, the stores of O, and the ring's refills.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.elseBlock());
    if (plan.gridDependency()) // its refills read chunks' results
      waitForChunks();
    auto loop = scf::ForOp::create(b, c0, c1, cI32(1));
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    Value parity = remu(sub(c, c0), cI32(2));
    mbarWait(barOf(c), phaseOf(c)); // Qg and P have landed (for this proxy too)
    Value qDesc = smemDesc(stageAddr(c, L.qgb), kMajor), pDesc = smemDesc(stageAddr(c, L.pb), kMajor);
    Value sDesc = smemDesc(sImage(parity), kMajor), vDesc = smemDesc(vImage(parity), kMajor);
    SmallVector<Value> oacc(nT * 4, cF32(0.0));
    namedSync(barrierId(kWgSReady, parity), both);
    wgFence(oacc);
    for (int64_t ks = 0; ks < K / 16; ++ks) {
      int64_t half = ks / 4, kk = ks % 4;
      wgmma(oacc, descPlus(qDesc, half * C * 128 + kk * 32), descPlus(sDesc, half * BV * 128 + kk * 32),
            /*accumulate=*/ks > 0, /*transA=*/false);
    }
    wgCommit();
    namedSync(barrierId(kWgVReady, parity), both);
    for (int64_t ks = 0; ks < C / 16; ++ks)
      wgmma(oacc, descPlus(pDesc, ks * 32), descPlus(vDesc, ks * 32), true, false);
    wgCommit();
    wgWait(0, oacc);
    namedArrive(barrierId(kWgDone, parity), both);
    Value t0, rows;
    std::tie(t0, rows) = chunkTokens(c, c0, q.bos, q.eos);
    // o, or (recur_cp) a transfer tile's rows in the workspace.
    auto storePair = outputPairStore(q, c, t0, rows);
    for (int64_t j = 0; j < nT; ++j)
      for (int64_t h = 0; h < 2; ++h) {
        Value row = wgRow(wl, 2 * h), col = wgCol(j, 0);
        storePair(row, col, oacc[4 * j + 2 * h], oacc[4 * j + 2 * h + 1]);
      }
    // Both warpgroups are done with chunk c's stage: refill it with chunk
    // c + stages.
    namedSync(barrierId(kWgADone, parity), both);
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(128)), [&] {
      Value ahead = add(c, stages);
      ifThen(cmp(arith::CmpIPredicate::slt, ahead, c1), [&] { copies(ahead); });
    });
  }
}
