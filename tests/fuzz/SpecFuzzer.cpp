//===- SpecFuzzer.cpp - libFuzzer target over deltac's spec entry -*- C++ -*-===//
//
// Bytes in, exactly what the deltac driver does with a spec file out:
// parse + verify + only-spec check (deltac::loadSpecs), and when that
// succeeds the expansion passes for sm_90a (deltac::expandSpecs), then the
// printing of the expanded module and the kernel plan that deltac writes.
//
// Each input gets a fresh MLIRContext: attributes and types are uniqued in
// the context for its whole life, so one long-lived context would grow with
// every input and hide real leaks behind that growth. Multithreading is off
// so no thread pool is started (and torn down) per input.
//
// Diagnostics are swallowed: an input that is rejected with a diagnostic is
// a success for the fuzzer; only crashes, asserts, sanitizer reports, leaks
// and hangs count.
//
//===----------------------------------------------------------------------===//

#include "codegen/SpecPipeline.h"
#include "tools/DeltacRegistration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>

// Only deltac's sources are instrumented; libMLIR.so and libLLVM.so are not.
// llvm::BumpPtrAllocator (Allocator.h, inline) poisons each new slab and
// unpoisons each allocation when compiled with ASan, so a slab started by
// instrumented inline code (e.g. the storage of a delta attribute) is handed
// out later by libMLIR.so's uninstrumented copy without being unpoisoned,
// and the next memcpy into it (seen: DenseArrayAttr::get) is reported as a
// use-after-poison that is not a bug. Manual poisoning is turned off here,
// in the binary, so a hand run needs no ASAN_OPTIONS; ordinary heap, stack
// and global checks are unaffected. (ASAN_OPTIONS can still override it.)
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

namespace {
const mlir::DialectRegistry &getRegistry() {
  static const mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    deltac::registerDialects(*r);
    return r;
  }();
  return *registry;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context(getRegistry(),
                            mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  context.getDiagEngine().registerHandler(
      [](mlir::Diagnostic &) { return mlir::success(); });

  llvm::SourceMgr sourceMgr;
  // getMemBufferCopy adds the NUL terminator the lexer relies on.
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz-input.mlir"),
      llvm::SMLoc());

  mlir::OwningOpRef<mlir::ModuleOp> module =
      deltac::loadSpecs(sourceMgr, context);
  if (!module)
    return 0;
  static const std::string targets[] = {"sm_90a"};
  if (mlir::failed(deltac::expandSpecs(*module, targets)))
    return 0;

  // What deltac does with a module that expanded: print it, plan kernels.
  std::string ir;
  llvm::raw_string_ostream irStream(ir);
  module->print(irStream);
  (void)deltac::planKernels(*module);
  return 0;
}
