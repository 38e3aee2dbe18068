//===- PrefillPlanTest.cpp - the prefill ABI and dispatch table ----------===//
//
// Host-only checks of the prefill path: the runtime packs the compiler's
// kernel parameters in the compiler's order; the workspace formula of the
// runtime equals the compiler's; the dispatch table is evaluated as
// delta-plan-prefill wrote it (the first variant whose grid has a quarter
// of min_blocks_per_sm blocks per SM, else the last) for given shapes; recur
// gets its deeper pipeline only where the device has the shared memory; a
// call whose one-dimensional grids would overflow is rejected before the
// driver is touched.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/PlanTarget.h"
#include "codegen/gpu/NvidiaTarget.h"
#include "codegen/gpu/prefill/PrefillEmitter.h"
#include "codegen/gpu/prefill/PrefillPlan.h"
#include "tools/DeltacRegistration.h"

#include "deltac_prefill.h"

#include "AbiCheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

// The prefill kernels' parameters (prep, chunks and recur take one list):
// the compiler's prefillKernelParams() lowered to LLVM types, the PTX
// .entry of every prefill kernel deltac wrote (the example library, fresh
// from this build's deltac), and the array the runtime packs
// (deltac_rt::packPrefillParams) agree position by position: name, kind,
// size (tests/unit/AbiCheck.h).
TEST(PrefillAbi, RuntimePacksTheCompilersParameters) {
  int count = 0;
  const deltac_rt::ParamInfo *runtime = deltac_rt::prefillParamLayout(&count);
  llvm::ArrayRef<mlir::delta::KernelParam> compiler =
      mlir::delta::prefillKernelParams();
  abicheck::expectSame(runtime, count, abicheck::compilerParams(compiler),
                  "compiler types", compiler);
}

TEST(PrefillAbi, RuntimePacksThePtxParameters) {
  int count = 0;
  const deltac_rt::ParamInfo *runtime = deltac_rt::prefillParamLayout(&count);
  std::vector<std::string> files = abicheck::ptxFiles(DELTAC_LIBRARY_DIR, "_prefill_");
  ASSERT_GE(files.size(), 6u) << DELTAC_LIBRARY_DIR; // prep, chunks, recur, ...
  for (const std::string &file : files) {
    std::string entry;
    std::vector<abicheck::Param> ptx = abicheck::ptxParams(file, &entry);
    abicheck::expectSame(runtime, count, ptx, file + " (" + entry + ")");
  }
}

TEST(PrefillTma, TensorMapRules) {
  alignas(16) static const uint16_t rows[64] = {};
  const void *base = rows;
  const void *odd = reinterpret_cast<const char *>(rows) + 2;
  EXPECT_TRUE(deltac_rt::tensorMapUsable(base, 16000, 16, 128, 16 * 128));
  // q from a fused projection: tokens further apart than H * K.
  EXPECT_TRUE(deltac_rt::tensorMapUsable(base, 1, 16, 128, 16 * 128 + 4096));
  EXPECT_FALSE(deltac_rt::tensorMapUsable(nullptr, 16, 16, 128, 16 * 128));
  EXPECT_FALSE(deltac_rt::tensorMapUsable(odd, 16, 16, 128, 16 * 128));
  EXPECT_FALSE(deltac_rt::tensorMapUsable(base, 0, 16, 128, 16 * 128));
  EXPECT_FALSE(deltac_rt::tensorMapUsable(base, 16, 16, 128, 16 * 128 + 4)); // 8-byte steps
  EXPECT_FALSE(deltac_rt::tensorMapUsable(base, 16, 16, 128, 128));          // heads overlap
  EXPECT_FALSE(deltac_rt::tensorMapUsable(base, int64_t(1) << 31, 1, 128, 128));
  EXPECT_TRUE(deltac_rt::tensorMapUsable(base, (int64_t(1) << 31) - 1, 1, 128, 128));

  deltac_rt::TensorMap map;
  std::memset(&map, 0x5a, sizeof map); // poison
  EXPECT_FALSE(deltac_rt::encodeRowsMap(&map, odd, true, 16, 16, 128, 16 * 128, 64, 64));
  for (uint64_t word : map.opaque)
    EXPECT_EQ(word, 0u);
  EXPECT_EQ(alignof(deltac_rt::TensorMap), 64u);
  EXPECT_EQ(sizeof(deltac_rt::TensorMap), 128u);
}

namespace {
deltac_rt::PrefillVariant variant(int64_t K, int64_t V, unsigned tiles,
                                  int64_t minBlocks,
                                  deltac_rt::GateKind gate = deltac_rt::GateKind::Log) {
  return {K, V, 64, DELTAC_BF16, DELTAC_F32, gate,
          false, 128, 128, 128, tiles, minBlocks, 0, 0, 0, 0, nullptr, nullptr, nullptr};
}

// A bf16 call with an fp32 state, K = V = 128, H = HV = `heads`.
deltac_prefill_args args(int64_t N, int64_t T, int64_t heads) {
  deltac_prefill_args a{};
  a.K = a.V = 128;
  a.N = N;
  a.T = T;
  a.H = a.HV = heads;
  a.io_dtype = DELTAC_BF16;
  a.state_dtype = DELTAC_F32;
  return a;
}
} // namespace

TEST(PrefillDispatch, WideTileOnceTheGridFillsHalfTheGpu) {
  // delta-plan-prefill's default table for V = 128: tile 32 (4 blocks per
  // head) when 2 * N * HV * 4 >= SMs, else tile 16 (8 blocks per head).
  const deltac_rt::PrefillVariant table[] = {
      variant(64, 64, 2, 2), variant(128, 128, 4, 2), variant(128, 128, 8, 0)};
  const int sms = 132; // H200
  auto tiles = [&](int64_t N, int64_t HV) {
    const deltac_rt::PrefillVariant *v =
        deltac_rt::choosePrefillVariant(table, 3, 128, 128, N, HV, sms);
    return v ? int(v->valueTiles) : -1;
  };
  EXPECT_EQ(tiles(1, 16), 8);  // T=32K H=HV=16: 64 blocks < 66
  EXPECT_EQ(tiles(1, 32), 4);  // T=4K HV32: 128 >= 66
  EXPECT_EQ(tiles(8, 32), 4);  // varlen 8 x HV32: 1024
  EXPECT_EQ(tiles(17, 1), 4);  // 68 >= 66
  EXPECT_EQ(tiles(16, 1), 8);  // 64 < 66
  EXPECT_EQ(deltac_rt::choosePrefillVariant(table, 3, 96, 128, 1, 1, sms),
            nullptr);
  // The 64x64 entry is alone: chosen even though its predicate fails.
  EXPECT_EQ(deltac_rt::choosePrefillVariant(table, 3, 64, 64, 1, 1, sms),
            &table[0]);
}

