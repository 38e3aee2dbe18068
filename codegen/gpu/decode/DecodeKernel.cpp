//===- DecodeKernel.cpp - the recurrent-step (decode) GPU kernel -*- C++ -*-===//
//
// Decode is pure bandwidth: the state (K*V*4 bytes per head in f32) dwarfs
// q, k, v and o. The kernel therefore
//   - reads each state element once with 16-byte loads, coalesced across the
//     lanes that share a row, all loads of a thread issued before first use;
//   - keeps the state in registers for all T tokens (T <= max_t), writing it
//     once at the end (and per step only when a step buffer is given);
//   - fuses gate, beta and q/k L2 norm, and does all arithmetic in f32,
//     rounding o and the state once.
// Per value row r (vk layout: row r of S^T, K contiguous) and token t:
//   d = decay, pk = S_r . k, pq = S_r . q       (one pass, both dots)
//   u = beta (v_r - d pk),  o_r = scale (d pq + u (k . q)),  S_r = d S_r + u k
// which equals the reference's decay-then-update order exactly in real
// arithmetic (o reads the updated state). per_value specs (FLA's gv and
// per-value beta) give row r its own beta_r and d_r = decay exp(gv_r).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/decode/DecodeKernel.h"
#include "codegen/gpu/decode/DecodeEmitter.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::decode;
using namespace deltac_abi; // the flags' bits

ArrayRef<KernelParam> mlir::delta::decodeKernelParams() {
  static const KernelParam params[] = {
      {"q", ParamKind::Pointer},           {"k", ParamKind::Pointer},
      {"v", ParamKind::Pointer},           {"g", ParamKind::Pointer},
      {"beta", ParamKind::Pointer},        {"A_log", ParamKind::Pointer},
      {"dt_bias", ParamKind::Pointer},     {"o", ParamKind::Pointer},
      {"state", ParamKind::Pointer},       {"in_idx", ParamKind::Pointer},
      {"out_idx", ParamKind::Pointer},     {"step_states", ParamKind::Pointer},
      {"error_flag", ParamKind::Pointer},  {"T", ParamKind::I32},
      {"H", ParamKind::I32},               {"HV", ParamKind::I32},
      {"slots", ParamKind::I64},           {"q_stride", ParamKind::I64},
      {"k_stride", ParamKind::I64},        {"v_stride", ParamKind::I64},
      {"o_stride", ParamKind::I64},        {"scale", ParamKind::F32},
      {"flags", ParamKind::I32},           {"step_slots", ParamKind::Pointer},
      {"num_accepted", ParamKind::Pointer},
      {"step_slots_stride", ParamKind::I64},
      {"cu_seqlens", ParamKind::Pointer},  {"state_in", ParamKind::Pointer},
      {"slot_stride", ParamKind::I64},     {"lower_bound", ParamKind::F32},
      {"gv", ParamKind::Pointer}};
  static_assert(sizeof(params) / sizeof(params[0]) == kNumParams);
  return params;
}

