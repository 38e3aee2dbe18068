//===- ExpandSpec.cpp - delta.spec to sequence-level functions --*- C++ -*-===//
//
// One function per (spec, specialization, entry point). The signature is the
// contract the host wrapper implements later, so it is built in one place.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTAEXPANDSPEC
#include "passes/Passes.h.inc"

namespace {
constexpr int64_t kDyn = ShapedType::kDynamic;

/// Builds the function of one specialization and entry point.
class EntryBuilder {
public:
  EntryBuilder(SpecOp spec, int64_t k, int64_t v, EntryKind entry)
      : spec(spec), k(k), v(v), entry(entry), b(spec.getContext()) {}

  func::FuncOp build(OpBuilder &moduleBuilder) {
    MLIRContext *ctx = spec.getContext();
    Type io = spec.getIoType(), stateType = spec.getStateType();
    Type f32 = b.getF32Type();
    bool prefill = entry == EntryKind::prefill;
    // Prefill packs sequences along T (B = 1, cu_seqlens); decode has one
    // state per batch row and T <= max_t.
    int64_t batch = prefill ? 1 : kDyn;
    bool kda = spec.getRule() == Rule::kda;
    GateForm gate = spec.getGate();
    // Log-space and linear decays come as f32 (as FLA passes g); raw `a` and
    // beta (or its logits) come in the io type, as projections produce them.
    // A gate by call (log or raw) comes as f32; the host also takes a raw
    // `a` in the io type (a flag of the call).
    Type gateElement = isRaw(gate) ? io : f32;

    SmallVector<Type> inputs;
    SmallVector<StringRef> names;
    auto add = [&](StringRef name, Type type) {
      names.push_back(name);
      inputs.push_back(type);
      return inputs.size() - 1;
    };
    size_t q = add("q", tensor({batch, kDyn, kDyn, k}, io));
    size_t key = add("k", tensor({batch, kDyn, kDyn, k}, io));
    size_t val = add("v", tensor({batch, kDyn, kDyn, v}, io));
    std::optional<size_t> g;
    if (gate != GateForm::none)
      g = add(isRaw(gate) ? "a" : "g",
              kda ? tensor({batch, kDyn, kDyn, k}, gateElement)
                  : tensor({batch, kDyn, kDyn}, gateElement));
    // per_value: FLA's gv (log decays per value column) and a beta per
    // value column (the host also takes one per head: a flag of the call).
    bool perValue = spec.getPerValue();
    std::optional<size_t> gv;
    if (perValue)
      gv = add("gv", tensor({batch, kDyn, kDyn, v}, f32));
    size_t beta = add(spec.getBeta() == BetaForm::given ||
                              spec.getBeta() == BetaForm::call
                          ? "beta"
                          : "b",
                      perValue ? tensor({batch, kDyn, kDyn, v}, io)
                               : tensor({batch, kDyn, kDyn}, io));
    std::optional<size_t> aLog, dtBias;
    if (takesRawParams(gate)) {
      aLog = add("A_log", tensor({kDyn}, f32));
      dtBias = add("dt_bias", tensor({kDyn}, f32));
    }
    SmallVector<int64_t> stateShape =
        spec.getLayout() == StateLayout::kv
            ? SmallVector<int64_t>{kDyn, kDyn, k, v}
            : SmallVector<int64_t>{kDyn, kDyn, v, k};
    Type state = tensor(stateShape, stateType);
    size_t s0 = add("initial_state", state);
    std::optional<size_t> cu;
    if (prefill)
      cu = add("cu_seqlens", tensor({kDyn}, b.getI64Type()));
    size_t scale = add("scale", f32);
    // The options an `= call` spec leaves to the call (deltac_abi.h's
    // CallOptions bits).
    std::optional<size_t> options;
    if (takesCallOptions(gate, spec.getBeta(), spec.getL2normCall()))
      options = add("options", b.getI32Type());

    Type out = tensor({batch, kDyn, kDyn, v}, io);
    auto type = FunctionType::get(ctx, inputs, {out, state});
    std::string name = (spec.getSymName() + "_k" + Twine(k) + "_v" +
                        Twine(v) + "_" + stringifyEntryKind(entry))
                           .str();
    auto func =
        func::FuncOp::create(moduleBuilder, spec.getLoc(), name, type);
    func->setAttr(DeltaDialect::kSpecAttrName,
                  FlatSymbolRefAttr::get(spec.getSymNameAttr()));
    func->setAttr(DeltaDialect::kEntryAttrName,
                  EntryKindAttr::get(ctx, entry));
    // The specialization, typed: later stages read it, never the name.
    func->setAttr(DeltaDialect::kDimsAttrName, DimsAttr::get(ctx, k, v));
    if (prefill)
      func->setAttr(DeltaDialect::kChunkSizeAttrName,
                    spec.getChunkSizeAttr());
    else
      func->setAttr(DeltaDialect::kMaxTAttrName, spec.getMaxTAttr());
    for (auto [i, argName] : llvm::enumerate(names))
      func.setArgAttr(i, DeltaDialect::kArgNameAttrName,
                      b.getStringAttr(argName));

    Block *body = func.addEntryBlock();
    OpBuilder fb = OpBuilder::atBlockBegin(body);
    auto arg = [&](std::optional<size_t> index) -> Value {
      return index ? body->getArgument(*index) : Value();
    };
    auto rec = RecurrenceOp::create(
        fb, spec.getLoc(), TypeRange{out, state}, spec.getRule(),
        spec.getLayout(), gate, spec.getBeta(), spec.getQkL2norm(),
        spec.getL2normCall(), arg(q), arg(key), arg(val), arg(g), arg(gv),
        arg(beta), arg(aLog), arg(dtBias), arg(s0), arg(cu), arg(scale),
        arg(options));
    func::ReturnOp::create(fb, spec.getLoc(), rec->getResults());
    return func;
  }

private:
  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }

  SpecOp spec;
  int64_t k, v;
  EntryKind entry;
  Builder b;
};

struct ExpandSpec : impl::DeltaExpandSpecBase<ExpandSpec> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    SmallVector<SpecOp> specs(module.getOps<SpecOp>());
    for (SpecOp spec : specs)
      for (auto [k, v] : spec.getDimPairs())
        for (Attribute entry : spec.getEntries())
          EntryBuilder(spec, k, v, cast<EntryKindAttr>(entry).getValue())
              .build(builder);
  }
};
} // namespace
} // namespace mlir::delta
