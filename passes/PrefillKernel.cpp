//===- PrefillKernel.cpp - the chunked (prefill) GPU kernels ------*- C++ -*-===//
//
// The prefill kernels' ABI, plan, workspace size and the gpu.func shell
// each kernel is emitted into (bodies: PrefillEmitter.h and the files it
// names).
//
//===----------------------------------------------------------------------===//

#include "passes/PrefillKernel.h"
#include "passes/PrefillEmitter.h"

using namespace mlir;
using namespace mlir::delta;
using namespace mlir::delta::prefill;

namespace {
const KernelParam kParams[] = {
    {"q", ParamKind::Pointer},           {"k", ParamKind::Pointer},
    {"v", ParamKind::Pointer},           {"o", ParamKind::Pointer},
    {"g", ParamKind::Pointer},           {"beta", ParamKind::Pointer},
    {"a_log", ParamKind::Pointer},       {"dt_bias", ParamKind::Pointer},
    {"initial_state", ParamKind::Pointer}, {"final_state", ParamKind::Pointer},
    {"in_idx", ParamKind::Pointer},      {"out_idx", ParamKind::Pointer},
    {"cu_seqlens", ParamKind::Pointer},  {"work", ParamKind::Pointer},
    {"error_flag", ParamKind::Pointer},  {"cu_is_i64", ParamKind::I32},
    {"T", ParamKind::I64},               {"N", ParamKind::I32},
    {"H", ParamKind::I32},               {"HV", ParamKind::I32},
    {"max_chunks", ParamKind::I32},      {"q_stride", ParamKind::I64},
    {"k_stride", ParamKind::I64},        {"v_stride", ParamKind::I64},
    {"o_stride", ParamKind::I64},        {"slots", ParamKind::I64},
    {"scale", ParamKind::F32},           {"overlap", ParamKind::I32},
    {"qk_raw", ParamKind::I32},
    // sm_90a's warpgroup chunks and raw-form recur take q, k (and v) by
    // TMA tensor copies when `tma` is set.
    {"tma", ParamKind::I32},             {"q_map", ParamKind::TensorMap},
    {"k_map", ParamKind::TensorMap},     {"v_map", ParamKind::TensorMap},
};
} // namespace

ArrayRef<KernelParam> mlir::delta::prefillKernelParams() { return kParams; }

PrefillPlan mlir::delta::planPrefill(const PrefillSpec &spec, int64_t valueTile,
                                     int64_t threads) {
  PrefillPlan p;
  p.valueTile = valueTile > 0 ? valueTile : std::min<int64_t>(32, spec.v);
  // Eight warps when every product has a multiple of eight 16x8 tiles
  // (C = 64 with V tiles of 16 or more): twice the warps to hide latency.
  auto tiles = [](int64_t m, int64_t n) { return (m / 16) * (n / 8); };
  bool eight = tiles(spec.chunk, spec.chunk) % 8 == 0 &&
               tiles(spec.chunk, p.valueTile) % 8 == 0 &&
               tiles(spec.chunk, spec.k) % 8 == 0 &&
               tiles(spec.chunk, spec.v) % 8 == 0 &&
               tiles(spec.k, p.valueTile) % 8 == 0 && spec.chunk / 8 >= 4;
  p.threads = threads > 0 ? threads : eight ? 256 : 128;
  // The transposed state of one warp takes K / 2 registers per thread (64
  // at K = 128); as many output warps as state warps, at least two,
  // compute each chunk's C x V-tile output while the state warps run ahead
  // (at V tile 64, two output warps would each issue more mma.sync per
  // chunk than a state warp).
  p.registerState = spec.k <= 128 && p.valueTile % 16 == 0;
  if (p.registerState) {
    p.stateWarps = p.valueTile / 16;
    p.outputWarps = std::max<int64_t>(2, p.stateWarps);
  } else {
    p.stateWarps = p.threads / 64;
    p.outputWarps = p.threads / 32 - p.stateWarps;
  }
  p.recurThreads = 32 * (p.stateWarps + p.outputWarps);
  auto sixteen = [&](int64_t m, int64_t n) { return tiles(m, n) % 16 == 0; };
  p.chunksThreads = spec.rule == Rule::kda && sixteen(spec.chunk, spec.chunk) &&
                            sixteen(spec.chunk, spec.k) && sixteen(spec.chunk, spec.v)
                        ? 512
                        : p.threads;
  p.chunksSmem = ChunksSmem(spec).total;
  RecurSmem recur(spec, p.valueTile, p.registerState);
  p.recurSmem = recur.total;
  p.recurSmemStage = recur.stage;
  p.prepSmem = 2 * p.threads * 4 + 16; // the scan's two buffers, the verdict
  return p;
}

