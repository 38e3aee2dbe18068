//===- deltac.cpp - the deltac generator driver -----------------*- C++ -*-===//
//
//   deltac SPEC.mlir --target=sm_90a[,sm_80,...] [-o DIR] [--print-ir]
//
// Verifies a spec file, expands it for the given targets, prints the kernels
// the library will hold and, with -o, writes the expanded IR and the kernel
// list into DIR. Every error exits non-zero with a message; errors in the
// spec carry file:line:col.
//
//===----------------------------------------------------------------------===//

#include "codegen/SpecPipeline.h"
#include "tools/DeltacRegistration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

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
cl::opt<std::string> outputDir("o", cl::desc("output directory"),
                               cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> printIR("print-ir",
                      cl::desc("print the expanded IR to standard output"),
                      cl::cat(category));

int fail(const Twine &message) {
  errs() << "deltac: error: " << message << "\n";
  return 1;
}

/// Writes `text` to `dir/name`, replacing what was there.
bool writeFile(StringRef dir, StringRef name, StringRef text) {
  SmallString<256> path(dir);
  sys::path::append(path, name);
  std::string error;
  auto file = mlir::openOutputFile(path, &error);
  if (!file) {
    errs() << "deltac: error: " << error << "\n";
    return false;
  }
  file->os() << text;
  file->keep();
  return true;
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
  if (!module || failed(deltac::expandSpecs(*module, targetList)))
    return 1; // the diagnostic handler has printed file:line:col messages

  std::string ir;
  raw_string_ostream irStream(ir);
  module->print(irStream);

  std::string plan;
  raw_string_ostream planStream(plan);
  auto kernels = deltac::planKernels(*module);
  planStream << "# kernel, spec, entry, K, V, target\n";
  for (const deltac::PlannedKernel &kernel : kernels)
    planStream << kernel.function << "_" << kernel.target << ", "
               << kernel.spec << ", " << kernel.entry << ", " << kernel.k
               << ", " << kernel.v << ", " << kernel.target << "\n";

  if (printIR)
    outs() << ir;
  outs() << "deltac: " << inputFile << ": " << kernels.size()
         << " kernels planned\n";
  for (const deltac::PlannedKernel &kernel : kernels)
    outs() << "  " << left_justify(kernel.function + "_" + kernel.target, 44)
           << kernel.entry << "  K=" << kernel.k << " V=" << kernel.v << "\n";

  if (!outputDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(outputDir))
      return fail("cannot create '" + outputDir + "': " + ec.message());
    StringRef stem = sys::path::stem(inputFile);
    if (!writeFile(outputDir, (stem + ".expanded.mlir").str(), ir) ||
        !writeFile(outputDir, "kernels.txt", plan))
      return 1;
    outs() << "deltac: wrote " << outputDir << "/" << stem
           << ".expanded.mlir and kernels.txt\n";
  }
  return 0;
}
