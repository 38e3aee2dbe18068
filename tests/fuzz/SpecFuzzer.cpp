//===- SpecFuzzer.cpp - libFuzzer target over the deltac driver's path -*- C++ -*-===//
//
// Bytes in, exactly what the deltac driver does with a spec file out:
// parse + verify + only-spec check (deltac::loadSpecs), the expansion and
// GPU lowering passes (deltac::expandSpecs) with the input's tool options,
// the printing of the expanded module and the kernel plan, and for a
// small spec the NVPTX lowering (deltac::lowerToPtx) and the library
// writer (deltac::writeLibrary, writeEmbeddedImages) into a temporary
// folder that is removed afterwards.
//
// The input's leading `//` comment lines are the driver's options (MLIR
// skips them, so a plain spec file is a valid input too), one a line:
//
//   // target=sm_80,sm_100a                     (--target)
//   // decode-tuning=rows-per-thread=4 unswitch-steps=false
//   // prefill-plan=value-tiles=32
//   // name=lib                                 (--name)
//
// Without a target line the input's size picks one of sm_80, sm_90a and
// sm_100a, so the corpus reaches all three. PTX is made only where the
// module holds one spec with one K x V pair and one target, and prefill
// only at 32x32 with chunk 32 (smallEnoughForPtx: the NVPTX back end takes
// seconds per prefill kernel); bigger inputs still run every pass before.
//
// Each input gets a fresh MLIRContext: attributes and types are uniqued in
// the context for its whole life, so one long-lived context would grow with
// every input and hide real leaks behind that growth. Multithreading is off
// so no thread pool is started (and torn down) per input.
//
// Diagnostics are swallowed: an input that is rejected with a diagnostic is
// a success for the fuzzer; only crashes, asserts, sanitizer reports, leaks
// and hangs count. (LLVM's report_fatal_error, e.g. from the NVPTX printer,
// aborts: a finding.)
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelLibrary.h"
#include "codegen/SpecPipeline.h"
#include "dialect/DeltaOps.h"
#include "tools/DeltacRegistration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

/// The driver's options, read off the input's leading comment lines.
struct ToolOptions {
  std::vector<std::string> targets;
  std::string decodeTuning, prefillPlan, name = "fuzz_lib";
};

ToolOptions readOptions(llvm::StringRef text) {
  static const char *const chips[] = {"sm_80", "sm_90a", "sm_100a"};
  ToolOptions options;
  bool haveTargets = false;
  while (text.consume_front("//")) {
    auto [line, rest] = text.split('\n');
    text = rest;
    auto [key, value] = line.trim().split('=');
    if (key == "target") {
      haveTargets = true;
      llvm::SmallVector<llvm::StringRef> list;
      value.split(list, ',');
      for (llvm::StringRef t : list)
        options.targets.push_back(t.str());
    } else if (key == "decode-tuning") {
      options.decodeTuning = value.str();
    } else if (key == "prefill-plan") {
      options.prefillPlan = value.str();
    } else if (key == "name") {
      options.name = value.str();
    }
  }
  if (!haveTargets)
    options.targets.push_back(chips[text.size() % 3]);
  return options;
}

/// Inputs with more specs are only parsed and verified (see below).
constexpr size_t kMaxSpecsToExpand = 4;

/// True when lowering `module` to PTX is cheap enough for one input (the
/// ctest run stops at 10 s an input, and a loaded 2-core machine makes a
/// 2 s input take several times that): one spec, one K x V pair with
/// K * V <= 128 * 128, one target, and a prefill entry only at its
/// smallest, 32x32 with chunk 32. Measured under ASan: decode 128x128 up to
/// 1.5 s (256x256: 3.4 s), prefill + decode 32x32 chunk 32 up to 3.1 s,
/// prefill 64x64 chunk 64 on sm_90a 9-12 s (the NVPTX back end's share,
/// which grows with every tile).
bool smallEnoughForPtx(mlir::ModuleOp module, const ToolOptions &options) {
  auto specs = llvm::to_vector(module.getOps<mlir::delta::SpecOp>());
  if (options.targets.size() != 1 || specs.size() != 1 ||
      specs.front().getDims().size() != 1)
    return false;
  mlir::delta::SpecOp spec = specs.front();
  auto [k, v] = spec.getDimPairs().front();
  if (k * v > 128 * 128)
    return false;
  return !spec.hasEntry(mlir::delta::EntryKind::prefill) ||
         (k == 32 && v == 32 && spec.getChunkSize() == 32);
}

/// lowerToPtx and the library writer, into a fresh temporary folder.
void lowerAndWrite(mlir::ModuleOp module, const ToolOptions &options) {
  auto kernels = deltac::lowerToPtx(module);
  if (mlir::failed(kernels))
    return;
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("deltac-spec-fuzzer", dir))
    return; // no temporary space: nothing to check
  std::string error =
      deltac::writeLibrary(dir, options.name, "fuzz.mlir", *kernels);
  if (error.empty())
    (void)deltac::writeEmbeddedImages(dir, options.name, *kernels);
  // A name the library writer refuses must leave the folder empty.
  if (!deltac::checkLibraryName(options.name).empty()) {
    std::error_code ec;
    llvm::sys::fs::directory_iterator it(dir, ec);
    if (!ec && it != llvm::sys::fs::directory_iterator()) {
      llvm::errs() << "writeLibrary refused '" << options.name
                   << "' but wrote " << it->path() << "\n";
      abort();
    }
  }
  (void)llvm::sys::fs::remove_directories(dir);
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context(getRegistry(),
                            mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  context.getDiagEngine().registerHandler(
      [](mlir::Diagnostic &) { return mlir::success(); });

  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  ToolOptions options = readOptions(text);
  if (!deltac::checkTargets(options.targets).empty())
    return 0;

  llvm::SourceMgr sourceMgr;
  // getMemBufferCopy adds the NUL terminator the lexer relies on.
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz-input.mlir"),
      llvm::SMLoc());

  mlir::OwningOpRef<mlir::ModuleOp> module =
      deltac::loadSpecs(sourceMgr, context);
  if (!module)
    return 0;
  // Parse and verify only past a few specs: expanding, printing and
  // planning a whole library of them (examples/gdn.mlir, 15 specs, and its
  // mutations) took 9-17 s an input under ASan, past the 10 s limit; one
  // spec at a time covers the same code (make_corpus.py seeds each
  // example spec alone).
  if (llvm::range_size(module->getOps<mlir::delta::SpecOp>()) > kMaxSpecsToExpand)
    return 0;
  bool lower = smallEnoughForPtx(*module, options);
  if (mlir::failed(deltac::expandSpecs(*module, options.targets,
                                       options.decodeTuning,
                                       options.prefillPlan)))
    return 0;

  // What deltac does with a module that expanded: print it, plan kernels,
  // lower to PTX, write the library.
  std::string ir;
  llvm::raw_string_ostream irStream(ir);
  module->print(irStream);
  (void)deltac::planKernels(*module);
  if (lower)
    lowerAndWrite(*module, options);
  return 0;
}
