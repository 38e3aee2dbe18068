//===- PrefillRecurState.cpp - recur's register-resident state ---*- C++ -*-===//
//
// recur's state warps when each owns 16 columns of the V tile for all K
// rows (RecurForm::RegisterState). The warp keeps its slice of the state
// transposed, S^T [16 x K], as mma accumulators, and computes
//
//   V'^T = U^T - S^T W^T          (A = S^T from its own accumulators)
//   S^T  = e^G_last S^T + V'^T Kd (A = V'^T from its own accumulators)
//
// An accumulator tile (row g, columns 2t, 2t + 1) is exactly an A fragment
// of the next mma.m16n8k16 when the accumulator's columns are the next
// product's reduction index, so neither product's result leaves the
// registers: the chain of states from chunk to chunk has no shared-memory
// round trip and no barrier on it, where the row-shared form
// (recurStateShared) stores S and V' and synchronises the state warps
// twice per chunk. The warp still stores both, transposed and in 16 bits,
// for the output warps (Qg S, P V'), off the chain.
//
// It is also recur_cp's form outside sm_90a (PrefillSegments.cpp): a
// transfer tile starts from the identity's columns with U read as zero,
// and its final state and outputs go where RecurSequence says.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillRecurForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

// Fragments of B loaded ahead in the state warps' products: two k steps of
// W^T (16 registers each at C = 64), one of Kd (32).
static constexpr int64_t kStatePrefetchRegs = 32;

