//===- KernelAbi.h - what every generated GPU kernel shares -------*- C++ -*-===//
//
// The parameter kinds of a kernel ABI (the host runtime packs the same list
// for cuLaunchKernel), the LLVM types they lower to, and the NVVM targets a
// kernel's gpu.module is compiled for.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_KERNELABI_H
#define DELTAC_CODEGEN_GPU_KERNELABI_H

#include "templates/runtime/deltac_abi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir::delta {

/// What one kernel parameter carries (the runtime packs the same kinds; a
/// tensor map gets its PTX form from delta-tensor-map-params).
using ParamKind = deltac_abi::ParamKind;

struct KernelParam {
  const char *name;
  ParamKind kind;
};

/// The argument types of a gpu.func with these parameters (pointers are
/// global-memory LLVM pointers; a tensor map is a generic `!llvm.ptr` to
/// the parameter itself, the only generic pointer a kernel takes).
SmallVector<Type> kernelParamTypes(OpBuilder &builder,
                                   ArrayRef<KernelParam> params);

/// One #nvvm.target (O3) per SM of the module's `delta.targets`.
ArrayAttr nvvmTargets(ModuleOp module);

} // namespace mlir::delta

#endif // DELTAC_CODEGEN_GPU_KERNELABI_H
