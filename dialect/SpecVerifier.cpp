//===- SpecVerifier.cpp - every rule a delta.spec must satisfy --*- C++ -*-===//
//
// One diagnostic per inconsistency, at the spec's location. docs/verifier.md
// lists each rule beside the lit test that exercises it.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

using namespace mlir;
using namespace mlir::delta;

/// Largest T one decode call may advance: speculative decoding verifies a
/// handful of draft tokens; beyond this prefill is the right entry.
static constexpr int64_t kMaxDecodeT = 64;

bool SpecOp::hasEntry(EntryKind kind) {
  return llvm::any_of(getEntries(), [&](Attribute attr) {
    return cast<EntryKindAttr>(attr).getValue() == kind;
  });
}

SmallVector<std::pair<int64_t, int64_t>> SpecOp::getDimPairs() {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (Attribute attr : getDims()) {
    auto dims = cast<DimsAttr>(attr);
    pairs.emplace_back(dims.getK(), dims.getV());
  }
  return pairs;
}

static LogicalResult verifyHeadDim(SpecOp op, StringRef what, int64_t dim) {
  if (dim < 16 || dim > 256 || dim % 16 != 0)
    return op.emitOpError() << what << " = " << dim
                            << " must be a multiple of 16 in [16, 256]";
  return success();
}

std::optional<std::string> mlir::delta::checkEntryDims(EntryKind entry,
                                                       int64_t k, int64_t v) {
  // delta-lower-prefill-to-gpu builds K and V multiples of 32 only (below
  // that, delta-plan-prefill's default V tile 32 already fails, at the
  // function). Every multiple of 32 up to 256 lowers, for both rules,
  // layouts and state types at chunk 32 (swept over all 64 pairs); chunk 64
  // can exceed sm_80's shared memory, which the lowering reports, with the
  // way out, since it depends on the targets.
  if (entry == EntryKind::prefill && (k % 32 != 0 || v % 32 != 0))
    return std::string("K and V multiples of 32 (32, 64, ..., 256)");
  return std::nullopt;
}

/// The options two specs must share to emit the same kernels for a (K, V)
/// pair, packed for hashing.
using DuplicateKey =
    std::tuple<uint64_t, Type, Type, int64_t, int64_t, int64_t>;

/// Two specs that agree on everything but their name and entry points and
/// share a (K, V) pair would emit the same kernels twice. Checked once per
/// block, by its last spec, when every earlier one has verified (the
/// verifier visits a block's region-less ops in order and stops at the
/// first failure): one hash lookup per (spec, K x V) pair, where comparing
/// each spec with its predecessors took 43 s for 55k specs.
static LogicalResult verifyNoDuplicateSibling(SpecOp op) {
  if (!op->getParentOp())
    return success();
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode())
    if (isa<SpecOp>(next))
      return success(); // a later spec checks the block
  llvm::DenseMap<DuplicateKey, SpecOp> first;
  for (auto spec : op->getBlock()->getOps<SpecOp>()) {
    uint64_t enums = static_cast<uint64_t>(spec.getRule()) |
                     static_cast<uint64_t>(spec.getLayout()) << 8 |
                     static_cast<uint64_t>(spec.getGate()) << 16 |
                     static_cast<uint64_t>(spec.getBeta()) << 24 |
                     static_cast<uint64_t>(spec.getQkL2norm()) << 32 |
                     static_cast<uint64_t>(spec.getPerValue()) << 33 |
                     static_cast<uint64_t>(spec.getL2normCall()) << 34;
    for (auto [k, v] : spec.getDimPairs()) {
      DuplicateKey key{enums, spec.getIoType(), spec.getStateType(),
                       spec.getChunkSize(), k, v};
      auto [it, inserted] = first.try_emplace(key, spec);
      if (!inserted && it->second != spec)
        return spec.emitOpError()
               << "duplicate specialization " << k << "x" << v << ": spec @"
               << it->second.getSymName()
               << " already emits it with the same options";
    }
  }
  return success();
}

