//===- DecodeAbiTest.cpp - compiler and runtime agree on the kernel ABI ---===//
//
// The decode kernel's parameters are listed twice: by the compiler
// (decodeKernelParams(), which builds the gpu.func) and by the host runtime
// that packs them for cuLaunchKernel (deltac_rt::decodeParamNames(), beside
// the packing in templates/runtime/deltac_decode.cpp). A parameter added,
// removed or moved on one side only fails here instead of on the GPU.
//
//===----------------------------------------------------------------------===//

#include "passes/DecodeKernel.h"

#include "deltac_decode.h"

#include <gtest/gtest.h>

TEST(DecodeAbi, RuntimePacksTheCompilersParameters) {
  int count = 0;
  const char *const *runtime = deltac_rt::decodeParamNames(&count);
  llvm::ArrayRef<mlir::delta::KernelParam> compiler =
      mlir::delta::decodeKernelParams();
  ASSERT_EQ(size_t(count), compiler.size());
  for (size_t i = 0; i < compiler.size(); ++i)
    EXPECT_STREQ(runtime[i], compiler[i].name) << "parameter " << i;
}
