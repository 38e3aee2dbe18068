//===- PrefillKernel.cpp - the gpu.func shell of each prefill kernel -*- C++ -*-===//
//
// Creates each prefill kernel's gpu.func with its launch attributes and
// has PrefillEmitter fill its body.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillKernel.h"
#include "codegen/gpu/prefill/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

ArrayRef<StringRef> mlir::delta::prefillKernelParts() {
  static const StringRef parts[] = {"prep", "chunks", "recur"};
  return parts;
}

gpu::GPUFuncOp mlir::delta::buildPrefillKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module, StringRef name,
                                     StringRef part, const PrefillSpec &spec,
                                     const PrefillPlan &plan,
                                     StringRef suffix) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> inputs = kernelParamTypes(builder, prefillKernelParams());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  // Dynamic shared memory: the kernels need more than the 48 KiB a static
  // array may have; the host raises the limit per kernel.
  std::string kernelName = (name + "_" + part + suffix).str();
  // recur and chunks have block sizes of their own.
  PrefillPlan own = plan;
  if (part == "recur")
    own.threads = plan.recurThreads;
  if (part == "chunks" || part == "queue")
    own.threads = plan.chunksThreads;
  std::string smemName = kernelName + "_smem";
  LLVM::GlobalOp::create(builder, loc, LLVM::LLVMArrayType::get(builder.getI8Type(), 0),
                         /*isConstant=*/false, LLVM::Linkage::External, smemName,
                         Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  int64_t smemBytes = part == "prep"     ? plan.prepSmem
                      : part == "chunks" || part == "queue" ? plan.chunksSmem
                                         : plan.recurSmem;
  auto func = gpu::GPUFuncOp::create(builder, loc, kernelName,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
  KernelRole role = part == "prep"     ? KernelRole::prep
                    : part == "queue"  ? KernelRole::queue
                    : part == "chunks" ? (plan.chunksRawQK() ? KernelRole::chunks_raw
                                                           : KernelRole::chunks)
                    : plan.sharedOverlap() ? KernelRole::recur_shared
                                         : KernelRole::recur;
  bool recur = part == "recur";
  func->setAttr(DeltaDialect::kKernelAttrName,
                KernelAttr::get(ctx, role, plan.code, spec.k, spec.v, plan.valueTile,
                                spec.v / plan.valueTile, own.threads, smemBytes,
                                recur ? plan.recurSmemStage : 0, /*minBlocksPerSm=*/0,
                                /*overlapBlocksPerSm=*/0, recur && plan.recurRawQK()));
  for (auto [i, p] : llvm::enumerate(prefillKernelParams()))
    if (p.kind == ParamKind::Pointer)
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), builder.getUnitAttr());
  func.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr({(int32_t)own.threads, 1, 1}));
  // The queue's loop (PrefillOverlap.cpp) has ptxas take more registers
  // than chunks' single item (108 against 79 at K = V = 128): hold it to
  // three blocks per SM, which it fits without spilling.
  if (part == "queue")
    func->setAttr("nvvm.minctasm", builder.getI32IntegerAttr(3));
  // setmaxnreg needs the launch's registers per thread fixed (.maxnreg).
  if (part == "recur" && plan.sharedOverlap())
    func->setAttr("nvvm.maxnreg", builder.getI32IntegerAttr(kSharedRecurRegisters));
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  Value smem = LLVM::AddressOfOp::create(b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  PrefillEmitter emitter(b, func, spec, own, smem);
  if (part == "prep")
    emitter.emitPrep();
  else if (part == "chunks")
    emitter.emitChunks();
  else if (part == "queue")
    emitter.emitQueue();
  else
    emitter.emitRecur();
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
  return func;
}