TEST(PrefillDispatch, ScalarGateTile64FromAQuarterWave) {
  // delta-plan-prefill's GDN table for V = 128 (min_blocks_per_sm in
  // quarters of a block per SM): tile 64 once its grid has a quarter block
  // per SM, i.e. once tile 16's would overflow a wave; else tile 16 (no
  // tile 32: from half a wave of its own blocks it would need the same
  // busy * HV as tile 64, and the plan drops it).
  const deltac_rt::PrefillVariant table[] = {variant(128, 128, 2, 1), variant(128, 128, 8, 0)};
  const int sms = 132; // H200
  auto tiles = [&](int64_t N, int64_t HV) {
    return int(deltac_rt::choosePrefillVariant(table, 2, 128, 128, N, HV, sms)->valueTiles);
  };
  EXPECT_EQ(tiles(1, 32), 2);  // T=4K HV32: 4 * 64 = 256 >= 132
  EXPECT_EQ(tiles(1, 17), 2);  // 4 * 34 = 136 >= 132
  EXPECT_EQ(tiles(1, 16), 8);  // T=32K H=HV=16: 128 < 132
  EXPECT_EQ(tiles(8, 32), 2);  // varlen 8 x HV32
}

namespace {
// delta-plan-prefill's table for one spec (`tiles`: its value-tiles
// option, empty for the default) as the host's rows: valueTiles = V / tile.
std::vector<deltac_rt::PrefillVariant> plannedTable(const std::string &spec, int64_t K,
                                                    int64_t V,
                                                    llvm::ArrayRef<int64_t> tiles = {},
                                                    const std::string &model = "nvidia") {
  mlir::DialectRegistry registry;
  deltac::registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // The remark a named, dropped tile gets is not this test's business.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) {});
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(spec, &context);
  std::vector<deltac_rt::PrefillVariant> rows;
  if (!module)
    return rows;
  mlir::delta::registerNvidiaPlanTarget();
  mlir::PassManager pm(&context);
  mlir::delta::buildSpecToChunkPipeline(pm);
  mlir::delta::DeltaPlanPrefillOptions options;
  options.valueTiles.assign(tiles.begin(), tiles.end());
  options.targetModel = model;
  pm.addNestedPass<mlir::func::FuncOp>(mlir::delta::createDeltaPlanPrefill(options));
  if (mlir::failed(pm.run(*module)))
    return rows;
  module->walk([&](mlir::func::FuncOp fn) {
    auto variants = fn->getAttrOfType<mlir::ArrayAttr>(mlir::delta::DeltaDialect::kRecurVariantsAttrName);
    if (!variants)
      return;
    auto cp = fn->getAttrOfType<mlir::delta::ContextParallelAttr>(
        mlir::delta::DeltaDialect::kContextParallelAttrName);
    for (auto v : variants.getAsRange<mlir::delta::RecurVariantAttr>()) {
      rows.push_back(variant(K, V, unsigned(V / v.getValueTile()), v.getMinBlocksPerSm()));
      // The library writer puts these on the row of recur_cp's variant.
      if (cp) {
        rows.back().segmentMinTokens = cp.getMinTokens();
        rows.back().segmentEighthsPerSM = cp.getEighthsPerSm();
      }
      // ... and these on the row of the shared recur's variant.
      if (auto shared = fn->getAttrOfType<mlir::delta::SharedOverlapAttr>(
              mlir::delta::DeltaDialect::kSharedOverlapAttrName)) {
        rows.back().sharedMinTokens = shared.getMinTokens();
        rows.back().sharedMaxTokens = shared.getMaxTokens();
        rows.back().sharedQuartersPerSM = shared.getQuartersPerSm();
      }
    }
  });
  return rows;
}
} // namespace

// The plan takes its costs from the target model it is given, not from
// code of its own: a model with other tiles and thresholds gives another
// table (passes/PlanTarget.h).
TEST(PrefillPlan, TargetModelDecides) {
  struct TwoTiles : mlir::delta::PlanTarget {
    llvm::SmallVector<int64_t> valueTiles(const mlir::delta::PlanQuery &) const override {
      return {16, 32};
    }
    int64_t launchQuartersPerSm(const mlir::delta::PlanQuery &, int64_t) const override {
      return 3;
    }
    int64_t overlapQuartersPerSm(const mlir::delta::PlanQuery &, int64_t) const override {
      return 0;
    }
    int64_t segmentMinTokens(const mlir::delta::PlanQuery &) const override { return 2048; }
    int64_t segmentEighthsPerSm(const mlir::delta::PlanQuery &) const override { return 3; }
    SharedOverlapBounds sharedOverlap(const mlir::delta::PlanQuery &) const override {
      return {100, 200, 1};
    }
  };
  mlir::delta::registerPlanTarget("unit-test-two-tiles", std::make_unique<TwoTiles>());
  const char *spec = "delta.spec @s rule = gated dims = [128x128] io = bf16 state = f32 "
                     "layout = kv gate = log beta = given chunk = 64 entries = [prefill]";
  std::vector<deltac_rt::PrefillVariant> table =
      plannedTable(spec, 128, 128, {}, "unit-test-two-tiles");
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].valueTiles, 4u); // tile 32, widest first
  EXPECT_EQ(table[0].minBlocksPerSM, 3);
  EXPECT_EQ(table[1].valueTiles, 8u); // tile 16, the fallback
  EXPECT_EQ(table[1].minBlocksPerSM, 0);
  // ... and its context parallelism's thresholds.
  EXPECT_EQ(table[0].segmentMinTokens, 2048);
  EXPECT_EQ(table[0].segmentEighthsPerSM, 3);
  EXPECT_EQ(table[0].sharedMinTokens, 100);
  EXPECT_EQ(table[0].sharedMaxTokens, 200);
  EXPECT_EQ(table[0].sharedQuartersPerSM, 1);
  // The NVIDIA model's table differs (tile 64 first, a quarter block;
  // segments from 8192 tokens where recur's grid is an eighth of the SMs).
  std::vector<deltac_rt::PrefillVariant> nvidia = plannedTable(spec, 128, 128);
  ASSERT_FALSE(nvidia.empty());
  EXPECT_EQ(nvidia[0].valueTiles, 2u);
  EXPECT_EQ(nvidia[0].minBlocksPerSM, 1);
  EXPECT_EQ(nvidia[0].segmentMinTokens, 8192);
  EXPECT_EQ(nvidia[0].segmentEighthsPerSM, 1);
  EXPECT_EQ(nvidia[0].sharedMinTokens, 1024);
  EXPECT_EQ(nvidia[0].sharedMaxTokens, 16384);
  EXPECT_EQ(nvidia[0].sharedQuartersPerSM, 2);
  // An unknown model fails the pass: no table.
  EXPECT_TRUE(plannedTable(spec, 128, 128, {}, "no-such-model").empty());
}

