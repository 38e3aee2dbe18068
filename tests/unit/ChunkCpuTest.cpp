//===- ChunkCpuTest.cpp - the chunk-level IR run on the CPU ------*- C++ -*-===//
//
// Generates a prefill function from a spec with the same passes the tools
// run (delta-spec-to-chunk, then delta-cpu-pipeline), JIT-compiles it with
// the MLIR ExecutionEngine and compares its outputs with the fp64
// token-by-token reference on fresh random inputs. This is how CI checks the
// chunking math (cumsum, K K^T, the triangular solve, WY, the state step and
// the chunk output, with padding of partial chunks) without a GPU.
//
// The function allocates its results; the test gives the JIT a `malloc`
// that fills every allocation with NaN bytes, so an element the IR does not
// write fails the error bound. Tolerances: f32 io 2e-4 relative (chunked
// and token-by-token f32 differ by rounding only); bf16 io 1e-2 on o (bf16
// output rounding is ~2e-3) with inputs rounded to bf16 for both sides.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines.h"
#include "templates/runtime/deltac_abi.h"
#include "tests/reference/DeltaReference.h"
#include "tools/DeltacRegistration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

using namespace deltac::ref;

namespace {

/// A ranked memref descriptor as the MLIR C interface passes it.
template <typename T, int N> struct Desc {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[N];
  int64_t strides[N];
};

template <typename T, int N>
Desc<T, N> describe(std::vector<T> &data, std::array<int64_t, N> shape) {
  Desc<T, N> d{data.data(), data.data(), 0, {}, {}};
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    d.sizes[i] = shape[i];
    d.strides[i] = stride;
    stride *= shape[i];
  }
  return d;
}

enum class Io { F32, BF16 };

struct Case {
  std::string name;
  Rule rule;
  Layout layout;
  GateForm gate;
  BetaForm beta;
  bool l2norm;
  int64_t chunk, K, V, H, HV;
  std::vector<int64_t> lengths;
  bool initialState;
  double gMin, gMax;
  Io io = Io::F32;
  /// delta-chunk's segments: > 1 runs context parallelism's schedule
  /// (segments without their entering state, chained and corrected).
  int64_t segments = 1;
  /// The spec leaves gate, beta and l2norm to the call (`gate = call` or
  /// `channel_call`, `beta = call`, `l2norm = call`): the function takes
  /// an `options` argument, and gate, beta and l2norm above are the call's
  /// choice, passed as deltac_abi's CallOptions bits.
  bool byCall = false;
};

std::ostream &operator<<(std::ostream &os, const Case &c) { return os << c.name; }

std::string specGate(const Case &c) {
  bool kda = c.rule == Rule::Kda;
  switch (c.gate) {
  case GateForm::None: return "none";
  case GateForm::Log: return kda ? "channel_log" : "log";
  case GateForm::Linear: return "linear";
  case GateForm::Raw: return kda ? "channel_raw" : "raw";
  }
  return "?";
}

std::string specText(const Case &c) {
  std::ostringstream s;
  s << "delta.spec @t rule = " << toString(c.rule) << " dims = [" << c.K
    << "x" << c.V << "] io = " << (c.io == Io::F32 ? "f32" : "bf16")
    << " state = f32 layout = " << toString(c.layout);
  if (c.byCall) {
    s << " gate = " << (c.rule == Rule::Kda ? "channel_call" : "call")
      << " beta = call l2norm = call";
  } else {
    s << " gate = " << specGate(c) << " beta = "
      << (c.beta == BetaForm::Given     ? "given"
          : c.beta == BetaForm::Sigmoid ? "sigmoid"
                                        : "sigmoid2")
      << (c.l2norm ? " l2norm" : "");
  }
  s << " chunk = " << c.chunk << " entries = [prefill]\n";
  return s.str();
}

