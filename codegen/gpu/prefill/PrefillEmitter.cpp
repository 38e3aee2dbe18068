//===- PrefillEmitter.cpp - prefill emitter helpers and prep -----*- C++ -*-===//
//
// PrefillEmitter's fragment loads and products, workspace regions, gate
// and beta forms, and the prep kernel (cu_seqlens -> chunk offsets).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

SmallVector<Value> PrefillEmitter::ldsm(Value rowAddr, int num, bool trans) {
  MLIRContext *ctx = b.getContext();
  Type res = num == 1 ? Type(i32)
                      : LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(num, i32));
  Value r = NVVM::LdMatrixOp::create(
      b, res, rowAddr, num, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8), NVVM::LdStMatrixEltType::B16);
  SmallVector<Value> out;
  for (int i = 0; i < num; ++i)
    out.push_back(num == 1 ? r : LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{i}).getResult());
  return out;
}

void PrefillEmitter::mmaTile(ArrayRef<Value> a, Value b0, Value b1, Frag &f) {
  MLIRContext *ctx = b.getContext();
  auto resType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  // Operands in the activations' 16-bit type: f16 keeps its 3 more mantissa
  // bits (FLA's f16 path computes in f16 too). The fragments are ldmatrix's
  // 32-bit registers: bf16 takes them as they are, f16 as pairs of halves.
  bool half = opType.isF16();
  auto frag = [&](Value r) -> Value {
    return half ? LLVM::BitcastOp::create(b, VectorType::get({2}, opType), r).getResult() : r;
  };
  SmallVector<Value> A, B{frag(b0), frag(b1)};
  for (int i = 0; i < 4; ++i)
    A.push_back(frag(a[i]));
  NVVM::MMATypes type = half ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  auto op = NVVM::MmaOp::create(
      b, resType, NVVM::MMAShapeAttr::get(ctx, 16, 8, 16), NVVM::MMAB1OpAttr(),
      NVVM::MMAIntOverflowAttr(), NVVM::MMALayout::row, NVVM::MMALayout::col,
      NVVM::MMATypesAttr::get(ctx, type), NVVM::MMATypesAttr::get(ctx, type), A, B,
      ValueRange{f.c[0], f.c[1], f.c[2], f.c[3]});
  for (int e = 0; e < 4; ++e)
    f.c[e] = LLVM::ExtractValueOp::create(b, op.getRes(), ArrayRef<int64_t>{e});
}