TEST(PrefillDispatch, EveryPlannedVariantIsLaunchedSomewhere) {
  // A variant the host never launches would be compiled and shipped for
  // nothing (tile 32 after a scalar gate's tile 64 asks for the same busy
  // * HV): every variant of the plan's table is the one chosen for some
  // busy * HV, on GPUs of 108 (A100), 132 (H100, H200) and 148 (B200) SMs.
  struct Case {
    const char *spec;
    int64_t K, V;
    std::vector<int64_t> tiles;
    size_t expected;
  };
  const Case cases[] = {
      {"delta.spec @s rule = gated dims = [128x128] io = bf16 state = f32 layout = kv "
       "gate = log beta = given chunk = 64 entries = [prefill]",
       128, 128, {}, 2},
      {"delta.spec @s rule = gated dims = [128x128] io = bf16 state = f32 layout = kv "
       "gate = log beta = given chunk = 64 entries = [prefill]",
       128, 128, {64, 32, 16}, 2},
      {"delta.spec @s rule = delta dims = [64x64] io = f16 state = f32 layout = kv "
       "gate = none beta = sigmoid l2norm chunk = 64 entries = [prefill]",
       64, 64, {}, 2},
      {"delta.spec @s rule = kda dims = [128x128] io = bf16 state = f32 layout = kv "
       "gate = channel_log beta = given chunk = 64 entries = [prefill]",
       128, 128, {}, 3},
      {"delta.spec @s rule = gated dims = [256x256] io = bf16 state = f32 layout = kv "
       "gate = log beta = given chunk = 32 entries = [prefill]",
       256, 256, {}, 2},
  };
  for (const Case &c : cases) {
    std::vector<deltac_rt::PrefillVariant> table = plannedTable(c.spec, c.K, c.V, c.tiles);
    EXPECT_EQ(table.size(), c.expected) << c.spec;
    for (int sms : {108, 132, 148}) {
      std::vector<bool> launched(table.size(), false);
      for (int64_t heads = 1; heads <= 4 * sms; ++heads)
        launched[deltac_rt::choosePrefillVariant(table.data(), int(table.size()), c.K, c.V, 1,
                                                 heads, sms) -
                 table.data()] = true;
      for (size_t i = 0; i < table.size(); ++i)
        EXPECT_TRUE(launched[i]) << c.spec << ": variant " << i << " (V tile "
                                 << c.V / table[i].valueTiles << ") never launched on " << sms
                                 << " SMs";
    }
  }
}

TEST(PrefillDispatch, RawQKWhereRecurFillsAWave) {
  // sm_90a's transposed recur reading raw q and k (qk_raw): where its grid
  // N * HV * valueTiles fills the SMs once; forced (DELTAC_PREFILL_QK_RAW=1)
  // wherever the code has it, -1 never; never without chunks' raw form.
  deltac_rt::Kernel *chunksRaw = reinterpret_cast<deltac_rt::Kernel *>(&chunksRaw);
  deltac_rt::PrefillVariant tile64 = variant(128, 128, 2, 1);
  tile64.chunksRaw = chunksRaw;
  const int sms = 132; // H200
  EXPECT_TRUE(deltac_rt::useRawQK(tile64, 8 * 32 * 2, sms, 0));   // varlen 8 x HV32
  EXPECT_TRUE(deltac_rt::useRawQK(tile64, 132, sms, 0));
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 131, sms, 0));
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 1 * 32 * 2, sms, 0));  // T = 4K, HV32
  EXPECT_TRUE(deltac_rt::useRawQK(tile64, 64, sms, 1));
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 512, sms, -1));
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 512, 0, 0)); // SM count not known
  tile64.chunksRaw = nullptr; // a library without the raw form
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 512, sms, 0));
  EXPECT_FALSE(deltac_rt::useRawQK(tile64, 512, sms, 1));
}

TEST(PrefillDispatch, OverlapWhereRecurTakesAQuarterOfTheSMs) {
  // delta-plan-prefill's GDN table with sm_90a's overlapped launch on the
  // tile-64 variant (overlap_blocks_per_sm = 1, in quarters): chunks' queue
  // form and recur side by side where recur's N * HV * 2 blocks fit a
  // quarter of the SMs; forced (DELTAC_PREFILL_OVERLAP=1) wherever the
  // code has it, -1 never.
  deltac_rt::Kernel *queue = reinterpret_cast<deltac_rt::Kernel *>(&queue);
  deltac_rt::PrefillVariant table[] = {variant(128, 128, 2, 1), variant(128, 128, 8, 0)};
  table[0].overlapBlocksPerSM = 1;
  table[0].queue = queue;
  const int sms = 132; // H200
  auto overlaps = [&](int64_t N, int64_t HV, int forced = 0) {
    return deltac_rt::chooseOverlapVariant(table, 2, 128, 128, N, HV, sms, forced) != nullptr;
  };
  EXPECT_TRUE(overlaps(1, 16));   // T = 32K, 128K (H = 16): 32 blocks <= 33
  EXPECT_FALSE(overlaps(1, 17));  // 34 blocks
  EXPECT_FALSE(overlaps(1, 32));  // T = 4K, HV = 32: 64 blocks
  EXPECT_FALSE(overlaps(8, 32));  // varlen 8 x HV32
  EXPECT_TRUE(overlaps(8, 32, 1));
  EXPECT_FALSE(overlaps(1, 16, -1));
  EXPECT_EQ(deltac_rt::chooseOverlapVariant(table, 2, 128, 128, 1, 16, sms)->valueTiles, 2u);
  // Without the queue kernel (a library without sm_90a) nothing overlaps.
  table[0].queue = nullptr;
  EXPECT_FALSE(overlaps(1, 16));
  EXPECT_FALSE(overlaps(1, 16, 1));
  // The SMs chunks leaves to recur: its grid, at most half of them.
  EXPECT_EQ(deltac_rt::overlapReservedSMs(32, sms), 32);
  EXPECT_EQ(deltac_rt::overlapReservedSMs(512, sms), 66);
  EXPECT_EQ(deltac_rt::overlapReservedSMs(0, sms), 1);
  // The shared launch (DELTAC_PREFILL_OVERLAP_SHARE=1) shares one SM per
  // recur block, up to every SM and the region's counters.
  EXPECT_EQ(deltac_rt::overlapSharedSMs(64, sms), 64); // T = 4K, HV = 32
  EXPECT_EQ(deltac_rt::overlapSharedSMs(512, sms), sms);
  EXPECT_EQ(deltac_rt::overlapSharedSMs(0, sms), 1);
  EXPECT_EQ(deltac_rt::overlapSharedSMs(1000, 400), deltac_rt::kMaxSharedSMs);
  EXPECT_EQ(deltac_rt::kMaxSharedSMs, 254);
}

