//===- DeltaDialect.h - the delta dialect -----------------------*- C++ -*-===//
//
// Declares the dialect, its enums and attributes. Ops are in DeltaOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_DIALECT_DELTADIALECT_H
#define DELTAC_DIALECT_DELTADIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialect/DeltaDialect.h.inc"
#include "dialect/DeltaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/DeltaAttrs.h.inc"

#include <optional>
#include <string>

namespace mlir::delta {

/// The SMs deltac generates for, in the order the driver lists them.
llvm::ArrayRef<llvm::StringRef> supportedTargets();

/// Why `gate` cannot be used with `rule`, or nullopt when it can. Shared by
/// the spec and recurrence verifiers so both say the same thing.
std::optional<std::string> checkRuleGate(Rule rule, GateForm gate);

/// Chunk sizes the chunked prefill supports: 16, 32 and 64.
bool isSupportedChunkSize(int64_t chunk);

/// Longest spec or library name: kernel symbols and PTX file names append
/// about 60 characters to it, and a file name holds at most 255.
constexpr size_t kMaxGeneratedNameLength = 128;

/// Why `name` cannot name a spec or a generated library, or nullopt when
/// it can: it must be a C identifier, not reserved, not a C or C++ keyword
/// and not a name the generated code uses (dialect/GeneratedNames.cpp).
/// The message completes "name 'x' ...".
std::optional<std::string> checkGeneratedName(llvm::StringRef name);

/// The K x V pairs the GPU lowering of an entry point builds, in words
/// (e.g. "multiples of 32"), or nullopt when it builds (k, v). Decode builds
/// every pair the spec verifier accepts; prefill's tiles need 32 | K, V.
std::optional<std::string> checkEntryDims(EntryKind entry, int64_t k,
                                          int64_t v);

/// True for the gate forms that carry one decay per K channel.
bool isPerChannel(GateForm gate);
/// True for the raw gate forms (`a` with `A_log` and `dt_bias`).
bool isRaw(GateForm gate);
/// True for the gate forms whose call chooses log or raw (`call`,
/// `channel_call`: the options' kCallGateRaw).
bool isByCall(GateForm gate);
/// True for the gate forms that take `A_log` and `dt_bias` (raw or by call).
bool takesRawParams(GateForm gate);
/// True where a spec or recurrence leaves an option to the call (`gate =
/// call` / `channel_call`, `beta = call`, `l2norm = call`): it takes the
/// call's `options`.
bool takesCallOptions(GateForm gate, BetaForm beta, bool l2normCall);

} // namespace mlir::delta

#endif // DELTAC_DIALECT_DELTADIALECT_H
