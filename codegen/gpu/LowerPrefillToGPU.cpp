//===- LowerPrefillToGPU.cpp - chunk-level IR to GPU kernels -----*- C++ -*-===//
//
// `delta-lower-prefill-to-gpu` reads the chunk loop that `delta-chunk`
// wrote and lowers it to the prep / chunks / recur kernels of
// PrefillKernel.h. The kernel options are read from the IR itself: the
// chunk ops fix C, K and V; the decays' presence and rank fix the rule; the
// producers of the loaded values (delta.l2norm, delta.gate_from_raw /
// gate_from_linear, delta.beta_sigmoid) fix the fused preparation; the
// state movers fix the layout. The split into kernels follows the chunk
// ops' data flow: the ops that do not read the carried state run for all
// chunks in parallel, the ones that do run in the sequential loop.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "codegen/gpu/Passes.h"
#include "codegen/gpu/NvidiaTarget.h"
#include "codegen/gpu/prefill/PrefillKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

namespace mlir::delta {
#define GEN_PASS_DEF_DELTALOWERPREFILLTOGPU
#include "codegen/gpu/Passes.h.inc"

namespace {
/// The function argument a chunk_load reads, looking through the
/// preparation ops; records which preparation it went through.
Value argumentOf(Value v, PrefillSpec &spec) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return v;
  if (auto norm = dyn_cast<L2NormOp>(def)) {
    spec.qkL2Norm = true;
    return argumentOf(norm.getOperand(), spec);
  }
  if (auto raw = dyn_cast<GateFromRawOp>(def)) {
    spec.gate = GateForm::raw;
    return raw.getA();
  }
  if (auto lin = dyn_cast<GateFromLinearOp>(def)) {
    spec.gate = GateForm::linear;
    return lin.getAlpha();
  }
  if (auto sig = dyn_cast<BetaSigmoidOp>(def)) {
    spec.beta = sig.getFactor().convertToDouble() == 2.0 ? BetaForm::sigmoid2
                                                        : BetaForm::sigmoid;
    return sig.getLogits();
  }
  if (auto cum = dyn_cast<ChunkCumsumOp>(def))
    return argumentOf(cum.getG(), spec);
  if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
    // An `= call` option (delta-normalize-options): the preparation sits in
    // the then-branch, the call's options choose whether it applies.
    Value then = ifOp.thenYield().getOperand(cast<OpResult>(v).getResultNumber());
    PrefillSpec prepared = spec;
    Value argument = argumentOf(then, prepared);
    if (prepared.qkL2Norm != spec.qkL2Norm)
      spec.l2normCall = true;
    if (prepared.beta != spec.beta)
      spec.beta = BetaForm::call;
    if (prepared.gate != spec.gate)
      spec.gate = GateForm::call; // log or raw (per channel: see below)
    return argument;
  }
  return v;
}

template <typename OpT> OpT theOnly(func::FuncOp func, LogicalResult &ok) {
  SmallVector<OpT> all;
  func.walk([&](OpT op) { all.push_back(op); });
  if (all.size() != 1) {
    func.emitError() << "expects exactly one '" << OpT::getOperationName()
                     << "' in the chunk loop, found " << all.size()
                     << "; run delta-chunk first";
    ok = failure();
    return nullptr;
  }
  return all.front();
}

