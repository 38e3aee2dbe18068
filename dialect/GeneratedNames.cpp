//===- GeneratedNames.cpp - names that become C and C++ identifiers -*- C++ -*-===//
//
// A spec's name becomes a C++ namespace (`<lib>::<spec>::decode`), part of
// C function names (`<lib>_<spec>_decode`) and of kernel symbols and PTX
// file names. A name that is not an identifier reaches the NVPTX printer
// (which aborts on `a b-c`); a keyword or a name the generated code already
// uses compiles into a library g++ rejects. Both are refused up front, by
// the spec verifier and by the driver for --name.
//
//===----------------------------------------------------------------------===//

#include "dialect/DeltaDialect.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

/// C (C23) and C++ (C++23) keywords and alternative tokens, lower case (the
/// reserved `_Upper` ones are refused as reserved names).
static const llvm::StringSet<> &keywords() {
  static const llvm::StringSet<> set = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand",
      "bitor", "bool", "break", "case", "catch", "char", "char8_t",
      "char16_t", "char32_t", "class", "co_await", "co_return", "co_yield",
      "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "decltype", "default", "delete", "do",
      "double", "dynamic_cast", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "inline",
      "int", "long", "mutable", "namespace", "new", "noexcept", "not",
      "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
      "public", "register", "reinterpret_cast", "requires", "restrict",
      "return", "short", "signed", "sizeof", "static", "static_assert",
      "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "typeof",
      "typeof_unqual", "union", "unsigned", "using", "virtual", "void",
      "volatile", "wchar_t", "while", "xor", "xor_eq",
      // Object-like macros of the C headers the library includes: the name
      // would be replaced before the compiler sees it.
      "errno", "NULL", "EOF",
      // Namespaces the generated code names from inside `<lib>::<spec>`:
      // a nested namespace of the same name would hide them.
      "std", "deltac", "deltac_rt"};
  return set;
}

std::optional<std::string> mlir::delta::checkGeneratedName(StringRef name) {
  if (name.empty())
    return std::string("is empty");
  if (llvm::isDigit(name.front()))
    return std::string("starts with a digit");
  for (char c : name) {
    if (llvm::isAlnum(c) || c == '_')
      continue;
    std::string shown = llvm::isPrint(c)
                            ? std::string(1, c)
                            : "\\x" + llvm::utohexstr(static_cast<uint8_t>(c),
                                                      /*LowerCase=*/false, 2);
    return "holds '" + shown +
           "'; it must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)";
  }
  if (name.contains("__") ||
      (name.size() > 1 && name[0] == '_' && llvm::isUpper(name[1])))
    return std::string("is reserved in C and C++ (it holds '__' or starts "
                       "with '_' and a capital)");
  if (keywords().contains(name))
    return std::string("is a C or C++ keyword or a name the generated code "
                       "uses (std, deltac, deltac_rt, errno, NULL, EOF)");
  if (name.size() > kMaxGeneratedNameLength)
    return "is longer than " + std::to_string(kMaxGeneratedNameLength) +
           " characters";
  return std::nullopt;
}
