//===- AttachTargets.cpp - record the target SMs in the module --*- C++ -*-===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTAATTACHTARGETS
#include "passes/Passes.h.inc"

namespace {
struct AttachTargets : impl::DeltaAttachTargetsBase<AttachTargets> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> names;
    for (const std::string &target : targets)
      names.push_back(StringAttr::get(&getContext(), target));
    NamedAttribute attr(
        StringAttr::get(&getContext(), DeltaDialect::kTargetsAttrName),
        ArrayAttr::get(&getContext(), names));
    // The dialect's attribute verifier owns the rules for target lists.
    auto *dialect = getContext().getOrLoadDialect<DeltaDialect>();
    if (failed(dialect->verifyOperationAttribute(module, attr)))
      return signalPassFailure();
    module->setAttr(attr.getName(), attr.getValue());
  }
};
} // namespace
} // namespace mlir::delta