TEST(PrefillDispatch, SegmentsWhereRecurLeavesMostSMsIdle) {
  // Context parallelism (PrefillVariant::recurCp) on the tile-64 variant,
  // with the NVIDIA plan's #delta.context_parallel (min_tokens = 8192,
  // eighths_per_sm = 1): where busy * HV * 2 value tiles take at most an
  // eighth of the SMs and a busy sequence has 8192 tokens or more, the most
  // segments (a power of two up to 8) whose recur_cp blocks fit one wave
  // and whose transfers fit the workspace's slots.
  deltac_rt::Kernel *kernel = reinterpret_cast<deltac_rt::Kernel *>(&kernel);
  deltac_rt::PrefillVariant v = variant(128, 128, 2, 1);
  v.segmentMinTokens = 8192;
  v.segmentEighthsPerSM = 1;
  const int sms = 132;
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 4, sms, 32768, 0), 0); // no recur_cp
  v.recurCp = v.segmentChain = v.segmentCorrection = kernel;
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 2, sms, 32768, 0), 8);
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 4, sms, 32768, 0), 8);  // 120 blocks
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 8, sms, 32768, 0), 4);  // 112 blocks
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 16, sms, 32768, 0), 0); // recur's 32 blocks: overlapped
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 4, sms, 4096, 0), 0);   // too short
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 4, sms, 131072, 0), 8);
  // Busy sequences as choosePrefillVariant counts them: 4 long ones, or one
  // long among short ones where the host knows the longest.
  EXPECT_EQ(deltac_rt::chooseSegments(v, 4, 2, sms, 4 * 16384, 0), 4); // 112 blocks
  EXPECT_EQ(deltac_rt::chooseSegments(v, 33, 4, sms, 32768 + 32 * 100, 0), 0);
  EXPECT_EQ(deltac_rt::chooseSegments(v, 33, 2, sms, 32768 + 32 * 100, 32768), 2);
  // The plan's thresholds, not constants of the host: a plan of two
  // eighths splits H8 (32 blocks), one of 4096 tokens splits T = 4K, one
  // of 0 eighths never splits by itself.
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 16, sms, 32768, 0), 0);
  v.segmentEighthsPerSM = 2;
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 16, sms, 32768, 0), 2); // 32 + 64 blocks
  v.segmentEighthsPerSM = 1;
  v.segmentMinTokens = 4096;
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 4, sms, 4096, 0), 8);
  v.segmentEighthsPerSM = 0;
  EXPECT_EQ(deltac_rt::chooseSegments(v, 1, 2, sms, 32768, 0), 0);
  v.segmentEighthsPerSM = 1;
  v.segmentMinTokens = 8192;
  EXPECT_EQ(deltac_rt::segmentBlocks(v, 1, 4, 8), 4 * (2 + 7 * 4));
  EXPECT_EQ(deltac_rt::segmentBlocks(v, 1, 4, 1), 8);
  // The workspace: the ordinary call's, then regions 8-10 (transfer slots
  // min(8 N HV, 256), 16 KiB per (chunk, value head) of Q^).
  int64_t T = 32768, N = 1, HV = 4, chunks = (T / 64 + N) * HV;
  int64_t slots = deltac_abi::prefillSegmentSlots(N, HV);
  EXPECT_EQ(slots, 32);
  EXPECT_EQ(deltac_abi::prefillSegmentSlots(40, 32), deltac_abi::kMaxSegmentHeads);
  EXPECT_EQ(deltac_rt::prefillWorkspaceBytes(v, T, N, HV) -
                deltac_rt::prefillMinimumWorkspaceBytes(v, T, N, HV),
            slots * 128 * 256 * 4 + slots * 128 * 128 * 2 + chunks * 64 * 128 * 2);
  EXPECT_EQ(deltac_rt::prefillMinimumWorkspaceBytes(v, T, N, HV),
            deltac_abi::prefillWorkspaceBytes(64, 128, 128, false, T / 64 + N, HV, N));
  EXPECT_EQ(deltac_rt::prefillWorkspaceBytes(v, T, N, HV),
            deltac_abi::prefillSegmentWorkspaceBytes(64, 128, 128, false, T / 64 + N, HV, N));
}

TEST(PrefillDispatch, SharedOverlapWhereRecurTakesAtMostHalfTheSMs) {
  // The table above, with the queue and the shared recur on the tile-64
  // variant, and the NVIDIA plan's #delta.shared_overlap (1024 to 16384
  // tokens, 2 quarters). Taken where the reserved launch is not
  // (chooseOverlapVariant comes first in runPrefill), recur's grid takes at
  // most half the SMs and the sequences average 1K to 16K tokens (H100
  // timings in NvidiaTarget.cpp).
  deltac_rt::Kernel *kernel = reinterpret_cast<deltac_rt::Kernel *>(&kernel);
  deltac_rt::PrefillVariant table[] = {variant(128, 128, 2, 1), variant(128, 128, 8, 0)};
  table[0].overlapBlocksPerSM = 1;
  table[0].queue = kernel;
  table[0].recurShared = kernel;
  table[0].sharedMinTokens = 1024;
  table[0].sharedMaxTokens = 16384;
  table[0].sharedQuartersPerSM = 2;
  const int sms = 132;
  auto shared = [&](int64_t N, int64_t HV, int64_t T, int forced = 0) {
    return deltac_rt::chooseSharedOverlapVariant(table, 2, 128, 128, N, HV, T, sms, forced) !=
           nullptr;
  };
  EXPECT_TRUE(shared(1, 32, 4096));      // T = 4K, HV = 32: 64 blocks
  EXPECT_TRUE(shared(1, 32, 1024));
  EXPECT_TRUE(shared(1, 32, 16384));
  EXPECT_FALSE(shared(1, 32, 512));      // T = 512: too short
  EXPECT_FALSE(shared(1, 32, 1023));
  EXPECT_FALSE(shared(1, 32, 16385));    // not measured to pay
  EXPECT_TRUE(shared(1, 33, 4096));      // 66 blocks: half the SMs
  EXPECT_FALSE(shared(1, 34, 4096));     // 68
  EXPECT_FALSE(shared(2, 32, 8192));     // 128 blocks: a wave
  EXPECT_TRUE(shared(2, 16, 8192));      // 4K tokens a sequence
  EXPECT_FALSE(shared(2, 16, 1536));     // 768
  EXPECT_FALSE(shared(8, 32, 16384));    // varlen 8 x HV32
  EXPECT_TRUE(shared(8, 32, 16384, 1));  // forced
  EXPECT_FALSE(shared(1, 32, 4096, -1));
  EXPECT_EQ(deltac_rt::chooseSharedOverlapVariant(table, 2, 128, 128, 1, 32, 4096, sms)
                ->valueTiles,
            2u);
  // The plan's bounds, not constants of the host: 4 quarters (a wave) take
  // 2 x 8K (128 blocks), a range from 512 takes T = 512, 0 quarters only
  // forced.
  table[0].sharedQuartersPerSM = 4;
  EXPECT_TRUE(shared(2, 32, 8192));
  table[0].sharedQuartersPerSM = 2;
  table[0].sharedMinTokens = 512;
  EXPECT_TRUE(shared(1, 32, 512));
  table[0].sharedMinTokens = 1024;
  table[0].sharedQuartersPerSM = 0;
  EXPECT_FALSE(shared(1, 32, 4096));
  EXPECT_TRUE(shared(1, 32, 4096, 1));
  table[0].sharedQuartersPerSM = 2;
  // Without the shared recur (a library without sm_90a), or the queue,
  // nothing is shared, even forced.
  table[0].recurShared = nullptr;
  EXPECT_FALSE(shared(1, 32, 4096));
  EXPECT_FALSE(shared(1, 32, 4096, 1));
  table[0].recurShared = kernel;
  table[0].queue = nullptr;
  EXPECT_FALSE(shared(1, 32, 4096, 1));
  // The shared recur in the ordinary launch: under a wave of recur blocks
  // (where the raw form is not taken, useRawQK), and only with the SM count.
  EXPECT_TRUE(deltac_rt::useSharedRecur(64, sms));   // T = 512, HV = 32
  EXPECT_TRUE(deltac_rt::useSharedRecur(128, sms));  // 2 x 4K
  EXPECT_FALSE(deltac_rt::useSharedRecur(132, sms));
  EXPECT_FALSE(deltac_rt::useSharedRecur(512, sms)); // varlen 8 x HV32
  EXPECT_FALSE(deltac_rt::useSharedRecur(64, 0));
  // DELTAC_PREFILL_RECUR_SHARED: 0 (-1 here) turns it off, 1 is the default.
  EXPECT_FALSE(deltac_rt::useSharedRecur(64, sms, -1));
  EXPECT_TRUE(deltac_rt::useSharedRecur(64, sms, 1));
  EXPECT_FALSE(deltac_rt::useSharedRecur(512, sms, 1));
  // =2 (run.sh's forced runs) whatever the grid.
  EXPECT_TRUE(deltac_rt::useSharedRecur(512, sms, 2));
  table[0].chunksRaw = kernel;
  EXPECT_EQ(deltac_rt::useRawQK(table[0], 131, sms, 0), deltac_rt::useSharedRecur(131, sms) == false);
  EXPECT_EQ(deltac_rt::useRawQK(table[0], 132, sms, 0), deltac_rt::useSharedRecur(132, sms) == false);
}