LogicalResult SpecOp::verify() {
  // The name is checked first: every later message, and every generated
  // file, carries it.
  if (std::optional<std::string> why = checkGeneratedName(getSymName())) {
    std::string shown;
    llvm::raw_string_ostream os(shown);
    llvm::printEscapedString(getSymName(), os);
    return emitOpError() << "name '" << shown << "' " << *why;
  }
  if (getDims().empty())
    return emitOpError("needs at least one (K, V) specialization");
  llvm::DenseSet<std::pair<int64_t, int64_t>> seen;
  for (auto [k, v] : getDimPairs()) {
    if (failed(verifyHeadDim(*this, "key dim K", k)) ||
        failed(verifyHeadDim(*this, "value dim V", v)))
      return failure();
    if (!seen.insert({k, v}).second)
      return emitOpError() << "duplicate specialization " << k << "x" << v;
  }

  Type io = getIoType();
  if (!io.isBF16() && !io.isF16() && !io.isF32())
    return emitOpError() << "io type must be bf16, f16 or f32, got " << io;
  Type state = getStateType();
  if (!state.isF32() && !state.isBF16() && !state.isF16())
    return emitOpError() << "state type must be f32, bf16 or f16, got "
                         << state;

  if (std::optional<std::string> why = checkRuleGate(getRule(), getGate()))
    return emitOpError() << *why;
  if (getQkL2norm() && getL2normCall())
    return emitOpError("'l2norm' and 'l2norm = call' exclude each other");

  int64_t chunk = getChunkSize();
  if (!isSupportedChunkSize(chunk))
    return emitOpError() << "chunk size " << chunk
                         << " is not supported; use 16, 32 or 64";

  if (getEntries().empty())
    return emitOpError("needs at least one entry point (prefill, decode)");
  llvm::DenseSet<unsigned> entrySeen;
  for (Attribute attr : getEntries()) {
    EntryKind kind = cast<EntryKindAttr>(attr).getValue();
    if (!entrySeen.insert(static_cast<unsigned>(kind)).second)
      return emitOpError() << "entry point '" << stringifyEntryKind(kind)
                           << "' is listed twice";
  }
  // Only the entries the spec asks for: a decode-only spec may be 16x16.
  // The GPU kernels' dims, where the module asks for GPU code (its
  // `delta.targets`, which deltac and delta-attach-targets set; the pass
  // manager verifies again after that pass, so deltac reports it at the
  // spec before any lowering). Without targets the spec also serves the
  // CPU chunk pipeline (delta-cpu-pipeline, tests/unit/ChunkCpuTest), which
  // runs any dims.
  auto module = (*this)->getParentOfType<ModuleOp>();
  bool gpu = module && module->hasAttr("delta.targets");
  for (Attribute attr : getEntries()) {
    EntryKind kind = cast<EntryKindAttr>(attr).getValue();
    for (auto [k, v] : gpu ? getDimPairs() : decltype(getDimPairs()){})
      if (std::optional<std::string> needs = checkEntryDims(kind, k, v))
        return emitOpError() << "specialization " << k << "x" << v
                             << " has no GPU " << stringifyEntryKind(kind)
                             << " kernel: " << stringifyEntryKind(kind)
                             << " supports " << *needs;
  }
  // gv and a per-value beta give every value column its own transition:
  // no K x K chunk transfer serves them (FLA's chunked kernels take
  // neither), so only decode computes them.
  if (getPerValue() && hasEntry(EntryKind::prefill))
    return emitOpError("per_value (FLA's gv and per-value beta) has no "
                       "chunked form: a per_value spec lists only the "
                       "'decode' entry point");
  std::optional<int64_t> maxT = getMaxT();
  if (hasEntry(EntryKind::decode) && !maxT)
    return emitOpError("entry point 'decode' needs max_t, the largest number "
                       "of tokens one decode call advances");
  if (!hasEntry(EntryKind::decode) && maxT)
    return emitOpError("max_t is only meaningful with the 'decode' entry "
                       "point");
  if (maxT && (*maxT < 1 || *maxT > kMaxDecodeT))
    return emitOpError() << "max_t = " << *maxT << " must lie in [1, "
                         << kMaxDecodeT << "]";

  return verifyNoDuplicateSibling(*this);
}
