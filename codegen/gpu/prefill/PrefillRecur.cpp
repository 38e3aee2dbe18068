//===- PrefillRecur.cpp - the prefill recur kernel ---------------*- C++ -*-===//
//
// The state from chunk to chunk, per sequence, value head and V tile
// (PrefillKernel.h), as two warp roles handing shared memory over through
// named barriers (see the comment above the roles below).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillRecurForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;


// recur's products (the output warps', and the row-shared state warps' of
// K = 256; the register-resident state warps have their own, in
// PrefillRecurState.cpp) load their fragments up to 64 registers ahead of the
// mma.sync that use them (at V tile 16 every product's whole k range; at
// V tile 32, five of the eight k steps of W S and Qg S), and keep up to
// eight partial sums per warp (eight independent mma.sync chains, where
// one chain per tile waits out each mma.sync's latency): one block per SM
// leaves the registers. ptxas still interleaves loads and products, but
// further ahead than one k step (T = 32K recur 558 -> 513 us on the H200;
// the partial sums: V tile 32 recur 3.5 % faster). Where the state tile
// takes more than 32 registers per state thread (K = 256), half of each,
// so that nothing spills.
struct RecurProducts {
  int64_t prefetchRegs, accumulators;
};
static RecurProducts recurProducts(int64_t stateRegs) {
  return stateRegs <= 32 ? RecurProducts{64, 8} : RecurProducts{32, 4};
}

void PrefillEmitter::emitRecur() {
  int64_t V = s.v, BV = plan.valueTile;
  // One-dimensional grid, sequence-major: the blocks of the grid's first
  // sequence (all heads and V tiles) are dispatched first. That is the
  // longest sequence, and so on down (longestFirst: ranked by the warp with
  // the inline map, read from prep's order above it, up to prep's
  // threads): a long sequence's chain starts in the first wave instead of
  // the last wherever cu_seqlens lists it.
  int64_t tiles = V / BV;
  Value flat = blockId(gpu::Dimension::x);
  Value vt = remu(flat, cI32(tiles)), rest = divu(flat, cI32(tiles));
  ChunkMap map = chunkMap(arith::ConstantIntOp::create(b, 0, 1));
  Value position = divu(rest, param(pHV));
  Value hv = remu(rest, param(pHV)), n = longestFirst(map, position);
  Value v0 = mul(vt, cI32(BV));
  SequenceSlots slots = sequenceSlots(n, map.ok);
  Value inSlot = slots.inSlot, outSlot = slots.outSlot, skipped = slots.skipped,
        kept = slots.kept, readOk = slots.readOk, writeOk = slots.writeOk;
  // Tokens no sequence covers get o = 0: past cu_seqlens[N], or all of
  // them in a skipped call.
  zeroUncovered(coveredTokens(map));
  auto stateIndex = [&](Value slot, Value d, Value col) {
    return poolStateIndex(slot, hv, v0, d, col);
  };
  Value inlineMap = map.inlineMap, scan = map.scan;
  Value c0 = chunkOffsetOf(inlineMap, scan, n),
        c1 = chunkOffsetOf(inlineMap, scan, add(n, cI32(1)));
  Value bos, eos; // named values, not structured bindings: the lambda captures them
  std::tie(bos, eos) = sequenceBounds(map, n);
  // A skipped sequence runs no chunk; this block zeroes its share of o.
  ifThen(skipped, [&] { zeroSequence(bos, eos, hv, v0, BV); });
  Value c1Run = arith::SelectOp::create(b, skipped, c0, c1);
  CheckpointStore checkpoint = recurCheckpoints(
      CheckpointSite{n, position, hv, v0, c0, c1, c1Run, bos, eos, kept, map.ok});
  c1 = c1Run;
  RecurSequence seq{hv,     v0,      c0,      c1,         bos,       eos,
                    readOk, writeOk, inSlot, outSlot, stateIndex, checkpoint};
  // One builder per recur form (PrefillRecurForms.h).
  switch (plan.recur) {
  case RecurForm::Transposed:
  case RecurForm::TransposedRawQK:
  case RecurForm::TransposedOverlap:
  case RecurForm::TransposedShared:
    return buildRecurTransposed(*this, seq);
  case RecurForm::Warpgroup:
    return buildRecurWarpgroup(*this, seq);
  case RecurForm::SharedRows:
  case RecurForm::RegisterState:
    return buildRecurRows(*this, seq);
  }
}

