//===- PrefillSegments.cpp - exact intra-card context parallelism -*- C++ -*-===//
//
// The context-parallel prefill (docs/context-parallelism.md; issue 35):
// each sequence's chunks split into runs of L = ceil(longest / segments)
// chunks (segmentLength; a sequence no longer than L runs whole), which
// recur runs side by side instead of one after the other.
// Per value head, chunk c maps its entering state by S_{c+1} = M_c S_c + b_c
// (M_c = Diag(e^G_last) - Kd^T W, b_c = Kd^T U): the same recurrence on K
// more value columns, started from I with zero values, gives a segment's
// transfer M_seg, and its outputs on those columns are Q^_c = (Qg_c - P_c
// W_c) Mpre_c, the rows by which the segment's entering state S0 adds to
// its output: O_c = O0_c + Q^_c S0. Three kernels after chunks:
//
//   recur_cp    the transposed recur (PrefillRecurTransposed.cpp; kda: the
//               warpgroup recur, PrefillRecurWarpgroup.cpp; sm_80 and the
//               other targets: the mma.sync recur's register-resident
//               state, PrefillRecurState.cpp), one block
//               per (sequence, value head, segment, tile): V / tile value
//               tiles, and for every segment but the first K / tile
//               transfer tiles (RecurSequence::transfer). A value tile of
//               the first segment starts from the pool's state, of the
//               others from zero, and writes O0 to o; a transfer tile
//               writes Q^ (16-bit) to region 10; every tile leaves its
//               final state (b_seg, M_seg columns) in region 8 (f32).
//   cp_chain    one block per (sequence, value head, 4 columns of V):
//               S_start(s + 1) = M_s S_start(s) + b_s in f32 from the first
//               segment's final state, each S_start(s) left in region 9
//               (16-bit, the correction's operand), the last one the
//               sequence's final state in the pool.
//   cp_correct  one block per (chunk, value head), like chunks: a chunk of
//               a segment past the first adds Q^_c S_start(s) to its rows
//               of o (mma.sync).
//
// Across ranks (issue 36; docs/context-parallelism.md, "Across GPUs") the
// same three kernels run a sequence whose entering state another rank
// holds, in two calls told apart by cp_phase: phase 1 gives the first
// segment transfer tiles too (its value tiles start from zero) and makes
// cp_chain compose the call's transfer [b | M] into cp_transfer on K more
// columns; phase 2 starts cp_chain from initial_state (the entering state
// the caller folded from the other ranks' transfers) and corrects every
// segment, the first included.
//
// Exact: no truncation or decay threshold; the serial result up to
// rounding (the transfer and chain in f32, the correction's operands in
// 16 bits as every product of recur). The host decides the segments per
// call (deltac_prefill.cpp) and bounds N * HV * segments by
// deltac_abi::prefillSegmentSlots, the regions' size.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillRecurForms.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

namespace {
// Workspace regions (deltac_abi::prefillSegmentRegionBytes).
constexpr int64_t kTransfers = 8, kEntering = 9, kCorrection = 10;
} // namespace

