//===- PtxasReport.cpp - what ptxas says of a generated kernel --*- C++ -*-===//

#include "codegen/PtxasReport.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

std::optional<std::string> deltac::findPtxas() {
  llvm::SmallVector<llvm::StringRef, 2> dirs;
  std::string cudaHome;
  if (const char *home = std::getenv("CUDA_HOME")) {
    cudaHome = std::string(home) + "/bin";
    dirs.push_back(cudaHome);
  }
  dirs.push_back("/usr/local/cuda/bin");
  if (auto path = llvm::sys::findProgramByName("ptxas", dirs))
    return *path;
  if (auto path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  return std::nullopt;
}

std::string deltac::ptxasReport(llvm::StringRef ptxas, llvm::StringRef ptx,
                                llvm::StringRef target) {
  llvm::SmallString<128> input, log;
  if (llvm::sys::fs::createTemporaryFile("deltac", "ptx", input) ||
      llvm::sys::fs::createTemporaryFile("deltac", "log", log))
    return "ptxas not run: no temporary file";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(input, ec);
    os << ptx;
  }
  std::string arch = ("-arch=" + target).str();
  llvm::StringRef args[] = {ptxas, arch, "-O3", "-v", input, "-o",
                            "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/60, 0, &error);
  auto text = llvm::MemoryBuffer::getFile(log);
  std::string report = text ? (*text)->getBuffer().str() : "";
  llvm::sys::fs::remove(input);
  llvm::sys::fs::remove(log);
  if (rc != 0)
    return "ptxas failed: " + (error.empty() ? report : error);
  llvm::SmallVector<llvm::StringRef, 4> m;
  std::string out;
  if (llvm::Regex("Used ([0-9]+) registers").match(report, &m))
    out += (m[1] + " regs").str();
  if (llvm::Regex("([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores")
          .match(report, &m))
    out += (", " + m[1] + " B stack, " + m[2] + " B spills").str();
  return out;
}