/// The `options` of a by-call case: its gate, beta and l2norm as bits.
int32_t callOptions(const Case &c) {
  int32_t bits = 0;
  if (c.l2norm)
    bits |= deltac_abi::kCallL2Norm;
  if (c.beta != BetaForm::Given)
    bits |= deltac_abi::kCallBetaSigmoid;
  if (c.beta == BetaForm::Sigmoid2)
    bits |= deltac_abi::kCallBetaTwice;
  if (c.gate == GateForm::Raw)
    bits |= deltac_abi::kCallGateRaw;
  return bits;
}

uint16_t toBf16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
float fromBf16Bits(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// malloc with every byte 0xff: NaN as f32 and as bf16.
extern "C" void *poisonMalloc(size_t bytes) {
  void *p = std::malloc(bytes);
  if (p)
    std::memset(p, 0xff, bytes);
  return p;
}

/// One argument of the generated prefill function, as its signature says.
struct Arg {
  std::string name;
  enum Kind { F32, BF16, I64, Scalar, I32Scalar } kind;
  int64_t rank;
};

/// The compiled prefill function of one spec.
struct Compiled {
  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::string function;
  std::vector<Arg> args;
  std::string error;
};

void compile(const std::string &spec, int64_t segments, Compiled &out) {
  mlir::DialectRegistry registry;
  deltac::registerDialects(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  out.context.appendDialectRegistry(registry);
  out.context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(spec, &out.context);
  if (!module) {
    out.error = "spec does not parse";
    return;
  }
  mlir::PassManager toChunks(&out.context);
  mlir::delta::buildSpecToChunkPipeline(toChunks, segments);
  if (mlir::failed(toChunks.run(*module))) {
    out.error = "delta-spec-to-chunk failed";
    return;
  }
  // The C interface takes one pointer per memref; the specs are metadata
  // the CPU code does not need.
  llvm::SmallVector<mlir::Operation *> specs;
  for (mlir::Operation &op : module->getBody()->getOperations()) {
    auto fn = llvm::dyn_cast<mlir::func::FuncOp>(op);
    if (!fn) {
      specs.push_back(&op);
      continue;
    }
    fn->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(&out.context));
    out.function = fn.getName().str();
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, "delta.name");
      mlir::Type type = fn.getArgumentTypes()[i];
      Arg arg{name ? name.str() : "?", type.isInteger(32) ? Arg::I32Scalar : Arg::Scalar, 0};
      if (auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type)) {
        mlir::Type elt = tensor.getElementType();
        arg.kind = elt.isF32()    ? Arg::F32
                   : elt.isBF16() ? Arg::BF16
                                  : Arg::I64;
        arg.rank = tensor.getRank();
      }
      out.args.push_back(arg);
    }
  }
  for (mlir::Operation *op : specs)
    op->erase();
  mlir::PassManager toCpu(&out.context);
  mlir::delta::buildChunkToCpuPipeline(toCpu);
  if (mlir::failed(toCpu.run(*module))) {
    out.error = "delta-cpu-pipeline failed";
    return;
  }
  // Every allocation of the generated code comes back NaN-filled (see
  // poisonMalloc).
  module->walk([&](mlir::LLVM::LLVMFuncOp fn) {
    if (fn.getName() == "malloc")
      (void)mlir::SymbolTable::replaceAllSymbolUses(
          fn, mlir::StringAttr::get(&out.context, "deltac_poison_malloc"),
          *module);
  });
  if (auto fn = module->lookupSymbol<mlir::LLVM::LLVMFuncOp>("malloc"))
    fn.setName("deltac_poison_malloc");
  mlir::ExecutionEngineOptions options;
  auto transformer = mlir::makeOptimizingTransformer(2, 0, nullptr);
  options.transformer = transformer;
  llvm::SmallVector<llvm::StringRef> libs{DELTAC_C_RUNNER_UTILS};
  options.sharedLibPaths = libs;
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    out.error = llvm::toString(engine.takeError());
    return;
  }
  out.engine = std::move(*engine);
  out.engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner("deltac_poison_malloc")] = {
        llvm::orc::ExecutorAddr::fromPtr(&poisonMalloc),
        llvm::JITSymbolFlags::Exported};
    return map;
  });
  out.engine->initialize();
}

