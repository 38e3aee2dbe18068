//===- SpecPipeline.h - load, verify and expand a spec file -----*- C++ -*-===//
//
// The entry the deltac driver and the fuzzer share: bytes in, a verified,
// expanded module (or diagnostics) out. Nothing here touches the file system
// beyond the SourceMgr it is given.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_SPECPIPELINE_H
#define DELTAC_CODEGEN_SPECPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace deltac {

/// Parses the buffers of `sourceMgr` as a module of `delta.spec` ops and
/// verifies it. Returns null after reporting through the context's
/// diagnostic handler when the text does not parse, does not verify, holds
/// anything but specs, or holds none.
mlir::OwningOpRef<mlir::ModuleOp> loadSpecs(llvm::SourceMgr &sourceMgr,
                                            mlir::MLIRContext &context);

/// Keeps only the specs named in `names` (all when it is empty). Returns an
/// empty string, or the message to print when a name is not a spec of the
/// module or is listed twice.
std::string selectSpecs(mlir::ModuleOp module, llvm::ArrayRef<std::string> names);

/// Checks a target list given on a command line. Returns an empty string
/// when every target is known and listed once, else the message to print.
std::string checkTargets(llvm::ArrayRef<std::string> targets);

/// Records `targets` in the module, expands every spec, lowers decode
/// entries to GPU kernels and prefill entries through the chunk level to
/// theirs (delta-attach-targets, delta-expand-spec,
/// delta-lower-decode-to-gpu, delta-normalize-options,
/// delta-prepare-chunking, delta-chunk, delta-plan-prefill,
/// delta-lower-prefill-to-gpu).
/// `decodeTuning` holds options of delta-lower-decode-to-gpu, e.g.
/// "rows-per-thread=4 prefetch=false", `prefillPlan` those of
/// delta-plan-prefill, e.g. "value-tiles=32" (empty: the defaults).
mlir::LogicalResult expandSpecs(mlir::ModuleOp module,
                                llvm::ArrayRef<std::string> targets,
                                llvm::StringRef decodeTuning = "",
                                llvm::StringRef prefillPlan = "");

/// One kernel the library will hold: a function of the expanded module
/// compiled for one target.
struct PlannedKernel {
  std::string spec;     ///< the delta.spec symbol
  std::string function; ///< the expanded function, e.g. gdn_k128_v128_decode
  std::string entry;    ///< "prefill" or "decode"
  int64_t k, v;
  std::string target;   ///< e.g. "sm_90a"
  bool lowered;         ///< a GPU kernel exists (else not implemented yet)
};

/// The kernels an expanded module will produce, in module and target order.
llvm::SmallVector<PlannedKernel> planKernels(mlir::ModuleOp module);

} // namespace deltac

#endif // DELTAC_CODEGEN_SPECPIPELINE_H