TEST(PrefillDispatch, LongestSequenceWhereTheHostKnowsIt) {
  // The table of the test above. With max_seqlen the busy sequences are
  // T / max_seqlen (at most N): one long sequence among short ones runs
  // like one sequence.
  const deltac_rt::PrefillVariant table[] = {
      variant(64, 64, 2, 2), variant(128, 128, 4, 2), variant(128, 128, 8, 0)};
  const int sms = 132;
  auto tiles = [&](int64_t N, int64_t HV, int64_t T, int64_t maxSeqlen) {
    return int(deltac_rt::choosePrefillVariant(table, 3, 128, 128, N, HV, sms, T,
                                               maxSeqlen)->valueTiles);
  };
  int64_t mixed = 32768 + 63 * 100; // one 32K sequence and 63 of 100 tokens
  EXPECT_EQ(tiles(64, 16, mixed, 0), 4);      // unknown: 64 sequences
  EXPECT_EQ(tiles(64, 16, mixed, 32768), 8);  // 1 busy: 16 * 8 blocks
  EXPECT_EQ(tiles(8, 32, 16384, 2048), 4);    // equal lengths: N as before
  EXPECT_EQ(tiles(1, 16, 32768, 32768), 8);   // T = 32K
  EXPECT_EQ(tiles(4, 8, 16384, 4096), 4);     // 4 * 4 * 8 * 4 = 512 >= 2 * 132
  EXPECT_EQ(tiles(4, 8, 16384, 13000), 8);    // 1 busy: 4 * 8 * 4 = 128 < 264
}

TEST(PrefillHost, MaxSeqlenMustBeALongestLength) {
  const deltac_rt::PrefillVariant table[] = {variant(128, 128, 4, 2),
                                             variant(128, 128, 8, 0)};
  deltac_prefill_args a = args(4, 1000, 16);
  // Below the mean (250), above T, negative: rejected, naming the field.
  for (int64_t bad : {int64_t(249), int64_t(1001), int64_t(-1)}) {
    a.max_seqlen = bad;
    deltac::Status s = deltac_rt::runPrefill(table, 2, a, nullptr);
    EXPECT_EQ(s.code, DELTAC_INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.message.find("max_seqlen = " + std::to_string(bad)), std::string::npos)
        << s.message;
  }
  // A possible value passes this check (the call then fails later, on the
  // null pointers, not on max_seqlen).
  for (int64_t good : {int64_t(0), int64_t(250), int64_t(1000)}) {
    a.max_seqlen = good;
    deltac::Status s = deltac_rt::runPrefill(table, 2, a, nullptr);
    EXPECT_EQ(s.message.find("max_seqlen"), std::string::npos) << s.message;
  }
}

TEST(PrefillDispatch, RecurRingDepthFromSharedMemory) {
  deltac_rt::PrefillVariant v = variant(128, 128, 8, 0);
  v.smemRecur = 143104; // 2 stages, V tile 16 (the lowering's numbers)
  v.smemRecurStage = 64768;
  // Per block: H100/H200 232448, A100 166912.
  auto stages = [&](int64_t perBlock, int forced = 0) {
    return deltac_rt::recurStages(v, perBlock, forced);
  };
  EXPECT_EQ(stages(232448), 3); // the deepest ring that fits
  EXPECT_EQ(stages(166912), 2); // A100: no room for 3
  EXPECT_EQ(stages(232448, 3), 3); // forced
  EXPECT_EQ(stages(166912, 3), 2);  // forced, but no room
  EXPECT_EQ(stages(232448, 1), 1);
  EXPECT_EQ(deltac_rt::recurSharedBytes(v, 3), 207872u);
  EXPECT_EQ(deltac_rt::recurSharedBytes(v, 2), 143104u);
  EXPECT_EQ(deltac_rt::recurSharedBytes(v, 1), 78336u);
  v.smemRecur = 160512; // V tile 32: 3 stages fit Hopper, not an A100
  v.smemRecurStage = 66816;
  EXPECT_EQ(stages(166912), 2);
  EXPECT_EQ(stages(232448), 3);
  v.smemRecur = 195328; // V tile 64: 2 stages fit Hopper, 1 an A100
  v.smemRecurStage = 70912;
  EXPECT_EQ(stages(232448), 2);
  EXPECT_EQ(stages(166912), 1);
  EXPECT_EQ(stages(166912, 2), 1); // forced, but no room
  v.smemRecurStage = 0;
  EXPECT_EQ(stages(232448), 2);
}

TEST(PrefillHost, GridBeyond2To31BlocksRejected) {
  const deltac_rt::PrefillVariant table[] = {variant(128, 128, 4, 2),
                                             variant(128, 128, 8, 0)};
  // One token each: 2^28 * 16 heads * 8 V tiles.
  deltac_prefill_args a = args(int64_t(1) << 28, int64_t(1) << 28, 16);
  deltac::Status s = deltac_rt::runPrefill(table, 2, a, nullptr);
  EXPECT_EQ(s.code, DELTAC_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("too large"), std::string::npos) << s.message;
}

