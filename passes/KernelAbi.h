//===- KernelAbi.h - what every generated GPU kernel shares -------*- C++ -*-===//
//
// The parameter kinds of a kernel ABI (the host runtime packs the same list
// for cuLaunchKernel), the LLVM types they lower to, and the NVVM targets a
// kernel's gpu.module is compiled for.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_PASSES_KERNELABI_H
#define DELTAC_PASSES_KERNELABI_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir::delta {

/// What one kernel parameter carries: a device pointer, a 32/64-bit integer,
/// an f32 or a TMA tensor map (cuda.h's CUtensorMap, 128 bytes passed by
/// value; delta-tensor-map-params gives it its PTX form). The wrapper
/// emitter maps each to a C type.
enum class ParamKind { Pointer, I32, I64, F32, TensorMap };

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

#endif // DELTAC_PASSES_KERNELABI_H