/// vk: lanes per row as many as keep at least 16 elements per lane (64 bytes
/// of f32 in flight), a power of two dividing the row, and at least two so a
/// warp covers at most 16 rows (then V >= 16 divides evenly); 64 state
/// registers per thread, 32 when the next token's inputs are prefetched,
/// 128 in the staged form.
/// kv: a tile of 32 value columns (16 when V is not a multiple of 32), the
/// K rows split over lane groups and up to four warps, at most 64 state
/// registers per thread; staged, 128 (K = V = 128 f32: 32 rows of 4
/// columns, one warp a block, so no exchange through shared memory).
DecodeTiling mlir::delta::chooseDecodeTiling(const DecodeSpec &spec,
                                             const DecodeTuning &tuning) {
  DecodeTiling t;
  t.layout = spec.layout;
  t.elemsPerLoad = 16 / (spec.stateType.getIntOrFloatBitWidth() / 8);
  if (spec.layout == StateLayout::kv) {
    int64_t tile = spec.v % 32 == 0 ? 32 : 16;
    t.lanesPerRow = tile / t.elemsPerLoad;
    t.loadsPerLane = 1;
    int64_t groupsPerWarp = 32 / t.lanesPerRow;
    t.warps = 4;
    while (t.warps > 1 && spec.k % (groupsPerWarp * t.warps) != 0)
      t.warps /= 2;
    t.rowsPerThread = spec.k / (groupsPerWarp * t.warps);
    // Staged, the token's inputs wait in shared memory, not registers: 128
    // state registers a thread. An override trades rows per thread for
    // warps per block (1 to 32).
    int64_t rows = tuning.rowsPerThread > 0 ? tuning.rowsPerThread
                   : tuning.stageInputs     ? 128 / t.elemsPerLoad
                                            : 0;
    while (rows > 0 && t.rowsPerThread > rows && t.rowsPerThread % 2 == 0 &&
           t.warps < 32) {
      t.rowsPerThread /= 2;
      t.warps *= 2;
    }
    while (rows > t.rowsPerThread && t.warps % 2 == 0) {
      t.rowsPerThread *= 2;
      t.warps /= 2;
    }
    return t;
  }
  int64_t pieces = spec.k / t.elemsPerLoad; // 16-byte pieces per row
  t.lanesPerRow = 1;
  while (t.lanesPerRow < 16 && pieces % (t.lanesPerRow * 2) == 0 &&
         ((pieces / (t.lanesPerRow * 2)) * t.elemsPerLoad >= 16 ||
          t.lanesPerRow < 2))
    t.lanesPerRow *= 2;
  t.loadsPerLane = pieces / t.lanesPerRow;
  int64_t elemsPerLane = t.loadsPerLane * t.elemsPerLoad;
  // 32 state registers per thread leave room for the prefetched inputs of
  // the next token without capping occupancy below 4 blocks per SM.
  // Without prefetch, 64 state registers per thread (measured best for
  // large batches); with it, 32, leaving room for the next token's inputs;
  // staged, 128 (the inputs wait in shared memory, not registers).
  int64_t maxRows = tuning.rowsPerThread > 0
                        ? tuning.rowsPerThread
                        : std::max<int64_t>(
                              1, (tuning.stageInputs ? 128
                                  : tuning.prefetch  ? 32
                                                     : 64) /
                                     elemsPerLane);
  int64_t rowsPerPass = 32 / t.lanesPerRow;
  int64_t passes = spec.v / rowsPerPass; // warp-passes needed to cover V
  t.warps = 4;
  while (t.warps > 1 && passes % t.warps != 0)
    t.warps /= 2;
  t.rowsPerThread = 1;
  for (int64_t r = maxRows; r >= 1; --r)
    if ((passes / t.warps) % r == 0) {
      t.rowsPerThread = r;
      break;
    }
  return t;
}

bool mlir::delta::stagedDecodeFits(const DecodeSpec &spec) {
  // The stage holds one beta a token and one g, or (kv only: the vk token
  // loop does not read them from there) K decays: not per-value terms. kv
  // up to K = 128: at K = 256 its 32 rows of 2 warps spilled 256 bytes on
  // sm_100a.
  bool kv = spec.layout == StateLayout::kv;
  return !spec.perValue && spec.maxT >= 3 && (!kv || spec.k <= 128) &&
         (kv || !isPerChannel(spec.gate));
}

