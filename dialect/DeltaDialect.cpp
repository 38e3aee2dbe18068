//===- DeltaDialect.cpp - the delta dialect ---------------------*- C++ -*-===//
//
// The dialect's attributes, the `delta.targets` module attribute and
// the rule/gate compatibility table shared by the verifiers.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::delta;

#include "dialect/DeltaDialect.cpp.inc"
#include "dialect/DeltaEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/DeltaAttrs.cpp.inc"

void DeltaDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/DeltaAttrs.cpp.inc"
      >();
  registerOperations();
}

LogicalResult RecurVariantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                       int64_t valueTile, int64_t minBlocksPerSm,
                                       int64_t overlapBlocksPerSm) {
  if (valueTile < 8 || valueTile % 8 != 0)
    return emitError() << "recur variant: value_tile must be a positive multiple of 8, got "
                       << valueTile;
  if (minBlocksPerSm < 0 || overlapBlocksPerSm < 0)
    return emitError() << "recur variant: min_blocks_per_sm and overlap_blocks_per_sm must "
                          "not be negative, got "
                       << minBlocksPerSm << " and " << overlapBlocksPerSm;
  return success();
}

LogicalResult ContextParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          int64_t minTokens, int64_t eighthsPerSm) {
  if (minTokens < 0 || eighthsPerSm < 0)
    return emitError() << "context_parallel: min_tokens and eighths_per_sm must not be "
                          "negative, got "
                       << minTokens << " and " << eighthsPerSm;
  return success();
}

LogicalResult SharedOverlapAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                        int64_t minTokens, int64_t maxTokens,
                                        int64_t quartersPerSm) {
  if (minTokens < 0 || maxTokens < minTokens || quartersPerSm < 0)
    return emitError() << "shared_overlap: need 0 <= min_tokens <= max_tokens and "
                          "quarters_per_sm >= 0, got "
                       << minTokens << ", " << maxTokens << " and " << quartersPerSm;
  return success();
}

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 KernelRole, KernelCode, int64_t k, int64_t v,
                                 int64_t valueTile, int64_t gridX, int64_t blockThreads,
                                 int64_t dynamicSmem, int64_t dynamicSmemStage,
                                 int64_t minBlocksPerSm, int64_t overlapBlocksPerSm,
                                 bool, int64_t minTokens, int64_t cpEighthsPerSm,
                                 int64_t maxTokens) {
  if (k < 1 || v < 1 || valueTile < 1 || gridX < 1)
    return emitError() << "kernel: k, v, value_tile and grid_x must be positive, got "
                       << k << ", " << v << ", " << valueTile << " and " << gridX;
  if (blockThreads < 32 || blockThreads % 32 != 0)
    return emitError() << "kernel: block_threads must be a positive multiple of 32, got "
                       << blockThreads;
  if (dynamicSmem < 0 || dynamicSmemStage < 0 || dynamicSmemStage > dynamicSmem)
    return emitError() << "kernel: dynamic_smem and dynamic_smem_stage must not be "
                          "negative, the stage at most the whole, got "
                       << dynamicSmem << " and " << dynamicSmemStage;
  if (minBlocksPerSm < 0 || overlapBlocksPerSm < 0)
    return emitError() << "kernel: min_blocks_per_sm and overlap_blocks_per_sm must "
                          "not be negative, got "
                       << minBlocksPerSm << " and " << overlapBlocksPerSm;
  if (minTokens < 0 || cpEighthsPerSm < 0)
    return emitError() << "kernel: min_tokens and cp_eighths_per_sm must not be negative, got "
                       << minTokens << " and " << cpEighthsPerSm;
  if (maxTokens != 0 && maxTokens < minTokens)
    return emitError() << "kernel: max_tokens must be 0 (none) or at least min_tokens, got "
                       << maxTokens << " below " << minTokens;
  return success();
}

ArrayRef<StringRef> mlir::delta::supportedTargets() {
  static const StringRef targets[] = {"sm_80", "sm_90a", "sm_100a"};
  return targets;
}

bool mlir::delta::isSupportedChunkSize(int64_t chunk) {
  return chunk == 16 || chunk == 32 || chunk == 64;
}

bool mlir::delta::isPerChannel(GateForm gate) {
  return gate == GateForm::channel_log || gate == GateForm::channel_raw ||
         gate == GateForm::channel_call;
}

bool mlir::delta::isRaw(GateForm gate) {
  return gate == GateForm::raw || gate == GateForm::channel_raw;
}

bool mlir::delta::isByCall(GateForm gate) {
  return gate == GateForm::call || gate == GateForm::channel_call;
}

bool mlir::delta::takesRawParams(GateForm gate) {
  return isRaw(gate) || isByCall(gate);
}

