//===- PrefillOverlap.cpp - chunks and recur side by side --------*- C++ -*-===//
//
// The overlapped launch (the queue kernel and RecurForm::TransposedOverlap; the host's
// prefillOverlap decides per call). Where recur's grid needs only a few SMs
// (one long sequence at V tile 64: N * HV * V / 64 blocks, 32 at H = 16 on
// 132 SMs), its chains need not wait for the whole chunks grid, and chunks
// need not leave those SMs idle while the chains run. The host launches
//
//   chunks  SMs x (its blocks per SM) blocks, `overlap` = R, the number of
//           SMs to leave to recur (R = recur's grid);
//   recur   as chunks' programmatic dependent: every chunks block triggers
//           it first thing, so recur launches as soon as chunks has.
//
// chunks' blocks on SMs numbered below R leave at once (all but the last
// to leave, so that the queue always has a worker); the others take items
// (chunk * HV + head) from a queue in workspace region 7, in chunk order,
// and publish each item's ready flag once its results are in memory.
// recur's blocks take the SMs the leavers freed (its 220 KiB of shared
// memory fit nowhere else), skip griddepcontrol.wait, and copy chunk c of
// their head once its flag is up.
//
// Forward progress needs no co-residency: chunks never waits for recur, so
// where recur cannot start early (no SM free, a tool that serialises
// kernels) it runs after chunks as it would without the overlap. The host
// zeroes the counters and flags (a memset node) before each overlapped
// call; a flag that stays down for seconds (a broken chunk map) raises the
// error flag instead of hanging.
//
// Memory model: chunks' results leave partly by bulk copies (async proxy),
// whose issuing threads wait for their completion and fence the async
// proxy; a block barrier then orders every thread's stores before thread
// 0's release of the flag (fence.acq_rel.gpu, then the store); recur's
// acquire load of the flag is followed by an async-proxy fence before its
// bulk copies read the chunk.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

namespace {
// Region 7: counters (u32 slots: the queue's, the leavers', one per SM for
// the shared launch), then a u32 ready flag per item.
constexpr int64_t kQueueCounter = 0, kLeaveCounter = 1, kPerSMCounters = kOverlapQueueCounters,
                  kFlagsAt = kOverlapCounterBytes;
// A flag not up after this long raises the error flag (nanoseconds).
constexpr int64_t kAwaitTimeout = 4'000'000'000;
} // namespace