SequenceSlots PrefillEmitter::sequenceSlots(Value n, Value mapOk) {
  // Slots: in_idx / out_idx (null: row n; out null: the slot read).
  // Negative = padding (no read / no write); >= slots raises the flag.
  auto slotOf = [&](Value idx, Value fallback) {
    auto r = scf::IfOp::create(b, TypeRange{i64}, isNull(idx), true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(r.thenBlock());
    scf::YieldOp::create(b, fallback);
    b.setInsertionPointToStart(r.elseBlock());
    // int64 index arrays (bit 1 of cu_is_i64) are read as int64, never narrowed.
    Value wide = cmp(arith::CmpIPredicate::ne, andI(param(pCuIsI64), cI32(2)), cI32(0));
    auto read = scf::IfOp::create(b, TypeRange{i64}, wide, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(read.thenBlock());
      scf::YieldOp::create(b, load(i64, idx, n, 8));
      b.setInsertionPointToStart(read.elseBlock());
      scf::YieldOp::create(b, toI64(load(i32, idx, n, 4)));
    }
    scf::YieldOp::create(b, read.getResult(0));
    return r.getResult(0);
  };
  Value inSlot = slotOf(param(pInIdx), toI64(n));
  Value outSlot = slotOf(param(pOutIdx), inSlot);
  auto usable = [&](Value slot, Value pool) {
    Value tooBig = andI(cmp(arith::CmpIPredicate::sge, slot, param(pSlots)), notNull(pool));
    ifThen(tooBig, [&] { raiseError(); });
    return andI(andI(cmp(arith::CmpIPredicate::sge, slot, cI64(0)),
                     cmp(arith::CmpIPredicate::slt, slot, param(pSlots))),
                notNull(pool));
  };
  // A pool index past the pool skips its sequence: no state read or
  // written, o = 0 for its tokens (below), as decode skips such a row.
  auto pastPool = [&](Value slot, Value pool) {
    return andI(cmp(arith::CmpIPredicate::sge, slot, param(pSlots)), notNull(pool));
  };
  Value skipped = orI(pastPool(inSlot, param(pInitial)), pastPool(outSlot, param(pFinal)));
  Value kept = arith::XOrIOp::create(b, skipped, arith::ConstantIntOp::create(b, 1, 1));
  // A skipped call (invalid cu_seqlens) reads and writes no state.
  Value readOk = andI(andI(usable(inSlot, param(pInitial)), mapOk), kept);
  Value writeOk = andI(andI(usable(outSlot, param(pFinal)), mapOk), kept);
  return {inSlot, outSlot, skipped, kept, readOk, writeOk};
}

Value PrefillEmitter::poolStateIndex(Value slot, Value hv, Value v0, Value d, Value col) {
  int64_t K = s.k, V = s.v;
  // Slots slot_stride elements apart (a slot may hold more than one
  // state: vLLM's hybrid cache), heads K * V apart within one.
  Value head = add(mul(slot, param(pSlotStride)), mul(toI64(hv), cI64(K * V)));
  Value vcol = toI64(add(v0, col));
  return add(head, s.layout == StateLayout::vk ? add(mul(vcol, cI64(K)), toI64(d))
                                               : add(mul(toI64(d), cI64(V)), vcol));
}

void mlir::delta::prefill::buildRecurRows(const PrefillEmitter &e, const RecurSequence &q) {
  RecurRowsBuilder(e).build(q);
}

void RecurRowsBuilder::build(const RecurSequence &q) {
  int64_t C = s.chunk, K = s.k, V = s.v, BV = plan.valueTile;
  RecurSmem L(s, BV, plan.registerState());
  // Registers of the state tile per state thread where the state warps
  // share it (with the register-resident state, the output warps hold no
  // state: the full budget).
  RecurProducts products = recurProducts(
      plan.registerState() ? 0 : K * BV / (plan.stateWarps * 32));
  Value hv = q.hv, v0 = q.v0, c0 = q.c0, c1 = q.c1, bos = q.bos, eos = q.eos;
  Value readOk = q.readOk, writeOk = q.writeOk, inSlot = q.inSlot, outSlot = q.outSlot;
  const auto &stateIndex = q.stateIndex;
  Value st = region(L.st), vn = region(L.vn);
  // The pipeline depth from the launch's dynamic shared memory: 2 stages,
  // 3 where the host granted one more, or 1 where it gave one less so that
  // two blocks share an SM (many blocks: the other block hides the loads).
  RecurRing ring = recurRing(L.total, L.stage, c0);
  Value deep = ring.deep, single = ring.single, stages = ring.stages;
  // Chunk c's operands go to stage ringSlot(c): as one cp.async group per
  // thread, or (sm_90+) W, Kd, Qg and P as four bulk copies by one thread
  // that complete on the stage's mbarrier, the U tile and G_last still by
  // cp.async. A bulk copy moves a whole tile with one instruction: the
  // output warps no longer issue ~30 copies each per chunk (varlen recur
  // 6 % faster on the H200).
  auto slotOfChunk = [&](Value c) { return ringSlot(ring, c); };
  auto stageAt = [&](Value c, int64_t at) {
    return gep(region(at), b.getI8Type(), mul(slotOfChunk(c), cI32(L.stage)));
  };
  // Bulk copies: stage s completes on mbarrier s (ringPhase).
  bool bulk = plan.bulkCopies();
  auto barOf = [&](Value c) { return gep(region(L.mbar), i64, slotOfChunk(c)); };
  auto phaseOf = [&](Value c) { return ringPhase(ring, c); };
  int64_t kTile = C * (K + kRowPad), pTile = C * (C + kRowPad); // padded rows
  auto copies = [&](Value c) {
    Value ch = chunkHead(c, hv);
    Value from[] = {gep(workRegion(2), opType, mul(ch, cI64(kTile))),
                    gep(workRegion(5), opType, mul(ch, cI64(kTile))),
                    gep(workRegion(4), opType, mul(ch, cI64(kTile))),
                    gep(workRegion(6), opType, mul(ch, cI64(pTile)))};
    int64_t at[] = {L.wb, L.kd, L.qgb, L.pb}, elems[] = {kTile, kTile, kTile, pTile};
    if (bulk) {
      // One thread moves the four whole tiles.
      ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
        Value bar = barOf(c);
        mbarArriveExpect(bar, (3 * kTile + pTile) * 2);
        for (int t = 0; t < 4; ++t)
          bulkCopy(stageAt(c, at[t]), from[t], elems[t] * 2, bar);
      });
    } else {
      for (int t = 0; t < 4; ++t)
        copyBlock(stageAt(c, at[t]), from[t], cI64(0), elems[t]);
    }
    copyTile(stageAt(c, L.ub), workRegion(3), add(mul(ch, cI64(C * V)), toI64(v0)), C, BV, V);
    if (s.rule == Rule::kda) // e^G_last per channel: K floats, 16 bytes a copy
      copyBlock(stageAt(c, L.gl), gep(workRegion(1), f32, mul(ch, cI64(K))), cI64(0), 2 * K);
    else
      ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
        cpAsync4(stageAt(c, L.gl), gep(workRegion(1), f32, ch));
      });
  };
  // Chunk c's bulk copies have landed (the cp.async ones are waited for by
  // their groups).
  auto waitBulk = [&](Value c) {
    if (bulk)
      mbarWait(barOf(c), phaseOf(c));
  };
  if (bulk) {
    ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
      for (int64_t i = 0; i < 3; ++i)
        mbarInit(gep(region(L.mbar), i64, cI32(i)), 1);
      mbarInitFence();
    });
    barrier();
  }
  // S and V' in 16 bits (the operand type), row-major: the B operands of
  // Qg S and P V' (and of W S and Kd^T V' where the state warps share the
  // state), transposed with the register-resident state. Copy `which` (0
  // or 1) of each.
  int64_t sBytes = (plan.registerState() ? BV * (K + kRowPad) : K * (BV + kRowPad)) * 2,
          vBytes = (plan.registerState() ? BV * (C + kRowPad) : C * (BV + kRowPad)) * 2;
  auto sCopy = [&](Value which) { return gep(st, b.getI8Type(), mul(which, cI32(sBytes))); };
  auto vCopy = [&](Value which) { return gep(vn, b.getI8Type(), mul(which, cI32(vBytes))); };

  // Two warp roles, so the serial chain of states never waits for outputs:
  // the state warps run V' = U - W S and S = e^G_last S + Kd^T V' chunk
  // after chunk, the state in their registers (recurStateRegisters or
  // recurStateShared); the output warps keep the
  // operand ring filled and compute O = Qg S + P V' from the S and V' the
  // state warps leave in shared memory. They hand over through named
  // barriers, one per signal and chunk parity (the two sides are never
  // more than one chunk apart, so a barrier is never reused before its
  // previous round completes); each round counts every thread of the block:
  //   landed(c)  output -> state   chunk c's operands are in shared memory
  //   sReady(c)  state -> output   S of chunk c is in copy c % 2
  //   vReady(c)  state -> output   V' of chunk c is in copy c % 2
  //   done(c)    output -> state   chunk c's S and V' copies are read
  //   aDone(c)   state -> output   chunk c's stage is read (may be refilled)
  int64_t all = plan.threads;
  auto barrierId = [&](int64_t base, Value parity) { return add(cI32(base), parity); };
  RecurFrame frame{c0, c1, readOk, writeOk, inSlot, outSlot, stateIndex, stageAt,
                   waitBulk, sCopy, vCopy, L.wb, L.kd, L.ub, L.gl,
                   products.prefetchRegs, products.accumulators, q.checkpoint, &q};
  assert((!q.transfer || plan.registerState()) &&
         "recur_cp's hooks are the register-resident state's (K <= 128)");
  auto roles = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, warp, cI32(plan.stateWarps)), true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.thenBlock());
    WarpRole role(*this, 0, plan.stateWarps);
    if (plan.registerState())
      recurStateRegisters(frame);
    else
      recurStateShared(frame);
  }

  // Output warps.
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(roles.elseBlock());
    WarpRole role(*this, plan.stateWarps, plan.outputWarps);
    // Every thread of the role commits one group per chunk (empty past the
    // last), so with chunks c .. c + k issued, "chunk c has landed" is "at
    // most k groups pending".
    auto waitGroups = [&](Value threeStages, int64_t pendingIfThree, int64_t pendingElse) {
      auto ifThree = scf::IfOp::create(b, threeStages, true);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifThree.thenBlock());
      waitCopyGroups(pendingIfThree);
      b.setInsertionPointToStart(ifThree.elseBlock());
      waitCopyGroups(pendingElse);
    };
    // A programmatic dependent of chunks: wait for its results (and their
    // visibility) before the first copy of them. The state warps need not:
    // they read only what these copies bring, and load the initial state
    // meanwhile.
    if (plan.gridDependency())
      waitForPrerequisiteGrid();
    // Prologue: every stage filled (chunks c0 .. c0 + stages - 1).
    for (int64_t i = 0; i < 3; ++i)
      ifThen(cmp(arith::CmpIPredicate::slt, cI32(i), stages), [&] {
        Value c = add(c0, cI32(i));
        ifThen(cmp(arith::CmpIPredicate::slt, c, c1), [&] { copies(c); });
        commitCopies();
      });
    ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] {
      waitGroups(deep, 2, 0); // 2 stages: 1 pending, but nothing waits on it
      waitBulk(c0);
      namedArrive(barrierId(kLanded, cI32(0)), all);
    });
    auto loop = scf::ForOp::create(b, c0, c1, cI32(1));
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c = loop.getInductionVar();
    Value parity = remu(sub(c, c0), cI32(2)), other = sub(cI32(1), parity);
    Value more = cmp(arith::CmpIPredicate::slt, add(c, cI32(1)), c1);
    // Chunk c + 1 is handed over as soon as it can have landed, so the
    // state warps' next step need not wait for this chunk's output: with 3
    // stages first (it was issued two steps ago), with 2 after the output
    // (it was issued at the end of the previous step), with 1 after the
    // refill below (it is the refill).
    Value twoStages = andI(notI(deep), notI(single));
    auto handOver = [&](Value when, int64_t pending) {
      ifThen(andI(when, more), [&] {
        waitCopyGroups(pending);
        waitBulk(add(c, cI32(1)));
        namedArrive(barrierId(kLanded, other), all);
      });
    };
    handOver(deep, 1);
    Value t0, rows;
    std::tie(t0, rows) = chunkTokens(c, c0, bos, eos);
    // chunk_output: O = Qg S + P V' (the S chunk c started from).
    SmallVector<Frag> acc = zeroFrags(C, BV);
    namedSync(barrierId(kSReady, parity), all);
    // S and V' as B operands: [K][V tile] and [C][V tile], or transposed.
    bool tr = plan.registerState();
    mma(Operand{stageAt(c, L.qgb), K + kRowPad},
        Operand{sCopy(parity), tr ? K + kRowPad : BV + kRowPad, /*kRows=*/!tr}, C, BV, K, acc,
        products.accumulators, products.prefetchRegs);
    namedSync(barrierId(kVReady, parity), all);
    mma(Operand{stageAt(c, L.pb), C + kRowPad},
        Operand{vCopy(parity), tr ? C + kRowPad : BV + kRowPad, /*kRows=*/!tr}, C, BV, C, acc,
        products.accumulators, products.prefetchRegs);
    namedArrive(barrierId(kDone, parity), all);
    // o, or (recur_cp) a transfer tile's rows in the workspace.
    forEachPair(C, BV, acc, outputPairStore(q, c, t0, rows));
    handOver(twoStages, 0);
    // Both roles are done with chunk c's stage: refill it with chunk
    // c + stages.
    namedSync(barrierId(kADone, parity), all);
    Value ahead = add(c, stages);
    ifThen(cmp(arith::CmpIPredicate::slt, ahead, c1), [&] { copies(ahead); });
    commitCopies();
    handOver(single, 0);
  }
}

