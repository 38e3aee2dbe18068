//===- PrefillLayout.h - where the prefill kernels keep their data -*- C++ -*-===//
//
// The shared-memory layouts of every prefill form (chunks, recur and their
// warpgroup forms) and the sizes of the workspace slots they exchange.
// Below both the plan (which sizes the launches from them) and the
// emitters (which address them): neither includes the other for these.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLLAYOUT_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLLAYOUT_H

#include "codegen/gpu/prefill/PrefillSpec.h"
#include "templates/runtime/deltac_abi.h"

#include <algorithm>
#include <cstdint>

namespace mlir::delta::prefill {

// The contract's values the layouts share with the runtime
// (templates/runtime/deltac_abi.h): the row padding, the workspace's
// 256-byte alignment and region 7's counters.
using deltac_abi::align256;
using deltac_abi::kMaxSharedSMs;
using deltac_abi::kOverlapCounterBytes;
using deltac_abi::kOverlapQueueCounters;
using deltac_abi::kRowPad;

/// The warpgroup forms' slot of region 6 per (chunk, head), as chunks
/// writes it and recur's ring stage receives it: P's [C][C] 16-bit image
/// and G_last's 16 bytes (pGLastBytes), then, for the transposed recur's
/// raw q/k form, the factors fq [C] and fk [C] as f32 (rawFactorBytes).
constexpr int64_t pGLastBytes(int64_t C) { return C * C * 2 + 16; }
constexpr int64_t rawFactorBytes(int64_t C) { return 2 * C * 4; }
/// The `_chunks_raw` form writes no P: the transposed recur's output
/// warpgroup computes it from the raw q and k rows and these per-token
/// terms, which take the start of P's place in region 6's slot (f32):
///   a [C]: G log2 e + log2(scale / |q|)   (-inf on padding rows)
///   b [C]: G log2 e - log2(1 / |k|)       (+inf on padding rows)
/// so that P_ij = (q_i . k_j) 2^(a_i - b_j) on i >= j: one exponential
/// per element, of a bounded argument where G_i <= G_j.
constexpr int64_t rawPInputBytes(int64_t C) { return 2 * C * 4; }
/// wgmma's 128-byte-swizzled images start on 1024-byte bounds.
inline int64_t align1024(int64_t x) { return (x + 1023) / 1024 * 1024; }
/// Shared-memory regions of the chunks kernel (byte offsets). kb, qb, vb
/// first receive the raw k, q, v rows (cp.async); q and k are then
/// normalised in place; lf and af hold L and its inverse in fp32.
/// One region is reused three times: Q until Q K^T is done, then L, then
/// the two 16-bit factors of the WY products, A diag(beta e^G) and
/// A diag(beta) (the solve's intermediate products sit in af's blocks
/// above the diagonal). With K = V = 128, C = 64 that is 70.5 KiB: 3 blocks
/// per SM.
///
/// Per-channel decays (rule kda) keep Q, L and the operands of the
/// off-diagonal products alive together, so nothing aliases Q there: the
/// decays per (row, channel) gk [C][gkLd] f32 (cumulative after the scan;
/// rows padded by 16 bytes, so that a quarter warp reading four channels of
/// eight different rows, as the diagonal blocks' pairs do, hits 32
/// different banks instead of the same four),
/// one block row's K~ = K ⊙ e^(G - G_r) (kl: r the block's first row, 16
/// rows), its R = K ⊙ e^(G_r - G) (rb, the rows up to the block's last) and
/// the low halves of its diagonal block's operands (dl: 48 rows), whose
/// space the WY factors take once L is solved; `slow` holds one flag per
/// 16-row block (its decays too steep for the product form of its diagonal
/// block). 155.5 KiB at K = V = 128, C = 64 (one block per SM; the A100 limit
/// is 163 KiB).
struct ChunksSmem {
  int64_t kb, qb, lf, ab1, ab2, af, vb, beta = 0, gam = 0, gr = 0, eg = 0, egl = 0, beg = 0,
      gk = 0, kl = 0, rb = 0, dl = 0, slow = 0, gkLd = 0, total;
  ChunksSmem(const PrefillSpec &s) {
    int64_t C = s.chunk, K = s.k, V = s.v, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    int64_t abBytes = align256(C * (C + kRowPad) * 2);
    kb = take(C * (K + kRowPad) * 2);
    if (s.rule == Rule::kda) {
      qb = take(C * (K + kRowPad) * 2);
      lf = take(C * (C + 4) * 4);
      int64_t klBytes = align256(16 * (K + kRowPad) * 2),
              rbBytes = align256(C * (K + kRowPad) * 2),
              dlBytes = align256(48 * (K + kRowPad) * 2);
      kl = take(std::max(klBytes + rbBytes + dlBytes, 2 * abBytes));
      rb = kl + klBytes;
      dl = rb + rbBytes;
      ab1 = kl; // K~ and R are dead once L is solved
    } else {
      qb = lf = ab1 = take(std::max({C * (K + kRowPad) * 2, C * (C + 4) * 4, 2 * abBytes}));
    }
    ab2 = ab1 + abBytes;
    // A's fp32 rows; also the staging area of the results (16-bit rows).
    af = take(std::max(C * (C + 4) * 4, C * (std::max({C, K, V}) + kRowPad) * 2));
    vb = take(C * (V + kRowPad) * 2);
    if (s.rule == Rule::kda) {
      gkLd = K + 4;
      gk = take(C * gkLd * 4);
      slow = take(C / 16 * 4);
    }
    // Per row: beta, and the decay factors of a scalar gate (kda keeps its
    // decays per channel in gk).
    if (s.rule == Rule::kda) {
      beta = take(C * 4);
    } else {
      gam = take(C * 4);
      gr = take(C * 4);
      beta = take(C * 4);
      eg = take(C * 4);
      egl = take(C * 4);
      beg = take(C * 4);
    }
    total = off;
  }
};

/// Shared-memory regions of the recur kernel: one mbarrier per stage (used
/// with bulk copies), two copies of S and of V' (chunk c reads and writes
/// copy c % 2 of V' and reads copy c % 2 of S, writing the next state to
/// the other: the state warps can run one chunk ahead of the output
/// warps), row-major 16-bit operands of the products, as [K][V tile] and
/// [C][V tile], or transposed ([V tile][K], [V tile][C]) with the
/// register-resident state (RecurForm::RegisterState), then `stages`
/// copies of a chunk's operands (W, Kd, the U tile, G_last, Qg, P), `stage`
/// bytes apart, filled by cp.async or bulk copies up to `stages` chunks
/// ahead. The kernel reads the stage count from its
/// dynamic shared memory size: 2 (total), 3 where the host could add
/// `stage` bytes (Hopper: up to 227 KiB per block), or 1 (total - stage)
/// where two do not fit (V tile 64 on an A100) or where forced
/// (DELTAC_PREFILL_FORCE=...,stages=1: two blocks fit an SM).
struct RecurSmem {
  int64_t mbar, st, vn, wb, kd, ub, gl, qgb, pb, stage, total;
  RecurSmem(const PrefillSpec &s, int64_t bv, bool transposed) {
    int64_t C = s.chunk, K = s.k, off = 0;
    auto take = [&](int64_t bytes) { int64_t at = off; off += align256(bytes); return at; };
    mbar = take(3 * 8); // bulk copies: one mbarrier per stage
    st = take(2 * (transposed ? bv * (K + kRowPad) : K * (bv + kRowPad)) * 2);
    vn = take(2 * (transposed ? bv * (C + kRowPad) : C * (bv + kRowPad)) * 2);
    int64_t first = off;
    wb = take(C * (K + kRowPad) * 2);
    kd = take(C * (K + kRowPad) * 2);
    ub = take(C * (bv + kRowPad) * 2);
    gl = take(4 * (s.rule == Rule::kda ? K : 1)); // G_last; kda: e^G_last per channel
    qgb = take(C * (K + kRowPad) * 2);
    pb = take(C * (C + kRowPad) * 2);
    stage = off - first;
    total = off + stage;
  }
};

/// Shared memory of the warpgroup recur (RecurForm::Warpgroup),
/// offsets from the first 1024-byte boundary of the dynamic shared memory
/// (wgmma's 128-byte swizzle repeats every 1024 bytes, and an image must
/// start on one; `total` has room for the alignment): the mbarriers, two
/// copies of S^T [V tile][K] and of V'^T [V tile][C] as swizzled B images
/// (chunk c reads copy c % 2 and the state warpgroup writes S^T of chunk
/// c + 1 to the other, so it can run a chunk ahead of the output
/// warpgroup), then `stages` copies of a chunk's operands: W, Kd, Qg
/// (swizzled [C][64] images per 64 columns), P (one such image, then
/// G_last: 16 bytes), the U tile ([V tile / 16][C][16]) and, rule kda,
/// e^G_last per channel. The transposed form (RecurForm::Transposed)
/// has no S^T or V'^T images: `st` holds its two O^T staging buffers
/// ([C][V tile] rows of oRow bytes) and `vn` is empty, which leaves room
/// for a third stage at V tile 64.
struct RecurWarpgroupSmem {
  int64_t mbar, st, vn, wb, kd, qgb, pb, ub, gl = 0, stage, total;
  int64_t sBytes, vBytes, oRow, oBytes;
  RecurWarpgroupSmem(const PrefillSpec &s, int64_t bv, bool transposed = false) {
    int64_t C = s.chunk, K = s.k, off = 0;
    auto take = [&](int64_t bytes) {
      int64_t at = off;
      off += align1024(bytes);
      return at;
    };
    sBytes = bv * K * 2;
    vBytes = bv * C * 2;
    oRow = bv * 2 + 16; // rows 16 bytes apart in the banks for stmatrix.trans
    oBytes = C * oRow;
    mbar = take(3 * 8);
    st = take(transposed ? 2 * oBytes : 2 * sBytes);
    vn = take(transposed ? 0 : 2 * vBytes);
    int64_t first = off;
    wb = take(C * K * 2);
    kd = take(C * K * 2);
    qgb = take(C * K * 2);
    // + fq, fk and P's inputs (recurRawQK)
    pb = take(pGLastBytes(C) + (transposed ? rawFactorBytes(C) + rawPInputBytes(C) : 0));
    ub = take(C * bv * 2);
    if (s.rule == Rule::kda)
      gl = take(K * 4);
    stage = off - first;
    total = 1024 + off + stage; // two stages
  }
};

/// Shared memory of the warpgroup chunks (ChunksForm::Warpgroup),
/// offsets from the first 1024-byte boundary (`total` has room for the
/// alignment). q, k and v land as 128-byte-swizzled images ([cols / 64][C]
/// [64]; wgmma reads them, q and k K-major for Q K^T and K K^T, k and v
/// MN-major for the WY products). q's region then holds L, then the two
/// WY factors' images; k's and v's receive W and U block by block as their
/// products consume them; `af` holds P on its way out, then A (and the
/// solve's intermediate products above its diagonal). Per row: the scalar
/// gate's factors, the norms' inverse 1 / |q|, 1 / |k|, and the rows'
/// scales fq, fk (Qg = fq q, Kd = fk k). With K = V = 128, C = 64:
/// 69.5 KiB (the queue form), 3 blocks per SM.
///
/// `lateV` (every form but the queue's): v has no region of its own. It
/// lands where k was once K K^T has read it (`_chunks_raw` with qk_raw =
/// 2, where W is recur's and nothing else reads k; V <= K), or where A was
/// once the WY factors have read it, so that the block needs 53.5 KiB and
/// an SM holds 4 (ChunksWarpgroupBuilder).
struct ChunksWarpgroupSmem {
  int64_t qs, ks, vs, af, lf, ab1, ab2, gam, gr, beta, eg, egl, beg, rq, rk, fq, fk, xq, xl, xk,
      queue, total;
  explicit ChunksWarpgroupSmem(const PrefillSpec &s, bool lateV = false) {
    int64_t C = s.chunk, K = s.k, V = s.v, off = 0;
    auto take = [&](int64_t bytes) {
      int64_t at = off;
      off += align1024(bytes);
      return at;
    };
    int64_t lBytes = C * (C + 4) * 4;
    qs = lf = ab1 = take(std::max({C * K * 2, lBytes, 2 * C * C * 2}));
    ab2 = ab1 + C * C * 2;
    ks = take(C * K * 2);
    vs = lateV ? -1 : take(C * V * 2);
    af = take(std::max({lBytes, pGLastBytes(C), lateV ? C * V * 2 : 0}));
    int64_t row = off;
    gam = row, gr = row + C * 4, beta = row + 2 * C * 4, eg = row + 3 * C * 4,
    egl = row + 4 * C * 4, beg = row + 5 * C * 4, rq = row + 6 * C * 4, rk = row + 7 * C * 4;
    fq = row + 8 * C * 4, fk = row + 9 * C * 4;
    // The epilogues' base-2 exponents (PrefillChunksWarpgroup.cpp): P's and
    // L's row terms and their shared column term, over rows nothing reads
    // afterwards: e^G and e^(G_last - G), each read only by the lane that
    // stores the row's exponent in its place, and the raw gates, which the
    // cumsum has consumed.
    xq = eg, xl = egl, xk = gr;
    off += 10 * C * 4;
    // The overlapped launch's next item (PrefillOverlap.cpp); in the
    // single-item form, the mbarriers of q and k's and v's TMA copies.
    queue = off;
    off += 16;
    total = 1024 + off;
  }
};

} // namespace mlir::delta::prefill

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLLAYOUT_H