bool mlir::delta::prefillWarpgroupFits(const PrefillSpec &spec, ArrayRef<int64_t> tiles) {
  // wgmma's M is 64 rows: the chunk's rows in V' = U - W S and the output,
  // 64 K rows per product in the state step.
  if (spec.chunk != 64 || spec.k % 64 != 0 || spec.k > 128 || spec.v % 16 != 0)
    return false;
  return llvm::all_of(tiles, [](int64_t t) { return t % 16 == 0 && t <= 64; });
}

void mlir::delta::useWarpgroupRecur(PrefillPlan &plan, const PrefillSpec &spec) {
  plan.transposedRecur = spec.rule != Rule::kda && plan.valueTile == 64;
  RecurWarpgroupSmem L(spec, plan.valueTile, plan.transposedRecur);
  plan.warpgroupRecur = true;
  plan.recurThreads = 256; // the state warpgroup, then the output warpgroup
  plan.recurSmem = L.total;
  plan.recurSmemStage = L.stage;
  auto wide = [](int64_t n) { return n == 64 || n == 128; };
  if (spec.rule != Rule::kda && wide(spec.k) && wide(spec.v)) {
    plan.warpgroupChunks = true;
    plan.chunksThreads = 256; // the Q K^T / W warpgroup, the K K^T / U warpgroup
    plan.chunksSmem = ChunksWarpgroupSmem(spec).total;
  }
  plan.recurRawQK = plan.transposedRecur && plan.warpgroupChunks;
}

bool mlir::delta::targetHasWarpgroupMma(StringRef chip) { return chip == "sm_90a"; }

/// The compute capability of "sm_90a" (90), 0 when unreadable.
static int64_t computeCapability(StringRef chip) {
  StringRef arch = chip.drop_front(3).take_while(llvm::isDigit);
  int64_t cc = 0;
  if (!chip.starts_with("sm_") || arch.getAsInteger(10, cc))
    return 0;
  return cc;
}

bool mlir::delta::targetHasBulkCopies(StringRef chip) {
  return computeCapability(chip) >= 90;
}

int64_t mlir::delta::targetSharedLimit(StringRef chip) {
  int64_t cc = computeCapability(chip);
  if (cc == 0)
    return 48 * 1024;
  if (cc == 80 || cc == 87)
    return 163 * 1024;
  if (cc == 86 || cc == 89 || cc >= 120)
    return 99 * 1024;
  if (cc >= 90)
    return 227 * 1024;
  return 48 * 1024;
}

std::array<int64_t, 6> mlir::delta::prefillChunkRegionBytes(const PrefillSpec &s) {
  // 16-bit tiles; W, Qg, Kd and P in recur's padded shared-memory rows.
  int64_t C = s.chunk, Kp = s.k + prefill::kPad, Cp = C + prefill::kPad;
  // G_last: one float, or K factors e^G_last (per channel, rule kda).
  int64_t gLast = 4 * (s.rule == Rule::kda ? s.k : 1);
  return {gLast, C * Kp * 2, C * s.v * 2, C * Kp * 2, C * Kp * 2, C * Cp * 2};
}

int64_t mlir::delta::prefillWorkspaceBytes(const PrefillSpec &s, int64_t maxChunks,
                                           int64_t valueHeads, int64_t numSeqs) {
  int64_t chunks = maxChunks * valueHeads;
  // [0] chunk offsets [N + 1] and prep's verdict on cu_seqlens.
  int64_t total = align256((numSeqs + 2) * 4);
  for (int64_t per : prefillChunkRegionBytes(s))
    total += align256(chunks * per);
  // [7] the overlapped launch's work queue and ready flags
  // (PrefillOverlap.cpp): counters, then a u32 per (chunk, head).
  return total + prefill::kOverlapCounterBytes + align256(chunks * 4);
}

ArrayRef<StringRef> mlir::delta::prefillKernelParts() {
  static const StringRef parts[] = {"prep", "chunks", "recur"};
  return parts;
}

void mlir::delta::buildPrefillKernel(OpBuilder &builder, Location loc,
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
  func->setAttr(DeltaDialect::kBlockThreadsAttrName, builder.getI64IntegerAttr(own.threads));
  func->setAttr(DeltaDialect::kDynamicSmemAttrName, builder.getI64IntegerAttr(smemBytes));
  if (part == "recur")
    func->setAttr(DeltaDialect::kDynamicSmemStageAttrName,
                  builder.getI64IntegerAttr(plan.recurSmemStage));
  func->setAttr(DeltaDialect::kGridXAttrName, builder.getI64IntegerAttr(spec.v / plan.valueTile));
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
  if (part == "recur" && plan.sharedOverlap)
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
}