void PrefillEmitter::mma(Operand A, Operand B, int64_t M, int64_t N,
                         int64_t Kd, SmallVectorImpl<Frag> &acc,
                         int64_t accumulators, int64_t prefetchRegs) {
  // This lane's row of the ldmatrix matrices: lanes 8j..8j+7 address the
  // rows of matrix j. A (x4): matrices (m, k), (m+8, k), (m, k+8),
  // (m+8, k+8) = fragment registers a0..a3; B (x2): (k, n), (k+8, n).
  Value r8 = remu(lane, cI32(8)), j = divu(lane, cI32(8));
  Value jLo = remu(j, cI32(2)), jHi = divu(j, cI32(2));
  auto addr = [&](const Operand &op, Value row, Value col) {
    return gep(op.base, opType, toI64(add(mul(row, cI32(op.ld)), col)));
  };
  // A warp with few tiles has few independent chains of mma.sync, each
  // waiting on the one before: each tile's k steps are dealt round-robin
  // to up to `accumulators / tiles` partial sums (at least two steps
  // each), added at the end.
  auto [gridM, gridN] = warpGrid(M, N);
  int64_t wm = gridM, wn = gridN; // plain variables: the lambdas capture them
  int64_t tiles = acc.size(), tn = wm ? N / 8 / wn : 1;
  int64_t chains = std::clamp<int64_t>(accumulators / tiles, 1, std::max<int64_t>(Kd / 32, 1));
  // Fragment slots: with a warp grid, tile r uses A row r / tn and B column
  // r % tn of its block; otherwise each tile loads its own.
  auto aSlot = [&](int64_t r) { return wm ? r / tn : r; };
  auto bSlot = [&](int64_t r) { return wm ? r % tn : r; };
  int64_t numA = wm ? tiles / tn : tiles, numB = wm ? tn : tiles;
  SmallVector<Value> aRow(numA), bCol(numB);
  for (int64_t r = 0; r < tiles; ++r) {
    auto [m0, n0] = tileOrigin(M, N, r);
    aRow[aSlot(r)] = m0;
    bCol[bSlot(r)] = n0;
  }
  SmallVector<SmallVector<Frag>> part(tiles, SmallVector<Frag>(chains));
  for (int64_t r = 0; r < tiles; ++r) {
    part[r][0] = acc[r];
    for (int64_t c = 1; c < chains; ++c)
      for (Value &x : part[r][c].c)
        x = cF32(0.0);
  }
  // The fragments of k step `ks` (A per tile row, B per tile column).
  struct Step {
    SmallVector<SmallVector<Value>> a, b;
  };
  auto loadStep = [&](int64_t ks) {
    Step st;
    Value k0 = cI32(ks);
    for (Value m0 : aRow)
      st.a.push_back(ldsm(A.kRows ? addr(A, add(k0, add(r8, mul(jHi, cI32(8)))), add(m0, mul(jLo, cI32(8))))
                                  : addr(A, add(m0, add(r8, mul(jLo, cI32(8)))), add(k0, mul(jHi, cI32(8)))),
                          4, A.kRows));
    for (Value n0 : bCol)
      st.b.push_back(ldsm(B.kRows ? addr(B, add(k0, add(r8, mul(jLo, cI32(8)))), n0)
                                  : addr(B, add(n0, r8), add(k0, mul(jLo, cI32(8)))),
                          2, B.kRows));
    return st;
  };
  // Loads are issued `window` k steps ahead of the products: given one
  // step, ptxas left every mma.sync right behind its ldmatrix, waiting out
  // the shared-memory latency (recur's main stall under ncu); given more,
  // it keeps one or two steps between them.
  int64_t steps = Kd / 16, perStep = numA * 4 + numB * 2;
  int64_t window = std::clamp<int64_t>(prefetchRegs / perStep, 1, steps);
  SmallVector<Step> loaded(steps);
  for (int64_t s = 0; s < window; ++s)
    loaded[s] = loadStep(s * 16);
  for (int64_t s = 0; s < steps; ++s) {
    Step &st = loaded[s];
    for (int64_t r = 0; r < tiles; ++r) {
      ArrayRef<Value> br = st.b[bSlot(r)];
      mmaTile(st.a[aSlot(r)], br[0], br[1], part[r][s % chains]);
    }
    if (s + window < steps)
      loaded[s + window] = loadStep((s + window) * 16);
  }
  for (int64_t r = 0; r < tiles; ++r) {
    acc[r] = part[r][0];
    for (int64_t c = 1; c < chains; ++c)
      for (int e = 0; e < 4; ++e)
        acc[r].c[e] = fadd(acc[r].c[e], part[r][c].c[e]);
  }
}

void PrefillEmitter::mmaRowBlock(ArrayRef<std::array<Value, 4>> a, Operand B,
                                 int64_t N, int64_t Kd,
                                 SmallVectorImpl<Frag> &acc,
                                 int64_t prefetchRegs) {
  assert(N % 16 == 0 && (int64_t)acc.size() == N / 8 && (int64_t)a.size() == Kd / 16);
  // ldmatrix.x4 of B: matrices (k, n), (k + 8, n), (k, n + 8), (k + 8, n + 8)
  // = b0, b1 of tile n and of tile n + 8; lanes 8j .. 8j + 7 address matrix j.
  Value r8 = remu(lane, cI32(8)), j = divu(lane, cI32(8));
  Value kHalf = mul(remu(j, cI32(2)), cI32(8)), nHalf = mul(divu(j, cI32(2)), cI32(8));
  auto loadStep = [&](int64_t ks) {
    SmallVector<Value> frags;
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      Value k = add(cI32(ks * 16), kHalf), n = add(cI32(n0), nHalf);
      Value row = B.kRows ? add(k, r8) : add(n, r8), col = B.kRows ? n : k;
      auto r = ldsm(gep(B.base, opType, toI64(add(mul(row, cI32(B.ld)), col))), 4, B.kRows);
      frags.append(r.begin(), r.end());
    }
    return frags;
  };
  int64_t steps = Kd / 16, perStep = N / 8 * 2;
  int64_t window = std::clamp<int64_t>(prefetchRegs / perStep, 1, steps);
  SmallVector<SmallVector<Value>> loaded(steps);
  for (int64_t s = 0; s < window; ++s)
    loaded[s] = loadStep(s);
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t t = 0; t < N / 8; ++t) {
      // Tile t's b0, b1: registers 0, 1 of its pair's ldmatrix for even t,
      // 2, 3 for odd.
      int64_t at = (t / 2) * 4 + (t % 2) * 2;
      mmaTile(a[s], loaded[s][at], loaded[s][at + 1], acc[t]);
    }
    if (s + window < steps)
      loaded[s + window] = loadStep(s + window);
  }
}