/// A dense row-major argument buffer and its memref descriptor.
struct Buffer {
  std::vector<uint8_t> bytes;
  Desc<void, 4> desc{}; // ranks 1-4 share the layout of their prefix
  void *descPtr = nullptr;
};

class ChunkCpu : public ::testing::TestWithParam<Case> {};

TEST_P(ChunkCpu, MatchesTokenByTokenReference) {
  const Case &c = GetParam();
  Problem p;
  p.rule = c.rule;
  p.B = 1;
  p.cuSeqlens = cuSeqlensFromLengths(c.lengths);
  p.T = p.cuSeqlens.back();
  p.H = c.H;
  p.HV = c.HV;
  p.K = c.K;
  p.V = c.V;
  p.layout = c.layout;
  p.gate = c.gate;
  p.beta = c.beta;
  p.qkL2Norm = c.l2norm;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.K));
  RandomOptions opts;
  opts.gMin = c.gMin;
  opts.gMax = c.gMax;
  opts.initialState = c.initialState;
  opts.betaMax = 1.5; // beta in (0, 1.5): exercises beta > 1, never clamped
  Inputs in = randomInputs(p, /*seed=*/0x5eed + c.chunk * 131 + c.K, opts);
  Sizes sz = sizesOf(p);
  if (in.initialState.empty())
    in.initialState.assign(sz.state, 0.0);

  Compiled compiled;
  compile(specText(c), c.segments, compiled);
  ASSERT_TRUE(compiled.engine) << compiled.error;

  int64_t N = numSequences(p), T = p.T, H = p.H, HV = p.HV, K = p.K, V = p.V;
  bool vk = c.layout == Layout::Vk, kda = c.rule == Rule::Kda;
  std::vector<int64_t> stateShape{N, HV, vk ? V : K, vk ? K : V};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> unreadALog(HV, nan), unreadDtBias(kda ? HV * K : HV, nan);
  // What each named argument holds, and its shape.
  auto source = [&](const Arg &a) -> std::pair<std::vector<double> *,
                                               std::vector<int64_t>> {
    if (a.name == "q") return {&in.q, {1, T, H, K}};
    if (a.name == "k") return {&in.k, {1, T, H, K}};
    if (a.name == "v") return {&in.v, {1, T, HV, V}};
    if (a.name == "g" || a.name == "a")
      return {&in.g, a.rank == 4 ? std::vector<int64_t>{1, T, HV, K}
                                 : std::vector<int64_t>{1, T, HV}};
    if (a.name == "beta" || a.name == "b") return {&in.beta, {1, T, HV}};
    // A log gate by call leaves A_log and dt_bias unread: NaN there fails
    // the bound if the function reads them anyway.
    if (a.name == "A_log") return {in.aLog.empty() ? &unreadALog : &in.aLog, {HV}};
    if (a.name == "dt_bias")
      return {in.dtBias.empty() ? &unreadDtBias : &in.dtBias, {kda ? HV * K : HV}};
    if (a.name == "initial_state") return {&in.initialState, stateShape};
    return {nullptr, {}};
  };
  float scale = static_cast<float>(p.scale);
  std::vector<int64_t> cu = p.cuSeqlens;
  std::vector<Buffer> buffers(compiled.args.size());
  for (size_t i = 0; i < compiled.args.size(); ++i) {
    const Arg &a = compiled.args[i];
    Buffer &buf = buffers[i];
    std::vector<int64_t> shape;
    if (a.kind == Arg::Scalar) {
      ASSERT_EQ(a.name, "scale");
      continue;
    }
    if (a.kind == Arg::I32Scalar) {
      ASSERT_EQ(a.name, "options");
      ASSERT_TRUE(c.byCall) << "only a by-call spec takes options";
      continue;
    }
    if (a.kind == Arg::I64) {
      ASSERT_EQ(a.name, "cu_seqlens");
      buf.bytes.resize(cu.size() * 8);
      std::memcpy(buf.bytes.data(), cu.data(), buf.bytes.size());
      shape = {N + 1};
    } else {
      auto [data, dims] = source(a);
      ASSERT_TRUE(data) << "unexpected argument " << a.name;
      shape = dims;
      // A bf16 argument: the reference sees the same rounded values.
      size_t width = a.kind == Arg::BF16 ? 2 : 4;
      buf.bytes.resize(data->size() * width);
      for (size_t j = 0; j < data->size(); ++j) {
        float x = static_cast<float>((*data)[j]);
        if (a.kind == Arg::BF16) {
          uint16_t bits = toBf16Bits(x);
          (*data)[j] = fromBf16Bits(bits);
          std::memcpy(&buf.bytes[j * 2], &bits, 2);
        } else {
          std::memcpy(&buf.bytes[j * 4], &x, 4);
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(shape.size()), a.rank) << a.name;
    // Descriptors of rank r: pointers, offset, r sizes, r strides.
    auto *raw = reinterpret_cast<int64_t *>(&buf.desc);
    void *ptr = buf.bytes.data();
    std::memcpy(&raw[0], &ptr, 8);
    std::memcpy(&raw[1], &ptr, 8);
    raw[2] = 0;
    int64_t stride = 1;
    for (int64_t d = a.rank - 1; d >= 0; --d) {
      raw[3 + d] = shape[d];
      raw[3 + a.rank + d] = stride;
      stride *= shape[d];
    }
    buf.descPtr = &buf.desc;
  }
  Outputs ref;
  ASSERT_EQ(run(p, in, ref), "");

  // The two results, as the C interface returns them.
  struct Results {
    Desc<void, 4> o;
    Desc<float, 4> state;
  } results{};
  Results *resultsPtr = &results;
  std::vector<void *> args{&resultsPtr};
  int32_t options = callOptions(c);
  for (size_t i = 0; i < compiled.args.size(); ++i)
    args.push_back(compiled.args[i].kind == Arg::Scalar      ? static_cast<void *>(&scale)
                   : compiled.args[i].kind == Arg::I32Scalar ? static_cast<void *>(&options)
                                                             : static_cast<void *>(&buffers[i].descPtr));
  llvm::Error err =
      compiled.engine->invokePacked("_mlir_ciface_" + compiled.function, args);
  ASSERT_FALSE(err) << llvm::toString(std::move(err));

  // Both results are dense row-major with the expected shapes.
  const std::array<int64_t, 4> oShape{1, T, HV, V};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(results.o.sizes[i], oShape[i]) << "o dim " << i;
    ASSERT_EQ(results.state.sizes[i], stateShape[i]) << "state dim " << i;
  }
  const bool bf16 = c.io == Io::BF16;
  std::vector<float> o(sz.o), sf(sz.state);
  for (size_t i = 0; i < sz.o; ++i)
    o[i] = bf16 ? fromBf16Bits(static_cast<uint16_t *>(results.o.aligned)[i])
                : static_cast<float *>(results.o.aligned)[i];
  std::memcpy(sf.data(), results.state.aligned, sz.state * sizeof(float));
  std::free(results.o.allocated);
  std::free(results.state.allocated);

  double oTol = bf16 ? 1e-2 : 2e-4, sTol = bf16 ? 5e-3 : 2e-4;
  double oErr = relativeError(o, ref.o),
         sErr = relativeError(sf, ref.finalState);
  EXPECT_LT(oErr, oTol) << "o";
  EXPECT_LT(sErr, sTol) << "final state";
  RecordProperty("o_rel_err", std::to_string(oErr));
  RecordProperty("state_rel_err", std::to_string(sErr));
}