SmallVector<std::pair<std::string, DecodeTuning>>
mlir::delta::decodeVariants(const DecodeSpec &spec,
                            const DecodeTuning &overrides, StringRef only) {
  // Measured on an H200 (docs/performance-journal.md, decode variants): at T = 4 the bulk
  // shape is 1.3x faster from B = 64 up, the small one 1.2x faster at B = 1.
  DecodeTuning staged = overrides, bulk = overrides, small = overrides;
  // Staged: no prefetch, the token inputs in shared memory and 128 state
  // registers a thread (each token's chain of reductions serves more of
  // the state). From 3 tokens a row: at T = 2 bulk runs at T = 1's time.
  // (min_blocks_per_sm is in quarters of a block per SM.)
  // vk (8 rows at K = 128 f32, one block of 4 warps per head), H100,
  // session 38: T = 4 B = 256 382 us against bulk's 484, B = 16 37.7
  // against 40.1, B = 4 (128 blocks) 15.1 against small's 18.4, but B = 3
  // (96 blocks) 14.0 against 13.4: from three quarters of a block per SM.
  // kv (32 rows of 4 columns, blocks of one warp, 4 per head at V = 128),
  // H100, session 39: T = 4 B = 64 110.3 us against bulk's 158.3, B = 256
  // 392.4 / 600.7, B = 4 (512 blocks) 14.8 against bulk's 15.7 and small's
  // 20.7, B = 2 12.1 / 12.4 / 12.3, but B = 1 11.0 against small's 10.1:
  // from 7 quarters (256 blocks on 132 SMs). kv also from 2 tokens a row
  // (H100, session 39: T = 2 B = 64 103.2 us against bulk's 123.6, B = 256
  // 382.3 / 469.7, B = 4 13.1 / 12.9), where vk's bulk kernel already runs
  // T = 2 at T = 1's time.
  bool kv = spec.layout == StateLayout::kv;
  staged.prefetch = false;
  staged.stageInputs = true;
  staged.minBlocksPerSM = kv ? 7 : 3;
  staged.minTokens =
      overrides.minTokens > 0 ? overrides.minTokens : (kv ? 2 : 3);
  bulk.prefetch = false;
  bulk.minBlocksPerSM = 16; // 4 blocks per SM
  small.prefetch = true;
  small.minBlocksPerSM = 0;
  // kv beside its staged form: bulk for every other call. It beat small at
  // every B at T = 1 up to 4 (B = 4: 11.4 against 13.9 us) and at T = 2
  // (B = 4 12.7 / 16.4, B = 64 123.0 / 139.3), lost by 2-3.5 % at T = 1
  // from B = 64 (where bulk already ran) and at T = 3-4 B = 1 (10.4 against
  // 10.1): small is not built (H100, session 39).
  bool fitsStaged = stagedDecodeFits(spec);
  bool kvPair = kv && fitsStaged;
  if (kvPair)
    bulk.minBlocksPerSM = 0;
  SmallVector<std::pair<std::string, DecodeTuning>> variants;
  if (fitsStaged && (only.empty() || only == "staged"))
    variants.emplace_back("_staged", staged);
  if (only.empty() || only == "bulk")
    variants.emplace_back("", bulk);
  if ((only.empty() && !kvPair) || only == "small")
    variants.emplace_back("_small", small);
  return variants;
}