void RecurRowsBuilder::handOverNextS(const RecurFrame &f, Value c, Value other,
                                   function_ref<void(Value)> storeS) {
  // The other S copy holds chunk c - 1's state until its output is done.
  ifThen(cmp(arith::CmpIPredicate::sgt, c, f.c0),
         [&] { namedSync(add(cI32(kDone), other), plan.threads); });
  ifThen(cmp(arith::CmpIPredicate::slt, add(c, cI32(1)), f.c1), [&] {
    storeS(other);
    namedArrive(add(cI32(kSReady), other), plan.threads);
  });
}

// The state warps share the [K, V tile] state by rows; W S needs all of it,
// so each chunk hands S and V' through shared memory between them.
void RecurRowsBuilder::recurStateShared(const RecurFrame &f) {
  int64_t C = s.chunk, K = s.k, BV = plan.valueTile, all = plan.threads,
          half = plan.stateWarps;
  Value c0 = f.c0, c1 = f.c1, readOk = f.readOk, writeOk = f.writeOk, inSlot = f.inSlot,
        outSlot = f.outSlot;
  const auto &stateIndex = f.stateIndex;
  const auto &stageAt = f.stageAt;
  const auto &waitBulk = f.waitBulk;
  const auto &sCopy = f.sCopy;
  const auto &vCopy = f.vCopy;
  auto barrierId = [&](int64_t base, Value parity) { return add(cI32(base), parity); };
  struct { int64_t wb, kd, ub, gl; } L{f.wb, f.kd, f.ub, f.gl};
  RecurProducts products{f.prefetchRegs, f.accumulators};
  // The state tile [K, BV] as mma accumulators.
  SmallVector<Frag> S = zeroFrags(K, BV);
  {
    SmallVector<Value> read = initialStateOrZero(readOk, S.size() * 4, [&](auto &vals) {
      forEachElement(K, BV, S, [&](Value d, Value col, Value) {
        vals.push_back(loadInitialState(stateIndex(inSlot, d, col)));
      });
    });
    for (size_t i = 0; i < S.size() * 4; ++i)
      S[i / 4].c[i % 4] = read[i];
  }
  auto storeS = [&](Value which) {
    Value at = sCopy(which);
    forEachPair(K, BV, S, [&](Value d, Value col, Value x0, Value x1) {
      storeVec(pack2(x0, x1, opType), at, opType, add(mul(d, cI32(BV + kRowPad)), col), 4);
    });
  };
  ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] {
    storeS(cI32(0));
    namedArrive(barrierId(kSReady, cI32(0)), all);
  });
  // The thread's state elements, for the checkpoints.
  auto elements = [&](function_ref<void(Value, Value, Value)> store) {
    forEachElement(K, BV, S, [&](Value d, Value col, Value x) { store(x, d, col); });
  };
  SmallVector<Value> init;
  for (Frag &t : S)
    init.append(t.c, t.c + 4);
  auto bind = [&](ValueRange carried) {
    for (size_t i = 0; i < S.size() * 4; ++i)
      S[i / 4].c[i % 4] = carried[i];
  };
  SmallVector<Value> last = chainLoop(f.checkpoint, c0, c1, init, bind, elements,
                                      [&](Value c, ValueRange carried) {
    bind(carried);
    Value parity = remu(sub(c, c0), cI32(2)), other = sub(cI32(1), parity);
    // Also a barrier of the state warps: every one has stored S.
    namedSync(barrierId(kLanded, parity), all);
    waitBulk(c); // complete already: it orders the copies' writes first
    Value wb = stageAt(c, L.wb), kd = stageAt(c, L.kd), ub = stageAt(c, L.ub),
          gl = stageAt(c, L.gl), vc = vCopy(parity);
    Value decayLast = s.rule == Rule::gated ? exp(load(f32, gl, cI32(0), 4)) : cF32(1.0);
    // chunk_residual: V' = U - W S.
    {
      SmallVector<Frag> acc = zeroFrags(C, BV);
      mma(Operand{wb, K + kRowPad}, Operand{sCopy(parity), BV + kRowPad, /*kRows=*/true}, C, BV, K,
          acc, products.accumulators, products.prefetchRegs);
      forEachPair(C, BV, acc, [&](Value i, Value col, Value x0, Value x1) {
        Value at = add(mul(i, cI32(BV + kRowPad)), col);
        Value u = LLVM::LoadOp::create(b, VectorType::get({2}, opType), gep(ub, opType, at), 4);
        Value u0 = toF32(elt(u, 0));
        Value u1 = toF32(elt(u, 1));
        storeVec(pack2(fsub(u0, x0), fsub(u1, x1), opType), vc, opType, at, 4);
      });
    }
    namedArrive(barrierId(kVReady, parity), all);
    namedSync(cI32(kState), half * 32);
    // chunk_state_step: S = e^G_last S + Kd^T V' (kda: row d of S decays
    // by e^G_last[d]).
    for (auto [r, t] : llvm::enumerate(S)) {
      Value decay[2] = {decayLast, decayLast}; // rows g and g + 8
      if (s.rule == Rule::kda) {
        Value row0 = tileOrigin(K, BV, r).first;
        for (int64_t h = 0; h < 2; ++h)
          decay[h] = load(f32, gl, add(row0, add(group, cI32(8 * h))), 4);
      }
      for (int e = 0; e < 4; ++e)
        t.c[e] = fmul(t.c[e], decay[e / 2]);
    }
    mma(Operand{kd, K + kRowPad, /*kRows=*/true}, Operand{vc, BV + kRowPad, /*kRows=*/true}, K, BV,
        C, S, products.accumulators, products.prefetchRegs);
    namedArrive(barrierId(kADone, parity), all);
    handOverNextS(f, c, other, storeS);
    SmallVector<Value> nextS;
    for (Frag &t : S)
      nextS.append(t.c, t.c + 4);
    return nextS;
  });
  bind(last);
  // The last chunk's done round (every round completes).
  ifThen(cmp(arith::CmpIPredicate::slt, c0, c1), [&] {
    namedSync(barrierId(kDone, remu(sub(sub(c1, c0), cI32(1)), cI32(2))), all);
  });
  auto ifWrite = scf::IfOp::create(b, writeOk, false);
  b.setInsertionPointToStart(ifWrite.thenBlock());
  forEachElement(K, BV, S, [&](Value d, Value col, Value x) {
    storeFinalState(x, [&] { return stateIndex(outSlot, d, col); });
  });
}

RecurRing PrefillEmitter::recurRing(int64_t total, int64_t stage, Value c0) {
  Value dynSmem = LLVM::InlineAsmOp::create(
                      b, i32, ValueRange{}, "mov.u32 $0, %dynamic_smem_size;", "=r",
                      /*has_side_effects=*/false, /*is_align_stack=*/false,
                      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
                      .getResult(0);
  Value deep = cmp(arith::CmpIPredicate::sge, dynSmem, cI32(total + stage));
  Value single = cmp(arith::CmpIPredicate::slt, dynSmem, cI32(total));
  return {deep, single, sel(deep, cI32(3), sel(single, cI32(1), cI32(2))), c0};
}
