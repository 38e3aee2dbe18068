//===- PrefillEmitter.h - building blocks of the prefill kernels -*- C++ -*-===//
//
// What the prefill kernels (PrefillKernel.h) are built from: the parameter
// order, the warp roles' shared state, and PrefillEmitter, which turns the
// plan and the layouts (PrefillLayout.h) into gpu.func + llvm + nvvm.
// Tensor-core products are mma.sync.m16n8k16 with 16-bit operands in the
// activations' type (bf16 or f16; "16-bit" below) loaded from shared memory
// by ldmatrix (.trans where an operand's rows are the reduction index, so
// nothing is transposed in memory), on sm_90a wgmma. Rows are padded by 8
// elements: 16-byte aligned, and the 8 rows of an ldmatrix matrix fall in
// different banks. The kernels' bodies live in PrefillEmitter.cpp (prep and
// the helpers), PrefillChunks*.cpp, PrefillRecur*.cpp and PrefillOverlap.cpp;
// the chunks and recur forms are builder types over this class's
// primitives (PrefillChunksForms.h, PrefillRecurForms.h), each copied from
// the part's emitter at its one dispatch.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLEMITTER_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLEMITTER_H

#include "codegen/gpu/KernelEmitter.h"
#include "codegen/gpu/prefill/PrefillLayout.h"
#include "codegen/gpu/prefill/PrefillPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>
#include <tuple>

namespace mlir::delta::prefill {

/// The kernel parameters by position (prefillKernelParams() names them).
enum Param {
  pQ, pK, pV, pO, pG, pBeta, pALog, pDtBias, pInitial, pFinal, pInIdx,
  pOutIdx, pCu, pWork, pErrorFlag, pCuIsI64, pT, pN, pH, pHV, pMaxChunks,
  pQStride, pKStride, pVStride, pOStride, pSlots, pScale, pOverlap, pQkRaw,
  pTma, pQMap, pKMap, pVMap, pLowerBound, pSlotStride, pCkpt, pCkptStarts,
  pCkptEvery, pCkptRows, pCkptF32, pBetaF32, pSegments, pCpPhase, pCpTransfer,
  pOptions
};

/// kda's diagonal blocks go through the product form where, in every
/// channel, G stays within kSteep of the block's first row: its factors
/// e^(G - G_r) and e^(G_r - G) then lie in [e^-64, e^64] (bf16 and fp32
/// normal numbers, with room for unnormalised k).
constexpr double kSteep = 64.0;
/// The same bound for f16 operands: f16's largest number is 65504, about
/// e^11.1, so the factors stay within e^8 (room for unnormalised k of up
/// to about 20); with kSteep they overflowed to inf and the outputs were
/// NaN (FLA's f16 chunk_kda tests, session 42).
constexpr double kSteepF16 = 8.0;

/// The high half of a wgmma shared-memory matrix descriptor (PTX ISA,
/// "Matrix Descriptor Format": start address >> 4 in bits 0-13, leading
/// byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, layout
/// type in 62-63, 1 = 128-byte swizzle; every image starts on a 1024-byte
/// bound, so the base offset is 0).
///   K-major: rows of 128 bytes (64 elements of the reduction index),
///   groups of 8 rows 1024 bytes apart (stride offset); the leading offset
///   is unused with this swizzle (wgmmaKMajor).
///   MN-major (imm-trans-a / -b = 1): rows of 128 bytes along M (or N), 8
///   reduction rows per group, groups 1024 bytes apart (stride offset),
///   64-column blocks a whole [rows][64] image apart (leading offset;
///   unused at M or N = 64).
constexpr uint64_t wgmmaDescHigh(uint64_t leadingBytes, uint64_t strideBytes) {
  return (uint64_t(1) << 62) | ((strideBytes >> 4) << 32) | ((leadingBytes >> 4) << 16);
}
constexpr uint64_t wgmmaKMajor = wgmmaDescHigh(16, 1024);

/// recur's named barriers, one per signal and chunk parity (id + parity);
/// see the comment above the warp roles in PrefillRecur.cpp.
enum RecurBarrier : int64_t {
  kLanded = 1, kSReady = 3, kVReady = 5, kDone = 7, kADone = 9, kState = 11
};

/// Calls `store(x, d, col)` for every state element the thread holds: x
/// (f32), d its K index, col its column in the V tile.
using StateElements =
    function_ref<void(function_ref<void(Value x, Value d, Value col)>)>;

/// Stores the state at chunk boundary c (a chunk index in [c0, c1]: the
/// state entering chunk c, or at c1 the final one) to the call's
/// checkpoints where the call keeps that boundary (PrefillCheckpoints.cpp).
using CheckpointStore = std::function<void(Value c, StateElements each)>;

struct RecurSequence;

/// What recur's state warps share with the rest of the kernel: the chunk
/// range, the state slots and the operand ring.
struct RecurFrame {
  Value c0, c1;               ///< the sequence's chunks [c0, c1)
  Value readOk, writeOk;      ///< initial state read / final state written
  Value inSlot, outSlot;
  /// Element (d, col) of the state in `slot` (d: K index, col: in the V tile).
  std::function<Value(Value slot, Value d, Value col)> stateIndex;
  /// Chunk c's region at byte offset `at` of its ring stage.
  std::function<Value(Value c, int64_t at)> stageAt;
  /// Waits for chunk c's bulk copies (nothing with cp.async).
  std::function<void(Value c)> waitBulk;
  /// Copy `which` (0 or 1) of S and of V' in shared memory.
  std::function<Value(Value which)> sCopy, vCopy;
  int64_t wb, kd, ub, gl;     ///< stage offsets of W, Kd, the U tile, G_last
  int64_t prefetchRegs, accumulators;
  CheckpointStore checkpoint;
  /// The block's sequence, for recur_cp's hooks (RecurSequence::transfer,
  /// storeFinal, outTile; the register-resident state only).
  const RecurSequence *seq = nullptr;
};

/// What every form of recur knows of its block's sequence, value head and
/// V tile (PrefillRecur.cpp computes it).
struct RecurSequence {
  Value hv, v0;               ///< value head, first column of the V tile
  Value c0, c1;               ///< the sequence's chunks [c0, c1)
  Value bos, eos;             ///< its tokens [bos, eos) (i64)
  Value readOk, writeOk, inSlot, outSlot;
  /// Element (d, col) of the state in `slot` (d: K index, col: in the V tile).
  std::function<Value(Value slot, Value d, Value col)> stateIndex;
  CheckpointStore checkpoint;
  /// Context parallelism (recur_cp, PrefillSegments.cpp; null elsewhere):
  /// i1, this block runs a segment's transfer: its state starts as columns
  /// [m0, m0 + V tile) of the identity (where readOk is false) and U reads
  /// as zero, so that its final state is those columns of the transfer
  /// matrix and its outputs those of the correction's left operand.
  Value transfer, m0;
  /// recur_cp: stores element (d, col) of the final state (instead of the
  /// pool's slot).
  std::function<void(Value x, Value d, Value col)> storeFinal;
  /// recur_cp: where chunk c's output rows go (instead of o): the pointer,
  /// the element offset of row 0, column 0 of the tile, and the row stride
  /// in elements.
  std::function<std::tuple<Value, Value, Value>(Value c, Value t0)> outTile;
};

/// Sequence n's state slots as recur reads them (in_idx / out_idx, else
/// row n) and what its blocks may do (PrefillEmitter::sequenceSlots).
struct SequenceSlots {
  Value inSlot, outSlot;   ///< i64; negative: padding
  Value skipped, kept;     ///< a slot past the pool skips the sequence
  Value readOk, writeOk;   ///< the initial state read / final state written
};

/// What recurCheckpoints needs of the block's sequence.
struct CheckpointSite {
  Value n, position;          ///< the sequence, and its place in the grid
  Value hv, v0;               ///< value head, first column of the V tile
  Value c0, c1;               ///< its chunks [c0, c1), also when skipped
  Value c1Run;                ///< the chain's end (c0 when skipped)
  Value bos, eos;             ///< its tokens [bos, eos) (i64)
  Value kept, mapOk;          ///< not skipped; cu_seqlens valid
};

/// recur's operand ring: its depth, read from the launch's dynamic shared
/// memory (PrefillEmitter::recurRing), and the sequence's first chunk.
struct RecurRing {
  Value deep, single, stages, c0;
};

/// One 16x8 accumulator tile of mma.m16n8k16: c0, c1 at (row g, cols 2t,
/// 2t+1), c2, c3 at (row g + 8, same cols); g = lane / 4, t = lane % 4.
struct Frag {
  Value c[4];
};

/// A 16-bit mma operand in shared memory: row stride `ld` elements (a
/// multiple of 8, so every row of 8 is one aligned 16-byte ldmatrix row).
/// `kRows`: the rows are indexed by the reduction dimension (A stored as
/// [k][m], B as [k][n], i.e. row-major B); otherwise A is [m][k] and B
/// [n][k]. kRows operands are loaded with ldmatrix.trans, so no operand is
/// ever transposed in memory.
struct Operand {
  Value base;
  int64_t ld;
  bool kRows = false;
};

/// Where a chunks block works: chunk c (of all sequences' chunks), value
/// head hv and its q/k head h, the chunk's first token t0 (i64) and how
/// many of its C rows the sequence has.
struct ChunkSite {
  Value c, hv, h, t0, rows;
};

/// chunks' per-row f32 arrays of a scalar gate: the cumulative log decay
/// G, the raw one, beta, e^G, e^(G_last - G), beta e^G.
/// The chunk map as a block reads it (PrefillEmitter::chunkMap): whether
/// it is the inline scan, the scan, and each lane's sequence's first token
/// and length (i64; 0 when not inline), and whether cu_seqlens is valid
/// (i1, uniform; when not, every sequence is empty: the call is skipped).
struct ChunkMap {
  Value inlineMap, scan, first, len, ok;
};

struct RowFactors {
  Value gam, gr, beta, eg, egl, beg;
};

class PrefillEmitter : protected KernelEmitter {
public:
  PrefillEmitter(ImplicitLocOpBuilder &b, gpu::GPUFuncOp func,
                 const PrefillSpec &s, const PrefillPlan &plan, Value smem)
      : KernelEmitter(b), func(func), s(s), plan(plan), smem(smem) {
    opType = s.ioType; // bf16 or f16 (the lowering rejects others)
    tid = arith::IndexCastOp::create(b, i32, gpu::ThreadIdOp::create(b, gpu::Dimension::x));
    warp = arith::DivUIOp::create(b, tid, cI32(32));
    lane = arith::RemUIOp::create(b, tid, cI32(32));
    group = arith::DivUIOp::create(b, lane, cI32(4));
    quad = arith::RemUIOp::create(b, lane, cI32(4));
    nWarps = plan.threads / 32;
  }

