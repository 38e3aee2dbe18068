//===- AbiCheck.h - compare a kernel ABI three ways -----------------------===//
//
// The parameters of a generated kernel exist three times: the compiler's
// list (KernelParam, lowered to LLVM types by kernelParamTypes), the PTX
// .entry that comes out, and the array the runtime packs for cuLaunchKernel
// (deltac_rt::ParamPack, whose layout reports each value's kind and size).
// checkAbi compares the runtime's packed array with the other two, position
// by position: name, kind and size. A parameter added, removed, moved or
// retyped on one side fails here instead of on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_TESTS_UNIT_ABICHECK_H
#define DELTAC_TESTS_UNIT_ABICHECK_H

#include "codegen/gpu/KernelAbi.h"

#include "deltac_runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace abicheck {

using Kind = deltac_rt::ParamKind;

inline const char *kindName(Kind k) {
  switch (k) {
  case Kind::Pointer: return "pointer";
  case Kind::I32: return "i32";
  case Kind::I64: return "i64";
  case Kind::F32: return "f32";
  case Kind::TensorMap: return "tensor map";
  }
  return "?";
}

/// One parameter as seen from one side: kind and bytes passed.
struct Param {
  Kind kind;
  unsigned bytes;
};

/// The compiler's parameters as the kernel's LLVM argument types say
/// (kernelParamTypes): a global pointer is 8 bytes, a generic pointer is
/// the tensor map passed by value (CUtensorMap, 128 bytes).
inline std::vector<Param>
compilerParams(llvm::ArrayRef<mlir::delta::KernelParam> params) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::LLVM::LLVMDialect>();
  mlir::OpBuilder builder(&context);
  std::vector<Param> out;
  for (mlir::Type t : mlir::delta::kernelParamTypes(builder, params)) {
    if (auto ptr = llvm::dyn_cast<mlir::LLVM::LLVMPointerType>(t))
      out.push_back(ptr.getAddressSpace() == 1 ? Param{Kind::Pointer, 8}
                                               : Param{Kind::TensorMap, 128});
    else if (t.isInteger(32))
      out.push_back({Kind::I32, 4});
    else if (t.isInteger(64))
      out.push_back({Kind::I64, 8});
    else if (t.isF32())
      out.push_back({Kind::F32, 4});
    else
      ADD_FAILURE() << "unexpected kernel parameter type";
  }
  return out;
}

/// The .param list of the .entry in a PTX file.
inline std::vector<Param> ptxParams(const std::string &file,
                                    std::string *entry) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string ptx = text.str();
  std::smatch m;
  std::vector<Param> out;
  if (!std::regex_search(ptx, m,
                         std::regex(R"(\.entry\s+(\w+)\s*\(([^)]*)\))"))) {
    ADD_FAILURE() << file << ": no .entry";
    return out;
  }
  *entry = m[1];
  std::string list = m[2];
  std::regex param(R"(\.param\s+([^,]*?)\s*(?:,|$))");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), param);
       it != std::sregex_iterator(); ++it) {
    std::string p = (*it)[1];
    if (p.find(".b8") != std::string::npos && p.find("[128]") != std::string::npos)
      out.push_back({Kind::TensorMap, 128});
    else if (p.find(".ptr") != std::string::npos)
      out.push_back({Kind::Pointer, 8});
    else if (p.rfind(".u64", 0) == 0 || p.rfind(".b64", 0) == 0 ||
             p.rfind(".s64", 0) == 0)
      out.push_back({Kind::I64, 8});
    else if (p.rfind(".u32", 0) == 0 || p.rfind(".b32", 0) == 0 ||
             p.rfind(".s32", 0) == 0)
      out.push_back({Kind::I32, 4});
    else if (p.rfind(".f32", 0) == 0)
      out.push_back({Kind::F32, 4});
    else
      ADD_FAILURE() << file << ": unknown .param " << p;
  }
  return out;
}

/// The runtime's packed array against the compiler's list (names too) and
/// against `other` (types only), parameter by parameter.
inline void expectSame(const deltac_rt::ParamInfo *runtime, int count,
                       const std::vector<Param> &other, const std::string &what,
                       llvm::ArrayRef<mlir::delta::KernelParam> names = {}) {
  ASSERT_EQ(size_t(count), other.size()) << what << ": parameter count";
  for (int i = 0; i < count; ++i) {
    if (!names.empty()) { // braces: EXPECT_* expands to an if/else
      EXPECT_STREQ(runtime[i].name, names[i].name) << what << ", parameter " << i;
    }
    EXPECT_EQ(kindName(runtime[i].kind), std::string(kindName(other[i].kind)))
        << what << ", parameter " << i << " (" << runtime[i].name << ")";
    EXPECT_EQ(runtime[i].bytes, other[i].bytes)
        << what << ", parameter " << i << " (" << runtime[i].name << ")";
  }
}

/// Every kernels/*.ptx of `dir` whose name contains `part`.
inline std::vector<std::string> ptxFiles(const std::string &dir,
                                         const std::string &part) {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(dir + "/kernels"))
    if (e.path().extension() == ".ptx" &&
        e.path().filename().string().find(part) != std::string::npos)
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace abicheck

#endif // DELTAC_TESTS_UNIT_ABICHECK_H