namespace {

//===----------------------------------------------------------------------===//
// vk: rows of S^T ([V, K], K contiguous)
//===----------------------------------------------------------------------===//

/// Per value row r and token t:
///   d = decay, pk = S_r . k, pq = S_r . q   (one pass, both dots)
///   u = beta (v_r - d pk),  o_r = scale (d pq + u (k . q)),  S_r = d S_r + u k
/// which is the reference's decay-then-update order (o reads the new state).
class VkEmitter : VkEmitterBase {
public:
  using VkEmitterBase::VkEmitterBase;
  /// `stage`: the staged form's shared memory (null: the serial form).
  void emit(Value stage);
};

void VkEmitter::emit(Value stage) {
  vkPrologue();
  SmallVector<Value> state = loadEnteringRows();
  int64_t perLane = this->perLane();
  loadHeadParams();
  if (stage)
    stageInputs(stage);
  // Inputs of a token: q and k pieces, v of each row, g, beta.
  int64_t nQK = t.loadsPerLane * t.elemsPerLoad;
  auto loadInputs = [&](Value tok) {
    if (stage)
      return stagedInputs(tok);
    SmallVector<Value> in = loadVector(param(pQ), param(pQStride), tok);
    llvm::append_range(in, loadVector(param(pK), param(pKStride), tok));
    for (Value row : rows)
      in.push_back(loadElems(param(pV), s.ioType,
                             vIndex(tok, param(pVStride), row), 1)[0]);
    llvm::append_range(in, loadBetas(tok, rows, /*adjacent=*/false));
    if (Value g = loadGate(tok))
      in.push_back(g);
    // KDA: the gate inputs of the lane's key channels (the pieces of q, k).
    if (perChannel())
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        llvm::append_range(in,
                           loadChannelGates(tok, elemIndex(j), t.elemsPerLoad));
    return in;
  };
  auto body = [&](Value tInt, ArrayRef<Value> S, ArrayRef<Value> in) {
    Value tok = token(tInt);
    SmallVector<Value> q(in.take_front(nQK)),
        k(in.slice(nQK, nQK));
    ArrayRef<Value> vRows = in.slice(2 * nQK, rows.size());
    int64_t nBeta = numBetaInputs(rows.size());
    ArrayRef<Value> betaIn = in.slice(2 * nQK + rows.size(), nBeta);
    size_t gateAt = 2 * nQK + rows.size() + nBeta;
    Value gIn = s.gate != GateForm::none && !perChannel() ? in[gateAt]
                                                          : Value();
    // KDA: each key channel e decays by its own d_e, so the dots against
    // the decayed row are S_r . (d k) and S_r . (d q), and S_r = d S_r +
    // u k elementwise (the scalar decay below is then 1).
    SmallVector<Value> dk, dq, channel;
    if (perChannel()) {
      size_t per = channelBias() ? 2 * t.elemsPerLoad
                                                    : t.elemsPerLoad;
      ArrayRef<Value> gates = in.drop_front(gateAt);
      for (int64_t j = 0; j < t.loadsPerLane; ++j)
        llvm::append_range(channel,
                           channelDecays(gates.slice(j * per, per)));
    }
    if (mayNormalise()) {
      // x / sqrt(sum x^2 + 1e-6): the lanes of a row hold all K elements.
      for (SmallVector<Value> *x : {&q, &k}) {
        Value inv = normFactor(rowSum(sum(*x, *x)));
        for (Value &e : *x)
          e = fmul(e, inv);
      }
    }
    Value kq = rowSum(sum(k, q));
    auto [decay, beta] = gateAndBeta(gIn, s.perValue ? Value() : betaIn[0]);
    // per_value: row r (value column r of S) has its own beta and decays by
    // a further exp(gv_r).
    ValueTerms terms;
    if (s.perValue)
      terms = valueTerms(betaIn, rows.size());
    if (perChannel())
      for (int64_t e = 0; e < nQK; ++e) {
        dk.push_back(fmul(channel[e], k[e]));
        dq.push_back(fmul(channel[e], q[e]));
      }
    SmallVector<Value> next;
    for (auto [r, row] : llvm::enumerate(rows)) {
      ArrayRef<Value> Sr = S.slice(r * perLane, perLane);
      Value pk = rowSum(sum(Sr, perChannel() ? dk : k));
      Value pq = rowSum(sum(Sr, perChannel() ? dq : q));
      Value rowDecay = s.perValue ? fmul(decay, terms.factor[r]) : decay;
      Value u = fmul(s.perValue ? terms.beta[r] : beta,
                     fsub(vRows[r], fmul(rowDecay, pk)));
      Value o = fmul(param(pScale), fma(u, kq, fmul(rowDecay, pq)));
      // Every lane of the row stores: the butterfly gives all of them the
      // same bits (each step adds the same two values), the stores to one
      // address merge, and no branch splits the token's code.
      storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), row), {o});
      for (int64_t e = 0; e < perLane; ++e) {
        Value d = rowDecay;
        if (perChannel())
          d = s.perValue ? fmul(channel[e], terms.factor[r]) : channel[e];
        next.push_back(fma(u, k[e], fmul(d, Sr[e])));
      }
    }
    return next;
  };
  advanceTokens(state, loadInputs, body,
                [&](Value dst, Value base, ArrayRef<Value> tile) {
                  storeTile(dst, base, tile);
                });
}

//===----------------------------------------------------------------------===//
// kv: rows of S ([K, V], V contiguous)
//===----------------------------------------------------------------------===//