const std::vector<int64_t> kMixed = {37, 1, 64, 0, 90}; // 1, partial, exact
const std::vector<int64_t> kExact = {32, 64};

std::vector<Case> cases() {
  std::vector<Case> all;
  auto add = [&](Case c) { all.push_back(std::move(c)); };
  for (Layout layout : {Layout::Kv, Layout::Vk}) {
    std::string l = layout == Layout::Kv ? "Kv" : "Vk";
    // Gated DeltaNet: every gate form.
    add({"GatedLog" + l, Rule::Gated, layout, GateForm::Log, BetaForm::Given,
         false, 16, 16, 32, 2, 4, kMixed, true, -1.0, 0.0});
    add({"GatedLinear" + l, Rule::Gated, layout, GateForm::Linear,
         BetaForm::Sigmoid, false, 32, 32, 16, 1, 2, kMixed, true, -0.5, 0.0});
    add({"GatedRawL2" + l, Rule::Gated, layout, GateForm::Raw,
         BetaForm::Sigmoid, true, 64, 32, 32, 2, 4, kMixed, true, -1.0, 0.0});
    add({"GatedStrongDecay" + l, Rule::Gated, layout, GateForm::Log,
         BetaForm::Given, false, 64, 16, 16, 1, 1, kMixed, true, -17.0,
         -15.0});
    // DeltaNet.
    add({"Delta" + l, Rule::Delta, layout, GateForm::None, BetaForm::Sigmoid2,
         true, 32, 16, 32, 2, 2, kMixed, true, 0.0, 0.0});
    // KDA: per-channel decays.
    add({"KdaLog" + l, Rule::Kda, layout, GateForm::Log, BetaForm::Given,
         false, 16, 16, 16, 1, 2, kMixed, true, -1.0, 0.0});
    add({"KdaRawL2" + l, Rule::Kda, layout, GateForm::Raw, BetaForm::Sigmoid,
         true, 32, 32, 16, 2, 4, kMixed, true, -1.0, 0.0});
    add({"KdaStrongDecay" + l, Rule::Kda, layout, GateForm::Log,
         BetaForm::Given, false, 64, 16, 16, 1, 1, kMixed, true, -17.0,
         -15.0});
  }
  add({"GatedWeakDecayNoInitialState", Rule::Gated, Layout::Kv, GateForm::Log,
       BetaForm::Given, false, 16, 16, 16, 4, 8, kExact, false, -0.02, 0.0});
  add({"GatedSingleToken", Rule::Gated, Layout::Vk, GateForm::Raw,
       BetaForm::Sigmoid, true, 64, 32, 32, 1, 2, {1}, true, -1.0, 0.0});
  add({"KdaWeakDecayGva", Rule::Kda, Layout::Vk, GateForm::Log,
       BetaForm::Given, false, 32, 16, 32, 1, 4, kExact, false, -0.02, 0.0});
  add({"GatedLogBf16Io", Rule::Gated, Layout::Kv, GateForm::Log,
       BetaForm::Given, false, 32, 32, 16, 1, 2, kMixed, true, -1.0, 0.0,
       Io::BF16});
  add({"GatedBf16Io", Rule::Gated, Layout::Vk, GateForm::Raw,
       BetaForm::Sigmoid, true, 64, 64, 64, 2, 4, kMixed, true, -1.0, 0.0,
       Io::BF16});
  // Context parallelism's schedule (issue 35): each sequence's chunks in
  // segments computed from zero and, on K more columns, from -I, then
  // chained and corrected, split as the GPU splits (L = ceil(longest / n)
  // chunks a segment; a sequence of N chunks in ceil(N / L)): kMixed at
  // chunk 16 and n = 4 has L = 2 (90 tokens: 6 chunks in 3 segments, 37
  // tokens: 3 chunks in 2 of 2 and 1, one chunk whole, an empty
  // sequence); 1000 tokens of DeltaNet (M does not contract) in 7
  // segments of 8 chunks and one of 7; a varlen batch whose short sequences run whole
  // and one takes 2 of 4 segments; strong decay, KDA, bf16 io.
  auto segmented = [&](Case c, int64_t segments) {
    c.name += "Segments" + std::to_string(segments);
    c.segments = segments;
    add(c);
  };
  segmented({"GatedLogKv", Rule::Gated, Layout::Kv, GateForm::Log, BetaForm::Given,
             false, 16, 16, 32, 2, 4, kMixed, true, -1.0, 0.0}, 4);
  // 19, 3, 2 and 9 chunks: L = 5, so 4, 1, 1 and 2 segments.
  segmented({"GatedLogKvVarlenByLongest", Rule::Gated, Layout::Kv, GateForm::Log,
             BetaForm::Given, false, 16, 16, 32, 1, 2, {300, 40, 17, 130}, true, -0.3, 0.0},
            4);
  segmented({"GatedStrongDecayVk", Rule::Gated, Layout::Vk, GateForm::Log,
             BetaForm::Given, false, 16, 16, 16, 1, 1, kMixed, true, -17.0, -15.0}, 3);
  segmented({"GatedRawL2Vk", Rule::Gated, Layout::Vk, GateForm::Raw,
             BetaForm::Sigmoid, true, 32, 32, 32, 2, 4, kMixed, true, -1.0, 0.0}, 2);
  segmented({"DeltaLong", Rule::Delta, Layout::Kv, GateForm::None, BetaForm::Sigmoid2,
             true, 16, 16, 16, 1, 1, {1000}, true, 0.0, 0.0}, 8);
  segmented({"KdaRawL2Kv", Rule::Kda, Layout::Kv, GateForm::Raw, BetaForm::Sigmoid,
             true, 16, 32, 16, 2, 4, kMixed, true, -1.0, 0.0}, 3);
  segmented({"GatedBf16IoVk", Rule::Gated, Layout::Vk, GateForm::Raw,
             BetaForm::Sigmoid, true, 32, 32, 32, 2, 4, kMixed, true, -1.0, 0.0,
             Io::BF16}, 4);
  // Options by call (`gate = call`, `beta = call`, `l2norm = call`): one
  // function, the choice in its `options` argument, taken by the scf.ifs
  // of delta-normalize-options; each case's choice differs from its
  // neighbours' so a bit read wrongly fails.
  auto byCall = [&](Case c) {
    c.name += "ByCall";
    c.byCall = true;
    add(c);
  };
  byCall({"GatedLogGiven", Rule::Gated, Layout::Kv, GateForm::Log, BetaForm::Given,
          false, 16, 16, 32, 2, 4, kMixed, true, -1.0, 0.0});
  byCall({"GatedRawSigmoidL2", Rule::Gated, Layout::Vk, GateForm::Raw, BetaForm::Sigmoid,
          true, 32, 32, 16, 1, 2, kMixed, true, -1.0, 0.0});
  byCall({"GatedLogSigmoid2L2", Rule::Gated, Layout::Kv, GateForm::Log, BetaForm::Sigmoid2,
          true, 16, 16, 16, 2, 2, kMixed, true, -1.0, 0.0});
  byCall({"GatedRawGivenBf16Io", Rule::Gated, Layout::Kv, GateForm::Raw, BetaForm::Given,
          false, 32, 32, 32, 2, 4, kMixed, true, -1.0, 0.0, Io::BF16});
  byCall({"KdaLogSigmoid", Rule::Kda, Layout::Kv, GateForm::Log, BetaForm::Sigmoid,
          false, 16, 16, 16, 1, 2, kMixed, true, -1.0, 0.0});
  byCall({"KdaRawGivenL2", Rule::Kda, Layout::Vk, GateForm::Raw, BetaForm::Given,
          true, 32, 32, 16, 2, 4, kMixed, true, -1.0, 0.0});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Rules, ChunkCpu, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace

int main(int argc, char **argv) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
