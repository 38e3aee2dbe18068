//===- Templates.h - the text templates deltac emits from -------*- C++ -*-===//
//
// The files of templates/ are compiled into deltac (cmake/EmbedTemplates)
// so an installed deltac needs no source tree.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_TEMPLATES_H
#define DELTAC_CODEGEN_TEMPLATES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace deltac {

struct TemplateFile {
  const char *name; ///< path under templates/, e.g. "runtime/deltac_api.h"
  const char *text;
};

/// Every embedded template.
llvm::ArrayRef<TemplateFile> templateFiles();

/// The template `name`; aborts on an unknown name (a deltac bug).
llvm::StringRef getTemplate(llvm::StringRef name);

/// Replaces every `@KEY@` of `text` by its value; a key without a value is a
/// deltac bug and aborts, so no placeholder reaches a generated file.
std::string substitute(llvm::StringRef text,
                       const llvm::StringMap<std::string> &values);

} // namespace deltac

#endif // DELTAC_CODEGEN_TEMPLATES_H
