//===- PlanTarget.cpp - the registry of plan targets --------------*- C++ -*-===//

#include "passes/PlanTarget.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <mutex>

using namespace mlir::delta;

PlanTarget::~PlanTarget() = default;

namespace {
struct Registry {
  std::mutex mutex;
  llvm::StringMap<std::unique_ptr<PlanTarget>> targets;
};
Registry &registry() {
  static Registry r;
  return r;
}
} // namespace

void mlir::delta::registerPlanTarget(llvm::StringRef name,
                                     std::unique_ptr<PlanTarget> target) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.targets.try_emplace(name, std::move(target));
}

const PlanTarget *mlir::delta::lookupPlanTarget(llvm::StringRef name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.targets.find(name);
  return it == r.targets.end() ? nullptr : it->second.get();
}

std::string mlir::delta::registeredPlanTargets() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  llvm::SmallVector<llvm::StringRef> names;
  for (auto &entry : r.targets)
    names.push_back(entry.getKey());
  llvm::sort(names);
  std::string out;
  for (llvm::StringRef n : names)
    out += (out.empty() ? "" : ", ") + n.str();
  return out.empty() ? "none" : out;
}
