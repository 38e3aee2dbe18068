//===- deltac.cpp - the deltac generator driver -----------------*- C++ -*-===//
//
//   deltac SPEC.mlir --target=sm_90a[,sm_80,...] [-o DIR] [--name LIB]
//                    [--print-ir]
//
// Verifies a spec file, expands it for the given targets, lowers what has a
// GPU lowering to PTX and, with -o, writes the kernel library into DIR.
// Every error exits non-zero with a message; errors in the spec carry
// file:line:col.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelLibrary.h"
#include "codegen/PtxasReport.h"
#include "codegen/SpecPipeline.h"
#include "tools/DeltacRegistration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace llvm;

namespace {
cl::OptionCategory category("deltac options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<spec.mlir>"),
                               cl::Required, cl::cat(category));
cl::list<std::string> targets("target", cl::CommaSeparated,
                              cl::desc("target SMs: sm_80, sm_90a, sm_100a "
                                       "(comma separated)"),
                              cl::value_desc("sm_XX[,sm_YY]"),
                              cl::cat(category));
cl::list<std::string> specNames(
    "spec", cl::CommaSeparated,
    cl::desc("generate only these specs of the file (comma separated "
             "names, without the @; default: all)"),
    cl::value_desc("name[,name]"), cl::cat(category));
cl::opt<std::string> outputDir("o", cl::desc("write the kernel library here"),
                               cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> libraryName(
    "name", cl::desc("library name (default: the spec file's stem)"),
    cl::value_desc("name"), cl::cat(category));
cl::opt<std::string> decodeTuning(
    "decode-tuning",
    cl::desc("override decode code-shape choices (options of "
             "delta-lower-decode-to-gpu, e.g. \"rows-per-thread=4 "
             "prefetch=false\")"),
    cl::value_desc("options"), cl::cat(category));
cl::opt<std::string> prefillPlan(
    "prefill-plan",
    cl::desc("override the prefill plan (options of delta-plan-prefill, "
             "e.g. \"value-tiles=32\")"),
    cl::value_desc("options"), cl::cat(category));
cl::opt<bool> embedImages(
    "embed-images",
    cl::desc("also write <lib>_images.cpp with the PTX embedded, so the "
             "library builds from a fixed list of sources (used by "
             "deltac_generate_kernels)"),
    cl::cat(category));
cl::opt<std::string> runtimeDir(
    "runtime-dir",
    cl::desc("write the runtime files to this folder, relative to -o "
             "(default: the library's own folder, self-contained); libraries "
             "generated side by side can share one copy, as generated/ does"),
    cl::value_desc("relative dir"), cl::cat(category));
cl::opt<bool> printIR("print-ir",
                      cl::desc("print the IR after the deltac passes (before "
                               "PTX emission) to standard output"),
                      cl::cat(category));

int fail(const Twine &message) {
  errs() << "deltac: error: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "deltac " DELTAC_VERSION " (LLVM/MLIR " LLVM_VERSION_STRING ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "deltac: generate delta-rule linear-attention kernels from a spec\n");

  std::vector<std::string> targetList(targets.begin(), targets.end());
  if (std::string problem = deltac::checkTargets(targetList); !problem.empty())
    return fail(problem);
  // The default name is the file's stem made an identifier; a name given
  // explicitly must already be one. Either is checked before anything is
  // read or written: it names C/C++ symbols, files beside the runtime's and
  // a Python module.
  std::string lib = libraryName.getValue();
  if (libraryName.getNumOccurrences() == 0) {
    lib = sys::path::stem(inputFile).str();
    for (char &c : lib)
      if (!isAlnum(c) && c != '_')
        c = '_';
    if (lib.empty() || isDigit(lib.front()))
      lib = "_" + lib;
  }
  if (std::string problem = deltac::checkLibraryName(lib); !problem.empty())
    return fail(problem);

  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code ec = buffer.getError())
    return fail("cannot read '" + inputFile + "': " + ec.message());

  mlir::DialectRegistry registry;
  deltac::registerDialects(registry);
  mlir::MLIRContext context(registry);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), SMLoc());
  context.printOpOnDiagnostic(false); // file:line:col says where
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      deltac::loadSpecs(sourceMgr, context);
  if (!module)
    return 1; // the diagnostic handler has printed file:line:col messages
  std::vector<std::string> selected(specNames.begin(), specNames.end());
  if (std::string problem = deltac::selectSpecs(*module, selected); !problem.empty())
    return fail(problem);
  if (failed(deltac::expandSpecs(*module, targetList, decodeTuning, prefillPlan)))
    return 1;
  if (printIR)
    module->print(outs());
  auto planned = deltac::planKernels(*module);

  auto kernels = deltac::lowerToPtx(*module);
  if (failed(kernels))
    return 1;

  std::optional<std::string> ptxas = deltac::findPtxas();
  size_t generated = 0; // kernels x their targets (some have one kind only)
  for (const deltac::EmittedKernel &e : *kernels)
    generated += e.ptx.size();
  outs() << "deltac: " << inputFile << ": " << planned.size()
         << " kernels planned, " << generated << " generated\n";
  for (const deltac::PlannedKernel &k : planned) {
    std::string status = "not generated yet (no " + k.entry + " lowering)";
    if (k.lowered)
      for (const deltac::EmittedKernel &e : *kernels)
        if (e.name == k.function)
          for (const auto &[target, ptx] : e.ptx)
            if (target == k.target)
              status = "PTX " + std::to_string(ptx.size()) + " B, " +
                       std::to_string(e.threads) + " threads x " +
                       std::to_string(e.gridX) + " blocks/head" +
                       (ptxas ? "; " + deltac::ptxasReport(*ptxas, ptx,
                                                           target)
                              : std::string());
    outs() << "  " << left_justify(k.function + "." + k.target, 42) << " "
           << left_justify(k.entry, 8) << "K=" << k.k << " V=" << k.v << "  "
           << status << "\n";
  }

  if (!outputDir.empty()) {
    std::string error =
        deltac::writeLibrary(outputDir, lib, sys::path::filename(inputFile),
                             *kernels, runtimeDir);
    if (error.empty() && embedImages)
      error = deltac::writeEmbeddedImages(outputDir, lib, *kernels);
    if (!error.empty())
      return fail(error);
    outs() << "deltac: wrote library '" << lib << "' to " << outputDir
           << " (" << lib << ".h, " << lib << ".cpp, kernels/*.ptx, "
           << "CMakeLists.txt, " << lib << ".py, pyproject.toml; runtime in "
           << (runtimeDir.empty() ? std::string("the same folder")
                                  : outputDir + "/" + runtimeDir)
           << ")\n";
  }
  return 0;
}
