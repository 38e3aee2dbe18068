//===- PtxasReport.h - what ptxas says of a generated kernel ----*- C++ -*-===//
//
// deltac prints registers, stack and spills of each kernel when ptxas is at
// hand (CUDA_HOME, /usr/local/cuda or PATH); nothing depends on it otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_PTXASREPORT_H
#define DELTAC_CODEGEN_PTXASREPORT_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace deltac {

/// The ptxas executable, if one is found.
std::optional<std::string> findPtxas();

/// Assembles `ptx` for `target` with `ptxas -v` and returns e.g.
/// "128 regs, 0 B stack, 0 B spills", or "ptxas failed: ..." on error.
std::string ptxasReport(llvm::StringRef ptxas, llvm::StringRef ptx,
                        llvm::StringRef target);

} // namespace deltac

#endif // DELTAC_CODEGEN_PTXASREPORT_H