void PrefillEmitter::emitRecurSegments() {
  assert((plan.warpgroupRecur() || plan.registerState()) &&
         "context parallelism is built on a wgmma recur or the register-resident state");
  int64_t C = s.chunk, K = s.k, V = s.v, BV = plan.valueTile;
  int64_t valueTiles = V / BV, tiles = valueTiles + K / BV;
  Value segments = param(pSegments);
  // One-dimensional grid, tile fastest, then segment, head and sequence
  // (longest first, as recur).
  Value flat = blockId(gpu::Dimension::x);
  Value tile = remu(flat, cI32(tiles)), rest = divu(flat, cI32(tiles));
  Value segment = remu(rest, segments);
  rest = divu(rest, segments);
  ChunkMap map = chunkMap(arith::ConstantIntOp::create(b, 0, 1));
  Value position = divu(rest, param(pHV)), hv = remu(rest, param(pHV));
  Value n = longestFirst(map, position);
  Value transfer = cmp(arith::CmpIPredicate::uge, tile, cI32(valueTiles));
  // A transfer tile copies U's first columns (read as zero).
  Value v0 = sel(transfer, cI32(0), mul(tile, cI32(BV)));
  Value m0 = mul(sub(tile, cI32(valueTiles)), cI32(BV));
  SequenceSlots slots = sequenceSlots(n, map.ok);
  zeroUncovered(coveredTokens(map));
  Value firstSegment = cmp(arith::CmpIPredicate::eq, segment, cI32(0));
  // The first segment starts from the known state: no transfer; in a
  // rank's phase 1 no state is known, and every segment has one.
  Value known = andI(firstSegment, notI(rankPhase(1)));
  Value c0 = chunkOffsetOf(map.inlineMap, map.scan, n),
        c1 = chunkOffsetOf(map.inlineMap, map.scan, add(n, cI32(1)));
  Value length = segmentLength(map);
  // A segment past the sequence's own is empty: nothing to run, and the
  // chain stops before its transfer.
  Value occupied = cmp(arith::CmpIPredicate::ult, segment, segmentsOf(c0, c1, length));
  ifThen(andI(occupied, notI(andI(transfer, known))), [&] {
    Value bos, eos;
    std::tie(bos, eos) = sequenceBounds(map, n);
    Value sc0 = minS(add(c0, mul(segment, length)), c1);
    Value sc1 = minS(add(sc0, length), c1);
    auto tokenOf = [&](Value c) { return minS(add(bos, mul(toI64(sub(c, c0)), cI64(C))), eos); };
    Value sbos = tokenOf(sc0), seos = tokenOf(sc1);
    // A skipped sequence: its value tiles zero their share of o.
    ifThen(andI(slots.skipped, notI(transfer)),
           [&] { zeroSequence(sbos, seos, hv, v0, BV); });
    Value sc1Run = sel(slots.skipped, sc0, sc1);
    Value readOk = andI(slots.readOk, andI(known, notI(transfer)));
    // Region 8: per (sequence, head, segment) b_seg, then M_seg
    // transposed (transferIndex): the chain reads M's column k across its
    // threads (one per row d), so a warp's load is one 128-byte line where
    // row-major M made it 32 lines.
    Value at = toI64(add(mul(add(mul(n, param(pHV)), hv), segments), segment));
    Value transfers = gep(workRegion(kTransfers), f32, cI64(0));
    Value correction = workRegion(kCorrection);
    auto stateIndex = [&](Value slot, Value d, Value col) {
      return poolStateIndex(slot, hv, v0, d, col);
    };
    auto storeFinal = [&](Value x, Value d, Value col) {
      Value c = toI64(add(sel(transfer, m0, v0), col));
      store(x, transfers, transferIndex(at, toI64(d), c, transfer, /*mTransposed=*/true), 4);
    };
    // o, or for a transfer tile Q^ [chunk, head][C][K] in region 10.
    auto outTile = [&](Value c, Value t0) -> std::tuple<Value, Value, Value> {
      Value ptrTo = LLVM::SelectOp::create(b, transfer, correction, param(pO));
      Value qAt = add(mul(chunkHead(c, hv), cI64(C * K)), toI64(m0));
      Value oAt = add(add(mul(t0, param(pOStride)), mul(toI64(hv), cI64(V))), toI64(v0));
      return {ptrTo, sel(transfer, qAt, oAt), sel(transfer, cI64(K), param(pOStride))};
    };
    CheckpointStore none = [](Value, StateElements) {};
    RecurSequence seq{hv,         v0,      sc0,          sc1Run,        sbos,       seos,
                      readOk,     cTrue(), slots.inSlot, slots.outSlot, stateIndex, none};
    seq.transfer = transfer;
    seq.m0 = m0;
    seq.storeFinal = storeFinal;
    seq.outTile = outTile;
    // sm_90a: the transposed recur (scalar gates), else the warpgroup
    // form (kda's per-channel decays: each state row decays by its own
    // factor, M's columns too). Other targets: the mma.sync recur with the
    // state in its warps' registers.
    if (plan.transposedRecur())
      buildRecurTransposed(*this, seq);
    else if (plan.warpgroupRecur())
      buildRecurWarpgroup(*this, seq);
    else
      buildRecurRows(*this, seq);
  });
}

Value PrefillEmitter::segmentLength(const ChunkMap &map) {
  auto longest = scf::IfOp::create(b, TypeRange{i32}, map.inlineMap, true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(longest.thenBlock());
    // chunksOf is 0 on lanes past N.
    scf::YieldOp::create(b, xorReduce(chunksOf(map.len), 1, 16, [&](Value x, Value o) {
                           return arith::MaxUIOp::create(b, x, o).getResult();
                         }));
    b.setInsertionPointToStart(longest.elseBlock());
    scf::YieldOp::create(b, load(i32, gep(workRegion(0), i32, cI64(0)), longestWordIndex(), 4));
  }
  Value n = param(pSegments);
  Value length = divu(add(longest.getResult(0), sub(n, cI32(1))), n);
  return arith::MaxUIOp::create(b, length, cI32(1));
}

