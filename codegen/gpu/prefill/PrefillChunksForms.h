//===- PrefillChunksForms.h - chunks' forms as builder types -----*- C++ -*-===//
//
// chunks' body for one (chunk, value head) item is one of two forms
// (PrefillPlan::chunks), each a type over PrefillEmitter's primitives built
// by one builder function from chunkItem's single dispatch, given the
// item (ChunkSite):
//
//   buildChunksRows        mma.sync (ChunksForm::Rows, and
//                          ::RowsForWarpgroupRecur, which writes the
//                          warpgroup recur's swizzled images) (PrefillChunks.cpp)
//   buildChunksWarpgroup   sm_90a wgmma (ChunksForm::Warpgroup and its raw
//                          q/k form) (PrefillChunksWarpgroup.cpp)
//
// Both share ChunksBuilder's steps: the rows' gates and beta, the scalar
// gate's cumulative sum and the triangular solve.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PREFILL_PREFILLCHUNKSFORMS_H
#define DELTAC_CODEGEN_GPU_PREFILL_PREFILLCHUNKSFORMS_H

#include "codegen/gpu/prefill/PrefillEmitter.h"

namespace mlir::delta::prefill {

/// ChunksForm::Rows and ::RowsForWarpgroupRecur.
void buildChunksRows(const PrefillEmitter &e, const ChunkSite &site);
/// ChunksForm::Warpgroup and ::WarpgroupRawQK.
void buildChunksWarpgroup(const PrefillEmitter &e, const ChunkSite &site);

/// The steps both chunks forms take (PrefillChunks.cpp).
class ChunksBuilder : public PrefillEmitter {
public:
  explicit ChunksBuilder(const PrefillEmitter &e) : PrefillEmitter(e) {}

protected:
  /// The gate and beta of the chunk's rows (0 on padding rows), a thread
  /// per row.
  void loadRowGates(const ChunkSite &site, const RowFactors &f);
  /// chunk_cumsum of a scalar gate and the per-row factors every later
  /// step uses: e^G, e^(G_last - G), beta e^G.
  void scalarGateCumsum(const RowFactors &f);
  /// solve_tril: A = (I + L)^-1 (fp32 rows of C + 4 in shared memory),
  /// blocked by 16: (a) each diagonal 16x16 block inverted by forward
  /// substitution, one lane per column with the column in registers
  /// (A_ij = -sum_{m<i} L_im A_mj); (b) doubling, 16 -> 32 -> 64: for each
  /// pair of diagonal blocks, A_21 = -A_22 (L_21 A_11), the product in
  /// parentheses kept in the pair's block above the diagonal. Blocks above
  /// the diagonal hold those products afterwards, or zero where
  /// `zeroAbove`. All in fp32, every sum unrolled with its loads issued
  /// together. Two levels and four barriers at C = 64, where the block
  /// rows by distance from the diagonal took three and six (the last with
  /// a quarter of the threads).
  void solveTril(Value lf, Value af, bool zeroAbove);
  Value loadF32x4(Value base, Value idx) {
    return LLVM::LoadOp::create(b, VectorType::get({4}, f32), gep(base, f32, idx), 16).getResult();
  }
  Value f32x4(ArrayRef<Value> x) {
    Value v = LLVM::UndefOp::create(b, VectorType::get({4}, f32));
    for (int64_t i = 0; i < 4; ++i)
      v = LLVM::InsertElementOp::create(b, v, x[i], cI32(i));
    return v;
  }
};

} // namespace mlir::delta::prefill

#endif // DELTAC_CODEGEN_GPU_PREFILL_PREFILLCHUNKSFORMS_H