  void emitPrep();
  void emitChunks();
  /// chunks for the overlapped launch: the same items from a queue
  /// (PrefillOverlap.cpp).
  void emitQueue();
  void emitRecur();
  /// Context parallelism (PrefillSegments.cpp): recur over segments of each
  /// sequence with the transfer tiles beside the value tiles; the chain of
  /// segment transfers; the correction of the segments' outputs.
  void emitRecurSegments();
  void emitSegmentChain();
  void emitSegmentCorrection();

protected:
  /// Element (d, col) of a segment transfer [b | M] (f32, K (V + K)
  /// elements; `tr` counts transfers): b [K][V] row-major (col a value
  /// column), then M [K][K] (col a key column), stored transposed in
  /// region 8 (M[d][col] at col K + d: the chain's warp reads a column as
  /// one line) and row-major in cp_transfer (the C API's). d and col i64.
  Value transferIndex(Value tr, Value d, Value col, Value ofM, bool mTransposed);
  /// One (chunk, value head) item of chunks: flat = chunk * HV + head;
  /// its body is the plan's form (PrefillChunksForms.h).
  void chunkItem(Value flat);
  // The overlapped launch (PrefillOverlap.cpp): chunks takes its items
  // from a queue and publishes each one's ready flag; recur, launched
  // beside it, waits for a chunk's flag before it copies the chunk.
  /// Whether this is the queue kernel (emitQueue).
  bool queued = false;
  /// recur: whether this call is overlapped (the `overlap` parameter).
  Value overlapped() { return cmp(arith::CmpIPredicate::ne, param(pOverlap), cI32(0)); }
  /// The call's transposed recur reads raw q and k (RecurForm::TransposedRawQK
  /// and the host's `qk_raw`): chunks ran as `_chunks_raw`, without Qg, Kd.
  Value qkRaw() { return cmp(arith::CmpIPredicate::ne, param(pQkRaw), cI32(0)); }
  /// Whether the host passed the q and k tensor maps (`tma`).
  Value tmaMaps() { return cmp(arith::CmpIPredicate::ne, param(pTma), cI32(0)); }
  /// qk_raw = 2: the raw form in which recur computes W = A_w K itself
  /// (chunks_raw writes A_w instead of W).
  Value recurComputesW() { return cmp(arith::CmpIPredicate::eq, param(pQkRaw), cI32(2)); }
  /// recur, one thread: waits until item `ch` (chunk * HV + head) is
  /// published, when the call is overlapped.
  void awaitChunk(Value ch);
  /// recur as chunks' programmatic dependent: waits for the chunks grid
  /// (griddepcontrol.wait), unless the call is overlapped (awaitChunk).
  void waitForChunks() {
    if (!plan.chunkFlags())
      return waitForPrerequisiteGrid();
    ifThen(notI(overlapped()), [&] { waitForPrerequisiteGrid(); });
  }
  /// The checkpoint store of the block's sequence (PrefillCheckpoints.cpp);
  /// also zeroes the rows a skipped sequence or call would have stored.
  CheckpointStore recurCheckpoints(const CheckpointSite &q);
  /// The chain's loop over chunks [c0, c1) carrying `init`, `body` the step
  /// of chunk c (it returns the next carried values), with the checkpoint
  /// of boundary c0 before the loop and of c + 1 at the end of chunk c's
  /// step, after its products completed (`bind` shows the carried values
  /// to `each`). Returns the final carried values. (A store at the top of
  /// the step made ptxas serialise every wgmma of the sm_90a forms, its
  /// warning C7520, and recur 8-22 % slower on an H100 although no call
  /// kept a state; at the end, +0 to +3 % on an H200: journal, session 33.)
  SmallVector<Value> chainLoop(const CheckpointStore &ck, Value c0, Value c1, ValueRange init,
                               function_ref<void(ValueRange)> bind, StateElements each,
                               function_ref<SmallVector<Value>(Value c, ValueRange carried)> body);
  /// The `count` initial-state elements that `load` pushes (each state
  /// form's own order), read where `readOk`, else those `otherwise` pushes
  /// (null: zeros).
  SmallVector<Value> initialStateOrZero(
      Value readOk, int64_t count, function_ref<void(SmallVectorImpl<Value> &)> load,
      function_ref<void(SmallVectorImpl<Value> &)> otherwise = nullptr) {
    auto ifRead = scf::IfOp::create(b, TypeRange(SmallVector<Type>(count, f32)), readOk, true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifRead.thenBlock());
    SmallVector<Value> vals;
    load(vals);
    scf::YieldOp::create(b, vals);
    b.setInsertionPointToStart(ifRead.elseBlock());
    vals.clear();
    if (otherwise)
      otherwise(vals);
    else
      vals.assign(count, cF32(0.0));
    scf::YieldOp::create(b, vals);
    return SmallVector<Value>(ifRead.getResults());
  }
  /// The block's initial state (`count` elements that `each` lists by (d,
  /// col) in the form's order): read from the pool where q.readOk, else
  /// the identity's columns for a transfer block (q.transfer), else zeros.
  SmallVector<Value> initialStateOf(
      const RecurSequence &q, int64_t count,
      function_ref<void(function_ref<void(Value d, Value col)>)> each) {
    auto identity = [&](SmallVectorImpl<Value> &vals) {
      each([&](Value d, Value col) {
        Value one = andI(q.transfer, cmp(arith::CmpIPredicate::eq, d, add(q.m0, col)));
        vals.push_back(sel(one, cF32(1.0), cF32(0.0)));
      });
    };
    return initialStateOrZero(
        q.readOk, count,
        [&](SmallVectorImpl<Value> &vals) {
          each([&](Value d, Value col) {
            vals.push_back(loadInitialState(q.stateIndex(q.inSlot, d, col)));
          });
        },
        q.transfer ? function_ref<void(SmallVectorImpl<Value> &)>(identity) : nullptr);
  }
  /// Element (d, col) of the block's final state: q.storeFinal, else the
  /// pool's slot q.outSlot.
  void storeFinalOf(const RecurSequence &q, Value x, Value d, Value col) {
    if (q.storeFinal)
      return q.storeFinal(x, d, col);
    storeFinalState(x, [&] { return q.stateIndex(q.outSlot, d, col); });
  }
  /// Sequence n's slots and what its recur blocks may do with them (raises
  /// the error flag for an index past the pool; `mapOk`: cu_seqlens valid).
  SequenceSlots sequenceSlots(Value n, Value mapOk);
  /// Element (d, col) of value head hv's state in pool slot `slot`, V tile
  /// from column v0 (the spec's layout; slots slot_stride apart).
  Value poolStateIndex(Value slot, Value hv, Value v0, Value d, Value col);
  /// The sequence of chunk c (of all sequences' chunks): `ended` with the
  /// inline map (the lanes' count of sequences ending at or before c),
  /// else a binary search over prep's offsets.
  Value sequenceOfChunk(const ChunkMap &map, Value c, Value ended);
  /// With the inline map: the sequences whose chunks end at or before
  /// chunk c (a warp sum over the lanes' scan), sequenceOfChunk's `ended`.
  Value sequencesEndedBy(const ChunkMap &map, Value c) {
    return xorSum(arith::ExtUIOp::create(b, i32,
                                         andI(cmp(arith::CmpIPredicate::ult, lane, param(pN)),
                                              cmp(arith::CmpIPredicate::sle, map.scan, c))),
                  1, 16);
  }
  /// Chunks per segment in a context-parallel call, one length for every
  /// sequence: ceil(longest / segments), at least 1, the longest
  /// sequence's chunks from the inline map's lanes or from the word prep
  /// writes after its order. The longest sequence splits into `segments`
  /// pieces, a shorter one into fewer (its last segments are empty: b =
  /// 0, M = I), and one no longer than a segment runs whole: the split is
  /// made on the device from cu_seqlens, and the chain is as long as the
  /// longest sequence's segment either way (PrefillSegments.cpp).
  Value segmentLength(const ChunkMap &map);
  /// The segments sequence n of chunks [c0, c1) fills at `length` chunks
  /// a segment: ceil((c1 - c0) / length), at least 1, at most `segments`.
  /// Those past it are empty (b = 0, M = I): recur_cp skips their blocks
  /// and the chain stops before them.
  Value segmentsOf(Value c0, Value c1, Value length) {
    Value own = divu(add(sub(c1, c0), sub(length, cI32(1))), length);
    own = arith::MaxUIOp::create(b, own, cI32(1));
    return arith::MinUIOp::create(b, own, param(pSegments));
  }
  /// Where prep leaves the longest sequence's chunk count in region 0
  /// (deltac_abi::prefillLongestWord(N), linear in N).
  Value longestWordIndex() {
    constexpr int64_t perSequence = deltac_abi::prefillLongestWord(1) - deltac_abi::prefillLongestWord(0);
    return add(mul(param(pN), cI32(perSequence)), cI32(deltac_abi::prefillLongestWord(0)));
  }
  /// Whether the call is phase `phase` of context parallelism across
  /// ranks (cp_phase; PrefillSegments.cpp).
  Value rankPhase(int phase) { return cmp(arith::CmpIPredicate::eq, param(pCpPhase), cI32(phase)); }
  /// An initial-state element at `index` as f32.
  Value loadInitialState(Value index) { return loadF32(param(pInitial), s.stateType, index); }
  /// x stored to the final state at element index(), in the state's type
  /// (the conversion emitted first, as the forms always did).
  void storeFinalState(Value x, function_ref<Value()> index) {
    Value y = s.stateType.isF32() ? x : arith::TruncFOp::create(b, s.stateType, x).getResult();
    store(y, param(pFinal), index(), s.stateType.getIntOrFloatBitWidth() / 8);
  }
  /// Chunk c of a sequence (its chunks from c0, its tokens [bos, eos)):
  /// its first token, and how many of its C rows the sequence has.
  std::pair<Value, Value> chunkTokens(Value c, Value c0, Value bos, Value eos) {
    Value t0 = add(bos, mul(toI64(sub(c, c0)), cI64(s.chunk)));
    return {t0, toI32(arith::MinSIOp::create(b, cI64(s.chunk), sub(eos, t0)))};
  }
  /// O's elements (row, col) and (row, col + 1) of the chunk from token t0,
  /// value head hv, V tile from column v0, where row < rows: one store.
  void storeOutputPair(Value t0, Value rows, Value hv, Value v0, Value row, Value col, Value x0,
                       Value x1) {
    ifThen(cmp(arith::CmpIPredicate::slt, row, rows), [&] {
      Value tok = add(t0, toI64(row));
      Value at = add(add(mul(tok, param(pOStride)), mul(toI64(hv), cI64(s.v))),
                     toI64(add(v0, col)));
      storeOutputPairAt(param(pO), at, x0, x1);
    });
  }
  /// x0, x1 as two adjacent io-type elements of `ptr` from element `at`:
  /// one store.
  void storeOutputPairAt(Value ptr, Value at, Value x0, Value x1) {
    storeVec(pack2(x0, x1, s.ioType), ptr, s.ioType, at, 2 * s.ioType.getIntOrFloatBitWidth() / 8);
  }
  /// The store of chunk c's output pairs (row, col), (row, col + 1) for
  /// rows below `rows` (the chunk from token t0): into o's tile of (q.hv,
  /// q.v0), or, in recur_cp, where q.outTile says (asked once, here).
  std::function<void(Value row, Value col, Value x0, Value x1)>
  outputPairStore(const RecurSequence &q, Value c, Value t0, Value rows) {
    if (!q.outTile)
      return [this, t0, rows, hv = q.hv, v0 = q.v0](Value row, Value col, Value x0, Value x1) {
        storeOutputPair(t0, rows, hv, v0, row, col, x0, x1);
      };
    Value ptr, at, stride;
    std::tie(ptr, at, stride) = q.outTile(c, t0);
    return [this, rows, ptr, at, stride](Value row, Value col, Value x0, Value x1) {
      ifThen(cmp(arith::CmpIPredicate::slt, row, rows), [&] {
        storeOutputPairAt(ptr, add(at, add(mul(toI64(row), stride), toI64(col))), x0, x1);
      });
    };
  }
  /// The ring's depth from the launch's dynamic shared memory: 2 stages
  /// (`total` bytes), 3 where the host granted `stage` more, 1 where it gave
  /// `stage` fewer.
  RecurRing recurRing(int64_t total, int64_t stage, Value c0);
  /// The stage of chunk c: (c - c0) % stages (a remainder by a constant:
  /// one by the run-time `stages` would be a long division on every step's
  /// path).
  Value ringSlot(const RecurRing &r, Value c) {
    Value i = sub(c, r.c0);
    return sel(r.single, cI32(0), sel(r.deep, remu(i, cI32(3)), andI(i, cI32(1))));
  }
  /// The parity of chunk c's phase of its stage's mbarrier, whose phase
  /// flips once per chunk that uses the stage: that of the uses before it,
  /// (c - c0) / stages.
  Value ringPhase(const RecurRing &r, Value c) {
    Value i = sub(c, r.c0);
    Value uses = sel(r.single, i,
                     sel(r.deep, divu(i, cI32(3)), arith::ShRUIOp::create(b, i, cI32(1))));
    return andI(uses, cI32(1));
  }