Value PrefillEmitter::transferIndex(Value tr, Value d, Value col, Value ofM, bool mTransposed) {
  int64_t K = s.k, V = s.v;
  Value inB = add(mul(d, cI64(V)), col);
  Value inM = add(cI64(K * V), mTransposed ? add(mul(col, cI64(K)), d) : add(mul(d, cI64(K)), col));
  return add(mul(tr, cI64(K * (V + K))), sel(ofM, inM, inB));
}

// The chain is short (segments - 1 steps of K x K by K x 4) and f32: one
// thread per row of kSegmentChainColumns state columns, M's row read from
// its transposed image (a column across the warp) a step ahead, the
// state's columns from shared memory (the same address across the warp).
// Narrow column blocks make more blocks, each step shorter: the chain is
// latency, not work (16 columns: 73 us for 7 steps at T = 32K H2 on an
// H100; 4 columns with the operands a step ahead: 15.6 us, H200).
//
// Across ranks (issue 36) the same kernel also composes a rank's transfer
// (phase 1: the columns of b_rank and, in (V + K) / 4 blocks, of M_rank =
// M_{n-1} ... M_0, into cp_transfer) and starts the chain from the
// entering state (phase 2: initial_state read as the pool's, S_start(0) =
// it, every segment's S_start left for the correction).
void PrefillEmitter::emitSegmentChain() {
  int64_t K = s.k, V = s.v, W = kSegmentChainColumns;
  Value segments = param(pSegments);
  Value compose = rankPhase(1), entering = rankPhase(2);
  Value blocks = sel(compose, cI32((V + K) / W), cI32(V / W));
  Value flat = blockId(gpu::Dimension::x);
  Value block = remu(flat, blocks), rest = divu(flat, blocks);
  Value hv = remu(rest, param(pHV)), n = divu(rest, param(pHV));
  ChunkMap map = chunkMap(arith::ConstantIntOp::create(b, 0, 1));
  // A block past the sequences (a grid for wider blocks) reads nothing.
  auto within = scf::IfOp::create(b, cmp(arith::CmpIPredicate::ult, n, param(pN)), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(within.thenBlock());
  SequenceSlots slots = sequenceSlots(n, map.ok);
  Value col0 = mul(block, cI32(W));
  // Phase 1's columns past V are M's (no b added, I at the start).
  Value ofM = cmp(arith::CmpIPredicate::uge, col0, cI32(V));
  Value active = cmp(arith::CmpIPredicate::ult, tid, cI32(K));
  Value d = toI64(minS(tid, cI32(K - 1))); // in bounds; only `active` stores
  Value first = toI64(mul(add(mul(n, param(pHV)), hv), segments));
  Value transfers = gep(workRegion(kTransfers), f32, cI64(0));
  Value starts = gep(workRegion(kEntering), opType, cI64(0));
  Value S = region(0); // [K][W] f32
  // Element (d, col0 + j) of transfer tr, the block's columns past V
  // being M's.
  auto transferAt = [&](Value tr, int64_t j, bool mTransposed) {
    Value col = toI64(add(col0, cI32(j)));
    return transferIndex(tr, d, sel(ofM, sub(col, cI64(V)), col), ofM, mTransposed);
  };
  auto colAt = [&](Value tr, int64_t j) { return transferAt(tr, j, /*mTransposed=*/true); };
  // Phase 2 starts from the entering state (zeros where the slot is not
  // read: a negative index), the others from the first segment's transfer.
  SmallVector<Value> x = initialStateOrZero(
      entering, W,
      [&](SmallVectorImpl<Value> &vals) {
        SmallVector<Value> in = initialStateOrZero(slots.readOk, W, [&](SmallVectorImpl<Value> &v) {
          for (int64_t j = 0; j < W; ++j)
            v.push_back(loadInitialState(
                poolStateIndex(slots.inSlot, hv, cI32(0), toI32(d), add(col0, cI32(j)))));
        });
        vals.append(in.begin(), in.end());
      },
      [&](SmallVectorImpl<Value> &vals) {
        for (int64_t j = 0; j < W; ++j)
          vals.push_back(load(f32, transfers, colAt(first, j), 4));
      });
  // Step seg's operands, b_seg's columns and M_seg's column of this thread
  // (the transposed image, element k at k * K: a warp's load is one
  // 128-byte line), are loaded a step ahead and carried into the step that
  // uses them, so that only S waits on the step before. Loaded in the
  // step, they waited out one L2 round trip after another (ptxas keeps few
  // loads in flight: 8 of 128 scalar ones, or 4 batches of vectors) and a
  // step took about 5 us (T = 32K H4, H200, 2026-11-29: 67 % of the
  // chain's stall samples long-scoreboard waits on them, ncu).
  // Loading past the last step reads the last step's again, in bounds.
  // The chain ends at the sequence's last occupied segment (segmentsOf):
  // a short sequence of a varlen batch, whole in one segment, has no step.
  Value own = segmentsOf(chunkOffsetOf(map.inlineMap, map.scan, n),
                         chunkOffsetOf(map.inlineMap, map.scan, add(n, cI32(1))),
                         segmentLength(map));
  Value start = sel(entering, cI32(0), cI32(1));
  Value lastTr = add(first, toI64(sub(own, cI32(1))));
  auto operandsOf = [&](Value tr, SmallVectorImpl<Value> &out) {
    tr = minS(tr, lastTr);
    SmallVector<Value> bCols = initialStateOrZero(notI(ofM), W, [&](SmallVectorImpl<Value> &v) {
      for (int64_t j = 0; j < W; ++j)
        v.push_back(load(f32, transfers, colAt(tr, j), 4));
    });
    out.append(bCols.begin(), bCols.end());
    Value mColumn = transferIndex(tr, d, cI64(0), cTrue(), /*mTransposed=*/true);
    for (int64_t k = 0; k < K; ++k)
      out.push_back(load(f32, transfers, add(mColumn, cI64(k * K)), 4));
  };
  SmallVector<Value> carried(x);
  operandsOf(add(first, toI64(start)), carried);
  auto steps = scf::ForOp::create(b, start, own, cI32(1), carried);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(steps.getBody());
    Value seg = steps.getInductionVar();
    ValueRange args = steps.getRegionIterArgs();
    SmallVector<Value> cur(args.take_front(W));
    SmallVector<Value> y(args.slice(W, W)), m(args.drop_front(2 * W));
    Value tr = add(first, toI64(seg));
    ifThen(active, [&] {
      for (int64_t j = 0; j < W; j += 4) {
        auto v4 = VectorType::get({4}, f32);
        Value vec = LLVM::UndefOp::create(b, v4);
        for (int64_t e = 0; e < 4; ++e)
          vec = LLVM::InsertElementOp::create(b, vec, cur[j + e], cI32(e));
        storeVec(vec, S, f32, add(mul(d, cI64(W)), cI64(j)), 16);
      }
      // S_start(seg), the correction's operand (phase 1 corrects nothing).
      ifThen(notI(compose), [&] {
        for (int64_t j = 0; j < W; j += 2)
          storeVec(pack2(cur[j], cur[j + 1], opType), starts, opType,
                   add(add(mul(tr, cI64(K * V)), mul(d, cI64(V))), toI64(add(col0, cI32(j)))),
                   4);
      });
    });
    barrier();
    // y = b_seg + M_seg[d][:] S, the products over two partial sums per
    // column (half the dependent FMAs).
    SmallVector<Value> odd(W, cF32(0.0));
    auto v4 = VectorType::get({4}, f32);
    for (int64_t k = 0; k < K; ++k) {
      SmallVector<Value> &acc = k % 2 ? odd : y;
      for (int64_t j = 0; j < W; j += 4) {
        Value s4 = LLVM::LoadOp::create(b, v4, gep(S, f32, cI32(k * W + j)), 16);
        for (int64_t i = 0; i < 4; ++i)
          acc[j + i] = fma(m[k], elt(s4, i), acc[j + i]);
      }
    }
    for (int64_t j = 0; j < W; ++j)
      y[j] = fadd(y[j], odd[j]);
    // The next step's operands, after this step's FMAs: issued before
    // them, both steps' M columns would be live at once (255 registers and
    // spills).
    operandsOf(add(tr, cI64(1)), y);
    barrier(); // every thread has read S before the next step writes it
    scf::YieldOp::create(b, y);
  }
  SmallVector<Value> last(steps.getResults().take_front(W));
  // Phase 1: the rank's transfer [b | M] of (n, hv), f32, to cp_transfer.
  ifThen(andI(active, compose), [&] {
    Value at = toI64(add(mul(n, param(pHV)), hv));
    for (int64_t j = 0; j < W; ++j)
      store(last[j], param(pCpTransfer), transferAt(at, j, /*mTransposed=*/false), 4);
  });
  ifThen(andI(active, andI(slots.writeOk, notI(compose))), [&] {
    for (int64_t j = 0; j < W; ++j)
      storeFinalState(last[j], [&] {
        return poolStateIndex(slots.outSlot, hv, cI32(0), toI32(d), add(col0, cI32(j)));
      });
  });
}