// Workspace: [0] chunk offsets i32 [N + 1] and prep's verdict on cu_seqlens
// (i32, nonzero: invalid; the call is skipped); then per (chunk, head):
// [1] gamma_last f32 (K of them per channel, rule kda); [2] W [C, K + 8]; [3] U [C, V]; [4] Qg [C, K + 8];
// [5] Kd [C, K + 8]; [6] P [C, C + 8] (16-bit, all row-major). W, Qg, Kd
// and P have recur's shared-memory rows (kRowPad elements of padding), so
// each is one contiguous copy there; U is read in V tiles. Regions start
// on 256-byte bounds. [7] serves the overlapped launch (PrefillOverlap.cpp):
// a work-queue counter and an exit counter in its first
// kOverlapCounterBytes, then a ready flag (u32) per (chunk, head). [8]-[10]
// serve context parallelism (deltac_abi::prefillSegmentRegionBytes,
// PrefillSegments.cpp).
Value PrefillEmitter::workRegion(int64_t which) {
  Value chunks = mul(toI64(param(pMaxChunks)), toI64(param(pHV)));
  std::array<int64_t, 6> perChunk = prefillChunkRegionBytes(s);
  auto round = [&](Value bytes) { return mul(divu(add(bytes, cI64(255)), cI64(256)), cI64(256)); };
  // Region 0: deltac_abi::prefillSequenceRegionWords(N) words, linear in
  // N; its two coefficients are taken from the contract's one definition.
  constexpr int64_t perSequence = deltac_abi::prefillSequenceRegionWords(1) -
                                  deltac_abi::prefillSequenceRegionWords(0);
  constexpr int64_t fixed = deltac_abi::prefillSequenceRegionWords(0);
  Value words = add(mul(toI64(param(pN)), cI64(perSequence)), cI64(fixed));
  Value off = round(mul(words, cI64(4)));
  for (int64_t r = 1; r < which && r <= 6; ++r)
    off = add(off, round(mul(chunks, cI64(perChunk[r - 1]))));
  // Regions 8-10 (context parallelism) follow region 7.
  if (which >= 8)
    off = add(off, add(cI64(deltac_abi::kOverlapCounterBytes), round(mul(chunks, cI64(4)))));
  if (which >= 9) {
    // Regions 8 and 9 hold deltac_abi::prefillSegmentSlots(N, HV) transfers.
    Value wanted = mul(mul(toI64(param(pN)), toI64(param(pHV))), cI64(deltac_abi::kMaxSegments));
    Value slots = minS(wanted, cI64(deltac_abi::kMaxSegmentHeads));
    off = add(off, round(mul(slots, cI64(s.k * (s.v + s.k) * 4))));
    if (which >= 10)
      off = add(off, round(mul(slots, cI64(s.k * s.v * 2))));
  }
  if (which == 0)
    off = cI64(0);
  return gep(param(pWork), b.getI8Type(), off);
}

std::pair<Value, Value> PrefillEmitter::gateAndBeta(Value tok, Value hv) {
  Value at = add(mul(tok, toI64(param(pHV))), toI64(hv));
  Value g = cF32(0.0);
  switch (s.gate) {
  case GateForm::none: break;
  case GateForm::log: g = loadF32(param(pG), s.gateType, at); break;
  case GateForm::linear: g = log(loadF32(param(pG), s.gateType, at)); break;
  case GateForm::call: g = gateByCall(at, hv, hv); break;
  default: // raw: a + dt_bias[hv]
    g = rawDecay(fadd(loadF32(param(pG), s.gateType, at), loadF32Or(param(pDtBias), hv, 0.0)),
                 hv);
  }
  return {g, betaOf(tok, hv)};
}

Value PrefillEmitter::rawDecay(Value x, Value hv) {
  Value aLog = loadF32Or(param(pALog), hv, 0.0); // exp(0) = 1 without A_log
  return rawLogDecay(x, exp(aLog), param(pLowerBound));
}

