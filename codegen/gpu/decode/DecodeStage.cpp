//===- DecodeStage.cpp - a call's token inputs staged in shared memory -*- C++ -*-===//
//
// The staged decode form. The serial token loop of the bulk kernel reads
// each token's q, k, v, g and beta when it gets to that token: with no
// prefetch (the bulk shape has no registers for one) every token is one
// more memory round trip while the block holds its state. Staged, the
// block copies
// every token's inputs (up to max_t) to shared memory in one round, issued
// right after the state's loads, and the token loop reads them from there.
// The arithmetic is the serial kernel's, token by token.
//
// The token-chunked alternative, every token's dots against the entering
// state in one pass and only the small per-token recurrences serial (with
// the chunk's Gram terms formed in shared memory), was built and measured
// slower than the serial bulk loop at every shape on an H100 (T = 4,
// B = 256: 494-757 us against 484; docs/performance-journal.md, session
// 38): its Gram terms, barriers and per-row coefficient work cost more
// issue slots than the shuffle chains they remove. What made the staged
// loop fast is the room staging leaves: 128 state registers a thread, so
// each token's chain of reductions serves 8 rows (382 us).
//
// kv (FLA's layout) uses the same stage with blocks of one warp: 32 key
// rows of 4 value columns a thread, reduced by shuffles alone (T = 4,
// B = 256: 392 us against its bulk kernel's 601 on an H100; over 4 or 2
// warps, with the exchange through shared memory each token, it lost to
// bulk, session 38). KDA's per-channel decays ride in the stage already
// exponentiated (kv only: the vk loop reads its gates from memory).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/decode/DecodeEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::decode;

int64_t mlir::delta::decode::stagedInputFloats(const DecodeSpec &spec,
                                               const DecodeTiling &tiling) {
  // q and k of each token, the block's v columns of each token, each
  // token's g and beta, then (KDA) each token's K decays from a 16-byte
  // boundary (EmitterBase::decaysAt).
  int64_t scalars = 2 * spec.maxT * spec.k +
                    spec.maxT * tiling.valuesPerBlock() + 2 * spec.maxT;
  return isPerChannel(spec.gate) ? (scalars + 3) / 4 * 4 + spec.maxT * spec.k
                                 : scalars;
}

void EmitterBase::stageInputs(Value shared) {
  stageBase = shared;
  int64_t T = s.maxT, vpb = t.valuesPerBlock();
  int64_t perPiece = 16 / (s.ioType.getIntOrFloatBitWidth() / 8);
  int64_t threads = t.threads();
  // `total` 16-byte pieces spread over the block, `copy(p)` moving piece p;
  // tokens past the row read the row's last one (clampedToken): no branch
  // before the loads, and the loop never reads them.
  auto spread = [&](int64_t total, function_ref<void(Value)> copy) {
    for (int64_t round = 0; round * threads < total; ++round) {
      Value p = add(tid, cI32(round * threads));
      if ((round + 1) * threads <= total) {
        copy(p);
        continue;
      }
      auto ifInside = scf::IfOp::create(
          b, cmp(arith::CmpIPredicate::ult, p, cI32(total)), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifInside.thenBlock());
      copy(p);
    }
  };
  // q then k of each token: vector p / (K / perPiece), q for the first T.
  int64_t perVector = s.k / perPiece;
  spread(2 * T * perVector, [&](Value p) {
    Value vector = arith::DivUIOp::create(b, p, cI32(perVector));
    Value offset = toI64(
        mul(arith::RemUIOp::create(b, p, cI32(perVector)), cI32(perPiece)));
    Value isK = cmp(arith::CmpIPredicate::uge, vector, cI32(T));
    Value tok = clampedToken(arith::RemUIOp::create(b, vector, cI32(T)));
    Value base = arith::SelectOp::create(b, isK, param(pK), param(pQ));
    Value stride =
        arith::SelectOp::create(b, isK, param(pKStride), param(pQStride));
    storeStage(add(mul(toI64(vector), cI64(s.k)), offset),
                loadQK(base, stride, tok, offset, perPiece));
  });
  // The block's v columns of each token.
  int64_t vPieces = std::max<int64_t>(1, vpb / perPiece);
  int64_t vPiece = std::min(perPiece, vpb);
  spread(T * vPieces, [&](Value p) {
    Value j = arith::DivUIOp::create(b, p, cI32(vPieces));
    Value offset = toI64(
        mul(arith::RemUIOp::create(b, p, cI32(vPieces)), cI32(vPiece)));
    Value column = add(toI64(mul(bx, cI32(vpb))), offset);
    storeStage(add(cI64(vAt(0)), add(mul(toI64(j), cI64(vpb)), offset)),
                loadElems(param(pV), s.ioType,
                          vIndex(clampedToken(j), param(pVStride), column),
                          vPiece));
  });
  // Each token's g (raw input, as loadGate reads it) and beta input.
  auto ifToken = scf::IfOp::create(
      b, cmp(arith::CmpIPredicate::ult, tid, cI32(T)), false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifToken.thenBlock());
    Value tok = clampedToken(tid);
    Value j = toI64(tid);
    if (Value g = loadGate(tok))
      storeStage(add(cI64(gAt(0)), j), {g});
    storeStage(add(cI64(betaAt(0)), j),
                {loadBeta(add(mul(tok, toI64(param(pHV))), hv))});
  }
  // KDA: every token's K decays, exponentiated once here rather than by
  // each thread for its key rows in the token loop (4 channels a piece:
  // g and dt_bias are 16-byte aligned, K a multiple of 4).
  if (perChannel()) {
    int64_t perToken = s.k / 4;
    spread(T * perToken, [&](Value p) {
      Value j = arith::DivUIOp::create(b, p, cI32(perToken));
      Value key = toI64(
          mul(arith::RemUIOp::create(b, p, cI32(perToken)), cI32(4)));
      storeStage(add(add(cI64(decaysAt(0)), mul(toI64(j), cI64(s.k))), key),
                 channelDecays(loadChannelGates(clampedToken(j), key, 4)));
    });
  }
  gpu::BarrierOp::create(b);
}

SmallVector<Value> VkEmitterBase::stagedInputs(Value tok) {
  Value j = arith::SubIOp::create(b, tok, rowStart);
  SmallVector<Value> in;
  for (int64_t at : {qAt(0), kAt(0)})
    for (int64_t p = 0; p < t.loadsPerLane; ++p)
      llvm::append_range(
          in, loadStage(add(add(cI64(at), mul(j, cI64(s.k))), elemIndex(p)),
                         t.elemsPerLoad));
  Value column0 = toI64(mul(bx, cI32(t.valuesPerBlock())));
  for (Value row : rows)
    in.push_back(loadStage(add(add(cI64(vAt(0)),
                                    mul(j, cI64(t.valuesPerBlock()))),
                                arith::SubIOp::create(b, row, column0)),
                            1)[0]);
  in.push_back(loadStage(add(cI64(betaAt(0)), j), 1)[0]);
  if (s.gate != GateForm::none)
    in.push_back(loadStage(add(cI64(gAt(0)), j), 1)[0]);
  return in;
}