// A log gate's prefill refuses A_log and dt_bias by name (read only with a
// raw gate), never ignores them; without them the same call passes the gate
// checks. Nothing is dereferenced before the refusal.
TEST(PrefillHost, LogGateRefusesRawParams) {
  const deltac_rt::PrefillVariant table[] = {variant(128, 128, 4, 2),
                                             variant(128, 128, 8, 0)};
  alignas(16) static unsigned char dummy[64];
  deltac_prefill_args a = args(1, 64, 2);
  a.q = a.k = a.v = a.g = a.beta = dummy;
  a.o = a.workspace = dummy;
  a.error_flag = reinterpret_cast<int32_t *>(dummy);
  a.A_log = reinterpret_cast<const float *>(dummy);
  deltac::Status s = deltac_rt::runPrefill(table, 2, a, nullptr);
  EXPECT_EQ(s.code, DELTAC_INVALID_ARGUMENT);
  EXPECT_EQ(s.message.rfind("A_log must be null: the gate that runs is not raw", 0), 0u)
      << s.message;
  a.A_log = nullptr;
  a.dt_bias = reinterpret_cast<const float *>(dummy);
  s = deltac_rt::runPrefill(table, 2, a, nullptr);
  EXPECT_EQ(s.message.rfind("dt_bias must be null: the gate that runs is not raw", 0), 0u)
      << s.message;
  a.dt_bias = nullptr;
  s = deltac_rt::runPrefill(table, 2, a, nullptr);
  EXPECT_EQ(s.message.find("must be null"), std::string::npos) << s.message;
}

// Per rule: kda keeps G_last per channel (K floats per chunk and head).
class PrefillWorkspace : public ::testing::TestWithParam<bool> {};

TEST_P(PrefillWorkspace, RuntimeMatchesCompiler) {
  bool kda = GetParam();
  mlir::MLIRContext ctx;
  mlir::Type bf16 = mlir::BFloat16Type::get(&ctx),
             f32 = mlir::Float32Type::get(&ctx);
  mlir::delta::PrefillSpec spec{kda ? mlir::delta::Rule::kda : mlir::delta::Rule::gated,
                                kda ? mlir::delta::GateForm::channel_log
                                    : mlir::delta::GateForm::log,
                                mlir::delta::BetaForm::given,
                                true,
                                mlir::delta::StateLayout::kv,
                                bf16,
                                f32,
                                f32,
                                bf16,
                                128,
                                128,
                                64};
  deltac_rt::PrefillVariant v =
      variant(128, 128, 4, 1, kda ? deltac_rt::GateKind::ChannelLog : deltac_rt::GateKind::Log);
  for (auto [T, N, HV] : {std::tuple<int64_t, int64_t, int64_t>{512, 1, 32},
                          {16000, 8, 32},
                          {131072, 1, 16},
                          {0, 3, 2},
                          {1, 1, 1}}) {
    int64_t maxChunks = (T + 63) / 64 + N;
    EXPECT_EQ(deltac_rt::prefillWorkspaceBytes(v, T, N, HV),
              mlir::delta::prefillWorkspaceBytes(spec, maxChunks, HV, N))
        << "T=" << T << " N=" << N << " HV=" << HV;
    // Region 7 (the overlapped launch's counters, two and one per shared
    // SM, and a flag per item) is last: the host zeroes exactly it.
    int64_t regionBytes = 0;
    int64_t at = deltac_rt::prefillOverlapRegion(v, T, N, HV, &regionBytes);
    EXPECT_EQ(regionBytes, 4 * (2 + deltac_rt::kMaxSharedSMs) + (maxChunks * HV * 4 + 255) / 256 * 256);
    EXPECT_EQ(at + regionBytes, mlir::delta::prefillWorkspaceBytes(spec, maxChunks, HV, N));
  }
  // The per-channel G_last really is larger (one float per channel).
  mlir::delta::PrefillSpec other = spec;
  other.rule = kda ? mlir::delta::Rule::gated : mlir::delta::Rule::kda;
  EXPECT_NE(mlir::delta::prefillWorkspaceBytes(spec, 1000, 32, 1),
            mlir::delta::prefillWorkspaceBytes(other, 1000, 32, 1));
}
INSTANTIATE_TEST_SUITE_P(Rules, PrefillWorkspace, ::testing::Values(false, true),
                         [](const auto &info) { return info.param ? "Kda" : "Gated"; });

// The per-block shared-memory limits the lowering checks kernels against
// (CUDA programming guide, compute capabilities table).
TEST(PrefillPlan, TargetSharedMemoryLimits) {
  EXPECT_EQ(mlir::delta::targetSharedLimit("sm_80"), 163 * 1024);
  EXPECT_EQ(mlir::delta::targetSharedLimit("sm_86"), 99 * 1024);
  EXPECT_EQ(mlir::delta::targetSharedLimit("sm_90a"), 227 * 1024);
  EXPECT_EQ(mlir::delta::targetSharedLimit("sm_100a"), 227 * 1024);
  EXPECT_EQ(mlir::delta::targetSharedLimit("sm_120"), 99 * 1024);
  // Unknown chips get the portable 48 KiB.
  EXPECT_EQ(mlir::delta::targetSharedLimit("gfx90a"), 48 * 1024);
}

TEST(PrefillHost, PerChannelGatesMustBe16ByteAligned) {
  // kda's chunks kernel copies each token's K decays 16 bytes at a time.
  const deltac_rt::PrefillVariant table[] = {
      variant(128, 128, 8, 0, deltac_rt::GateKind::ChannelLog)};
  deltac_prefill_args a = args(1, 64, 2);
  // Never dereferenced: the call is rejected (or fails) before any launch.
  auto at = [](uintptr_t x) { return reinterpret_cast<void *>(x); };
  a.q = a.k = a.v = a.beta = at(0x10000);
  a.o = a.workspace = at(0x10000);
  a.error_flag = static_cast<int32_t *>(at(0x20000));
  a.g = at(0x30004);
  deltac::Status s = deltac_rt::runPrefill(table, 1, a, nullptr);
  EXPECT_EQ(s.code, DELTAC_INVALID_ARGUMENT);
  EXPECT_EQ(s.message, "g must be 16-byte aligned (per-channel gates)");
  a.g = at(0x30010);
  s = deltac_rt::runPrefill(table, 1, a, nullptr);
  EXPECT_EQ(s.message.find("g must"), std::string::npos) << s.message;
}