Value PrefillEmitter::loadF32Or(Value base, Value idx, double otherwise) {
  return unlessNull(base, otherwise, [&] { return loadF32(base, f32, idx); });
}

Value PrefillEmitter::betaOf(Value tok, Value hv) {
  Value at = add(mul(tok, toI64(param(pHV))), toI64(hv));
  // A 16-bit spec reads beta in its type or, where the call says so, f32.
  Value beta = s.betaType.isF32()
                   ? loadF32(param(pBeta), f32, at)
                   : loadBeta(param(pBeta), at,
                              cmp(arith::CmpIPredicate::ne, param(pBetaF32), cI32(0)),
                              s.betaType);
  if (s.beta == BetaForm::call) {
    // The call's form: logits with kCallBetaSigmoid (times 2 with
    // kCallBetaTwice), else beta as given. Selects, no branch.
    Value factor = sel(callOption(deltac_abi::kCallBetaTwice), cF32(2.0), cF32(1.0));
    Value sig = scaledSigmoid(factor, beta);
    beta = sel(callOption(deltac_abi::kCallBetaSigmoid), sig, beta);
  } else if (s.beta != BetaForm::given) {
    beta = scaledSigmoid(cF32(s.beta == BetaForm::sigmoid2 ? 2.0 : 1.0), beta);
  }
  return beta;
}

Value PrefillEmitter::gateByCall(Value at, Value hv, Value biasAt) {
  // f32, or a raw a in the io dtype with kCallGate16 (one load of either
  // width); the raw form's log decay where the call's kCallGateRaw is set.
  // A null g (log form: FLA's g=None, plain DeltaNet on these kernels)
  // reads 0, no decay.
  Value in = unlessNull(param(pG), 0.0, [&] {
    return loadBeta(param(pG), at, notI(callOption(deltac_abi::kCallGate16)), s.ioType);
  });
  Value raw = rawDecay(fadd(in, loadF32Or(param(pDtBias), biasAt, 0.0)), hv);
  return sel(callOption(deltac_abi::kCallGateRaw), raw, in);
}

Value PrefillEmitter::channelGate(Value tok, Value hv, Value d) {
  Value hd = add(mul(toI64(hv), cI64(s.k)), toI64(d));
  Value at = add(mul(tok, mul(toI64(param(pHV)), cI64(s.k))), hd);
  if (s.gate == GateForm::channel_call)
    return gateByCall(at, hv, hd);
  if (s.gate == GateForm::channel_log)
    return loadF32(param(pG), s.gateType, at);
  // channel_raw: a + dt_bias[hv * K + d].
  return rawDecay(fadd(loadF32(param(pG), s.gateType, at), loadF32Or(param(pDtBias), hd, 0.0)),
                  hv);
}

Frag PrefillEmitter::tileProduct(Operand A, Value m0, Operand B, Value n0, int64_t Kd) {
  // The addressing of mma() for one tile at run-time row and column
  // origins, its k steps split over two partial sums.
  Value r8 = remu(lane, cI32(8)), j = divu(lane, cI32(8));
  Value jLo = remu(j, cI32(2)), jHi = divu(j, cI32(2));
  auto addr = [&](const Operand &op, Value row, Value col) {
    return gep(op.base, opType, toI64(add(mul(row, cI32(op.ld)), col)));
  };
  Frag part[2];
  for (Frag &f : part)
    for (Value &c : f.c)
      c = cF32(0.0);
  for (int64_t k0 = 0; k0 < Kd; k0 += 16) {
    auto a = ldsm(addr(A, add(m0, add(r8, mul(jLo, cI32(8)))), add(cI32(k0), mul(jHi, cI32(8)))), 4,
                  /*trans=*/false);
    auto bf = ldsm(addr(B, add(n0, r8), add(cI32(k0), mul(jLo, cI32(8)))), 2, /*trans=*/false);
    mmaTile(a, bf[0], bf[1], part[(k0 / 16) % 2]);
  }
  Frag out;
  for (int e = 0; e < 4; ++e)
    out.c[e] = fadd(part[0].c[e], part[1].c[e]);
  return out;
}