bool mlir::delta::takesCallOptions(GateForm gate, BetaForm beta, bool l2normCall) {
  return isByCall(gate) || beta == BetaForm::call || l2normCall;
}

std::optional<std::string> mlir::delta::checkRuleGate(Rule rule,
                                                      GateForm gate) {
  switch (rule) {
  case Rule::delta:
    if (gate != GateForm::none)
      return std::string("rule 'delta' has no gate; use gate = none (got '") +
             stringifyGateForm(gate).str() + "')";
    return std::nullopt;
  case Rule::gated:
    if (gate == GateForm::none)
      return std::string("rule 'gated' needs a per-head gate (log, linear "
                         "or raw)");
    if (isPerChannel(gate))
      return std::string("rule 'gated' takes one decay per head; the "
                         "per-channel gate '") +
             stringifyGateForm(gate).str() + "' belongs to rule 'kda'";
    return std::nullopt;
  case Rule::kda:
    if (gate == GateForm::linear)
      return std::string("a linear gate (alpha) is not supported with rule "
                         "'kda'; use channel_log or channel_raw");
    if (!isPerChannel(gate))
      return std::string("rule 'kda' needs a per-channel gate (channel_log, "
                         "channel_raw or channel_call), got '") +
             stringifyGateForm(gate).str() + "'";
    return std::nullopt;
  }
  llvm_unreachable("unknown rule");
}

/// `delta.targets` lists the SMs to generate for: a non-empty array of known,
/// distinct target names on a module.
static LogicalResult verifyTargets(Operation *op, Attribute value) {
  StringRef name = DeltaDialect::kTargetsAttrName;
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << name << "' must be set on a builtin.module";
  auto list = dyn_cast<ArrayAttr>(value);
  if (!list || list.empty())
    return op->emitError() << "'" << name
                           << "' must be a non-empty array of target names";
  llvm::StringSet<> seen;
  for (Attribute element : list) {
    auto target = dyn_cast<StringAttr>(element);
    if (!target)
      return op->emitError() << "'" << name << "' must hold strings, got "
                             << element;
    if (!llvm::is_contained(supportedTargets(), target.getValue()))
      return op->emitError()
             << "unknown target '" << target.getValue()
             << "'; supported targets are sm_80, sm_90a, sm_100a";
    if (!seen.insert(target.getValue()).second)
      return op->emitError() << "target '" << target.getValue()
                             << "' is listed twice";
  }
  return success();
}

/// The function attributes written by delta-expand-spec say which spec and
/// entry point a function implements; later passes and the codegen read them.
LogicalResult DeltaDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == kTargetsAttrName)
    return verifyTargets(op, value);
  if (name == kSpecAttrName) {
    if (!isa<FlatSymbolRefAttr>(value))
      return op->emitError() << "'" << name << "' must name a delta.spec";
    return success();
  }
  if (name == kRecurVariantsAttrName) {
    // Each entry verified itself when it was built (RecurVariantAttr).
    auto list = dyn_cast<ArrayAttr>(value);
    if (!list || list.empty() ||
        !llvm::all_of(list, [](Attribute v) { return isa<RecurVariantAttr>(v); }))
      return op->emitError() << "'" << name
                             << "' must be a non-empty array of #delta.recur_variant";
    return success();
  }
  if (name == kSharedOverlapAttrName) {
    if (!isa<SharedOverlapAttr>(value))
      return op->emitError() << "'" << name << "' must be a #delta.shared_overlap";
    return success();
  }
  if (name == kContextParallelAttrName) {
    if (!isa<ContextParallelAttr>(value))
      return op->emitError() << "'" << name << "' must be a #delta.context_parallel";
    return success();
  }
  if (name == kDimsAttrName) {
    if (!isa<DimsAttr>(value))
      return op->emitError() << "'" << name << "' must be a #delta.dims";
    return success();
  }
  if (name == kKernelAttrName) {
    // Its fields verified themselves when it was built (KernelAttr).
    if (!isa<KernelAttr>(value))
      return op->emitError() << "'" << name << "' must be a #delta.kernel";
    return success();
  }
  if (name == kEntryAttrName) {
    if (!isa<EntryKindAttr>(value))
      return op->emitError() << "'" << name
                             << "' must be an entry point attribute";
    return success();
  }
  if (name == kChunkSizeAttrName || name == kMaxTAttrName) {
    auto number = dyn_cast<IntegerAttr>(value);
    if (!number || number.getInt() < 1)
      return op->emitError() << "'" << name << "' must be a positive integer";
    if (name == kChunkSizeAttrName &&
        !isSupportedChunkSize(number.getInt()))
      return op->emitError() << "chunk size " << number.getInt()
                             << " is not supported; use 16, 32 or 64";
    return success();
  }
  return op->emitError() << "unknown delta dialect attribute '" << name
                         << "'";
}