/// A thread holds `rowsPerThread` key rows of a tile of value columns. Per
/// token, the dots over K (S^T k and S^T q per column, and for the L2 norm
/// |q|^2, |k|^2, k . q) are partial sums over a thread's rows, reduced over
/// the lane groups of a warp with shuffles and across warps through shared
/// memory (double-buffered by token parity, so one barrier per token).
/// Normalisation is applied after the reduction: the dots of the raw vectors
/// scale by 1/|k| and 1/|q|. The staged form's block is one warp (32 rows
/// of 4 columns at K = 128 f32): shuffles only, and q, k of its rows read
/// from the stage.
class KvEmitter : EmitterBase {
public:
  using EmitterBase::EmitterBase;
  /// `sharedBase`: the exchange buffer (null for a block of one warp);
  /// `stage`: the staged form's shared memory (null: the serial form).
  void emit(Value sharedBase, Value stage);

private:
  Value column0, kGroup, laneInGroup;
  SmallVector<Value> keyRows;
};

void KvEmitter::emit(Value shared, Value stage) {
  int64_t tile = t.valuesPerBlock();
  int64_t epl = t.elemsPerLoad;
  int64_t groupsPerWarp = 32 / t.lanesPerRow;
  int64_t groups = groupsPerWarp * t.warps;
  auto setup = [&]() {
    laneInGroup = arith::RemUIOp::create(b, lane, cI32(t.lanesPerRow));
    Value groupInWarp = arith::DivUIOp::create(b, lane, cI32(t.lanesPerRow));
    kGroup = add(mul(warp, cI32(groupsPerWarp)), groupInWarp);
    column0 = toI64(add(mul(bx, cI32(tile)), mul(laneInGroup, cI32(epl))));
    keyRows.clear();
    for (int64_t r = 0; r < t.rowsPerThread; ++r)
      keyRows.push_back(toI64(add(kGroup, cI32(r * groups))));
  };
  auto pieceIndex = [&](Value base, Value keyRow) {
    return add(add(base, mul(keyRow, cI64(s.v))), column0);
  };
  // The thread's pieces of a head state starting at element `base` of `dst`.
  auto storeTile = [&](Value dst, Value base, ArrayRef<Value> tile) {
    for (auto [r, row] : llvm::enumerate(keyRows))
      storeElems(dst, s.stateType, pieceIndex(base, row),
                 tile.slice(r * epl, epl));
  };
  prologue([&] {
    setup();
    zeroSkippedState(t.rowsPerThread * epl, storeTile);
    Value leader = cmp(arith::CmpIPredicate::eq, kGroup, cI32(0));
    auto loop = scf::ForOp::create(b, cI32(0), rowLen, cI32(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value tok = token(loop.getInductionVar());
    auto ifLeader = scf::IfOp::create(b, leader, false);
    b.setInsertionPointToStart(ifLeader.thenBlock());
    storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), column0),
               SmallVector<Value>(epl, cF32(0.0)));
  });
  setup(); // again for the valid branch: see VkEmitter::emit


  Value inBase = stateBase(inSlot);
  SmallVector<Value> state = enteringState(
      int64_t(keyRows.size()) * epl, [&](Value src, Type type) {
        SmallVector<Value> tile;
        for (Value row : keyRows)
          llvm::append_range(
              tile, loadElems(src, type, pieceIndex(inBase, row), epl));
        return tile;
      });

  // Partial sums exchanged per token: S^T k and S^T q for each column, then
  // |k|^2, |q|^2 and k . q.
  int64_t perThread = 2 * epl + 3;
  Type smemPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
  loadHeadParams();
  // Inputs of a token: q and k of each key row, v of the tile's columns,
  // g, beta.
  int64_t nRows = t.rowsPerThread;
  if (stage)
    stageInputs(stage);
  auto loadInputs = [&](Value tok) {
    SmallVector<Value> in;
    if (stage) {
      // From the stage: q and k of the thread's key rows, the v piece of
      // its columns, beta, g.
      Value j = arith::SubIOp::create(b, tok, rowStart);
      for (int64_t at : {qAt(0), kAt(0)})
        for (Value row : keyRows)
          in.push_back(
              loadStage(add(add(cI64(at), mul(j, cI64(s.k))), row), 1)[0]);
      Value local =
          arith::SubIOp::create(b, column0, toI64(mul(bx, cI32(tile))));
      llvm::append_range(
          in, loadStage(add(add(cI64(vAt(0)), mul(j, cI64(tile))), local),
                        epl));
      in.push_back(loadStage(add(cI64(betaAt(0)), j), 1)[0]);
      if (s.gate != GateForm::none && !perChannel())
        in.push_back(loadStage(add(cI64(gAt(0)), j), 1)[0]);
      // KDA: the staged decays of the thread's key rows (exp(g) already).
      if (perChannel())
        for (Value row : keyRows)
          in.push_back(loadStage(
              add(add(cI64(decaysAt(0)), mul(j, cI64(s.k))), row), 1)[0]);
      return in;
    }
    for (Value row : keyRows)
      in.push_back(loadQK(param(pQ), param(pQStride), tok, row, 1)[0]);
    for (Value row : keyRows)
      in.push_back(loadQK(param(pK), param(pKStride), tok, row, 1)[0]);
    llvm::append_range(in, loadElems(param(pV), s.ioType,
                                     vIndex(tok, param(pVStride), column0),
                                     epl));
    SmallVector<Value> columns;
    for (int64_t c = 0; c < epl; ++c)
      columns.push_back(add(column0, cI64(c)));
    llvm::append_range(in, loadBetas(tok, columns, /*adjacent=*/true));
    if (Value g = loadGate(tok))
      in.push_back(g);
    // KDA: the gate inputs of the thread's key rows.
    if (perChannel())
      for (Value row : keyRows)
        llvm::append_range(in, loadChannelGates(tok, row, 1));
    return in;
  };
  auto body = [&](Value tInt, ArrayRef<Value> S, ArrayRef<Value> in) {
    Value tok = token(tInt);
    ArrayRef<Value> q = in.take_front(nRows), k = in.slice(nRows, nRows);
    ArrayRef<Value> vals = in.slice(2 * nRows, epl);
    int64_t nBeta = numBetaInputs(epl);
    ArrayRef<Value> betaIn = in.slice(2 * nRows + epl, nBeta);
    size_t gateAt = 2 * nRows + epl + nBeta;
    Value gIn = s.gate != GateForm::none && !perChannel() ? in[gateAt]
                                                          : Value();
    // KDA: key row r decays by d_r (the scalar decay below is then 1). The
    // rows are decayed first, S_r <- d_r S_r, and the column dots (|k|, |q|
    // and k . q stay those of the raw vectors) and the update S_r + k_r u
    // read those: no d k and d q arrays beside the state (staged, 32 rows
    // a thread, they made ptxas spill 180 bytes; bulk, 8 rows, they took
    // it from 128 registers to 149, 3 blocks an SM instead of 4).
    SmallVector<Value> rowDecay, Sd(S);
    if (perChannel()) {
      // Staged: the decays themselves; else the gate inputs of each row.
      size_t per = !stage && channelBias() ? 2 : 1;
      ArrayRef<Value> gates = in.drop_front(gateAt);
      for (int64_t r = 0; r < nRows; ++r) {
        rowDecay.push_back(stage ? gates[r]
                                 : channelDecays(gates.slice(r * per, per))[0]);
        for (int64_t c = 0; c < epl; ++c)
          Sd[r * epl + c] = fmul(rowDecay[r], S[r * epl + c]);
      }
    }
    SmallVector<Value> partial;
    for (int64_t c = 0; c < epl; ++c) {
      SmallVector<Value> column;
      for (int64_t r = 0; r < t.rowsPerThread; ++r)
        column.push_back(Sd[r * epl + c]);
      partial.push_back(sum(column, k));
    }
    for (int64_t c = 0; c < epl; ++c) {
      SmallVector<Value> column;
      for (int64_t r = 0; r < t.rowsPerThread; ++r)
        column.push_back(Sd[r * epl + c]);
      partial.push_back(sum(column, q));
    }
    partial.push_back(sum(k, k));
    partial.push_back(sum(q, q));
    partial.push_back(sum(k, q));
    // Over the lane groups of the warp (lanes with the same columns).
    for (Value &x : partial)
      x = xorSum(x, t.lanesPerRow, 16);
    // Across warps: warp w's group-0 lanes write, everyone sums all warps.
    Value parity = arith::RemUIOp::create(b, tInt, cI32(2));
    Value bufferBase = toI64(mul(parity, cI32(t.warps * t.lanesPerRow *
                                              perThread)));
    auto slotIndex = [&](Value w, int64_t e) {
      return add(bufferBase,
                 toI64(add(mul(add(mul(w, cI32(t.lanesPerRow)), laneInGroup),
                               cI32(perThread)),
                           cI32(e))));
    };
    if (t.warps > 1) {
      Value groupLeader = cmp(arith::CmpIPredicate::ult, lane,
                              cI32(t.lanesPerRow));
      {
        auto ifLeader = scf::IfOp::create(b, groupLeader, false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifLeader.thenBlock());
        for (int64_t e = 0; e < perThread; ++e)
          LLVM::StoreOp::create(
              b, partial[e],
              LLVM::GEPOp::create(b, smemPtr, f32, shared,
                                  ValueRange{slotIndex(warp, e)}),
              4);
      }
      gpu::BarrierOp::create(b);
      for (int64_t e = 0; e < perThread; ++e) {
        Value total;
        for (int64_t w = 0; w < t.warps; ++w) {
          Value x = LLVM::LoadOp::create(
              b, f32,
              LLVM::GEPOp::create(b, smemPtr, f32, shared,
                                  ValueRange{slotIndex(cI32(w), e)}),
              4);
          total = total ? fadd(total, x) : x;
        }
        partial[e] = total;
      }
    }
    Value invK = cF32(1.0), invQ = cF32(1.0);
    if (mayNormalise()) {
      invK = normFactor(partial[2 * epl]);
      invQ = normFactor(partial[2 * epl + 1]);
    }
    Value kq = fmul(partial[2 * epl + 2], fmul(invK, invQ));
    auto [decay, beta] = gateAndBeta(gIn, s.perValue ? Value() : betaIn[0]);
    // per_value: column c has its own beta and decays by a further
    // exp(gv_c).
    ValueTerms terms;
    if (s.perValue)
      terms = valueTerms(betaIn, epl);
    SmallVector<Value> u, o;
    Value scaleQ = fmul(param(pScale), invQ);
    for (int64_t c = 0; c < epl; ++c) {
      Value pk = fmul(partial[c], invK), pq = partial[epl + c];
      Value d = s.perValue ? fmul(decay, terms.factor[c]) : decay;
      u.push_back(fmul(s.perValue ? terms.beta[c] : beta,
                       fsub(vals[c], fmul(d, pk))));
      // scale (d S^T q_n + u (k_n . q_n)) with q_n = q / |q|.
      o.push_back(fma(param(pScale), fmul(u.back(), kq),
                      fmul(scaleQ, fmul(d, pq))));
    }
    {
      auto ifLeader = scf::IfOp::create(b, cmp(arith::CmpIPredicate::eq,
                                                  kGroup, cI32(0)),
                                        false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifLeader.thenBlock());
      storeElems(param(pO), s.ioType, vIndex(tok, param(pOStride), column0),
                 o);
    }
    // S_r = d S_r + k_r u, per_value with a further exp(gv_c) per column;
    // KDA's rows are decayed already (Sd, the scalar d then 1).
    SmallVector<Value> next;
    for (int64_t r = 0; r < t.rowsPerThread; ++r) {
      Value kn = fmul(k[r], invK);
      for (int64_t c = 0; c < epl; ++c) {
        Value d = s.perValue ? fmul(decay, terms.factor[c]) : decay;
        next.push_back(fma(kn, u[c], fmul(d, Sd[r * epl + c])));
      }
    }
    return next;
  };
  advanceTokens(state, loadInputs, body, storeTile);
}

} // namespace