// sm_90a's warpgroup recur (RecurForm::Warpgroup and the transposed forms): which specs take
// it, its launch shape, and the host picking its launch values where the
// device runs the sm_90a image.
TEST(PrefillPlan, WarpgroupRecurOnSm90aOnly) {
  EXPECT_TRUE(mlir::delta::targetHasWarpgroupMma("sm_90a"));
  for (const char *chip : {"sm_80", "sm_90", "sm_100a"})
    EXPECT_FALSE(mlir::delta::targetHasWarpgroupMma(chip)) << chip;

  mlir::MLIRContext ctx;
  mlir::Type bf16 = mlir::BFloat16Type::get(&ctx), f32 = mlir::Float32Type::get(&ctx);
  mlir::delta::PrefillSpec spec{mlir::delta::Rule::gated, mlir::delta::GateForm::log,
                                mlir::delta::BetaForm::given, true, mlir::delta::StateLayout::kv,
                                bf16, f32, f32, bf16, 128, 128, 64};
  EXPECT_TRUE(mlir::delta::prefillWarpgroupFits(spec, {64, 32, 16}));
  EXPECT_FALSE(mlir::delta::prefillWarpgroupFits(spec, {8})); // under wgmma's N of 16s
  mlir::delta::PrefillSpec other = spec;
  other.chunk = 32; // wgmma's M is 64 chunk rows
  EXPECT_FALSE(mlir::delta::prefillWarpgroupFits(other, {32}));
  other = spec;
  other.k = 256; // the state would take the registers
  EXPECT_FALSE(mlir::delta::prefillWarpgroupFits(other, {32}));

  // Two warpgroups; three ring stages fit Hopper's 227 KiB (at V tile 64
  // because the transposed form keeps S^T and V'^T in registers); the
  // one-stage kernel fits every target.
  for (auto [tile, stages] : {std::pair<int64_t, int>{16, 3}, {32, 3}, {64, 3}}) {
    mlir::delta::PrefillPlan plan = mlir::delta::planPrefill(spec, tile);
    mlir::delta::useWarpgroupRecur(plan, spec);
    EXPECT_EQ(plan.code, mlir::delta::KernelCode::wgmma);
    EXPECT_TRUE(plan.warpgroupRecur());
    // The transposed recur (S^T as wgmma's register operand) at V tile 64,
    // in its raw q/k form beside the warpgroup chunks.
    EXPECT_EQ(plan.transposedRecur(), tile == 64) << "V tile " << tile;
    EXPECT_EQ(plan.recur, tile == 64 ? mlir::delta::RecurForm::TransposedRawQK
                                     : mlir::delta::RecurForm::Warpgroup)
        << "V tile " << tile;
    EXPECT_TRUE(plan.swizzledWorkspace());
    EXPECT_EQ(plan.recurThreads, 256);
    deltac_rt::PrefillVariant v = variant(128, 128, unsigned(128 / tile), 0);
    v.smemRecur = unsigned(plan.recurSmem);
    v.smemRecurStage = unsigned(plan.recurSmemStage);
    EXPECT_EQ(deltac_rt::recurStages(v, 227 * 1024, 0), stages) << "V tile " << tile;
    EXPECT_LE(plan.recurSmem - plan.recurSmemStage, 163 * 1024) << "V tile " << tile;
    // chunks too, for scalar gates: two warpgroups, four blocks per SM (v
    // copied late), the overlapped launch's queue three.
    EXPECT_TRUE(plan.warpgroupChunks());
    EXPECT_EQ(plan.chunks, mlir::delta::ChunksForm::Warpgroup);
    EXPECT_EQ(plan.chunksThreads, 256);
    EXPECT_LE(4 * (plan.chunksSmem + 1024), 228 * 1024);
    EXPECT_GT(5 * (plan.chunksSmem + 1024), 228 * 1024);
    EXPECT_LE(3 * (plan.queueSmem + 1024), 228 * 1024);
    EXPECT_GT(plan.queueSmem, plan.chunksSmem);
  }
  // Per-channel decays keep the mma.sync chunks; so do K or V over 128.
  for (auto [rule, k, v] : {std::tuple{mlir::delta::Rule::kda, 128, 128},
                            std::tuple{mlir::delta::Rule::gated, 128, 256}}) {
    mlir::delta::PrefillSpec s = spec;
    s.rule = rule, s.k = k, s.v = v;
    mlir::delta::PrefillPlan plan = mlir::delta::planPrefill(s, 32);
    mlir::delta::useWarpgroupRecur(plan, s);
    EXPECT_FALSE(plan.warpgroupChunks()) << k << "x" << v;
    // ... writing the warpgroup recur's images.
    EXPECT_EQ(plan.chunks, mlir::delta::ChunksForm::RowsForWarpgroupRecur) << k << "x" << v;
  }
  // The mma.sync recur: the state in the state warps' registers where
  // K <= 128 and the V tile is of 16s, else shared by rows; chunks writes
  // recur's padded rows; no form of sm_90 code.
  {
    mlir::delta::PrefillPlan plan = mlir::delta::planPrefill(spec, 32);
    EXPECT_EQ(plan.recur, mlir::delta::RecurForm::RegisterState);
    EXPECT_EQ(plan.chunks, mlir::delta::ChunksForm::Rows);
    EXPECT_FALSE(plan.swizzledWorkspace());
    EXPECT_FALSE(plan.bulkCopies());
    plan.code = mlir::delta::KernelCode::bulk;
    EXPECT_TRUE(plan.bulkCopies() && plan.gridDependency());
    mlir::delta::PrefillSpec wide = spec;
    wide.k = 256;
    EXPECT_EQ(mlir::delta::planPrefill(wide, 32).recur, mlir::delta::RecurForm::SharedRows);
    EXPECT_EQ(mlir::delta::planPrefill(spec, 8).recur, mlir::delta::RecurForm::SharedRows);
  }
  // Per-channel decays keep the warpgroup recur at V tile 64 too.
  {
    mlir::delta::PrefillSpec s = spec;
    s.rule = mlir::delta::Rule::kda;
    mlir::delta::PrefillPlan plan = mlir::delta::planPrefill(s, 64);
    mlir::delta::useWarpgroupRecur(plan, s);
    EXPECT_TRUE(plan.warpgroupRecur());
    EXPECT_FALSE(plan.transposedRecur());
    EXPECT_EQ(plan.recur, mlir::delta::RecurForm::Warpgroup);
  }
  // The warpgroup chunks' images start on 1024-byte bounds; L, then the
  // two WY factors, fit q's region.
  for (int64_t k : {64, 128})
    for (int64_t vv : {64, 128}) {
      mlir::delta::PrefillSpec s = spec;
      s.k = k, s.v = vv;
      mlir::delta::prefill::ChunksWarpgroupSmem L(s);
      for (int64_t at : {L.qs, L.ks, L.vs, L.ab1, L.ab2})
        EXPECT_EQ(at % 1024, 0) << k << "x" << vv;
      EXPECT_LE(L.lf + 64 * 68 * 4, L.ks);
      EXPECT_LE(L.ab2 + 64 * 64 * 2, L.ks);
      EXPECT_LE(L.af + 64 * 64 * 2 + 16, L.gam); // P and G_last staged in af
      EXPECT_EQ(L.fq, L.rk + 64 * 4); // the rows' scales follow the norms
      EXPECT_EQ(L.fk, L.fq + 64 * 4);
      EXPECT_EQ(L.queue, L.fk + 64 * 4); // the queue kernel's next item
      EXPECT_EQ(L.total, 1024 + L.queue + 16);
    }

  // wgmma's 128-byte swizzle repeats every 1024 bytes: every image (and so
  // every stage) starts on a 1024-byte bound of the aligned base, and the
  // launch's shared memory leaves room to align it.
  for (bool kda : {false, true})
    for (int64_t tile : {16, 32, 64}) {
      mlir::delta::PrefillSpec s = spec;
      s.rule = kda ? mlir::delta::Rule::kda : mlir::delta::Rule::gated;
      mlir::delta::prefill::RecurWarpgroupSmem L(s, tile);
      for (int64_t at : {L.st, L.st + L.sBytes, L.vn, L.vn + L.vBytes, L.wb, L.kd, L.qgb, L.pb,
                         L.ub, L.gl, L.stage})
        EXPECT_EQ(at % 1024, 0) << "V tile " << tile << (kda ? " kda" : "");
      EXPECT_LE(L.pb + 64 * 64 * 2 + 16, L.ub); // G_last's 16 bytes after P
      EXPECT_EQ(L.total, 1024 + L.wb + 2 * L.stage);
    }
  // The transposed form: O^T's two staging buffers (rows 16-byte aligned)
  // before the same stages.
  {
    mlir::delta::prefill::RecurWarpgroupSmem T(spec, 64, /*transposed=*/true),
        W(spec, 64);
    EXPECT_EQ(T.oRow % 16, 0);
    EXPECT_LE(T.st + 2 * T.oBytes, T.wb);
    // Its P region also holds the raw q/k form's row factors and the
    // per-token terms recur builds P from (both forms share one layout).
    namespace pf = mlir::delta::prefill;
    EXPECT_GE(T.ub - T.pb,
              pf::pGLastBytes(64) + pf::rawFactorBytes(64) + pf::rawPInputBytes(64));
    EXPECT_EQ(T.stage - (T.ub - T.pb), W.stage - (W.ub - W.pb));
    EXPECT_EQ(T.wb % 1024, 0);
    EXPECT_LT(T.total, W.total);
  }

  // The variant table's sm_90a values apply to the sm_90a images only,
  // each kernel by the image it loaded.
  deltac_rt::PrefillVariant v = variant(128, 128, 8, 0);
  v.recurThreads = 96;
  v.smemRecur = 143104;
  v.smemRecurStage = 64768;
  v.smemChunks = 74240;
  v.altTarget = "sm_90a";
  v.recurAltThreads = 256;
  v.smemRecurAlt = 135168;
  v.smemRecurAltStage = 60416;
  v.chunksAltThreads = 256;
  v.smemChunksAlt = 73728;
  deltac_rt::PrefillVariant hopper = deltac_rt::forImages(v, "sm_90a", "sm_90a");
  EXPECT_EQ(hopper.recurThreads, 256u);
  EXPECT_EQ(hopper.smemRecur, 135168u);
  EXPECT_EQ(hopper.smemRecurStage, 60416u);
  EXPECT_EQ(hopper.smemChunks, 73728u);
  for (const char *image : {"sm_80", "sm_100a", ""}) {
    deltac_rt::PrefillVariant same = deltac_rt::forImages(v, image, image);
    EXPECT_EQ(same.recurThreads, 96u) << image;
    EXPECT_EQ(same.smemRecur, 143104u) << image;
    EXPECT_EQ(same.smemChunks, 74240u) << image;
  }
  EXPECT_EQ(deltac_rt::forImages(v, "sm_80", "sm_90a").smemChunks, 74240u);
  EXPECT_EQ(deltac_rt::forImages(v, "sm_90a", "sm_80").smemRecur, 143104u);
  v.altTarget = nullptr;
  EXPECT_EQ(deltac_rt::forImages(v, "sm_90a", "sm_90a").recurThreads, 96u);
  EXPECT_EQ(deltac_rt::forImages(v, "sm_90a", "sm_90a").smemChunks, 74240u);
}