void PrefillEmitter::emitSegmentCorrection() {
  int64_t C = s.chunk, K = s.k, V = s.v;
  Value flat = blockId(gpu::Dimension::x);
  Value c = divu(flat, param(pHV)), hv = remu(flat, param(pHV));
  Value N = param(pN);
  ChunkMap map = chunkMap(arith::ConstantIntOp::create(b, 0, 1));
  Value total = chunkOffsetOf(map.inlineMap, map.scan, N);
  Value ended = sequencesEndedBy(map, c);
  ifThen(cmp(arith::CmpIPredicate::slt, c, total), [&] {
    Value n = sequenceOfChunk(map, c, ended);
    Value c0 = chunkOffsetOf(map.inlineMap, map.scan, n);
    Value segment = divu(sub(c, c0), segmentLength(map));
    Value bos, eos;
    std::tie(bos, eos) = sequenceBounds(map, n);
    Value t0 = add(bos, mul(toI64(sub(c, c0)), cI64(C)));
    Value rows = toI32(minS(cI64(C), sub(eos, t0)));
    SequenceSlots slots = sequenceSlots(n, map.ok);
    // The first segment's rows are final (but for phase 2's, which
    // started from an unknown state); a skipped sequence's are zero.
    Value corrected = andI(orI(cmp(arith::CmpIPredicate::ugt, segment, cI32(0)), rankPhase(2)),
                           andI(slots.kept, map.ok));
    ifThen(corrected, [&] {
      int64_t ldO = V + kRowPad;
      Value qh = region(0), st = region(C * (K + kRowPad) * 2),
            ot = region((C * (K + kRowPad) + K * (V + kRowPad)) * 2);
      Value tr = toI64(add(mul(add(mul(n, param(pHV)), hv), param(pSegments)), segment));
      copyTile(qh, workRegion(kCorrection), mul(chunkHead(c, hv), cI64(C * K)), C, K);
      copyTile(st, workRegion(kEntering), mul(tr, cI64(K * V)), K, V);
      // o's rows pass through shared memory, 16 bytes a copy each way,
      // where each thread read and wrote its accumulators' 4-byte pairs
      // (8 rows x 16 bytes a warp instruction): T = 32K H4 48.8 -> 34.5 us
      // (H200, session 45). A row past the sequence copies its last row
      // and is not stored back.
      Value oHead = mul(toI64(hv), cI64(V));
      auto oRow = [&](Value r) {
        return add(mul(add(t0, toI64(r)), param(pOStride)), oHead);
      };
      // Element (row, col) of o's rows in shared memory, and the (row,
      // column) where 8-element vector i of them starts.
      auto otAt = [&](Value row, Value col) {
        return gep(ot, opType, toI64(add(mul(row, cI32(ldO)), col)));
      };
      auto rowCol = [&](Value i) {
        Value r = divu(i, cI32(V / 8));
        return std::pair<Value, Value>{r, mul(remu(i, cI32(V / 8)), cI32(8))};
      };
      threadLoop(C * (V / 8), [&](Value i) {
        auto [r, col] = rowCol(i);
        Value from = add(oRow(minS(r, sub(rows, cI32(1)))), toI64(col));
        cpAsync16(otAt(r, col), gep(param(pO), s.ioType, from));
      }, /*unroll=*/true);
      SmallVector<Frag> acc = zeroFrags(C, V);
      waitCopies();
      barrier();
      mma(Operand{qh, K + kRowPad}, Operand{st, V + kRowPad, /*kRows=*/true}, C, V, K, acc);
      auto pairTy = VectorType::get({2}, s.ioType);
      forEachPair(C, V, acc, [&](Value row, Value col, Value x0, Value x1) {
        Value at = otAt(row, col);
        Value o2 = LLVM::LoadOp::create(b, pairTy, at, 4);
        LLVM::StoreOp::create(
            b, pack2(fadd(toF32(elt(o2, 0)), x0), fadd(toF32(elt(o2, 1)), x1), s.ioType), at, 4);
      });
      barrier();
      auto vec = VectorType::get({8}, s.ioType);
      threadLoop(C * (V / 8), [&](Value i) {
        Value r, col;
        std::tie(r, col) = rowCol(i);
        ifThen(cmp(arith::CmpIPredicate::slt, r, rows), [&] {
          storeVec(LLVM::LoadOp::create(b, vec, otAt(r, col), 16), param(pO), s.ioType,
                   add(oRow(r), toI64(col)), 16);
        });
      }, /*unroll=*/true);
    });
  });
}