gpu::GPUFuncOp mlir::delta::buildDecodeKernel(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              StringRef name,
                                              const DecodeSpec &spec,
                                              const DecodeTuning &tuning,
                                              KernelCode code) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> inputs = kernelParamTypes(builder, decodeKernelParams());
  DecodeTiling tiling = chooseDecodeTiling(spec, tuning);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  // kv reduces across warps through shared memory (a block of one warp
  // needs none): two token buffers of (2 * elemsPerLoad + 3) floats per
  // lane group leader of each warp.
  std::string sharedName = (name + "_partials").str();
  std::string stageName = (name + "_stage").str();
  if (tuning.stageInputs) {
    // The staged form's copy of the call's token inputs.
    LLVM::GlobalOp::create(
        builder, loc,
        LLVM::LLVMArrayType::get(builder.getF32Type(),
                                 stagedInputFloats(spec, tiling)),
        /*isConstant=*/false, LLVM::Linkage::Internal, stageName,
        /*value=*/Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  }
  bool kvExchange = spec.layout == StateLayout::kv && tiling.warps > 1;
  if (kvExchange) {
    int64_t floats = 2 * tiling.warps * tiling.lanesPerRow *
                     (2 * tiling.elemsPerLoad + 3);
    LLVM::GlobalOp::create(
        builder, loc, LLVM::LLVMArrayType::get(builder.getF32Type(), floats),
        /*isConstant=*/false, LLVM::Linkage::Internal, sharedName,
        /*value=*/Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  }
  if (needsZeros(spec)) {
    // Read in place of a null gv or log g (EmitterBase::loadBetas, loadGate).
    auto zeros = LLVM::LLVMArrayType::get(builder.getF32Type(), kMaxGvPiece);
    LLVM::GlobalOp::create(builder, loc, zeros, /*isConstant=*/true,
                           LLVM::Linkage::Internal, zerosSymbol(name),
                           builder.getZeroAttr(RankedTensorType::get(
                               {kMaxGvPiece}, builder.getF32Type())),
                           /*alignment=*/16, /*addrSpace=*/1);
  }
  auto func = gpu::GPUFuncOp::create(builder, loc, name,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  func->setAttr(DeltaDialect::kKernelAttrName,
                KernelAttr::get(builder.getContext(), KernelRole::decode, code,
                                spec.k, spec.v, tiling.valuesPerBlock(),
                                spec.v / tiling.valuesPerBlock(), tiling.threads(),
                                /*dynamicSmem=*/0, /*dynamicSmemStage=*/0,
                                tuning.minBlocksPerSM, /*overlapBlocksPerSm=*/0,
                                /*rawQk=*/false, tuning.minTokens, /*cpEighthsPerSm=*/0,
                                /*maxTokens=*/0));
  // The buffers of one call never overlap (the host API documents it): let
  // loads move across stores and use the read-only path.
  for (auto [i, p] : llvm::enumerate(decodeKernelParams()))
    if (p.kind == ParamKind::Pointer)
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                      builder.getUnitAttr());
  func.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({(int32_t)tiling.threads(), 1, 1}));

  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  if (code == KernelCode::bulk) {
    // The host launches sm_90+ code as a programmatic dependent: every
    // input (q, k, v, the pool, its indices) may come from the kernel
    // before, so wait for that grid before any memory access; then let the
    // next kernel launch, so that its blocks are resident when this grid
    // ends (a run of decode calls in a graph: 32 calls at B = 1).
    NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::launch_dependents);
  }
  Value stage = tuning.stageInputs
                    ? LLVM::AddressOfOp::create(
                          b, LLVM::LLVMPointerType::get(ctx, 3), stageName)
                          .getResult()
                    : Value();
  if (spec.layout == StateLayout::kv) {
    Value shared = kvExchange ? LLVM::AddressOfOp::create(
                                    b, LLVM::LLVMPointerType::get(ctx, 3),
                                    sharedName)
                                    .getResult()
                              : Value();
    KvEmitter(b, func, spec, tiling, tuning).emit(shared, stage);
  } else {
    VkEmitter(b, func, spec, tiling, tuning).emit(stage);
  }
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
  return func;
}
