//===- KernelAbi.cpp - what every generated GPU kernel shares -----*- C++ -*-===//

#include "codegen/gpu/KernelAbi.h"

#include "dialect/DeltaDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

SmallVector<Type> mlir::delta::kernelParamTypes(OpBuilder &builder,
                                                ArrayRef<KernelParam> params) {
  Type ptr = LLVM::LLVMPointerType::get(builder.getContext(), 1);
  SmallVector<Type> types;
  for (const KernelParam &p : params) {
    switch (p.kind) {
    case ParamKind::Pointer: types.push_back(ptr); break;
    case ParamKind::I32: types.push_back(builder.getI32Type()); break;
    case ParamKind::I64: types.push_back(builder.getI64Type()); break;
    case ParamKind::F32: types.push_back(builder.getF32Type()); break;
    case ParamKind::TensorMap:
      types.push_back(LLVM::LLVMPointerType::get(builder.getContext()));
      break;
    }
  }
  return types;
}

ArrayAttr mlir::delta::nvvmTargets(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  SmallVector<Attribute> targets;
  if (auto list = module->getAttrOfType<ArrayAttr>(
          DeltaDialect::kTargetsAttrName))
    for (Attribute name : list)
      targets.push_back(NVVM::NVVMTargetAttr::get(
          ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda",
          cast<StringAttr>(name).getValue()));
  return ArrayAttr::get(ctx, targets);
}