//===----------------------------------------------------------------------===//
// prep: chunk offsets
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitPrep() {
  int64_t n = plan.threads;
  Value scan = gep(smem, i32, cI64(0));
  // One word past the scan's two buffers: set by any thread that finds
  // cu_seqlens invalid.
  Value badWord = gep(smem, i32, cI64(2 * n));
  // The next: the longest sequence's chunks (an atomic maximum).
  Value longestWord = gep(smem, i32, cI64(2 * n + 1));
  Value offsets = gep(workRegion(0), i32, cI64(0));
  Value N = param(pN);
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    store(cI32(0), offsets, cI32(0), 4);
    store(cI32(0), badWord, cI32(0), 4);
    store(cI32(0), longestWord, cI32(0), 4);
  });
  barrier();
  Value numTiles = divu(add(N, cI32(n - 1)), cI32(n));
  auto loop = scf::ForOp::create(b, cI32(0), numTiles, cI32(1), ValueRange{cI32(0), cI32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value tile = loop.getInductionVar(), carry = loop.getRegionIterArg(0);
    Value longest = loop.getRegionIterArg(1);
    Value seq = add(mul(tile, cI32(n)), tid);
    Value inside = cmp(arith::CmpIPredicate::slt, seq, N);
    auto count = scf::IfOp::create(b, TypeRange{i32}, inside, true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(count.thenBlock());
      Value first = cuAt(seq), end = cuAt(add(seq, cI32(1)));
      ifThen(boundsBad(seq, first, end), [&] {
        raiseError();
        store(cI32(1), badWord, cI32(0), 4);
      });
      scf::YieldOp::create(b, chunksOf(sub(end, first)));
      b.setInsertionPointToStart(count.elseBlock());
      scf::YieldOp::create(b, cI32(0));
    }
    // Inclusive scan over the block (Hillis-Steele, two buffers).
    Value x = count.getResult(0);
    store(x, scan, tid, 4);
    barrier();
    int64_t buf = 0;
    for (int64_t off = 1; off < n; off *= 2) {
      Value mine = load(i32, scan, add(tid, cI32(buf * n)), 4);
      Value has = cmp(arith::CmpIPredicate::uge, tid, cI32(off));
      Value other = load(i32, scan, add(sel(has, sub(tid, cI32(off)), tid), cI32(buf * n)), 4);
      Value sum = sel(has, add(mine, other), mine);
      buf = 1 - buf;
      store(sum, scan, add(tid, cI32(buf * n)), 4);
      barrier();
    }
    Value incl = load(i32, scan, add(tid, cI32(buf * n)), 4);
    ifThen(inside, [&] { store(add(carry, incl), offsets, add(seq, cI32(1)), 4); });
    Value total = load(i32, scan, cI32(buf * n + n - 1), 4);
    barrier();
    scf::YieldOp::create(b, ValueRange{add(carry, total), arith::MaxUIOp::create(b, longest, x)});
  }
  LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::umax, longestWord, loop.getResult(1),
                            LLVM::AtomicOrdering::monotonic);
  // An invalid cu_seqlens anywhere empties every sequence (all offsets 0)
  // and says so in the word after the offsets, which chunks and recur read
  // before they use a bound (chunkMap).
  barrier();
  Value bad = cmp(arith::CmpIPredicate::ne, load(i32, badWord, cI32(0), 4), cI32(0));
  ifThen(bad, [&] {
    auto zero = scf::ForOp::create(b, tid, add(N, cI32(1)), cI32(n));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(zero.getBody());
    store(cI32(0), offsets, zero.getInductionVar(), 4);
  });
  ifThen(cmp(arith::CmpIPredicate::eq, tid, cI32(0)), [&] {
    store(sel(bad, cI32(1), cI32(0)), offsets, add(N, cI32(1)), 4);
    Value longest = sel(bad, cI32(0), load(i32, longestWord, cI32(0), 4));
    store(longest, offsets, longestWordIndex(), 4);
  });
  // The sequences longest first (by chunk count, ties in cu_seqlens order)
  // after the verdict, where the block can rank them (N <= its threads,
  // the counts in shared memory): recur takes them in this order, so the
  // longest chains start in the first wave wherever cu_seqlens lists
  // them. An invalid cu_seqlens (every count 0) gives the identity.
  ifThen(cmp(arith::CmpIPredicate::sle, N, cI32(n)), [&] {
    barrier();
    Value inside = cmp(arith::CmpIPredicate::slt, tid, N);
    ifThen(inside, [&] {
      Value mine = sub(load(i32, offsets, add(tid, cI32(1)), 4), load(i32, offsets, tid, 4));
      store(mine, scan, tid, 4);
    });
    barrier();
    ifThen(inside, [&] {
      Value mine = load(i32, scan, tid, 4);
      auto rank = scf::ForOp::create(b, cI32(0), N, cI32(1), ValueRange{cI32(0)});
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(rank.getBody());
        Value j = rank.getInductionVar();
        Value other = load(i32, scan, j, 4);
        Value before = orI(cmp(arith::CmpIPredicate::sgt, other, mine),
                           andI(cmp(arith::CmpIPredicate::eq, other, mine),
                                cmp(arith::CmpIPredicate::slt, j, tid)));
        scf::YieldOp::create(b, add(rank.getRegionIterArg(0), sel(before, cI32(1), cI32(0))));
      }
      store(tid, offsets, add(add(N, cI32(2)), rank.getResult(0)), 4);
    });
  });
}

