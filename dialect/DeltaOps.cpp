//===- DeltaOps.cpp - delta dialect operations ------------------*- C++ -*-===//
//
// Custom assembly directives of the spec and the verifiers of the small
// elementwise ops. The spec and recurrence verifiers have files of their own.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::delta;

//===----------------------------------------------------------------------===//
// custom<DimsList>: `[128x128, 64x64]`
//===----------------------------------------------------------------------===//

static ParseResult parseDimsList(OpAsmParser &parser, ArrayAttr &dims) {
  SmallVector<Attribute> pairs;
  auto parsePair = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    SmallVector<int64_t, 2> kv;
    if (parser.parseDimensionList(kv, /*allowDynamic=*/false,
                                  /*withTrailingX=*/false))
      return failure();
    if (kv.size() != 2)
      return parser.emitError(loc, "expected a specialization written KxV, "
                                   "e.g. 128x128");
    pairs.push_back(DimsAttr::get(parser.getContext(), kv[0], kv[1]));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parsePair,
                                     " in the (K, V) list"))
    return failure();
  dims = parser.getBuilder().getArrayAttr(pairs);
  return success();
}

static void printDimsList(OpAsmPrinter &p, Operation *, ArrayAttr dims) {
  p << '[';
  llvm::interleaveComma(dims, p, [&](Attribute attr) {
    auto pair = cast<DimsAttr>(attr);
    p << pair.getK() << 'x' << pair.getV();
  });
  p << ']';
}

// custom<L2Norm>: nothing (off), `l2norm` (on) or `l2norm = call` (the
// call's options choose).
static ParseResult parseL2Norm(OpAsmParser &parser, UnitAttr &on,
                               UnitAttr &call) {
  if (parser.parseOptionalKeyword("l2norm"))
    return success();
  if (parser.parseOptionalEqual()) {
    on = parser.getBuilder().getUnitAttr();
    return success();
  }
  if (parser.parseKeyword("call", " after 'l2norm =' (the call chooses)"))
    return failure();
  call = parser.getBuilder().getUnitAttr();
  return success();
}

static void printL2Norm(OpAsmPrinter &p, Operation *, UnitAttr on,
                        UnitAttr call) {
  if (call)
    p << "l2norm = call";
  else if (on)
    p << "l2norm";
}

//===----------------------------------------------------------------------===//
// custom<EntryList>: `[prefill, decode]`
//===----------------------------------------------------------------------===//

static ParseResult parseEntryList(OpAsmParser &parser, ArrayAttr &entries) {
  SmallVector<Attribute> kinds;
  auto parseEntry = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (parser.parseKeyword(&keyword))
      return failure();
    std::optional<EntryKind> kind = symbolizeEntryKind(keyword);
    if (!kind)
      return parser.emitError(loc, "unknown entry point '")
             << keyword << "'; expected prefill or decode";
    kinds.push_back(EntryKindAttr::get(parser.getContext(), *kind));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseEntry,
                                     " in the entry point list"))
    return failure();
  entries = parser.getBuilder().getArrayAttr(kinds);
  return success();
}

static void printEntryList(OpAsmPrinter &p, Operation *, ArrayAttr entries) {
  p << '[';
  llvm::interleaveComma(entries, p, [&](Attribute attr) {
    p << stringifyEntryKind(cast<EntryKindAttr>(attr).getValue());
  });
  p << ']';
}

#define GET_OP_CLASSES
#include "dialect/DeltaOps.cpp.inc"

void DeltaDialect::registerOperations() {
  addOperations<
#define GET_OP_LIST
#include "dialect/DeltaOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Elementwise preparation ops
//===----------------------------------------------------------------------===//

LogicalResult GateFromRawOp::verify() {
  auto a = cast<RankedTensorType>(getA().getType());
  auto aLog = cast<RankedTensorType>(getALog().getType());
  auto dtBias = cast<RankedTensorType>(getDtBias().getType());
  auto g = cast<RankedTensorType>(getG().getType());
  if (a.getRank() != 3 && a.getRank() != 4)
    return emitOpError("expects 'a' of rank 3 [B, T, HV] or rank 4 "
                       "[B, T, HV, K], got rank ")
           << a.getRank();
  if (aLog.getRank() != 1 || dtBias.getRank() != 1)
    return emitOpError("expects 'a_log' and 'dt_bias' of rank 1");
  if (g.getShape() != a.getShape())
    return emitOpError("result shape must equal the shape of 'a'");
  return success();
}

LogicalResult BetaSigmoidOp::verify() {
  double factor = getFactor().convertToDouble();
  if (factor != 1.0 && factor != 2.0)
    return emitOpError("factor must be 1 or 2, got ") << factor;
  return success();
}

LogicalResult ChunkCumsumOp::verify() {
  int64_t chunk = getChunkSize();
  if (!isSupportedChunkSize(chunk))
    return emitOpError("chunk size ") << chunk
                                      << " is not supported; use 16, 32 or 64";
  auto g = cast<RankedTensorType>(getG().getType());
  if (g.getRank() != 3 && g.getRank() != 4)
    return emitOpError("expects decays of rank 3 [B, T, HV] or 4 "
                       "[B, T, HV, K], got rank ")
           << g.getRank();
  if (g.getShape() != cast<RankedTensorType>(getGamma().getType()).getShape())
    return emitOpError("result shape must equal the shape of the decays");
  if (getCuSeqlens() &&
      cast<RankedTensorType>(getCuSeqlens().getType()).getRank() != 1)
    return emitOpError("expects 'cu_seqlens' of rank 1 [N + 1]");
  return success();
}