void PrefillEmitter::emitQueue() {
  queued = true;
  // recur launches as soon as every queue block has started.
  launchDependents();
  ChunksWarpgroupSmem L(s);
  Type i8 = b.getI8Type();
  Value base = alignedSmem().first;
  Value slot = gep(base, i8, cI32(L.queue));
  Value region = workRegion(7);
  Value items = mul(param(pMaxChunks), param(pHV));
  // The queue's counters: inline PTX for a relaxed gpu-scope atomic add
  // whose result is used (an LLVM atomicrmw would do; kept so the queue's
  // code stays as measured, see docs/performance-journal.md).
  auto next = [&] {
    return ptxValue(i32, "atom.relaxed.gpu.global.add.u32 $0, [$1], 1;", "=r,l",
                    {gep(region, i32, cI32(kQueueCounter))});
  };
  // The first item, or `items` for a block that leaves its SM to recur.
  // `overlap` = -R (the shared launch, `_recur_shared`): the first block on
  // each of the R SMs stays, beside the recur block that takes the room the
  // others leave (a counter per SM in region 7).
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    Value smid = NVVM::SmIdOp::create(b, i32);
    Value overlap = param(pOverlap);
    Value shared = cmp(arith::CmpIPredicate::slt, overlap, cI32(0));
    Value sms = sel(shared, sub(cI32(0), overlap), overlap);
    Value reserved = cmp(arith::CmpIPredicate::ult, smid, sms);
    auto firstOnSM = [&] {
      // Only the R SMs' counters exist (smid < R <= kMaxSharedSMs).
      auto onSM = scf::IfOp::create(b, TypeRange{b.getI1Type()}, andI(shared, reserved), true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(onSM.thenBlock());
      Value before = ptxValue(i32, "atom.relaxed.gpu.global.add.u32 $0, [$1], 1;", "=r,l",
                              {gep(region, i32, add(smid, cI32(kPerSMCounters)))});
      scf::YieldOp::create(b, cmp(arith::CmpIPredicate::eq, before, cI32(0)));
      b.setInsertionPointToStart(onSM.elseBlock());
      scf::YieldOp::create(b, notI(cTrue()));
      return onSM.getResult(0);
    };
    auto leave = scf::IfOp::create(b, TypeRange{i32}, andI(reserved, notI(firstOnSM())), true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(leave.thenBlock());
      Value before = ptxValue(i32, "atom.relaxed.gpu.global.add.u32 $0, [$1], 1;", "=r,l",
                              {gep(region, i32, cI32(kLeaveCounter))});
      Value grid = arith::IndexCastOp::create(b, i32, gpu::GridDimOp::create(b, gpu::Dimension::x));
      Value last = cmp(arith::CmpIPredicate::eq, add(before, cI32(1)), grid);
      auto stay = scf::IfOp::create(b, TypeRange{i32}, last, true);
      b.setInsertionPointToStart(stay.thenBlock());
      scf::YieldOp::create(b, next());
      b.setInsertionPointToStart(stay.elseBlock());
      scf::YieldOp::create(b, items);
      b.setInsertionPointAfter(stay);
      scf::YieldOp::create(b, stay.getResult(0));
      b.setInsertionPointToStart(leave.elseBlock());
      scf::YieldOp::create(b, next());
    }
    store(leave.getResult(0), slot, cI32(0), 4);
  });
  barrier();
  Value first = load(i32, slot, cI32(0), 4);
  auto loop = scf::WhileOp::create(b, TypeRange{i32}, ValueRange{first});
  OpBuilder::InsertionGuard g(b);
  Block *before = b.createBlock(&loop.getBefore(), {}, TypeRange{i32}, {b.getLoc()});
  Value item = before->getArgument(0);
  scf::ConditionOp::create(b, cmp(arith::CmpIPredicate::slt, item, items), ValueRange{item});
  Block *after = b.createBlock(&loop.getAfter(), {}, TypeRange{i32}, {b.getLoc()});
  Value flat = after->getArgument(0);
  // The item sees the thread's indices and its shared memory through
  // opaque copies made in every iteration: otherwise LLVM hoists every
  // address and descriptor the item derives from them out of the loop,
  // and the kernel holds them all in registers (255 instead of 79: one
  // block per SM instead of three). (Opaque copies of the parameters
  // cost registers instead: ptxas keeps them where it otherwise reads the
  // constant bank at each use.)
  Value saved[] = {tid, warp, lane, group, quad, smem};
  tid = ptxValue(i32, "mov.u32 $0, %tid.x;", "=r", {});
  warp = divu(tid, cI32(32));
  lane = remu(tid, cI32(32));
  group = divu(lane, cI32(4));
  quad = remu(lane, cI32(4));
  smem = gep(smem, i8, ptxValue(i64, "mov.u64 $0, 0;", "=l", {}));
  chunkItem(flat);
  tid = saved[0], warp = saved[1], lane = saved[2], group = saved[3], quad = saved[4];
  smem = saved[5];
  // Every thread's stores of the item are issued (the bulk copies'
  // issuers waited for theirs and fenced the async proxy), and every
  // thread has read `slot`: publish, then take the next item.
  barrier();
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    // Inline PTX: the flag's release is a fence and a relaxed store at gpu
    // scope, which NVVM has no op for (its ld.acquire partner is in the
    // timed poll of awaitChunk).
    ptx("fence.acq_rel.gpu;", "", {});
    ptx("st.relaxed.gpu.global.u32 [$0], 1;", "l",
        {gep(gep(region, i8, cI64(kFlagsAt)), i32, flat)});
    store(next(), slot, cI32(0), 4);
  });
  barrier();
  scf::YieldOp::create(b, load(i32, slot, cI32(0), 4));
}

void PrefillEmitter::awaitChunk(Value ch) {
  Value items = mul(toI64(param(pMaxChunks)), toI64(param(pHV)));
  ifThen(andI(overlapped(), cmp(arith::CmpIPredicate::slt, ch, items)), [&] {
    Value flag = gep(gep(workRegion(7), b.getI8Type(), cI64(kFlagsAt)), i32, ch);
    // Polls with a short sleep; gives up (0) after kAwaitTimeout.
    Value up = ptxValue(i32,
                        "{\n.reg .pred p;\n.reg .u64 t0, t;\n"
                        "mov.u64 t0, %globaltimer;\n"
                        "poll:\n"
                        "ld.acquire.gpu.global.u32 $0, [$1];\n"
                        "setp.ne.u32 p, $0, 0;\n"
                        "@p bra done;\n"
                        "nanosleep.u32 20;\n"
                        "mov.u64 t, %globaltimer;\n"
                        "sub.u64 t, t, t0;\n"
                        "setp.lt.u64 p, t, " + std::to_string(kAwaitTimeout) + ";\n"
                        "@p bra poll;\n"
                        "done:\n}",
                        "=r,l", {flag});
    ifThen(cmp(arith::CmpIPredicate::eq, up, cI32(0)), [&] { raiseError(); });
    // The bulk copies that follow read the chunk through the async proxy.
    fenceProxyAsyncGlobal();
  });
}