LogicalResult lowerPrefill(func::FuncOp func, ArrayAttr targets,
                           int64_t valueTile) {
  LogicalResult ok = success();
  auto kkt = theOnly<ChunkKktOp>(func, ok);
  auto step = theOnly<ChunkStateStepOp>(func, ok);
  auto out = theOnly<ChunkOutputOp>(func, ok);
  auto store = theOnly<StateStoreOp>(func, ok);
  auto oStore = theOnly<ChunkStoreOp>(func, ok);
  if (failed(ok))
    return failure();
  PrefillSpec spec;
  spec.gate = GateForm::none;
  spec.beta = BetaForm::given;
  spec.qkL2Norm = false;
  Value gamma = kkt.getGamma();
  bool perChannel = gamma && cast<RankedTensorType>(gamma.getType()).getRank() == 2;
  spec.rule = perChannel ? Rule::kda : gamma ? Rule::gated : Rule::delta;
  auto kType = kkt.getK().getType();
  auto state = step.getState().getType();
  spec.chunk = kType.getDimSize(0);
  spec.k = state.getDimSize(0);
  spec.v = state.getDimSize(1);
  spec.layout = store.getLayout();
  spec.stateType = store.getDest().getType().getElementType();
  spec.ioType = oStore.getDest().getType().getElementType();
  // The loads of q, k, v, beta and the decays, traced to the arguments.
  spec.gateType = Float32Type::get(func.getContext());
  spec.betaType = spec.gateType;
  auto loadOf = [](Value v) { return v.getDefiningOp<ChunkLoadOp>(); };
  ChunkLoadOp qLoad = loadOf(out.getQ()), betaLoad = loadOf(kkt.getBeta());
  if (!qLoad || !betaLoad)
    return func.emitError("chunk ops do not read chunk_load results");
  argumentOf(qLoad.getSource(), spec);
  spec.betaType =
      cast<RankedTensorType>(argumentOf(betaLoad.getSource(), spec).getType())
          .getElementType();
  if (gamma) {
    ChunkLoadOp gLoad = loadOf(gamma);
    if (!gLoad)
      return func.emitError("decays do not come from a chunk_load");
    GateForm before = spec.gate;
    spec.gate = GateForm::log;
    Value g = argumentOf(gLoad.getSource(), spec);
    if (before != GateForm::none && spec.gate == GateForm::log)
      spec.gate = before;
    if (perChannel) {
      // The verifier gives kda only channel_log or channel_raw gates.
      assert((spec.gate == GateForm::log || spec.gate == GateForm::raw ||
              spec.gate == GateForm::call) &&
             "per-channel decays are log decays or raw projections");
      spec.gate = spec.gate == GateForm::raw    ? GateForm::channel_raw
                  : spec.gate == GateForm::call ? GateForm::channel_call
                                                : GateForm::channel_log;
    }
    spec.gateType = cast<RankedTensorType>(g.getType()).getElementType();
  }
  // The chunks kernel copies raw q/k/v rows into its bf16 operand buffers
  // and converts them in place: 16-bit activations only.
  if (spec.ioType.getIntOrFloatBitWidth() != 16)
    return func.emitError() << "prefill on the GPU needs bf16 or f16 "
                               "activations, got "
                            << spec.ioType;
  if (spec.chunk < 32 || spec.k % 32 != 0 || spec.v % 32 != 0 ||
      spec.k > 256 || spec.v > 256)
    return func.emitError() << "prefill on the GPU needs chunk 32 or 64 and "
                               "K, V multiples of 32 up to 256, got chunk "
                            << spec.chunk << ", K = " << spec.k
                            << ", V = " << spec.v;
  // The recur variants of delta-plan-prefill (or one, of `valueTile`).
  struct Recur {
    int64_t tile, minBlocks, overlap; // overlap_blocks_per_sm (0: none)
  };
  SmallVector<Recur> recurs;
  if (auto list = func->getAttrOfType<ArrayAttr>(
          DeltaDialect::kRecurVariantsAttrName)) {
    for (auto v : list.getAsRange<RecurVariantAttr>())
      recurs.push_back({v.getValueTile(), v.getMinBlocksPerSm(), v.getOverlapBlocksPerSm()});
  } else {
    recurs.push_back({valueTile, 0, 0});
  }
  // When the host splits sequences into segments (delta-plan-prefill's
  // #delta.context_parallel; without a plan, never by itself: the kernels
  // still serve a forced call and a rank's phase).
  auto cp = func->getAttrOfType<ContextParallelAttr>(DeltaDialect::kContextParallelAttrName);
  int64_t cpMinTokens = cp ? cp.getMinTokens() : 0, cpEighths = cp ? cp.getEighthsPerSm() : 0;
  // Where the host takes the shared overlapped launch (#delta.shared_overlap;
  // without a plan only when forced).
  auto sharedBounds =
      func->getAttrOfType<SharedOverlapAttr>(DeltaDialect::kSharedOverlapAttrName);
  OpBuilder builder(func);
  std::string name = func.getSymName().str();
  // One gpu.module (one PTX file per target) per kernel; recur kernels
  // after the first carry their V tile in the name.
  // The most dynamic shared memory a block may opt into on every target.
  int64_t sharedLimit = INT64_MAX;
  std::string limitingChip;
  for (Attribute t : targets) {
    StringRef chip = cast<NVVM::NVVMTargetAttr>(t).getChip();
    if (int64_t most = targetSharedLimit(chip); most < sharedLimit) {
      sharedLimit = most;
      limitingChip = chip.str();
    }
  }
  auto emit = [&](PrefillPart part, const PrefillPlan &plan, StringRef suffix,
                  int64_t minBlocks, ArrayAttr moduleTargets,
                  StringRef moduleSuffix = "", int64_t overlap = 0) -> LogicalResult {
    bool segmentedRecur = part == PrefillPart::recurCp;
    bool sharedRecur = part == PrefillPart::recur && plan.sharedOverlap();
    StringRef partName = prefillPartName(part);
    bool recur = isRecurPart(part);
    // A kernel whose buffers do not fit a block could only fail at launch.
    // recur runs with one stage where two do not fit (RecurSmem).
    int64_t smem = prefillPartSharedBytes(part, plan) - (recur ? plan.recurSmemStage : 0);
    if (smem > sharedLimit)
      return func.emitError()
             << "prefill K = " << spec.k << ", V = " << spec.v << ", chunk "
             << spec.chunk << ": the " << partName << " kernel needs " << smem
             << " bytes of shared memory, more than the " << sharedLimit
             << " a block can have on " << limitingChip
             << (spec.chunk > 32 ? "; use chunk = 32" : "");
    if (spec.v % plan.valueTile != 0 || plan.valueTile % 8 != 0)
      return func.emitError() << "V tile " << plan.valueTile
                              << " must divide V = " << spec.v;
    // Every product is split into 16x8 tiles evenly over the warps that
    // compute it: recur's output products over its output warps, its state
    // step over the state warps where they share the state by rows.
    auto even = [&](int64_t m, int64_t n, int64_t warps) {
      return ((m / 16) * (n / 8)) % warps == 0 && (m / 16) * (n / 8) >= warps;
    };
    int64_t outWarps = recur ? plan.outputWarps : plan.threads / 32;
    int64_t rowWarps = recur ? plan.stateWarps : plan.threads / 32;
    int64_t tooFew = !even(spec.chunk, plan.valueTile, outWarps) ? outWarps
                     : !recurStateInRegisters(spec, plan.valueTile) &&
                               !even(spec.k, plan.valueTile, rowWarps)
                         ? rowWarps
                         : 0;
    if (tooFew && !(recur && plan.warpgroupRecur())) // wgmma takes the whole V tile
      return func.emitError() << "V tile " << plan.valueTile
                              << " is too narrow for " << tooFew
                              << " warps with chunk " << spec.chunk;
    std::string kernel = name + "_" + partName.str() + suffix.str();
    auto module = gpu::GPUModuleOp::create(
        builder, func.getLoc(), kernel + moduleSuffix.str() + "_gpu", moduleTargets);
    gpu::GPUFuncOp k = buildPrefillKernel(builder, func.getLoc(), module, name, part,
                                          spec, plan, suffix);
    for (StringRef attr : {DeltaDialect::kSpecAttrName, DeltaDialect::kEntryAttrName,
                           DeltaDialect::kChunkSizeAttrName})
      k->setAttr(attr, func->getAttr(attr));
    // When the host launches it.
    auto own = k->getAttrOfType<KernelAttr>(DeltaDialect::kKernelAttrName);
    k->setAttr(DeltaDialect::kKernelAttrName,
               KernelAttr::get(builder.getContext(), own.getRole(), own.getCode(), own.getK(),
                               own.getV(), own.getValueTile(), own.getGridX(),
                               own.getBlockThreads(), own.getDynamicSmem(),
                               own.getDynamicSmemStage(), minBlocks, overlap,
                               own.getRawQk(),
                               segmentedRecur ? cpMinTokens
                               : sharedRecur  ? (sharedBounds ? sharedBounds.getMinTokens() : 0)
                                              : own.getMinTokens(),
                               segmentedRecur ? cpEighths : 0,
                               sharedRecur && sharedBounds ? sharedBounds.getMaxTokens() : 0));
    return success();
  };
  // One block size for all kernels of the entry: the smallest any needs.
  int64_t threads = 256;
  for (const Recur &r : recurs)
    threads = std::min(threads, planPrefill(spec, r.tile).threads);
  PrefillPlan first = planPrefill(spec, recurs.front().tile, threads);
  if (failed(emit(PrefillPart::prep, first, "", 0, targets)))
    return failure();
  // chunks and recur differ by kind of target: cp.async (sm_80), bulk
  // copies and a programmatic dependent launch (sm_90 and later), and on
  // sm_90a also the wgmma warpgroup recur with chunks' swizzled workspace
  // (RecurForm::Warpgroup), where the spec fits it: one module
  // (same kernel names) per kind.
  SmallVector<int64_t> tiles;
  for (const Recur &r : recurs)
    tiles.push_back(r.tile);
  bool warpgroup = prefillWarpgroupFits(spec, tiles);
  auto kinds = groupTargetsByCode(targets, [&](StringRef chip) {
    return warpgroup && targetHasWarpgroupMma(chip) ? KernelCode::wgmma
           : targetHasBulkCopies(chip)               ? KernelCode::bulk
                                                     : KernelCode::cp_async;
  });
  auto moduleSuffix = [&](KernelCode k) { return moduleSuffixOfCode(k, kinds.size()); };
  // The overlapped launch's chunks (PrefillOverlap.cpp), where a recur
  // variant takes that launch.
  bool overlaps = llvm::any_of(recurs, [](const Recur &r) { return r.overlap > 0; });
  for (auto &[k, group] : kinds) {
    PrefillPlan plan = first;
    plan.code = k;
    if (k == KernelCode::wgmma)
      useWarpgroupRecur(plan, spec);
    if (failed(emit(PrefillPart::chunks, plan, "", 0, builder.getArrayAttr(group),
                    moduleSuffix(k))))
      return failure();
    if (plan.warpgroupChunks() && overlaps &&
        failed(emit(PrefillPart::queue, plan, "", 0, builder.getArrayAttr(group),
                    moduleSuffix(k))))
      return failure();
    // chunks' form for the recur that reads raw q and k: only where one of
    // the recur variants of this kind is that form (RecurForm::TransposedRawQK).
    PrefillPlan rawPlan = plan;
    rawPlan.chunks = ChunksForm::WarpgroupRawQK;
    auto readsRaw = [&](const Recur &r) {
      PrefillPlan recur = planPrefill(spec, r.tile, threads);
      useWarpgroupRecur(recur, spec);
      return recur.recurRawQK();
    };
    if (k == KernelCode::wgmma && plan.warpgroupChunks() && llvm::any_of(recurs, readsRaw) &&
        failed(emit(PrefillPart::chunks, rawPlan, "_raw", 0, builder.getArrayAttr(group),
                    moduleSuffix(k))))
      return failure();
  }
  // Context parallelism (PrefillSegments.cpp) runs on the recur variant of
  // V tile 64 (the first, where 64 divides K), in every kind's code.
  std::optional<size_t> segmentedTile;
  for (auto [i, r] : llvm::enumerate(recurs))
    if (!segmentedTile && r.tile == 64 && spec.k % r.tile == 0)
      segmentedTile = i;
  for (auto [i, r] : llvm::enumerate(recurs)) {
    std::string suffix = i == 0 ? "" : "_v" + std::to_string(r.tile);
    for (auto &[k, group] : kinds) {
      PrefillPlan plan = planPrefill(spec, r.tile, threads);
      plan.code = k;
      if (k == KernelCode::wgmma)
        useWarpgroupRecur(plan, spec);
      // Only sm_90a's transposed recur, beside the warpgroup chunks (its raw
      // q/k form), is fast enough per chunk to keep pace on a quarter of the
      // SMs; recur waits for flags only where it may.
      int64_t overlap = plan.recur == RecurForm::TransposedRawQK ? r.overlap : 0;
      if (overlap > 0)
        plan.recur = RecurForm::TransposedOverlap;
      if (failed(emit(PrefillPart::recur, plan, suffix, r.minBlocks,
                      builder.getArrayAttr(group), moduleSuffix(k), overlap)))
        return failure();
      // The shared overlapped launch's recur (RecurForm::TransposedShared):
      // the same recurrence beside one queue block per SM.
      if (overlap > 0) {
        PrefillPlan shared = plan;
        shared.recur = RecurForm::TransposedShared;
        // Its overlap bound is the shared launch's own (0 without a plan).
        if (failed(emit(PrefillPart::recur, shared, "_shared", r.minBlocks,
                        builder.getArrayAttr(group), moduleSuffix(k),
                        sharedBounds ? sharedBounds.getQuartersPerSm() : 0)))
          return failure();
      }
      // Context parallelism (PrefillSegments.cpp), on the recur of V tile
      // 64 where 64 divides K and the chunk is 64: on sm_90a the wgmma
      // recur (the transposed form for a scalar gate, the warpgroup form for
      // kda's per-channel decays), elsewhere the mma.sync recur with the
      // state in registers (K <= 128); its segmented recur, the chain of
      // transfers and the correction. The segmented recur reads the
      // ordinary chunks' workspace (no raw q/k form: a third of the code).
      // Every kind gets them or none does (the same plan conditions), so
      // the host finds them in whatever code chunks and recur loaded.
      bool segmentable =
          plan.warpgroupRecur() || (plan.registerState() && spec.chunk == kWarpgroupChunk);
      if (segmentedTile == i && segmentable) {
        PrefillPlan cp = plan;
        if (plan.warpgroupRecur())
          cp.recur = plan.transposedRecur() ? RecurForm::Transposed : RecurForm::Warpgroup;
        for (PrefillPart part :
             {PrefillPart::recurCp, PrefillPart::segmentChain, PrefillPart::segmentCorrection})
          if (failed(emit(part, cp, suffix, 0, builder.getArrayAttr(group),
                          moduleSuffix(k))))
            return failure();
      }
    }
  }
  func.erase();
  return success();
}

struct LowerPrefillToGPU
    : impl::DeltaLowerPrefillToGPUBase<LowerPrefillToGPU> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ArrayAttr targets = nvvmTargets(module);
    SmallVector<func::FuncOp> prefills;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<EntryKindAttr>(DeltaDialect::kEntryAttrName);
      if (entry && entry.getValue() == EntryKind::prefill)
        prefills.push_back(func);
    }
    for (func::FuncOp func : prefills)
      if (failed(lowerPrefill(func, targets, valueTile)))
        return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::delta
