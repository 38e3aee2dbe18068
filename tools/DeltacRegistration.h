//===- DeltacRegistration.h - what every deltac tool registers --*- C++ -*-===//
//
// One registration function shared by deltac-opt, deltac and the fuzzer, so
// the tools agree on which dialects and passes exist.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_TOOLS_DELTACREGISTRATION_H
#define DELTAC_TOOLS_DELTACREGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace deltac {

/// Adds the delta dialect and the upstream dialects deltac's IR uses.
void registerDialects(mlir::DialectRegistry &registry);

/// Registers deltac's passes and the upstream passes its pipelines use, so
/// they can be named on a command line or in a pipeline string.
void registerPasses();

} // namespace deltac

#endif // DELTAC_TOOLS_DELTACREGISTRATION_H