Value PrefillEmitter::boundsBad(Value n, Value first, Value end) {
  // Sequence n is [first, end): valid when 0 <= first <= end <= T, and the
  // first sequence starts at 0. With every sequence valid, cu_seqlens
  // starts at 0, never decreases and ends at most at T, so no sequence
  // lies outside the tokens or overlaps another.
  Value bad = orI(cmp(arith::CmpIPredicate::slt, first, cI64(0)),
                  cmp(arith::CmpIPredicate::sgt, first, end));
  bad = orI(bad, cmp(arith::CmpIPredicate::sgt, end, param(pT)));
  return orI(bad, andI(cmp(arith::CmpIPredicate::eq, n, cI32(0)),
                       cmp(arith::CmpIPredicate::ne, first, cI64(0))));
}

//===----------------------------------------------------------------------===//
// The chunk map without prep
//===----------------------------------------------------------------------===//

ChunkMap PrefillEmitter::inlineChunkScan(Value check) {
  Value N = param(pN);
  Value inside = cmp(arith::CmpIPredicate::ult, lane, N);
  auto count = scf::IfOp::create(b, TypeRange{i64, i64, b.getI1Type()}, inside, true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(count.thenBlock());
    Value first = cuAt(lane), end = cuAt(add(lane, cI32(1)));
    Value bad = boundsBad(lane, first, end);
    ifThen(andI(check, bad), [&] { raiseError(); });
    scf::YieldOp::create(b, ValueRange{first, sub(end, first), bad});
    b.setInsertionPointToStart(count.elseBlock());
    scf::YieldOp::create(b, ValueRange{cI64(0), cI64(0), notI(cTrue())});
  }
  // One bad sequence anywhere empties them all (the call is skipped): no
  // bound derived from cu_seqlens is used before this vote.
  Value anyBad = NVVM::VoteSyncOp::create(b, b.getI1Type(), cI32(-1), count.getResult(2),
                                          NVVM::VoteSyncKind::any);
  Value first = sel(anyBad, cI64(0), count.getResult(0));
  Value len = sel(anyBad, cI64(0), count.getResult(1));
  Value x = chunksOf(len);
  for (int32_t off = 1; off < 32; off *= 2) {
    Value up = gpu::ShuffleOp::create(b, x, off, 32, gpu::ShuffleMode::UP).getShuffleResult();
    x = sel(cmp(arith::CmpIPredicate::uge, lane, cI32(off)), add(x, up), x);
  }
  return {Value(), x, first, len, notI(anyBad)};
}

Value PrefillEmitter::chunkOffset(Value scan, Value n) {
  Value from = arith::MaxSIOp::create(b, sub(n, cI32(1)), cI32(0));
  Value v = gpu::ShuffleOp::create(b, scan, from, cI32(32), gpu::ShuffleMode::IDX).getShuffleResult();
  return sel(cmp(arith::CmpIPredicate::eq, n, cI32(0)), cI32(0), v);
}

