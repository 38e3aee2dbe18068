//===- LowerDecodeToGPU.cpp - decode functions to GPU kernels ---*- C++ -*-===//

#include "dialect/DeltaOps.h"
#include "codegen/gpu/decode/DecodeKernel.h"
#include "codegen/gpu/NvidiaTarget.h"
#include "codegen/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTALOWERDECODETOGPU
#include "codegen/gpu/Passes.h.inc"

namespace {
/// The largest rows-per-thread and dot-partials: a thread never holds more
/// than a whole row (K, V <= 256), nor a dot product more partial sums.
constexpr int64_t kMaxDecodeTuning = 256;
/// The largest staged-min-tokens (max_t is at most this in a spec).
constexpr int64_t kMaxStagedMinTokens = 64;

/// The NVVM targets of the module's `delta.targets`, e.g. sm_90a.
LogicalResult lowerDecode(func::FuncOp func, ArrayAttr targets,
                          const DecodeTuning &tuning, StringRef only) {
  auto recurrences = llvm::to_vector(func.getOps<RecurrenceOp>());
  if (recurrences.size() != 1)
    return func.emitError("a decode function holds exactly one "
                          "delta.recurrence");
  RecurrenceOp rec = recurrences.front();
  auto q = cast<RankedTensorType>(rec.getQ().getType());
  auto v = cast<RankedTensorType>(rec.getV().getType());
  auto state = cast<RankedTensorType>(rec.getFinalState().getType());
  auto maxT = func->getAttrOfType<IntegerAttr>(DeltaDialect::kMaxTAttrName);
  if (q.isDynamicDim(3) || v.isDynamicDim(3) || !maxT)
    return func.emitError("decode needs static K and V and a delta.max_t");
  DecodeSpec spec{rec.getRule(),         rec.getGate(),
                  rec.getBetaForm(),     rec.getQkL2norm(),
                  rec.getLayout(),       q.getElementType(),
                  state.getElementType(), q.getDimSize(3),
                  v.getDimSize(3),       maxT.getInt()};
  spec.l2normCall = rec.getL2normCall();
  spec.perValue = rec.getGv() ||
                  cast<RankedTensorType>(rec.getBeta().getType()).getRank() == 4;

  // One gpu.module (and so one PTX file per target) per kernel variant and
  // kind of code: sm_90+ code takes the programmatic dependent launch
  // (KernelCode::bulk), older targets' does not (KernelCode::all). Where
  // the targets hold both kinds the sm_90+ module's name ends in _bulk;
  // the library merges the two by kernel name.
  auto kinds = groupTargetsByCode(targets, [](StringRef chip) {
    return targetHasBulkCopies(chip) ? KernelCode::bulk : KernelCode::all;
  });
  OpBuilder builder(func);
  for (auto [suffix, variant] : decodeVariants(spec, tuning, only)) {
    std::string name = (func.getSymName() + suffix).str();
    for (auto &[code, group] : kinds) {
      std::string moduleName = name + "_gpu" + moduleSuffixOfCode(code, kinds.size());
      auto module = gpu::GPUModuleOp::create(builder, func.getLoc(), moduleName,
                                             builder.getArrayAttr(group));
      gpu::GPUFuncOp kernel = buildDecodeKernel(builder, func.getLoc(), module,
                                                name, spec, variant, code);
      for (StringRef attr : {DeltaDialect::kSpecAttrName,
                             DeltaDialect::kEntryAttrName,
                             DeltaDialect::kMaxTAttrName})
        kernel->setAttr(attr, func->getAttr(attr));
    }
  }
  func.erase();
  return success();
}

struct LowerDecodeToGPU : impl::DeltaLowerDecodeToGPUBase<LowerDecodeToGPU> {
  using Base::Base;

  void runOnOperation() override {
    if (!variants.empty() && variants != "bulk" && variants != "small" &&
        variants != "staged") {
      getOperation().emitError() << "variants must be staged, bulk, small "
                                    "or empty, got '"
                                 << variants << "'";
      return signalPassFailure();
    }
    // Out-of-range values are refused, not clamped: rows-per-thread bounds
    // a search loop (2^63 - 1 never ended) and neither value is useful past
    // the largest head dimension.
    auto inRange = [&](StringRef option, int64_t value, int64_t lo,
                       int64_t hi, StringRef meaning) {
      if (value >= lo && value <= hi)
        return true;
      getOperation().emitError()
          << getArgument() << " option " << option << " = " << value
          << " is out of range; "
          << "accepted: " << lo << " to " << hi << meaning;
      return false;
    };
    if (!inRange("rows-per-thread", rowsPerThread, 0, kMaxDecodeTuning,
                 " (0: chosen from K, V and the state type)") ||
        !inRange("dot-partials", dotPartials, 1, kMaxDecodeTuning, "") ||
        !inRange("staged-min-tokens", stagedMinTokens, 0, kMaxStagedMinTokens,
                 " (0: the default, 2 for kv and 3 for vk)"))
      return signalPassFailure();
    DecodeTuning tuning;
    tuning.rowsPerThread = rowsPerThread;
    tuning.unswitchSteps = unswitchSteps;
    tuning.dotPartials = dotPartials;
    tuning.minTokens = stagedMinTokens;
    ModuleOp module = getOperation();
    ArrayAttr targets = nvvmTargets(module);
    SmallVector<func::FuncOp> decodes;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto entry =
          func->getAttrOfType<EntryKindAttr>(DeltaDialect::kEntryAttrName);
      if (entry && entry.getValue() == EntryKind::decode)
        decodes.push_back(func);
    }
    if (decodes.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    for (func::FuncOp func : decodes)
      if (failed(lowerDecode(func, targets, tuning, variants)))
        return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::delta
