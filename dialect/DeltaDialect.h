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

/// True for the gate forms that carry one decay per K channel.
bool isPerChannel(GateForm gate);
/// True for the gate forms that take `A_log` and `dt_bias`.
bool isRaw(GateForm gate);

} // namespace mlir::delta

#endif // DELTAC_DIALECT_DELTADIALECT_H