Value PrefillEmitter::chunkOffsetOf(Value inlineMap, Value scan, Value n) {
  // The shuffle runs in every lane (uniform), the load only without a scan.
  Value fromScan = chunkOffset(scan, n);
  auto r = scf::IfOp::create(b, TypeRange{i32}, inlineMap, true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(r.thenBlock());
  scf::YieldOp::create(b, fromScan);
  b.setInsertionPointToStart(r.elseBlock());
  scf::YieldOp::create(b, load(i32, gep(workRegion(0), i32, cI64(0)), n, 4));
  return r.getResult(0);
}

ChunkMap PrefillEmitter::chunkMap(Value check) {
  Value N = param(pN);
  Value inlineMap = cmp(arith::CmpIPredicate::sle, N, cI32(kPrefillInlineSequences));
  auto r = scf::IfOp::create(b, TypeRange{i32, i64, i64, b.getI1Type()}, inlineMap, true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(r.thenBlock());
    ChunkMap m = inlineChunkScan(check);
    scf::YieldOp::create(b, ValueRange{m.scan, m.first, m.len, m.ok});
    b.setInsertionPointToStart(r.elseBlock());
    // prep's verdict, the word after its offsets.
    Value bad = load(i32, gep(workRegion(0), i32, cI64(0)), add(N, cI32(1)), 4);
    scf::YieldOp::create(b, ValueRange{cI32(0), cI64(0), cI64(0),
                                       cmp(arith::CmpIPredicate::eq, bad, cI32(0))});
  }
  return {inlineMap, r.getResult(0), r.getResult(1), r.getResult(2), r.getResult(3)};
}

std::pair<Value, Value> PrefillEmitter::sequenceBounds(const ChunkMap &map, Value n) {
  // An i64 through two 32-bit shuffles from lane n (uniform: every lane runs them).
  auto fromLane = [&](Value x) {
    Value lo = toI32(x), hi = toI32(arith::ShRUIOp::create(b, x, cI64(32)));
    auto idx = [&](Value v) {
      return gpu::ShuffleOp::create(b, v, n, cI32(32), gpu::ShuffleMode::IDX).getShuffleResult();
    };
    Value wideLo = arith::ExtUIOp::create(b, i64, idx(lo));
    Value wideHi = arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i64, idx(hi)), cI64(32));
    return orI(wideHi, wideLo);
  };
  Value bos = fromLane(map.first), len = fromLane(map.len);
  auto r = scf::IfOp::create(b, TypeRange{i64, i64}, map.inlineMap, true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(r.thenBlock());
  scf::YieldOp::create(b, ValueRange{bos, add(bos, len)});
  b.setInsertionPointToStart(r.elseBlock());
  // Read only where prep found cu_seqlens valid: an invalid one empties
  // every sequence.
  auto read = scf::IfOp::create(b, TypeRange{i64, i64}, map.ok, true);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(read.thenBlock());
    scf::YieldOp::create(b, ValueRange{cuAt(n), cuAt(add(n, cI32(1)))});
    b.setInsertionPointToStart(read.elseBlock());
    scf::YieldOp::create(b, ValueRange{cI64(0), cI64(0)});
  }
  scf::YieldOp::create(b, read.getResults());
  return {r.getResult(0), r.getResult(1)};
}

Value PrefillEmitter::coveredTokens(const ChunkMap &map) {
  Value N = param(pN);
  // The last sequence's end: shuffled from lane N - 1 with the inline map
  // (0 when invalid), else cu_seqlens[N] where prep found it valid.
  Value last = sub(N, cI32(1));
  Value end = add(map.first, map.len);
  Value lo = toI32(end), hi = toI32(arith::ShRUIOp::create(b, end, cI64(32)));
  auto idx = [&](Value v) {
    return gpu::ShuffleOp::create(b, v, last, cI32(32), gpu::ShuffleMode::IDX).getShuffleResult();
  };
  Value fromLane = orI(arith::ShLIOp::create(b, arith::ExtUIOp::create(b, i64, idx(hi)), cI64(32)),
                       arith::ExtUIOp::create(b, i64, idx(lo)));
  auto r = scf::IfOp::create(b, TypeRange{i64}, map.inlineMap, true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(r.thenBlock());
  scf::YieldOp::create(b, fromLane);
  b.setInsertionPointToStart(r.elseBlock());
  auto read = scf::IfOp::create(b, TypeRange{i64}, map.ok, true);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(read.thenBlock());
    scf::YieldOp::create(b, cuAt(N));
    b.setInsertionPointToStart(read.elseBlock());
    scf::YieldOp::create(b, cI64(0));
  }
  scf::YieldOp::create(b, read.getResult(0));
  return r.getResult(0);
}

void PrefillEmitter::zeroPieces(Value start, Value count, Value step,
                                function_ref<Value(Value i)> pieceAt) {
  auto loop = scf::ForOp::create(b, start, count, step);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value at = pieceAt(loop.getInductionVar());
  storeVec(LLVM::ZeroOp::create(b, VectorType::get({4}, i32)), param(pO), s.ioType, at, 16);
}

