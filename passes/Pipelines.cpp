//===- Pipelines.cpp - named pass pipelines -----------------------*- C++ -*-===//
//
// Pipelines the driver, the tests and `deltac-opt` share, so a lit test and
// a gtest run exactly the passes the tools run.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::delta::buildSpecToChunkPipeline(OpPassManager &pm, int64_t segments) {
  pm.addPass(createDeltaExpandSpec());
  pm.addPass(createDeltaNormalizeOptions());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createDeltaPrepareChunking());
  fn.addPass(createDeltaChunk(DeltaChunkOptions{segments}));
  fn.addPass(createCanonicalizerPass());
}

void mlir::delta::buildChunkToCpuPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createDeltaChunkToLinalg());
  // delta-normalize-options leaves elementwise arith on whole tensors (an
  // options-by-call spec's un-normalised q in the io dtype, arith.extf),
  // which bufferization does not take.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // The chunk loop carries a freshly computed state each iteration.
  bufferize.allowReturnAllocsFromLoops = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::delta::registerDeltacPipelines() {
  PassPipelineRegistration<>(
      "delta-spec-to-chunk",
      "spec -> sequence level -> chunk-level IR (expand, normalize, "
      "prepare-chunking, delta-chunk)",
      [](OpPassManager &pm) { buildSpecToChunkPipeline(pm); });
  PassPipelineRegistration<>(
      "delta-cpu-pipeline",
      "chunk-level IR -> LLVM dialect for the CPU (delta-chunk-to-linalg, "
      "bufferization, loops)",
      buildChunkToCpuPipeline);
}