  // Constants and arithmetic.
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
  /// Sum as a balanced tree (a short dependent chain).
  Value treeSum(SmallVector<Value> terms) {
    while (terms.size() > 1) {
      SmallVector<Value> half;
      for (size_t t = 0; t + 1 < terms.size(); t += 2)
        half.push_back(fadd(terms[t], terms[t + 1]));
      if (terms.size() % 2)
        half.push_back(terms.back());
      terms = half;
    }
    return terms.empty() ? cF32(0.0) : terms[0];
  }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value sel(Value c, Value x, Value y) { return arith::SelectOp::create(b, c, x, y); }
  Value toI32(Value v) { return v.getType() == i32 ? v : arith::TruncIOp::create(b, i32, v).getResult(); }
  Value toOp(Value v) { return arith::TruncFOp::create(b, opType, v); }
  Value param(Param p) { return func.getArgument(p); }
  /// Whether the call's `options` have deltac_abi::CallOptions bit `bit`.
  Value callOption(int32_t bit) {
    return cmp(arith::CmpIPredicate::ne, arith::AndIOp::create(b, param(pOptions), cI32(bit)),
               cI32(0));
  }
  void barrier() { gpu::BarrierOp::create(b); }
  /// Emits body() under `if (cond)` (no results, no else).
  void ifThen(Value cond, function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  // Memory.
  Value region(int64_t byteOffset) { return gep(smem, b.getI8Type(), cI64(byteOffset)); }
  Value load(Type t, Value base, Value idx, int64_t align) {
    return LLVM::LoadOp::create(b, t, gep(base, t, idx), align);
  }
  void store(Value v, Value base, Value idx, int64_t align) {
    LLVM::StoreOp::create(b, v, gep(base, v.getType(), idx), align);
  }
  /// Stores a vector at element `idx` of `elt` (the GEP steps by `elt`, not
  /// by the vector).
  void storeVec(Value v, Value base, Type elt, Value idx, int64_t align) {
    LLVM::StoreOp::create(b, v, gep(base, elt, idx), align);
  }
  /// A global element converted to f32.
  Value loadF32(Value base, Type elt, Value idx) {
    return toF32(load(elt, base, idx, elt.getIntOrFloatBitWidth() / 8));
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value notI(Value x) { return arith::XOrIOp::create(b, x, cTrue()); }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value fcmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, p, x, y);
  }
  Value notNull(Value p) {
    return LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::ne, p, LLVM::ZeroOp::create(b, ptr));
  }
  /// cu_seqlens[n] as i64 (int32 or int64 per the call; null: n * T / N).
  Value cuAt(Value n) {
    Value cu = param(pCu);
    auto ifNull = scf::IfOp::create(b, TypeRange{i64}, isNull(cu), true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifNull.thenBlock());
      Value perSeq = arith::DivSIOp::create(b, param(pT), toI64(param(pN)));
      scf::YieldOp::create(b, mul(toI64(n), perSeq));
      b.setInsertionPointToStart(ifNull.elseBlock());
      // Bit 0 of cu_is_i64: cu_seqlens is int64 (bit 1: the index arrays).
      Value wide = cmp(arith::CmpIPredicate::ne, andI(param(pCuIsI64), cI32(1)), cI32(0));
      Value as64 = load(i64, cu, n, 8);
      Value as32 = toI64(load(i32, cu, n, 4));
      scf::YieldOp::create(b, sel(wide, as64, as32));
    }
    return ifNull.getResult(0);
  }
  void raiseError() {
    LLVM::StoreOp::create(b, cI32(1), param(pErrorFlag), 4);
  }

  /// The chunk map without prep (N <= kPrefillInlineSequences): lane l of
  /// every warp returns the chunks of sequences 0..l (inclusive scan of
  /// ceil(len / C)), and sequence l's first token and length (0 past N);
  /// `check` raises the error flag for a bad cu_seqlens, as prep does.
  /// chunkOffset(scan, n) is sequence n's first chunk.
  ChunkMap inlineChunkScan(Value check);
  /// Chunks of a sequence of `len` tokens (i64; a negative length, which
  /// the checks flag, counts as empty), as i32.
  Value chunksOf(Value len) {
    Value clamped = arith::MaxSIOp::create(b, len, cI64(0));
    return toI32(arith::DivUIOp::create(b, add(clamped, cI64(s.chunk - 1)), cI64(s.chunk)));
  }
  Value chunkOffset(Value scan, Value n);
  /// Sequence n's first chunk (n <= N): from the scan when `inlineMap`,
  /// else from prep's offsets in the workspace.
  Value chunkOffsetOf(Value inlineMap, Value scan, Value n);
  /// The map's source for this call, and the scan (0 when not inline).
  ChunkMap chunkMap(Value check);
  /// Sequence n's first and one-past-last token: shuffled from the lanes
  /// that read them for the inline scan (a dependent global load less at
  /// each block's start), else read from cu_seqlens.
  std::pair<Value, Value> sequenceBounds(const ChunkMap &map, Value n);
  /// Whether sequence n's bounds [first, end) (i64, read from cu_seqlens)
  /// are bad: outside [0, T], decreasing, or a first sequence not at 0.
  Value boundsBad(Value n, Value first, Value end);
  /// The tokens the sequences cover, [0, cu_seqlens[N]) (0 when cu_seqlens
  /// is invalid): recur zeroes o past them (zeroUncovered).
  Value coveredTokens(const ChunkMap &map);
  /// o = 0 for tokens [from, T) of every value head, by the whole grid of
  /// recur (a serving engine's padding, or every token of a skipped call).
  void zeroUncovered(Value from);
  /// o = 0 for tokens [bos, eos) (i64) of value head hv, columns [v0, v0 +
  /// cols), by this block's threads: a recur block's share of a skipped
  /// sequence (a pool index past the pool).
  void zeroSequence(Value bos, Value eos, Value hv, Value v0, int64_t cols);
  /// The loop both share: for i in [start, count) by `step`, a 16-byte zero
  /// store into o at element pieceAt(i).
  void zeroPieces(Value start, Value count, Value step, function_ref<Value(Value i)> pieceAt);
  /// The sequence a recur block at grid position `position` (< N) takes:
  /// sequences by chunk count, longest first (ties in their order), so
  /// that the longest chains start in the first wave wherever the caller
  /// lists them: ranked by the warp with the inline map, else read from
  /// prep's order where N is at most its threads; else `position` itself.
  Value longestFirst(const ChunkMap &map, Value position);

  // Workspace regions (element offsets computed from the call's sizes).
  Value workRegion(int64_t which);
  /// Where element (row, col) of a chunk's [C][cols] 16-bit result lives
  /// in its tile of workspace region `which` (2 W, 3 U, 4 Qg, 5 Kd, 6 P):
  /// recur's padded shared-memory rows (U: [C][V]), or, for the warpgroup
  /// recur (PrefillPlan::swizzledWorkspace), wgmma's 128-byte-swizzled images
  /// (W, Qg, Kd, P: a [C][64] block per 64 columns, 16-byte group j of
  /// row r at j ^ (r % 8)) and U in 16-column tiles ([V / 16][C][16], so
  /// that a V tile is one contiguous block). `col` is a multiple of the
  /// vector that is stored there (at most 8 elements).
  Value workTileAt(int64_t which, Value row, Value col) {
    int64_t C = s.chunk;
    if (!plan.swizzledWorkspace()) {
      int64_t ld = which == 3 ? s.v : which == 6 ? C + kRowPad : s.k + kRowPad;
      return toI64(add(mul(row, cI32(ld)), col));
    }
    if (which == 3)
      return toI64(add(mul(divu(col, cI32(16)), cI32(C * 16)),
                       add(mul(row, cI32(16)), remu(col, cI32(16)))));
    return toI64(swizzledAt(row, col, C));
  }
  /// Element (row, col) of a 16-bit 128-byte-swizzled image of `rows` rows
  /// (a [rows][64] block per 64 columns, 16-byte group j of row r at
  /// j ^ (r % 8)), as wgmma reads it from a 1024-byte bound.
  Value swizzledAt(Value row, Value col, int64_t rows) {
    Value inBlock = remu(col, cI32(64));
    Value swizzled = arith::XOrIOp::create(b, divu(inBlock, cI32(8)), remu(row, cI32(8)));
    return add(mul(divu(col, cI32(64)), cI32(rows * 64)),
               add(mul(row, cI32(64)), add(mul(swizzled, cI32(8)), remu(col, cI32(8)))));
  }
  Value chunkHead(Value c, Value hv) { return add(mul(toI64(c), toI64(param(pHV))), toI64(hv)); }
  /// The q/k head value head `hv` reads (GVA: HV / H value heads per head).
  Value keyHead(Value hv) { return divu(hv, divu(param(pHV), param(pH))); }

  /// How the warps share an M x N product of 16x8 tiles: a wm x wn grid of
  /// warps, each owning a block of (M/16/wm) x (N/8/wn) tiles, so that per
  /// k step a warp loads each A fragment (one per tile row of its block,
  /// 4 registers) and each B fragment (one per tile column, 2) once. The
  /// grid with the fewest fragment loads wins; {0, 0} when no grid divides
  /// the tiles (then tile `warp + r * warps` of the row-major numbering).
  std::pair<int64_t, int64_t> warpGrid(int64_t M, int64_t N) const {
    int64_t warps = nWarps, Mt = M / 16, Nt = N / 8;
    std::pair<int64_t, int64_t> best{0, 0};
    int64_t bestLoads = INT64_MAX;
    for (int64_t wm = 1; wm <= warps; wm *= 2) {
      int64_t wn = warps / wm;
      if (Mt % wm != 0 || Nt % wn != 0)
        continue;
      int64_t loads = Mt / wm * 4 + Nt / wn * 2;
      if (loads < bestLoads)
        best = {wm, wn}, bestLoads = loads;
    }
    return best;
  }
  int64_t tilesPerWarp(int64_t M, int64_t N) const {
    return (M / 16) * (N / 8) / nWarps;
  }
  /// The (row, column) origin of this warp's r-th tile.
  std::pair<Value, Value> tileOrigin(int64_t M, int64_t N, int64_t r) {
    auto [wm, wn] = warpGrid(M, N);
    Value mt, nt;
    if (wm == 0) {
      Value tile = add(warp, cI32(r * nWarps));
      mt = divu(tile, cI32(N / 8));
      nt = remu(tile, cI32(N / 8));
    } else {
      int64_t tm = M / 16 / wm, tn = N / 8 / wn;
      mt = add(mul(divu(warp, cI32(wn)), cI32(tm)), cI32(r / tn));
      nt = add(mul(remu(warp, cI32(wn)), cI32(tn)), cI32(r % tn));
    }
    return {mul(mt, cI32(16)), mul(nt, cI32(8))};
  }
  /// acc += A[M x Kd] * B[Kd x N] for this warp's tiles, 16-bit operands in
  /// shared memory loaded with ldmatrix (.trans where the operand's rows
  /// are the reduction index). A warp with fewer than `accumulators`
  /// tiles splits each tile's chain of k steps over several partial sums
  /// (accumulators / tiles, at most one per two k steps). The
  /// fragments are loaded as many k steps ahead of their products as fit
  /// in `prefetchRegs` registers per thread (at least one step).
  void mma(Operand A, Operand B, int64_t M, int64_t N, int64_t Kd,
           SmallVectorImpl<Frag> &acc, int64_t accumulators = 2,
           int64_t prefetchRegs = 0);
  /// f += A B for one 16x8 tile: mma.sync.m16n8k16 with fp32 accumulators
  /// on the A fragment registers a0..a3 and the B fragment registers b0, b1.
  void mmaTile(ArrayRef<Value> a, Value b0, Value b1, Frag &f);
  /// acc += A[16 x Kd] * B[Kd x N] in one warp: A from registers (per k
  /// step the four 32-bit A fragment registers of mma.m16n8k16), acc the
  /// warp's N / 8 tiles of 16 rows, B from shared memory two tiles per
  /// ldmatrix.x4, loaded up to `prefetchRegs` registers ahead.
  void mmaRowBlock(ArrayRef<std::array<Value, 4>> a, Operand B, int64_t N,
                   int64_t Kd, SmallVectorImpl<Frag> &acc, int64_t prefetchRegs);
  /// The A fragments of k step `ks` from 16-row accumulator tiles whose
  /// columns are the reduction index, packed to 16 bits as pairs (tile j's
  /// (c0, c1) at 2j, (c2, c3) at 2j + 1): tiles 2 ks and 2 ks + 1 are
  /// exactly a0..a3, so an mma result feeds the next product without
  /// leaving the registers.
  std::array<Value, 4> pairsToA(ArrayRef<Value> pairs, int64_t ks) {
    return {pairs[4 * ks], pairs[4 * ks + 1], pairs[4 * ks + 2], pairs[4 * ks + 3]};
  }
  /// Two f32 as two 16-bit operands in one 32-bit register.
  Value packI32(Value x0, Value x1) {
    return LLVM::BitcastOp::create(b, i32, pack2(x0, x1, opType));
  }
  /// ldmatrix of `num` 8x8 b16 matrices at this lane's row address.
  SmallVector<Value> ldsm(Value rowAddr, int num, bool trans);
  SmallVector<Frag> zeroFrags(int64_t M, int64_t N) {
    SmallVector<Frag> f(tilesPerWarp(M, N));
    for (Frag &x : f)
      for (Value &c : x.c)
        c = cF32(0.0);
    return f;
  }
  /// Calls fn(row, col, value) for every element of this warp's tiles.
  void forEachElement(int64_t M, int64_t N, ArrayRef<Frag> acc,
                      function_ref<void(Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(M, N, r);
      for (int e = 0; e < 4; ++e) {
        Value row = add(row0, add(group, cI32(e >= 2 ? 8 : 0)));
        Value col = add(col0, add(mul(quad, cI32(2)), cI32(e % 2)));
        fn(row, col, f.c[e]);
      }
    }
  }
  /// Calls fn(row, col, x0, x1) for every pair of adjacent elements (col
  /// even) of this warp's tiles: one 4-byte store instead of two.
  void forEachPair(int64_t M, int64_t N, ArrayRef<Frag> acc,
                   function_ref<void(Value, Value, Value, Value)> fn) {
    for (auto [r, f] : llvm::enumerate(acc)) {
      auto [row0, col0] = tileOrigin(M, N, r);
      Value col = add(col0, mul(quad, cI32(2)));
      fn(add(row0, group), col, f.c[0], f.c[1]);
      fn(add(row0, add(group, cI32(8))), col, f.c[2], f.c[3]);
    }
  }
  /// Two f32 as a vector of two `elt`.
  Value pack2(Value x0, Value x1, Type elt) {
    auto vt = VectorType::get({2}, elt);
    Value v = LLVM::UndefOp::create(b, vt);
    auto conv = [&](Value x) { return elt.isF32() ? x : arith::TruncFOp::create(b, elt, x).getResult(); };
    v = LLVM::InsertElementOp::create(b, v, conv(x0), cI32(0));
    return LLVM::InsertElementOp::create(b, v, conv(x1), cI32(1));
  }

  /// A loop over [0, count) in steps of the block's threads: a real loop
  /// (unrolling everything only raises register pressure and code size), or
  /// unrolled where the body's global loads should all be in flight.
  void threadLoop(int64_t count, function_ref<void(Value)> body,
                  bool unroll = false) {
    int64_t n = nWarps * 32;
    auto guarded = [&](Value i) {
      if (count % n == 0) {
        body(i);
        return;
      }
      ifThen(cmp(arith::CmpIPredicate::ult, i, cI32(count)), [&] { body(i); });
    };
    if (unroll) {
      for (int64_t base = 0; base < count; base += n)
        guarded(add(tid, cI32(base)));
      return;
    }
    auto loop = scf::ForOp::create(b, cI32(0), cI32(count), cI32(n));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    guarded(add(tid, loop.getInductionVar()));
  }
  /// Starts copying `rows` x `cols` 16-bit elements (cols % 8 == 0) from global (row
  /// stride `cols`) to shared memory (row stride cols + pad) with cp.async,
  /// 16 bytes per instruction, all in flight; waitCopies() completes them.
  void copyTile(Value dst, Value src, Value srcBase, int64_t rows, int64_t cols,
                int64_t srcStride = 0) {
    int64_t vecs = cols / 8;
    if (srcStride == 0)
      srcStride = cols;
    threadLoop(rows * vecs, [&](Value i) {
      Value r = divu(i, cI32(vecs)), c = mul(arith::RemUIOp::create(b, i, cI32(vecs)), cI32(8));
      Value from = gep(src, opType, add(srcBase, toI64(add(mul(r, cI32(srcStride)), c))));
      Value to = gep(dst, opType, toI64(add(mul(r, cI32(cols + kRowPad)), c)));
      cpAsync16(to, from);
    }, /*unroll=*/true);
  }
  /// Starts copying `count` 16-bit elements (count % 8 == 0) that are laid
  /// out alike in global and shared memory: thread t copies vectors t,
  /// t + threads, ..., so every address is a register plus a constant.
  void copyBlock(Value dst, Value src, Value srcBase, int64_t count) {
    Value from = gep(src, opType, srcBase);
    threadLoop(count / 8, [&](Value i) {
      Value at = toI64(mul(i, cI32(8)));
      cpAsync16(gep(dst, opType, at), gep(from, opType, at));
    }, /*unroll=*/true);
  }
  /// Starts copying a chunk's rows (token t0 on, `rows` of them real) of
  /// one head of q, k or v (`width` 16-bit columns at `headOffset`, tokens
  /// `stride` apart) by 16-byte cp.async into a 128-byte-swizzled image at
  /// `dst` ([width / 64][C][64]), every piece in flight at once. Rows past
  /// the sequence copy its chunk's first token: the callers' factors are
  /// 0 there, so nothing of them reaches a result.
  void copySwizzledRows(Value dst, Value src, Value stride, Value headOffset, int64_t width,
                        Value t0, Value rows, bool stepped = false) {
    int64_t pieces = width / 8, C = s.chunk, n = nWarps * 32;
    if (stepped && n % pieces == 0 && (C * pieces) % n == 0 && (n / pieces) % 8 == 0) {
      // Each thread copies one 16-byte column piece of rows r0 + m k (m:
      // the rows one pass covers): its source steps by m row strides, its
      // swizzled destination by a constant (m keeps the rows' phase in the
      // swizzle's 8). Fewer instructions, but two 64-bit pointers live
      // across the copies (chunks' 80-register forms spill with it).
      int64_t step = n / pieces;
      Value r0 = divu(tid, cI32(pieces)), col = mul(remu(tid, cI32(pieces)), cI32(8));
      Value firstTok = gep(src, s.ioType, add(add(mul(t0, stride), headOffset), toI64(col)));
      Value from = gep(firstTok, s.ioType, mul(toI64(r0), stride));
      Value to = gep(dst, opType, swizzledAt(r0, col, C));
      for (int64_t k = 0; k < C * pieces / n; ++k) {
        Value valid = cmp(arith::CmpIPredicate::slt, add(r0, cI32(k * step)), rows);
        cpAsync16(gep(to, opType, cI32(k * step * 64)), sel(valid, from, firstTok));
        from = gep(from, s.ioType, mul(stride, cI64(step)));
      }
      return;
    }
    threadLoop(C * pieces, [&](Value i) {
      Value r = divu(i, cI32(pieces)), col = mul(remu(i, cI32(pieces)), cI32(8));
      Value tok = add(t0, toI64(sel(cmp(arith::CmpIPredicate::slt, r, rows), r, cI32(0))));
      Value from = gep(src, s.ioType, add(add(mul(tok, stride), headOffset), toI64(col)));
      cpAsync16(gep(dst, opType, swizzledAt(r, col, C)), from);
    }, /*unroll=*/true);
  }
  // The GPU primitives the prefill kernels use, in one place: NVVM ops
  // where MLIR 22 has one (translated to the NVVM intrinsics), inline PTX
  // where it has none or cannot say what the kernel does, each with why.
  /// A 16-byte cp.async (L2 only) of global `src` to shared `dst`.
  void cpAsync16(Value dst, Value src) {
    NVVM::CpAsyncOp::create(b, dst, src, 16, NVVM::LoadCacheModifierKind::CG, Value());
  }
  /// A 4-byte cp.async (cp.async.cg moves 16 bytes only).
  void cpAsync4(Value dst, Value src) {
    NVVM::CpAsyncOp::create(b, dst, src, 4, NVVM::LoadCacheModifierKind::CA, Value());
  }
  void commitCopies() { NVVM::CpAsyncCommitGroupOp::create(b); }
  /// Waits for all of this thread's cp.async, committed or not. (The
  /// intrinsic by name: NVVM has cp.async.wait.group only, which leaves the
  /// uncommitted copies in flight.)
  void waitCopies() {
    LLVM::CallIntrinsicOp::create(b, b.getStringAttr("llvm.nvvm.cp.async.wait.all"), ValueRange{});
  }
  /// Programmatic dependent launch (sm_90+): let the dependent grid start /
  /// wait for the grid this one depends on.
  void launchDependents() {
    NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::launch_dependents);
  }
  void waitForPrerequisiteGrid() { NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::wait); }
  /// setmaxnreg: this warpgroup's registers per thread up or down to `n`.
  void setMaxRegisters(int64_t n, bool increase) {
    NVVM::SetMaxRegisterOp::create(b, uint32_t(n),
                                   increase ? NVVM::SetMaxRegisterAction::increase
                                            : NVVM::SetMaxRegisterAction::decrease);
  }
  /// Bulk stores (sm_90+): `bytes` of shared memory at 32-bit shared
  /// address `from` to global `dst`, in this thread's bulk group; the
  /// group committed, and waited for (`read`: until the source may be
  /// overwritten; else until the writes are done).
  void bulkStore(Value dst, Value from, Value bytes) {
    NVVM::CpAsyncBulkSharedCTAToGlobalOp::create(b, dst, sharedPtr(from), bytes, Value(), Value());
  }
  void bulkCommit() { NVVM::CpAsyncBulkCommitGroupOp::create(b); }
  void bulkWait(bool read) {
    NVVM::CpAsyncBulkWaitGroupOp::create(b, 0, read ? b.getUnitAttr() : UnitAttr());
  }
  /// Global writes of the async proxy (bulk stores) made visible to the
  /// generic proxy, and the reverse before bulk copies read global memory.
  void fenceProxyAsyncGlobal() { NVVM::FenceProxyOp::create(b, NVVM::ProxyKind::async_global, {}); }
  /// stmatrix .x4 (.trans): four 8x8 16-bit matrices of this warp, the
  /// registers `regs` (two elements each), to the rows at 32-bit shared
  /// address `addr`.
  void stmatrix(Value addr, ArrayRef<Value> regs, bool trans) {
    NVVM::StMatrixOp::create(b, sharedPtr(addr), regs,
                             trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
                             NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
                             NVVM::LdStMatrixEltType::B16);
  }
  /// Waits until at most `pending` of this thread's newest copy groups are
  /// still in flight.
  /// (Inline PTX: the intrinsic's immediate operand would be merged into a
  /// phi where two branches wait for different counts.)
  void waitCopyGroups(int64_t pending) {
    LLVM::InlineAsmOp::create(b, Type(), ValueRange{},
                              "cp.async.wait_group " + std::to_string(pending) + ";", "",
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  }
  /// The gate input of a token as a log decay, and its beta.
  std::pair<Value, Value> gateAndBeta(Value tok, Value hv);
  Value betaOf(Value tok, Value hv);
  /// The log decay of channel d (per-channel gates, rule kda).
  Value channelGate(Value tok, Value hv, Value d);
  /// gate = call / channel_call: the log decay of the input at `at` (a
  /// log g, or a raw a with dt_bias[biasAt] as the call says) of head hv.
  Value gateByCall(Value at, Value hv, Value biasAt);
  /// A raw gate's log decay from x = a + dt_bias (rawLogDecay: softplus,
  /// or bounded where the lower_bound parameter is a number), with
  /// exp(A_log[hv]) (1 for a null A_log).
  Value rawDecay(Value x, Value hv);
  /// base[idx] (f32) as f32, or `otherwise` for a null base (FLA's optional
  /// A_log and dt_bias).
  Value loadF32Or(Value base, Value idx, double otherwise);
  /// One 16x8 tile of A[m0.., :Kd] * B[n0.., :Kd]^T (both row-major with
  /// the reduction index along rows' columns) by this warp, at run-time
  /// origins m0, n0.
  Frag tileProduct(Operand A, Value m0, Operand B, Value n0, int64_t Kd);

  /// While alive, the products, element loops and thread loops run on
  /// warps [first, first + count) only, as if they were the whole block:
  /// `warp` and `tid` count from the role's first warp.
  class WarpRole {
  public:
    WarpRole(PrefillEmitter &e, int64_t first, int64_t count)
        : e(e), warp(e.warp), tid(e.tid), nWarps(e.nWarps) {
      e.warp = e.sub(warp, e.cI32(first));
      e.tid = e.sub(tid, e.cI32(first * 32));
      e.nWarps = count;
    }
    ~WarpRole() { e.warp = warp, e.tid = tid, e.nWarps = nWarps; }

  private:
    PrefillEmitter &e;
    Value warp, tid;
    int64_t nWarps;
  };
  /// Named barriers (ids 1-15) among `threads` threads: sync waits for
  /// all of them, arrive only counts this thread in (a producer's signal;
  /// its earlier memory accesses are ordered before the waiting threads').
  void namedSync(Value id, int64_t threads) {
    NVVM::BarrierOp::create(b, TypeRange{}, id, cI32(threads), {}, Value{});
  }
  void namedArrive(Value id, int64_t threads) {
    // Inline PTX: nvvm.barrier.arrive needs a conversion pass of its own.
    LLVM::InlineAsmOp::create(b, Type(), ValueRange{id, cI32(threads)}, "bar.arrive $0, $1;",
                              "r,r", /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  }

  /// Inline PTX with one result of type `t` ($0, "=r" or "=l" first in
  /// `constraints`); never hoisted or merged (it has side effects).
  Value ptxValue(Type t, StringRef text, StringRef constraints, ValueRange args) {
    return LLVM::InlineAsmOp::create(b, t, args, text, constraints,
                                     /*has_side_effects=*/true, /*is_align_stack=*/false,
                                     LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }
  /// An inline-PTX statement, for the instructions no NVVM op expresses
  /// (each caller says why).
  void ptx(StringRef text, StringRef constraints, ValueRange args) {
    LLVM::InlineAsmOp::create(b, Type(), args, text, constraints,
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  }
  /// A shared-memory pointer as the 32-bit address PTX's [reg] takes.
  Value sharedAddr(Value p) { return LLVM::PtrToIntOp::create(b, i32, p); }
  /// The reverse: a 32-bit shared address as the pointer the NVVM ops take.
  Value sharedPtr(Value addr) {
    return LLVM::IntToPtrOp::create(b, LLVM::LLVMPointerType::get(b.getContext(), 3), addr);
  }
  void mbarInit(Value bar, int64_t count) { mbarInit(bar, cI32(count)); }
  void mbarInit(Value bar, Value count) { NVVM::MBarrierInitOp::create(b, bar, count, Value()); }
  /// Makes the initialised mbarriers visible to the bulk-copy unit.
  void mbarInitFence() { NVVM::FenceMbarrierInitOp::create(b); }
  /// This thread's arrival, announcing `bytes` of copies to complete.
  void mbarArriveExpect(Value bar, int64_t bytes) { mbarArriveExpect(bar, cI32(bytes)); }
  void mbarArriveExpect(Value bar, Value bytes) {
    NVVM::MBarrierArriveExpectTxOp::create(b, Type(), bar, bytes, NVVM::MemScopeKind::CTA,
                                           /*relaxed=*/false, Value());
  }
  /// This thread's arrival (its state token unused).
  void mbarArrive(Value bar) {
    NVVM::MBarrierArriveOp::create(b, b.getI64Type(), bar, Value(), NVVM::MemScopeKind::CTA);
  }
  /// An arrival when this thread's cp.async so far complete, not counted in
  /// the expected arrivals (.noinc).
  void mbarArriveOnCopies(Value bar) { NVVM::CpAsyncMBarrierArriveOp::create(b, bar, true); }
  // Bulk copies into shared memory stay inline PTX: the NVVM ops take a
  // shared::cluster (address space 7) destination and barrier, and these
  // kernels address the CTA's own window (shared::cta) and run no cluster.
  void bulkCopy(Value dst, Value src, int64_t bytes, Value bar) {
    ptx("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
        "r,l,r,r", {sharedAddr(dst), src, cI32(bytes), sharedAddr(bar)});
  }
  /// A TMA tensor copy of the box at {x, y, z} of tensor map `map` (a
  /// kernel's ParamKind::TensorMap parameter) into shared memory at `dst`,
  /// completing on `bar` (its bytes count there, zero-filled ones too).
  void tensorCopy3d(Value dst, Value map, Value x, Value y, Value z, Value bar) {
    ptx("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
        "[$0], [$1, {$2, $3, $4}], [$5];",
        "r,l,r,r,r,r",
        {sharedAddr(dst), LLVM::PtrToIntOp::create(b, b.getI64Type(), map), x, y, z,
         sharedAddr(bar)});
  }
  /// TMA tensor copies of a chunk's rows into the swizzled [C][width] image
  /// at `dst` (one [C][64] block per 64 columns): boxes {64 columns, head
  /// `head`, C tokens from token t0} of `map`, completing on `bar`.
  void tensorCopyImage(Value dst, Param map, Value head, Value t0, int64_t width, Value bar) {
    for (int64_t blk = 0; blk < width / 64; ++blk)
      tensorCopy3d(gep(dst, b.getI8Type(), cI32(blk * s.chunk * 128)), param(map), cI32(64 * blk),
                   head, t0, bar);
  }
  /// Waits until the mbarrier's phase of parity `parity` has completed.
  /// (Inline PTX: the spin loop around try_wait stays in one asm block, so
  /// no compiler code runs between the tries.)
  void mbarWait(Value bar, Value parity) {
    ptx("{\n.reg .pred done;\nwait:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
        "@!done bra wait;\n}",
        "r,r", {sharedAddr(bar), parity});
  }

  // wgmma (sm_90a; PrefillWgmma.cpp). Operands are 128-byte-swizzled
  // shared-memory images that start on 1024-byte bounds (wgmmaDescHigh).
  /// The first 1024-byte bound of the dynamic shared memory: as a pointer
  /// and as the 32-bit shared address the descriptors take.
  std::pair<Value, Value> alignedSmem();
  /// Row of accumulator register 4 j + e of wgmma m64nNk16 (fp32) in its
  /// 64-row block: 16 wl + g (+ 8 for e >= 2), wl = the warp in its
  /// warpgroup; its column: 8 j + 2 t (+ 1 for odd e).
  Value wgRow(Value wl, int64_t e) { return add(mul(wl, cI32(16)), add(group, cI32(e >= 2 ? 8 : 0))); }
  Value wgCol(int64_t j, int64_t e) { return add(cI32(8 * j), add(mul(quad, cI32(2)), cI32(e % 2))); }
  /// An inline-asm statement that takes `acc` (f32) and, if given,
  /// `frags` (i32) and gives them back, so that LLVM orders every use of
  /// them after it and every definition before it (wgmma's fence and wait
  /// must bracket them).
  void throughAsm(StringRef text, ArrayRef<Value> extra, StringRef extraConstraints,
                  SmallVector<Value> &acc, SmallVector<Value> *frags = nullptr);
  void wgFence(SmallVector<Value> &acc) { throughAsm("wgmma.fence.sync.aligned;", {}, "", acc); }
  void wgWait(int64_t pending, SmallVector<Value> &acc) {
    throughAsm("wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";", {}, "", acc);
  }
  void wgCommit() { NVVM::WgmmaGroupSyncAlignedOp::create(b); }
  /// The descriptor of the image at shared address `addr`.
  Value smemDesc(Value addr, uint64_t high) {
    Value lo = arith::ExtUIOp::create(b, i64, arith::ShRUIOp::create(b, andI(addr, cI32(0x3FFFF)), cI32(4)));
    return orI(lo, cI64(int64_t(high)));
  }
  /// A descriptor `bytes` further on.
  Value descPlus(Value d, int64_t bytes) { return add(d, cI64(bytes >> 4)); }
  /// acc (+)= A B for one k step of 16, N = 2 acc.size() (accumulate =
  /// false: acc = A B); transA / transB: the operand is MN-major.
  void wgmma(SmallVector<Value> &acc, Value da, Value db, bool accumulate, bool transA,
             bool transB = false);
  /// One wgmma.mma_async: `ab` is A (a descriptor, or a fragment's four
  /// registers) then B's descriptor; `trans` the transpose immediates.
  void wgmmaAsm(SmallVector<Value> &acc, ArrayRef<Value> ab, StringRef abConstraints,
                bool accumulate, StringRef trans);
  /// The same with A from registers: `a` is this thread's fragment of the
  /// 64x16 A (four 32-bit registers of two 16-bit elements, the layout of
  /// mma.m16n8k16's A in each warp's 16 rows).
  void wgmmaRegA(SmallVector<Value> &acc, ArrayRef<Value> a, Value db, bool accumulate,
                 bool transB);
  /// wgmma's fence over accumulators `acc` (f32) and A fragments `frags`
  /// (i32), both passed through it (see throughAsm): registers an ordinary
  /// instruction wrote must be fenced before a wgmma reads them.
  void wgFenceAll(SmallVector<Value> &acc, SmallVector<Value> &frags);
  /// Generic-proxy writes of shared memory (st.shared, stmatrix, cp.async)
  /// made visible to the async proxy (wgmma, bulk copies) of the threads
  /// that synchronise with this one.
  void fenceProxyAsync() {
    NVVM::FenceProxyOp::create(
        b, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
  }
  /// Stores this warpgroup's m64n64 accumulator block (rounded to 16 bits)
  /// with stmatrix: the 16-byte row piece of `row`, columns 8 j .. 8 j + 7,
  /// at shared address addrOf(row, j) (wl: the warp in its warpgroup).
  void stmatrixBlock(Value wl, ArrayRef<Value> x, function_ref<Value(Value, Value)> addrOf);
  /// Shared address of row `row`, 8-column group j, of the 128-byte-swizzled
  /// [rows][64] image at shared address `img`.
  Value swizzledRow(Value img, Value row, Value j) {
    Value group16 = arith::XOrIOp::create(b, j, remu(row, cI32(8)));
    return add(img, add(mul(row, cI32(128)), mul(group16, cI32(16))));
  }

  gpu::GPUFuncOp func;
  const PrefillSpec &s;
  const PrefillPlan &plan;
  Value smem;
  Type opType;
  Value tid, warp, lane, group, quad;
  /// The warps that share products and thread loops (WarpRole narrows it).
  int64_t nWarps;
};

} // namespace mlir::delta::prefill

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLEMITTER_H
