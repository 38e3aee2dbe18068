//===- PrefillKernel.cpp - the gpu.func shell of each prefill kernel -*- C++ -*-===//
//
// Creates each prefill kernel's gpu.func with its launch attributes and
// has PrefillEmitter fill its body.
//
//===----------------------------------------------------------------------===//

#include "codegen/gpu/prefill/PrefillKernel.h"
#include "codegen/gpu/prefill/PrefillEmitter.h"
#include "codegen/gpu/NvidiaTarget.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

StringRef mlir::delta::prefillPartName(PrefillPart part) {
  switch (part) {
  case PrefillPart::prep: return "prep";
  case PrefillPart::chunks: return "chunks";
  case PrefillPart::queue: return "queue";
  case PrefillPart::recur: return "recur";
  case PrefillPart::recurCp: return "recur_cp";
  case PrefillPart::segmentChain: return "cp_chain";
  case PrefillPart::segmentCorrection: return "cp_correct";
  }
  llvm_unreachable("unknown prefill part");
}

int64_t mlir::delta::prefillPartSharedBytes(PrefillPart part, const PrefillPlan &plan) {
  switch (part) {
  case PrefillPart::prep: return plan.prepSmem;
  case PrefillPart::chunks: return plan.chunksSmem;
  case PrefillPart::queue: return plan.queueSmem;
  case PrefillPart::recur:
  case PrefillPart::recurCp: return plan.recurSmem;
  case PrefillPart::segmentChain: return plan.segmentChainSmem;
  case PrefillPart::segmentCorrection: return plan.segmentCorrectionSmem;
  }
  llvm_unreachable("unknown prefill part");
}

gpu::GPUFuncOp mlir::delta::buildPrefillKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module, StringRef name,
                                     PrefillPart part, const PrefillSpec &spec,
                                     const PrefillPlan &plan,
                                     StringRef suffix) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Type> inputs = kernelParamTypes(builder, prefillKernelParams());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  // Dynamic shared memory: the kernels need more than the 48 KiB a static
  // array may have; the host raises the limit per kernel.
  std::string kernelName = (name + "_" + prefillPartName(part) + suffix).str();
  // recur and chunks have block sizes of their own.
  PrefillPlan own = plan;
  if (isRecurPart(part))
    own.threads = plan.recurThreads;
  if (part == PrefillPart::segmentChain || part == PrefillPart::segmentCorrection)
    own.threads = kSegmentThreads;
  if (part == PrefillPart::chunks || part == PrefillPart::queue)
    own.threads = plan.chunksThreads;
  std::string smemName = kernelName + "_smem";
  LLVM::GlobalOp::create(builder, loc, LLVM::LLVMArrayType::get(builder.getI8Type(), 0),
                         /*isConstant=*/false, LLVM::Linkage::External, smemName,
                         Attribute(), /*alignment=*/16, /*addrSpace=*/3);
  int64_t smemBytes = prefillPartSharedBytes(part, plan);
  auto func = gpu::GPUFuncOp::create(builder, loc, kernelName,
                                     builder.getFunctionType(inputs, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
  bool recur = isRecurPart(part);
  KernelRole role = KernelRole::prep;
  switch (part) {
  case PrefillPart::prep: role = KernelRole::prep; break;
  case PrefillPart::queue: role = KernelRole::queue; break;
  case PrefillPart::chunks:
    role = plan.chunksRawQK() ? KernelRole::chunks_raw : KernelRole::chunks;
    break;
  case PrefillPart::recur:
    role = plan.sharedOverlap() ? KernelRole::recur_shared : KernelRole::recur;
    break;
  case PrefillPart::recurCp: role = KernelRole::recur_cp; break;
  case PrefillPart::segmentChain: role = KernelRole::cp_chain; break;
  case PrefillPart::segmentCorrection: role = KernelRole::cp_correct; break;
  }
  func->setAttr(DeltaDialect::kKernelAttrName,
                KernelAttr::get(ctx, role, plan.code, spec.k, spec.v, plan.valueTile,
                                spec.v / plan.valueTile, own.threads, smemBytes,
                                recur ? plan.recurSmemStage : 0, /*minBlocksPerSm=*/0,
                                /*overlapBlocksPerSm=*/0, recur && plan.recurRawQK(),
                                /*minTokens=*/0, /*cpEighthsPerSm=*/0, /*maxTokens=*/0));
  for (auto [i, p] : llvm::enumerate(prefillKernelParams()))
    if (p.kind == ParamKind::Pointer)
      func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), builder.getUnitAttr());
  func.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr({(int32_t)own.threads, 1, 1}));
  // The queue's loop (PrefillOverlap.cpp) has ptxas take more registers
  // than chunks' single item (108 against 79 at K = V = 128): hold it to
  // three blocks per SM, which it fits without spilling.
  if (part == PrefillPart::queue)
    func->setAttr("nvvm.minctasm", builder.getI32IntegerAttr(3));
  // The warpgroup chunks' shared memory (v copied late) lets an SM hold
  // four blocks; the registers must too (64 a thread).
  if (part == PrefillPart::chunks && plan.warpgroupChunks())
    func->setAttr("nvvm.minctasm", builder.getI32IntegerAttr(4));
  // setmaxnreg needs the launch's registers per thread fixed (.maxnreg).
  if (recur && plan.sharedOverlap())
    func->setAttr("nvvm.maxnreg", builder.getI32IntegerAttr(kSharedRecurRegisters));
  // Without a .maxnreg, sm_100a's ptxas holds some recur kernels to 128
  // registers and spills (f16 KDA, K = V = 64, tile 32: 8 B); the
  // hardware's 255 lets it take the 173 it needs. Only a module of such
  // chips alone: on sm_90a the limit moves ptxas's own choice (K = 256
  // tile 16: 167 -> 216 registers), which is not measured. The plan names
  // the recur kernels that need it on every target (recurTakesAllRegisters).
  else if (recur && (recurTakesAllRegisters(plan, spec) ||
                     llvm::all_of(module.getTargetsAttr(), [](Attribute t) {
                       return targetIsBlackwellOrLater(cast<NVVM::NVVMTargetAttr>(t).getChip());
                     })))
    func->setAttr("nvvm.maxnreg", builder.getI32IntegerAttr(255));
  ImplicitLocOpBuilder b(loc, builder);
  b.setInsertionPointToStart(&func.getBody().front());
  Value smem = LLVM::AddressOfOp::create(b, LLVM::LLVMPointerType::get(ctx, 3), smemName);
  PrefillEmitter emitter(b, func, spec, own, smem);
  // One dispatch: the part's entry, which builds the plan's form of it.
  switch (part) {
  case PrefillPart::prep: emitter.emitPrep(); break;
  case PrefillPart::chunks: emitter.emitChunks(); break;
  case PrefillPart::queue: emitter.emitQueue(); break;
  case PrefillPart::recur: emitter.emitRecur(); break;
  case PrefillPart::recurCp: emitter.emitRecurSegments(); break;
  case PrefillPart::segmentChain: emitter.emitSegmentChain(); break;
  case PrefillPart::segmentCorrection: emitter.emitSegmentCorrection(); break;
  }
  b.setInsertionPointToEnd(&func.getBody().front());
  gpu::ReturnOp::create(b);
  return func;
}