// DELTAC_PREFILL_FORCE's grammar: one form, then settings; anything else
// is an error that says what is wrong (the call is then refused).
TEST(PrefillForce, Grammar) {
  deltac_rt::PrefillForce f;
  EXPECT_EQ(deltac_rt::parsePrefillForce(nullptr, &f), "");
  EXPECT_EQ(f.form, deltac_rt::PrefillForm::Dispatch);
  EXPECT_EQ(deltac_rt::parsePrefillForce("", &f), "");
  EXPECT_EQ(f.form, deltac_rt::PrefillForm::Dispatch);
  EXPECT_EQ(deltac_rt::parsePrefillForce("raw_qk_w,tile=64,stages=1,tma=0", &f), "");
  EXPECT_EQ(f.form, deltac_rt::PrefillForm::RawQKW);
  EXPECT_TRUE(f.rawQK());
  EXPECT_EQ(f.valueTile, 64);
  EXPECT_EQ(f.stages, 1);
  EXPECT_EQ(f.tma, 0);
  EXPECT_EQ(f.text, "raw_qk_w,tile=64,stages=1,tma=0");
  EXPECT_EQ(deltac_rt::parsePrefillForce("overlap_shared,sms=40,stages=2", &f), "");
  EXPECT_TRUE(f.overlapped());
  EXPECT_EQ(f.overlapSMs, 40);
  EXPECT_EQ(deltac_rt::parsePrefillForce("dispatch,tile=16", &f), "");
  EXPECT_EQ(f.form, deltac_rt::PrefillForm::Dispatch);
  EXPECT_EQ(f.valueTile, 16);
  for (const char *form : {"ordinary", "shared_recur", "raw_qk", "overlap"})
    EXPECT_EQ(deltac_rt::parsePrefillForce(form, &f), "") << form;

  auto error = [&](const char *text) { return deltac_rt::parsePrefillForce(text, &f); };
  EXPECT_NE(error("fast").find("unknown form 'fast'"), std::string::npos);
  EXPECT_NE(error("1").find("unknown form '1'"), std::string::npos);
  EXPECT_NE(error("ordinary,width=2").find("unknown setting 'width'"), std::string::npos);
  EXPECT_NE(error("ordinary,tile=12").find("tile=12"), std::string::npos);
  EXPECT_NE(error("ordinary,tile=").find("tile="), std::string::npos);
  EXPECT_NE(error("ordinary,tile=64x").find("tile=64x"), std::string::npos);
  EXPECT_NE(error("ordinary,stages=4").find("1, 2 or 3 stages"), std::string::npos);
  EXPECT_NE(error("ordinary,tma=2").find("tma=2"), std::string::npos);
  EXPECT_NE(error("overlap,tma=1").find("cp.async"), std::string::npos);
  EXPECT_NE(error("ordinary,sms=8").find("only the overlap forms"), std::string::npos);
  EXPECT_NE(error("overlap,sms=0").find("positive"), std::string::npos);
  EXPECT_NE(error("ordinary,stages=1,stages=2").find("given twice"), std::string::npos);
  // cp: context parallelism, with its own settings.
  EXPECT_EQ(deltac_rt::parsePrefillForce("cp,segments=4,stages=2", &f), "");
  EXPECT_EQ(f.form, deltac_rt::PrefillForm::Segments);
  EXPECT_EQ(f.segments, 4);
  EXPECT_EQ(deltac_rt::parsePrefillForce("cp", &f), "");
  EXPECT_EQ(f.segments, 0);
  EXPECT_NE(error("cp,segments=1").find("from 2 to 8"), std::string::npos);
  EXPECT_NE(error("cp,segments=9").find("from 2 to 8"), std::string::npos);
  EXPECT_NE(error("overlap,segments=2").find("only the cp form"), std::string::npos);
  EXPECT_NE(error("cp,tile=64").find("V tile its kernels"), std::string::npos);
}
