//===- PrefillCheckpoints.cpp - recur's state checkpoints --------*- C++ -*-===//
//
// The states a call keeps besides the final one, stored by recur from the
// registers that hold the state at a chunk boundary, in the state's layout
// ([rows, HV, K, V] or [rows, HV, V, K]), as f32 or in the io dtype:
//
//   checkpoint_starts null: FLA's return_intermediate_states, the state
//     entering every chunk, row = the chunk's index in the call (sequence
//     n's chunks follow sequence n - 1's);
//   checkpoint_starts [N] int64: FlashInfer's state_checkpoints, the state
//     after every `checkpoint_every` chunks of a sequence (every n tokens),
//     rows checkpoint_starts[n] + j for the len / (every * C) such states.
//
// Both are one rule: boundary b of a sequence (b chunks in) is stored where
// b >= first, (b - first) % every == 0 and j = (b - first) / every < count,
// to row from + j (FLA: first 0, every 1, count = the sequence's chunks,
// from = its first chunk; FlashInfer: first = every).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

CheckpointStore PrefillEmitter::recurCheckpoints(const CheckpointSite &q) {
  // Two forms keep none, as their chains have no registers for the stores
  // (with them they spilled 16 bytes): the shared launch's recur (168
  // registers by setmaxnreg), which the host takes only for calls without
  // checkpoints, and K = 256's (255 registers), where the host refuses
  // them (kCheckpointMaxK in deltac_abi.h).
  if (plan.recur == RecurForm::TransposedShared || s.k > deltac_abi::kCheckpointMaxK)
    return [](Value, StateElements) {};
  using P = arith::CmpIPredicate;
  int64_t C = s.chunk, K = s.k, V = s.v, BV = plan.valueTile;
  Value ck = param(pCkpt), rows = param(pCkptRows);
  // FlashInfer's form is on with checkpoint_starts alone: an empty tensor
  // (0 rows, maybe null) must still flag a sequence that has checkpoints.
  Value perStarts = notNull(param(pCkptStarts)), on = orI(notNull(ck), perStarts);
  Value every = arith::MaxSIOp::create(b, param(pCkptEvery), cI32(1));
  Value count = sel(perStarts, toI32(divu(sub(q.eos, q.bos), mul(toI64(every), cI64(C)))),
                    sub(q.c1, q.c0));
  // The first row: checkpoint_starts[n] (a device value, bounded below
  // before it forms an address), else the sequence's first chunk.
  auto fromIf = scf::IfOp::create(b, TypeRange{i64}, andI(on, perStarts), true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(fromIf.thenBlock());
    scf::YieldOp::create(b, load(i64, param(pCkptStarts), q.n, 8));
    b.setInsertionPointToStart(fromIf.elseBlock());
    scf::YieldOp::create(b, toI64(q.c0));
  }
  Value from = fromIf.getResult(0);
  // Rows [from, from + count) inside the tensor, with no sum that could wrap.
  Value fits = andI(cmp(P::sge, from, cI64(0)), cmp(P::sle, from, sub(rows, toI64(count))));
  Value wanted = andI(on, cmp(P::sgt, count, cI32(0)));
  ifThen(andI(wanted, notI(fits)), [&] { raiseError(); });
  Value placed = andI(wanted, fits);
  Value stored = andI(placed, q.kept);

  bool vk = s.layout == StateLayout::vk;
  Type lowType = s.ioType;
  int64_t lowBytes = lowType.getIntOrFloatBitWidth() / 8;
  // Element (d, col) of the state of value head hv in checkpoint `row`.
  auto index = [this, vk, K, V, hv = q.hv, v0 = q.v0](Value row, Value d, Value col) {
    Value head = mul(add(mul(row, toI64(param(pHV))), toI64(hv)), cI64(K * V));
    Value vcol = toI64(add(v0, col));
    return add(head, vk ? add(mul(vcol, cI64(K)), toI64(d)) : add(mul(toI64(d), cI64(V)), vcol));
  };
  // x (f32) at element at() of the checkpoints in the io dtype (the
  // conversion emitted first).
  auto storeLow = [this, ck, lowType, lowBytes](Value x, function_ref<Value()> at) {
    Value low = lowType.isF32() ? x : arith::TruncFOp::create(b, lowType, x).getResult();
    store(low, ck, at(), lowBytes);
  };
  // x (f32) at `at`, in the checkpoints' dtype.
  auto storeElement = [this, ck, storeLow](Value f32Out, Value x, Value at) {
    auto pick = scf::IfOp::create(b, f32Out, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(pick.thenBlock());
    store(x, ck, at, 4);
    b.setInsertionPointToStart(pick.elseBlock());
    storeLow(x, [&] { return at; });
  };

  // Checkpoints that would hold a skipped sequence's states (a pool index
  // past the pool) are zeros, as its o is; an invalid cu_seqlens skips the
  // call, and the blocks of the grid's first sequence zero every row.
  auto zeroRows = [&](Value row0, Value n) {
    Value perRow = cI64(K * BV);
    Value threads = arith::IndexCastOp::create(b, i64, gpu::BlockDimOp::create(b, gpu::Dimension::x));
    auto loop = scf::ForOp::create(b, toI64(tid), mul(n, perRow), threads);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Value r = remu(i, perRow);
    Value at = index(add(row0, divu(i, perRow)), toI32(divu(r, cI64(BV))), toI32(remu(r, cI64(BV))));
    storeElement(cmp(P::ne, param(pCkptF32), cI32(0)), cF32(0.0), at);
  };
  ifThen(andI(placed, notI(q.kept)), [&] { zeroRows(from, toI64(count)); });
  ifThen(andI(on, andI(notI(q.mapOk), cmp(P::eq, q.position, cI32(0)))),
         [&] { zeroRows(cI64(0), rows); });

  // What the chain's stores need, in one register across the loop: the
  // sequence (for its checkpoint_starts entry, read again at a store), and
  // two bits: it stores, and (FlashInfer's form) its last chunk is whole,
  // so the end of the sequence is a boundary of n tokens. The rest comes
  // from the parameters and the chain's own bounds at each boundary (values
  // live across the loop made the mma.sync recur at 128 registers spill).
  Value lastFull = andI(perStarts, cmp(P::eq, remu(sub(q.eos, q.bos), cI64(C)), cI64(0)));
  auto bit = [&](Value x, int64_t at) {
    return arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i32, x), cI32(at)).getResult();
  };
  Value packed = orI(arith::ShLIOp::create(b, q.n, cI32(2)), orI(bit(lastFull, 1), bit(stored, 0)));
  return [=](Value c, StateElements each) {
    // Boundary bnd = c - c0 of the sequence's NT = c1Run - c0 chunks:
    // kept where bnd >= first, (bnd - first) % every = 0, and bnd < NT
    // (FLA: every chunk's entering state) or, FlashInfer's, bnd < NT or the
    // last chunk is whole (bnd C <= len).
    Value starts = param(pCkptStarts);
    Value byStarts = notNull(starts);
    Value everyP = arith::MaxSIOp::create(b, param(pCkptEvery), cI32(1));
    Value bnd = sub(c, q.c0);
    Value k = sub(bnd, sel(byStarts, everyP, cI32(0)));
    Value inSequence = orI(cmp(P::slt, bnd, sub(q.c1Run, q.c0)),
                           cmp(P::ne, andI(packed, cI32(2)), cI32(0)));
    Value hit = andI(andI(cmp(P::ne, andI(packed, cI32(1)), cI32(0)), cmp(P::sge, k, cI32(0))),
                     andI(cmp(P::eq, remu(k, everyP), cI32(0)), inSequence));
    ifThen(hit, [&] {
      // Its first row again: checkpoint_starts[n] (checked before the
      // loop: `stored` includes that the rows fit), else c0.
      auto fromIf = scf::IfOp::create(b, TypeRange{i64}, byStarts, true);
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(fromIf.thenBlock());
        scf::YieldOp::create(b, load(i64, starts, arith::ShRUIOp::create(b, packed, cI32(2)), 8));
        b.setInsertionPointToStart(fromIf.elseBlock());
        scf::YieldOp::create(b, toI64(q.c0));
      }
      Value row = add(fromIf.getResult(0), toI64(divu(k, everyP)));
      // One branch on the dtype around all of the thread's stores.
      auto pick = scf::IfOp::create(b, cmp(P::ne, param(pCkptF32), cI32(0)), true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(pick.thenBlock());
      each([&](Value x, Value d, Value col) { store(x, ck, index(row, d, col), 4); });
      b.setInsertionPointToStart(pick.elseBlock());
      each([&](Value x, Value d, Value col) { storeLow(x, [&] { return index(row, d, col); }); });
    });
  };
}

SmallVector<Value> PrefillEmitter::chainLoop(
    const CheckpointStore &ck, Value c0, Value c1, ValueRange init,
    function_ref<void(ValueRange)> bind, StateElements each,
    function_ref<SmallVector<Value>(Value c, ValueRange carried)> body) {
  // Boundary c0 before the loop, boundary c + 1 at the end of chunk c's
  // step (after its products completed).
  bind(init);
  ck(c0, each);
  auto chunks = scf::ForOp::create(b, c0, c1, cI32(1), init);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(chunks.getBody());
  Value c = chunks.getInductionVar();
  SmallVector<Value> next = body(c, chunks.getRegionIterArgs());
  bind(next);
  ck(add(c, cI32(1)), each);
  scf::YieldOp::create(b, next);
  return SmallVector<Value>(chunks.getResults());
}