void RecurRowsBuilder::recurStateRegisters(const RecurFrame &f) {
  int64_t C = s.chunk, K = s.k, BV = plan.valueTile, all = plan.threads;
  int64_t tilesS = K / 8, tilesV = C / 8;
  auto barrierId = [&](int64_t base, Value parity) { return add(cI32(base), parity); };
  // This warp's columns of the V tile; S^T tile j holds, at element e,
  // row (V column) vw + g (+ 8 for e >= 2) and column (K row) 8j + 2t (+1).
  Value vw = mul(warp, cI32(16));
  auto vOf = [&](int64_t e) { return add(vw, add(group, cI32(e >= 2 ? 8 : 0))); };
  auto colOf = [&](int64_t j, int64_t e) {
    return add(cI32(8 * j), add(mul(quad, cI32(2)), cI32(e % 2)));
  };
  const RecurSequence &q = *f.seq;
  SmallVector<Frag> S(tilesS);
  {
    // The pool's state, zeros, or (recur_cp's transfer tiles) the
    // identity's columns.
    SmallVector<Value> read = initialStateOf(q, tilesS * 4, [&](auto element) {
      for (int64_t j = 0; j < tilesS; ++j)
        for (int64_t e = 0; e < 4; ++e)
          element(colOf(j, e), vOf(e));
    });
    for (int64_t i = 0; i < tilesS * 4; ++i)
      S[i / 4].c[i % 4] = read[i];
  }
  // S^T in 16 bits, pair (c0, c1) or (c2, c3) of tile j at 2j + h: packed
  // once per chunk, both the next W product's A fragments (pairsToA) and
  // what goes to copy `which` ([V tile][K + pad]) for Qg S.
  auto packS = [&] {
    SmallVector<Value> packed;
    for (int64_t j = 0; j < tilesS; ++j)
      for (int64_t h = 0; h < 2; ++h)
        packed.push_back(packI32(S[j].c[2 * h], S[j].c[2 * h + 1]));
    return packed;
  };
  auto storeS = [&](Value which, ArrayRef<Value> packed) {
    Value at = f.sCopy(which);
    for (int64_t j = 0; j < tilesS; ++j)
      for (int64_t h = 0; h < 2; ++h)
        store(packed[2 * j + h], at,
              divu(add(mul(vOf(2 * h), cI32(K + kRowPad)), colOf(j, 0)), cI32(2)), 4);
  };
  // The thread's state elements, for the checkpoints.
  auto elements = [&](function_ref<void(Value, Value, Value)> store) {
    for (int64_t j = 0; j < tilesS; ++j)
      for (int64_t e = 0; e < 4; ++e)
        store(S[j].c[e], colOf(j, e), vOf(e));
  };
  SmallVector<Value> pairs = packS();
  ifThen(cmp(arith::CmpIPredicate::slt, f.c0, f.c1), [&] {
    storeS(cI32(0), pairs);
    namedArrive(barrierId(kSReady, cI32(0)), all);
  });
  SmallVector<Value> init;
  for (Frag &t : S)
    init.append(t.c, t.c + 4);
  init.append(pairs);
  auto bind = [&](ValueRange carried) {
    for (int64_t i = 0; i < tilesS * 4; ++i)
      S[i / 4].c[i % 4] = carried[i];
    for (int64_t i = 0; i < tilesS * 2; ++i)
      pairs[i] = carried[tilesS * 4 + i];
  };
  SmallVector<Value> last = chainLoop(f.checkpoint, f.c0, f.c1, init, bind, elements,
                                      [&](Value c, ValueRange carried) {
    bind(carried);
    Value parity = remu(sub(c, f.c0), cI32(2)), other = sub(cI32(1), parity);
    namedSync(barrierId(kLanded, parity), all);
    f.waitBulk(c);
    Value wb = f.stageAt(c, f.wb), kd = f.stageAt(c, f.kd), ub = f.stageAt(c, f.ub),
          gl = f.stageAt(c, f.gl), vc = f.vCopy(parity);
    Value decayLast = s.rule == Rule::gated ? exp(load(f32, gl, cI32(0), 4)) : cF32(1.0);
    // U^T in accumulator layout, loaded before the product so that its
    // latency is off the chain: ldmatrix.trans of the [C][V tile] U tile,
    // matrices (t, vw), (t, vw + 8), (t + 8, vw), (t + 8, vw + 8) = tile
    // t / 8's (c0, c1) and (c2, c3), then tile t / 8 + 1's.
    SmallVector<Value> u;
    {
      Value r8 = remu(lane, cI32(8)), m = divu(lane, cI32(8));
      Value rowIn = add(mul(divu(m, cI32(2)), cI32(8)), r8);
      Value col = add(vw, mul(remu(m, cI32(2)), cI32(8)));
      for (int64_t t0 = 0; t0 < C; t0 += 16) {
        Value at = add(mul(add(cI32(t0), rowIn), cI32(BV + kRowPad)), col);
        auto r = ldsm(gep(ub, opType, toI64(at)), 4, /*trans=*/true);
        u.append(r.begin(), r.end());
      }
    }
    // chunk_residual: V'^T = U^T - S^T W^T (W stored [C][K]: B as [n][k]).
    SmallVector<std::array<Value, 4>> aS;
    for (int64_t ks = 0; ks < K / 16; ++ks)
      aS.push_back(pairsToA(pairs, ks));
    SmallVector<Frag> acc(tilesV);
    for (Frag &t : acc)
      for (Value &x : t.c)
        x = cF32(0.0);
    mmaRowBlock(aS, Operand{wb, K + kRowPad}, C, K, acc, kStatePrefetchRegs);
    // V'^T in 16 bits: stored for P V' and kept as the state step's A.
    auto vec2 = VectorType::get({2}, opType);
    SmallVector<Value> vPairs; // tile n: (c0, c1), (c2, c3)
    for (int64_t n = 0; n < tilesV; ++n)
      for (int64_t h = 0; h < 2; ++h) {
        Value uv = LLVM::BitcastOp::create(b, vec2, u[2 * n + h]);
        Value u0 = toF32(elt(uv, 0));
        Value u1 = toF32(elt(uv, 1));
        if (q.transfer) { // a transfer tile: U = 0, V'^T = -S^T W^T
          u0 = sel(q.transfer, cF32(0.0), u0);
          u1 = sel(q.transfer, cF32(0.0), u1);
        }
        Value p = packI32(fsub(u0, acc[n].c[2 * h]), fsub(u1, acc[n].c[2 * h + 1]));
        vPairs.push_back(p);
        store(p, vc, divu(add(mul(vOf(2 * h), cI32(C + kRowPad)), colOf(n, 0)), cI32(2)), 4);
      }
    namedArrive(barrierId(kVReady, parity), all);
    // chunk_state_step: S^T = e^G_last S^T + V'^T Kd (Kd stored [C][K]:
    // B with the reduction index as rows).
    // kda: column d of S^T (row d of S) decays by e^G_last[d].
    for (int64_t j = 0; j < tilesS; ++j) {
      Value decay[2] = {decayLast, decayLast};
      if (s.rule == Rule::kda)
        for (int64_t e = 0; e < 2; ++e)
          decay[e] = load(f32, gl, colOf(j, e), 4);
      for (int64_t e = 0; e < 4; ++e)
        S[j].c[e] = fmul(S[j].c[e], decay[e % 2]);
    }
    SmallVector<std::array<Value, 4>> aV;
    for (int64_t ks = 0; ks < C / 16; ++ks)
      aV.push_back(pairsToA(vPairs, ks));
    mmaRowBlock(aV, Operand{kd, K + kRowPad, /*kRows=*/true}, K, C, S, kStatePrefetchRegs);
    namedArrive(barrierId(kADone, parity), all);
    pairs = packS();
    handOverNextS(f, c, other, [&](Value which) { storeS(which, pairs); });
    SmallVector<Value> next;
    for (Frag &t : S)
      next.append(t.c, t.c + 4);
    next.append(pairs);
    return next;
  });
  bind(last);
  // The last chunk's done round (every round completes).
  ifThen(cmp(arith::CmpIPredicate::slt, f.c0, f.c1), [&] {
    namedSync(barrierId(kDone, remu(sub(sub(f.c1, f.c0), cI32(1)), cI32(2))), all);
  });
  auto ifWrite = scf::IfOp::create(b, f.writeOk, false);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  for (int64_t j = 0; j < tilesS; ++j)
    for (int64_t e = 0; e < 4; ++e)
      storeFinalOf(q, S[j].c[e], colOf(j, e), vOf(e));
}
