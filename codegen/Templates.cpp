//===- Templates.cpp - the text templates deltac emits from -----*- C++ -*-===//

#include "codegen/Templates.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

namespace {
#include "codegen/Templates.inc"
} // namespace

llvm::ArrayRef<deltac::TemplateFile> deltac::templateFiles() {
  return kTemplateFiles;
}

llvm::StringRef deltac::getTemplate(llvm::StringRef name) {
  for (const TemplateFile &file : kTemplateFiles)
    if (name == file.name)
      return file.text;
  llvm::report_fatal_error(llvm::Twine("deltac: no template ") + name);
}

std::string deltac::substitute(llvm::StringRef text,
                               const llvm::StringMap<std::string> &values) {
  std::string out;
  while (!text.empty()) {
    size_t open = text.find('@');
    if (open == llvm::StringRef::npos) {
      out += text.str();
      break;
    }
    size_t close = text.find('@', open + 1);
    llvm::StringRef key =
        close == llvm::StringRef::npos ? "" : text.slice(open + 1, close);
    // Only @UPPER_CASE@ is a placeholder; other @ signs pass through.
    bool isKey = !key.empty() && llvm::all_of(key, [](char c) {
      return (c >= 'A' && c <= 'Z') || c == '_';
    });
    if (!isKey) {
      out += text.take_front(open + 1).str();
      text = text.drop_front(open + 1);
      continue;
    }
    auto it = values.find(key);
    if (it == values.end())
      llvm::report_fatal_error(llvm::Twine("deltac: template placeholder @") +
                               key + "@ has no value");
    out += text.take_front(open).str();
    out += it->second;
    text = text.drop_front(close + 1);
  }
  return out;
}
