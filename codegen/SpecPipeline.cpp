//===- SpecPipeline.cpp - load, verify and expand a spec file ---*- C++ -*-===//

#include "codegen/SpecPipeline.h"

#include "dialect/DeltaOps.h"
#include "codegen/gpu/NvidiaTarget.h"
#include "codegen/gpu/GpuPipelines.h"
#include "codegen/gpu/Passes.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

OwningOpRef<ModuleOp> deltac::loadSpecs(llvm::SourceMgr &sourceMgr,
                                        MLIRContext &context) {
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, &context); // parses and verifies
  if (!module)
    return nullptr;
  bool any = false;
  for (Operation &op : module->getBody()->getOperations()) {
    if (!isa<delta::SpecOp>(op)) {
      op.emitError() << "a spec file holds only delta.spec ops; found '"
                     << op.getName() << "'";
      return nullptr;
    }
    any = true;
  }
  if (!any) {
    module->emitError("the spec file holds no delta.spec");
    return nullptr;
  }
  return module;
}

std::string deltac::selectSpecs(ModuleOp module, ArrayRef<std::string> names) {
  if (names.empty())
    return "";
  llvm::StringSet<> wanted;
  for (const std::string &name : names)
    if (!wanted.insert(name).second)
      return "spec '" + name + "' is listed twice";
  std::string available;
  for (auto spec : module.getOps<delta::SpecOp>())
    available += (available.empty() ? "" : ", ") + spec.getSymName().str();
  for (const std::string &name : names)
    if (!module.lookupSymbol<delta::SpecOp>(name))
      return "no spec '" + name + "' in the file (it has " + available + ")";
  for (auto spec : llvm::make_early_inc_range(module.getOps<delta::SpecOp>()))
    if (!wanted.contains(spec.getSymName()))
      spec.erase();
  return "";
}

std::string deltac::checkTargets(ArrayRef<std::string> targets) {
  if (targets.empty())
    return "no target given; pass --target=sm_90a[,sm_80,...]";
  llvm::StringSet<> seen;
  for (const std::string &target : targets) {
    if (!llvm::is_contained(delta::supportedTargets(), target))
      return "unknown target '" + target +
             "'; supported targets are sm_80, sm_90a, sm_100a";
    if (!seen.insert(target).second)
      return "target '" + target + "' is listed twice";
  }
  return "";
}

/// Parses a driver option string into `pass`'s options. LLVM's value
/// parsers (a boolean that is not true/false/1/0, an integer that does not
/// fit 64 bits) print their complaint to stderr and hand the handler an
/// empty message, so that case gets a message of its own.
static LogicalResult initializeOptions(Pass &pass, StringRef flag,
                                       StringRef options, ModuleOp module) {
  return pass.initializeOptions(options, [&](const Twine &msg) {
    std::string text = msg.str();
    if (StringRef(text).trim().empty())
      text = "cannot parse '" + options.str() + "': options of " +
             pass.getArgument().str() + " are name=value, integers are "
             "decimal and fit 64 bits, booleans are true, false, 1 or 0";
    return module.emitError() << flag << ": " << text;
  });
}

LogicalResult deltac::expandSpecs(ModuleOp module,
                                  ArrayRef<std::string> targets,
                                  StringRef decodeTuning,
                                  StringRef prefillPlan) {
  // The plan's default target model; a tool has registered it already.
  delta::registerNvidiaPlanTarget();
  PassManager pm(module->getName());
  pm.addPass(delta::createDeltaAttachTargets(
      delta::DeltaAttachTargetsOptions{llvm::to_vector(targets)}));
  pm.addPass(delta::createDeltaExpandSpec());
  std::unique_ptr<Pass> decode = delta::createDeltaLowerDecodeToGPU();
  if (failed(initializeOptions(*decode, "--decode-tuning", decodeTuning,
                               module)))
    return failure();
  std::unique_ptr<Pass> plan = delta::createDeltaPlanPrefill();
  if (failed(initializeOptions(*plan, "--prefill-plan", prefillPlan, module)))
    return failure();
  delta::buildGpuKernelsPipeline(pm, std::move(decode), std::move(plan));
  return pm.run(module);
}

SmallVector<deltac::PlannedKernel> deltac::planKernels(ModuleOp module) {
  SmallVector<PlannedKernel> kernels;
  auto targets = module->getAttrOfType<ArrayAttr>(
      delta::DeltaDialect::kTargetsAttrName);
  if (!targets)
    return kernels;
  // Entry functions: lowered ones are gpu.func kernels, the others are still
  // func.func at the sequence level.
  module.walk([&](Operation *op) {
    if (!isa<func::FuncOp, gpu::GPUFuncOp>(op))
      return;
    auto spec = op->getAttrOfType<FlatSymbolRefAttr>(
        delta::DeltaDialect::kSpecAttrName);
    auto entry = op->getAttrOfType<delta::EntryKindAttr>(
        delta::DeltaDialect::kEntryAttrName);
    if (!spec || !entry)
      return;
    StringRef name = cast<SymbolOpInterface>(op).getName();
    // The specialization: a kernel's #delta.kernel, else the function's
    // delta.dims (delta-expand-spec), never parsed from the name.
    int64_t k = 0, v = 0;
    if (auto kernel = op->getAttrOfType<delta::KernelAttr>(delta::DeltaDialect::kKernelAttrName)) {
      k = kernel.getK();
      v = kernel.getV();
    } else if (auto dims = op->getAttrOfType<delta::DimsAttr>(delta::DeltaDialect::kDimsAttrName)) {
      k = dims.getK();
      v = dims.getV();
    } else {
      return;
    }
    // A kernel's targets: its gpu.module's (a kernel may be built in one
    // module per kind of target), else the module's list.
    SmallVector<std::string> chips;
    auto gpuModule = op->getParentOfType<gpu::GPUModuleOp>();
    if (ArrayAttr own = gpuModule ? gpuModule.getTargetsAttr() : ArrayAttr()) {
      for (Attribute t : own)
        if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(t))
          chips.push_back(nvvm.getChip().str());
    } else {
      for (Attribute target : targets)
        chips.push_back(cast<StringAttr>(target).getValue().str());
    }
    for (const std::string &chip : chips)
      kernels.push_back({spec.getValue().str(), name.str(),
                         delta::stringifyEntryKind(entry.getValue()).str(),
                         k, v, chip, isa<gpu::GPUFuncOp>(op)});
  });
  return kernels;
}