void PrefillEmitter::zeroUncovered(Value from) {
  // o = 0 for tokens [from, T), every value head, in 16-byte pieces over
  // the whole grid. Empty (one comparison) when the sequences cover T.
  int64_t ioBytes = s.ioType.getIntOrFloatBitWidth() / 8, perPiece = 16 / ioBytes;
  int64_t pieces = s.v / perPiece;
  Value T = param(pT);
  ifThen(cmp(arith::CmpIPredicate::slt, from, T), [&] {
    Value perToken = mul(toI64(param(pHV)), cI64(pieces));
    Value count = mul(sub(T, from), perToken);
    Value threads = arith::IndexCastOp::create(b, i64, gpu::BlockDimOp::create(b, gpu::Dimension::x));
    Value grid = arith::IndexCastOp::create(b, i64, gpu::GridDimOp::create(b, gpu::Dimension::x));
    Value start = add(mul(toI64(blockId(gpu::Dimension::x)), threads), toI64(tid));
    zeroPieces(start, count, mul(grid, threads), [&](Value i) {
      Value tok = add(from, arith::DivUIOp::create(b, i, perToken));
      Value rest = arith::RemUIOp::create(b, i, perToken);
      Value hv = arith::DivUIOp::create(b, rest, cI64(pieces));
      Value piece = arith::RemUIOp::create(b, rest, cI64(pieces));
      return add(add(mul(tok, param(pOStride)), mul(hv, cI64(s.v))), mul(piece, cI64(perPiece)));
    });
  });
}

void PrefillEmitter::zeroSequence(Value bos, Value eos, Value hv, Value v0, int64_t cols) {
  int64_t ioBytes = s.ioType.getIntOrFloatBitWidth() / 8, perPiece = 16 / ioBytes;
  int64_t pieces = cols / perPiece;
  Value count = mul(sub(eos, bos), cI64(pieces));
  Value threads = arith::IndexCastOp::create(b, i64, gpu::BlockDimOp::create(b, gpu::Dimension::x));
  zeroPieces(toI64(tid), count, threads, [&](Value i) {
    Value tok = add(bos, arith::DivUIOp::create(b, i, cI64(pieces)));
    Value piece = arith::RemUIOp::create(b, i, cI64(pieces));
    Value col = add(toI64(v0), mul(piece, cI64(perPiece)));
    return add(add(mul(tok, param(pOStride)), mul(toI64(hv), cI64(s.v))), col);
  });
}

Value PrefillEmitter::longestFirst(const ChunkMap &map, Value position) {
  // Lane l's rank among the lanes' chunk counts (0 past N, after every
  // sequence), descending and stable: the sequences' permutation, from 32
  // shuffles; then the lane whose rank is `position`, by a butterfly sum.
  Value mine = chunksOf(map.len);
  auto loop = scf::ForOp::create(b, cI32(0), cI32(32), cI32(1), ValueRange{cI32(0)});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar(), rank = loop.getRegionIterArg(0);
    Value other = gpu::ShuffleOp::create(b, mine, j, cI32(32), gpu::ShuffleMode::IDX)
                      .getShuffleResult();
    Value before = orI(cmp(arith::CmpIPredicate::ugt, other, mine),
                       andI(cmp(arith::CmpIPredicate::eq, other, mine),
                            cmp(arith::CmpIPredicate::ult, j, lane)));
    scf::YieldOp::create(b, add(rank, sel(before, cI32(1), cI32(0))));
  }
  Value rank = loop.getResult(0);
  Value taken = xorSum(sel(cmp(arith::CmpIPredicate::eq, rank, position), lane, cI32(0)), 1, 16);
  // Without the inline map: prep's order where it ranked the sequences (N
  // at most its threads, plan.threads), read only where prep found
  // cu_seqlens valid; else the grid's own order.
  Value N = param(pN);
  Value ranked = andI(andI(notI(map.inlineMap), map.ok),
                      cmp(arith::CmpIPredicate::sle, N, cI32(plan.threads)));
  auto r = scf::IfOp::create(b, TypeRange{i32}, ranked, true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(r.thenBlock());
    scf::YieldOp::create(
        b, load(i32, gep(workRegion(0), i32, cI64(0)), add(add(N, cI32(2)), position), 4));
    b.setInsertionPointToStart(r.elseBlock());
    scf::YieldOp::create(b, position);
  }
  return sel(map.inlineMap, taken, r.getResult(0));
}
