//===- TensorMapParams.cpp - tensor maps as grid-constant params -*- C++ -*-===//
//
// A kernel's tensor map (ParamKind::TensorMap) is a generic `!llvm.ptr`
// argument until here; this pass makes it the 128-byte by-value parameter
// the driver copies a CUtensorMap into (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTATENSORMAPPARAMS
#include "codegen/gpu/Passes.h.inc"

namespace {
struct TensorMapParams : impl::DeltaTensorMapParamsBase<TensorMapParams> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    auto bytes = LLVM::LLVMArrayType::get(b.getI8Type(), 128); // sizeof(CUtensorMap)
    getOperation()->walk([&](LLVM::LLVMFuncOp func) {
      if (!func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()) || func.isExternal())
        return;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        auto ptr = dyn_cast<LLVM::LLVMPointerType>(func.getArgument(i).getType());
        if (!ptr || ptr.getAddressSpace() != 0)
          continue;
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(), TypeAttr::get(bytes));
        // cp.async.bulk.tensor needs the map 64-byte aligned.
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b.getI32IntegerAttr(64));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
      }
    });
  }
};
} // namespace
} // namespace mlir::delta
