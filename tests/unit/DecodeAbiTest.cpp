//===- DecodeAbiTest.cpp - compiler and runtime agree on the kernel ABI ---===//
//
// The decode kernel's parameters: the compiler's decodeKernelParams() (which
// builds the gpu.func, lowered to LLVM types by kernelParamTypes), the PTX
// .entry of every decode kernel deltac wrote (the example library, fresh
// from this build's deltac), and the array the runtime packs for
// cuLaunchKernel (deltac_rt::packDecodeParams, whose layout reports each
// value's kind and size) must agree position by position.
//
//===----------------------------------------------------------------------===//

#include "AbiCheck.h"

#include "codegen/gpu/decode/DecodeKernel.h"

#include "deltac_decode.h"

TEST(DecodeAbi, RuntimePacksTheCompilersParameters) {
  int count = 0;
  const deltac_rt::ParamInfo *runtime = deltac_rt::decodeParamLayout(&count);
  llvm::ArrayRef<mlir::delta::KernelParam> compiler =
      mlir::delta::decodeKernelParams();
  abicheck::expectSame(runtime, count, abicheck::compilerParams(compiler),
                  "compiler types", compiler);
}

TEST(DecodeAbi, RuntimePacksThePtxParameters) {
  int count = 0;
  const deltac_rt::ParamInfo *runtime = deltac_rt::decodeParamLayout(&count);
  std::vector<std::string> files = abicheck::ptxFiles(DELTAC_LIBRARY_DIR, "_decode");
  ASSERT_FALSE(files.empty()) << DELTAC_LIBRARY_DIR;
  for (const std::string &file : files) {
    std::string entry;
    std::vector<abicheck::Param> ptx = abicheck::ptxParams(file, &entry);
    abicheck::expectSame(runtime, count, ptx, file + " (" + entry + ")");
  }
}
