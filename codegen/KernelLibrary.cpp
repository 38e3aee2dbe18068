//===- KernelLibrary.cpp - from GPU kernels to a generated library -*- C++ -*-===//

#include "codegen/KernelLibrary.h"
#include "codegen/Templates.h"

#include "codegen/gpu/decode/DecodeKernel.h"
#include "codegen/gpu/GpuPipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
std::string typeName(Type type) {
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  return "f32";
}

/// Reads what the wrapper needs off a lowered kernel before the NVVM
/// conversion replaces the gpu.func.
deltac::EmittedKernel describeKernel(ModuleOp module, gpu::GPUFuncOp func) {
  deltac::EmittedKernel k;
  k.name = func.getName().str();
  auto specRef = func->getAttrOfType<FlatSymbolRefAttr>(
      delta::DeltaDialect::kSpecAttrName);
  auto spec = module.lookupSymbol<delta::SpecOp>(specRef.getValue());
  k.spec = spec.getSymName().str();
  k.entry = delta::stringifyEntryKind(
                func->getAttrOfType<delta::EntryKindAttr>(
                        delta::DeltaDialect::kEntryAttrName)
                    .getValue())
                .str();
  auto integer = [&](StringRef name) -> int64_t {
    auto attr = func->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  };
  k.maxT = integer(delta::DeltaDialect::kMaxTAttrName);
  k.chunk = integer(delta::DeltaDialect::kChunkSizeAttrName);
  // Everything else about the launch: the kernel's #delta.kernel.
  auto launch = func->getAttrOfType<delta::KernelAttr>(delta::DeltaDialect::kKernelAttrName);
  k.role = launch.getRole();
  k.code = launch.getCode();
  k.k = launch.getK();
  k.v = launch.getV();
  k.valueTile = launch.getValueTile();
  k.smem = launch.getDynamicSmem();
  k.smemStage = launch.getDynamicSmemStage();
  k.threads = launch.getBlockThreads();
  k.gridX = launch.getGridX();
  k.minBlocksPerSM = launch.getMinBlocksPerSm();
  k.overlapBlocksPerSM = launch.getOverlapBlocksPerSm();
  k.rawQK = launch.getRawQk();
  k.minTokens = launch.getMinTokens();
  k.cpEighthsPerSM = launch.getCpEighthsPerSm();
  k.maxTokens = launch.getMaxTokens();
  k.ioType = typeName(spec.getIoType());
  k.stateType = typeName(spec.getStateType());
  k.gate = spec.getGate();
  k.layout = spec.getLayout();
  k.rule = delta::stringifyRule(spec.getRule()).str();
  k.beta = delta::stringifyBetaForm(spec.getBeta()).str();
  k.qkL2Norm = spec.getQkL2norm();
  k.l2normCall = spec.getL2normCall();
  k.perValue = spec.getPerValue();
  return k;
}
} // namespace

FailureOr<std::vector<deltac::EmittedKernel>>
deltac::lowerToPtx(ModuleOp module) {
  std::vector<EmittedKernel> kernels;
  std::vector<std::string> moduleNames;
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
    for (auto func : gpuModule.getOps<gpu::GPUFuncOp>()) {
      if (!func->hasAttr(delta::DeltaDialect::kKernelAttrName) ||
          !func->hasAttr(delta::DeltaDialect::kSpecAttrName)) {
        func.emitError() << "kernel lacks '" << delta::DeltaDialect::kKernelAttrName
                         << "' or '" << delta::DeltaDialect::kSpecAttrName
                         << "': only the GPU lowerings' kernels go into a library";
        return failure();
      }
      kernels.push_back(describeKernel(module, func));
      moduleNames.push_back(gpuModule.getName().str());
    }
  if (kernels.empty())
    return kernels;

  PassManager pm(module->getName());
  delta::buildGpuToPtxPipeline(pm);
  if (failed(pm.run(module)))
    return failure();

  // A kernel may come from several modules, one per kind of target (the
  // prefill chunks and recur kernels: cp.async on sm_80, bulk copies on
  // sm_90+, wgmma on sm_90a): one kernel with every target's PTX. Its
  // launch values are the other modules' where the wgmma form's
  // (KernelCode::wgmma, one target) differ: that target's go to altTarget.
  std::vector<deltac::EmittedKernel> merged;
  llvm::StringMap<size_t> byName;
  std::vector<bool> fromWgmma;
  for (auto [kernel, moduleName] : llvm::zip(kernels, moduleNames)) {
    auto binaryOp = module.lookupSymbol<gpu::BinaryOp>(moduleName);
    bool wgmma = kernel.code == delta::KernelCode::wgmma;
    auto [it, fresh] = byName.try_emplace(kernel.name, merged.size());
    if (fresh) {
      merged.push_back(kernel);
      fromWgmma.push_back(wgmma);
    }
    deltac::EmittedKernel &into = merged[it->second];
    // Only the wgmma form's module has the overlapped launch.
    into.overlapBlocksPerSM = std::max(into.overlapBlocksPerSM, kernel.overlapBlocksPerSM);
    into.rawQK = into.rawQK || kernel.rawQK; // likewise the raw q/k form
    auto chipOf = [&] {
      return cast<NVVM::NVVMTargetAttr>(
                 cast<gpu::ObjectAttr>(binaryOp.getObjects()[0]).getTarget())
          .getChip()
          .str();
    };
    if (!fresh && (kernel.threads != into.threads || kernel.smem != into.smem ||
                   kernel.smemStage != into.smemStage)) {
      deltac::EmittedKernel *alt = &kernel;
      if (fromWgmma[it->second]) { // the values so far were the wgmma form's
        std::swap(into.threads, kernel.threads);
        std::swap(into.smem, kernel.smem);
        std::swap(into.smemStage, kernel.smemStage);
        into.altTarget = into.ptx.front().first;
        fromWgmma[it->second] = false;
      } else {
        into.altTarget = chipOf();
      }
      into.altThreads = alt->threads;
      into.altSmem = alt->smem;
      into.altSmemStage = alt->smemStage;
    }
    for (Attribute object : binaryOp.getObjects()) {
      auto obj = cast<gpu::ObjectAttr>(object);
      auto target = cast<NVVM::NVVMTargetAttr>(obj.getTarget());
      into.ptx.emplace_back(target.getChip().str(),
                            obj.getObject().getValue().str());
    }
  }
  return merged;
}

namespace {
bool writeText(StringRef path, StringRef text, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  os << text;
  return true;
}

std::string dtypeEnum(StringRef type) {
  if (type == "bf16")
    return "DELTAC_BF16";
  if (type == "f16")
    return "DELTAC_F16";
  return "DELTAC_F32";
}

std::string gateKind(delta::GateForm gate) {
  switch (gate) {
  case delta::GateForm::none: return "deltac_rt::GateKind::None";
  case delta::GateForm::log: return "deltac_rt::GateKind::Log";
  case delta::GateForm::channel_log: return "deltac_rt::GateKind::ChannelLog";
  case delta::GateForm::linear: return "deltac_rt::GateKind::Linear";
  case delta::GateForm::raw: return "deltac_rt::GateKind::Raw";
  case delta::GateForm::channel_raw: return "deltac_rt::GateKind::ChannelRaw";
  case delta::GateForm::call: return "deltac_rt::GateKind::Call";
  case delta::GateForm::channel_call: return "deltac_rt::GateKind::ChannelCall";
  }
  return "deltac_rt::GateKind::None";
}

/// One row of a variant table, written as one assignment per named field
/// (`v.K = 128;`): the generated table says what each value is, and a
/// field added to the runtime's struct cannot shift the others.
/// The deltac_abi::CallOptions bits a kernel's spec leaves to the call, as
/// the generated table spells them.
std::string callOptions(const deltac::EmittedKernel &k) {
  std::string bits;
  if (k.l2normCall)
    bits = "deltac_abi::kCallL2Norm";
  if (k.beta == "call")
    bits += std::string(bits.empty() ? "" : " | ") +
            "deltac_abi::kCallBetaSigmoid | deltac_abi::kCallBetaTwice";
  if (delta::isByCall(k.gate))
    bits += std::string(bits.empty() ? "" : " | ") +
            "deltac_abi::kCallGateRaw | deltac_abi::kCallGate16";
  return bits.empty() ? "0" : bits;
}

struct Row {
  std::string body;
  void set(StringRef field, const std::string &value) {
    body += "      v." + field.str() + " = " + value + ";\n";
  }
  void set(StringRef field, int64_t value) { set(field, std::to_string(value)); }
  void kernel(StringRef field, const std::string &name) { set(field, "&" + name + "_kernel"); }
};

/// A table built on first use: `name()` returns its rows (a function-local
/// static, so no other static initializer can see it unbuilt).
std::string variantTable(StringRef type, const std::string &name,
                         ArrayRef<Row> rows) {
  std::string out = "const deltac_rt::" + type.str() + " *" + name + "() {\n" +
                    "  static const std::array<deltac_rt::" + type.str() + ", " +
                    std::to_string(rows.size()) + "> table = [] {\n" +
                    "    std::array<deltac_rt::" + type.str() + ", " +
                    std::to_string(rows.size()) + "> t{};\n";
  for (auto [i, row] : llvm::enumerate(rows))
    out += "    {\n      deltac_rt::" + type.str() + " &v = t[" + std::to_string(i) +
           "];\n" + row.body + "    }\n";
  return out + "    return t;\n  }();\n  return table.data();\n}\n";
}

/// A prefill row's alternative launch values (PrefillVariant::altTarget
/// ...): recur's, then chunks', for the one target whose code takes them
/// (each kernel's own values where only the other differs); none where
/// neither does. A library for sm_90a alone has the wgmma forms only, whose
/// values differ from no other's: where the overlapped launch or the raw
/// q/k form follows (`wgmmaTail`), which run only on altTarget's code, its
/// one target is named with its own values.
void altFields(Row &row, const deltac::EmittedKernel &chunks,
               const deltac::EmittedKernel &recur, bool wgmmaTail) {
  std::string target = recur.altTarget.empty() ? chunks.altTarget : recur.altTarget;
  if (target.empty() && wgmmaTail && recur.ptx.size() == 1)
    target = recur.ptx.front().first;
  if (target.empty())
    return;
  auto alt = [](const deltac::EmittedKernel &k, int64_t altValue, int64_t own) {
    return k.altTarget.empty() ? own : altValue;
  };
  row.set("altTarget", "\"" + target + "\"");
  row.set("recurAltThreads", alt(recur, recur.altThreads, recur.threads));
  row.set("smemRecurAlt", alt(recur, recur.altSmem, recur.smem));
  row.set("smemRecurAltStage", alt(recur, recur.altSmemStage, recur.smemStage));
  row.set("chunksAltThreads", alt(chunks, chunks.altThreads, chunks.threads));
  row.set("smemChunksAlt", alt(chunks, chunks.altSmem, chunks.smem));
}
} // namespace

std::string deltac::checkLibraryName(StringRef libName) {
  auto refuse = [&](const Twine &why) {
    return ("library name '" + libName + "' " + why +
            "; pass --name=<identifier>")
        .str();
  };
  if (std::optional<std::string> why = delta::checkGeneratedName(libName))
    return refuse(*why);
  static const StringRef pythonKeywords[] = {
      "False", "None", "True", "and", "as", "assert", "async", "await",
      "break", "class", "continue", "def", "del", "elif", "else", "except",
      "finally", "for", "from", "global", "if", "import", "in", "is",
      "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
      "while", "with", "yield"};
  if (llvm::is_contained(pythonKeywords, libName))
    return refuse("is a Python keyword (it names the library's Python "
                  "module)");
  for (const TemplateFile &file : templateFiles()) {
    StringRef name(file.name);
    if (!name.consume_front("runtime/"))
      continue;
    StringRef stem = llvm::sys::path::stem(name);
    if (stem.equals_insensitive(libName))
      return refuse("is the name of a runtime file the library holds (" +
                    name + ")");
  }
  return "";
}

std::string deltac::writeLibrary(StringRef dir, StringRef libName,
                                 StringRef specFile,
                                 const std::vector<EmittedKernel> &kernels,
                                 StringRef runtimeDir) {
  std::string error = checkLibraryName(libName);
  if (!error.empty())
    return error;
  // A relative path in '/' form: it is written into the CMakeLists and the
  // Python module, which must work wherever the folders are moved together.
  if (llvm::sys::path::is_absolute(runtimeDir) || runtimeDir.contains('\\') ||
      runtimeDir.contains('"') || runtimeDir.contains('$') ||
      runtimeDir.contains(' '))
    return "the runtime folder '" + runtimeDir.str() +
           "' must be a relative path from the library's folder, with '/' "
           "and without spaces, quotes or '$'";
  SmallString<256> runtimePath(dir);
  llvm::sys::path::append(runtimePath, runtimeDir);
  if (std::error_code ec = llvm::sys::fs::create_directories(runtimePath))
    return "cannot create '" + runtimePath.str().str() + "': " + ec.message();
  SmallString<256> kernelDir(dir);
  llvm::sys::path::append(kernelDir, "kernels");
  if (std::error_code ec = llvm::sys::fs::create_directories(kernelDir))
    return "cannot create '" + kernelDir.str().str() + "': " + ec.message();
  auto path = [&](StringRef name) {
    SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  };

  // Runtime files: copied verbatim.
  for (const TemplateFile &file : templateFiles()) {
    StringRef name(file.name);
    if (!name.consume_front("runtime/"))
      continue; // library.*.in, python.py.in, pyproject.toml.in: rendered below
    SmallString<256> target(runtimePath);
    llvm::sys::path::append(target, name);
    if (!writeText(target, file.text, error))
      return error;
  }

  // PTX, one file per kernel per target.
  std::vector<std::string> targets;
  for (const EmittedKernel &k : kernels)
    for (const auto &[target, ptx] : k.ptx) {
      if (!llvm::is_contained(targets, target))
        targets.push_back(target);
      if (!writeText(path("kernels/" + k.name + "." + target + ".ptx"),
                     ptx, error))
        return error;
    }

  // Wrapper: one variant table and one entry point per (spec, entry).
  std::string imageDecls, kernelDefs, cxxDecls, cDecls, definitions,
      kernelList;
  std::vector<std::string> specs;
  for (const EmittedKernel &k : kernels)
    if (!llvm::is_contained(specs, k.spec))
      specs.push_back(k.spec);
  for (const EmittedKernel &k : kernels) {
    // Image symbols carry the library's name: two libraries with a spec of
    // the same name link into one program.
    std::string images = libName.str() + "_" + k.name + "_images";
    imageDecls += "extern const deltac_rt::KernelImages " + images + ";\n";
    kernelDefs += "deltac_rt::Kernel " + k.name + "_kernel(" + images + ");\n";
    kernelList += (kernelList.empty() ? "" : " ") + k.name;
  }
  for (const std::string &spec : specs) {
    SmallVector<Row> rows;
    for (const EmittedKernel &k : kernels) {
      if (k.spec != spec || k.role != delta::KernelRole::decode)
        continue;
      Row &row = rows.emplace_back();
      row.set("K", k.k);
      row.set("V", k.v);
      row.set("io", dtypeEnum(k.ioType));
      row.set("state", dtypeEnum(k.stateType));
      row.set("gate", gateKind(k.gate));
      row.set("stateVFirst", k.layout == delta::StateLayout::vk ? "true" : "false");
      row.set("perValue", k.perValue ? "true" : "false");
      row.set("callOptions", callOptions(k));
      row.set("maxT", k.maxT);
      row.set("gridX", k.gridX);
      row.set("threads", k.threads);
      row.set("minBlocksPerSM", k.minBlocksPerSM);
      row.set("minTokens", k.minTokens);
      row.kernel("kernel", k.name);
    }
    int64_t count = rows.size();
    if (count == 0)
      continue;
    std::string cName = libName.str() + "_" + spec + "_decode";
    cxxDecls += "namespace " + spec + " {\n"
                "/// Decode (T = 1..max_t tokens per row) for spec @" + spec +
                "; dispatches on args.K and args.V.\n"
                "deltac::Status decode(const deltac_decode_args &args, "
                "void *stream);\n} // namespace " + spec + "\n";
    cDecls += "/* spec @" + spec + ": returns DELTAC_OK or a code; see " +
              libName.str() + "_last_error(). */\nint " + cName +
              "(const deltac_decode_args *args, void *stream);\n";
    definitions +=
        "namespace {\n" + variantTable("DecodeVariant", spec + "_decode_variants", rows) +
        "} // namespace\n\n" +
        "deltac::Status " + libName.str() + "::" + spec +
        "::decode(const deltac_decode_args &args, void *stream) {\n"
        "  return deltac_rt::runDecode(" + spec + "_decode_variants(), " +
        std::to_string(count) + ", args, stream);\n}\n\n"
        "extern \"C\" int " + cName +
        "(const deltac_decode_args *args, void *stream) {\n"
        "  if (!args)\n"
        "    return deltac_rt::setLastError({DELTAC_INVALID_ARGUMENT, "
        "\"args must not be null\"});\n"
        "  return deltac_rt::setLastError(" + libName.str() + "::" + spec +
        "::decode(*args, stream));\n}\n\n";
  }

  // Prefill: one variant per (K, V), made of its three kernels.
  for (const std::string &spec : specs) {
    SmallVector<Row> rows;
    // One variant per (K, V), in the order the lowering emitted them, made
    // of the kernels of each role (#delta.kernel).
    for (const EmittedKernel &k : kernels) {
      if (k.spec != spec || k.role != delta::KernelRole::prep)
        continue;
      auto part = [&](delta::KernelRole role) -> const EmittedKernel * {
        for (const EmittedKernel &p : kernels)
          if (p.spec == spec && p.k == k.k && p.v == k.v && p.role == role)
            return &p;
        return nullptr;
      };
      const EmittedKernel *chunks = part(delta::KernelRole::chunks);
      const EmittedKernel *queue = part(delta::KernelRole::queue);
      const EmittedKernel *chunksRaw = part(delta::KernelRole::chunks_raw);
      if (!chunks)
        continue;
      // One table entry per recur kernel, in dispatch order.
      for (const EmittedKernel &recur : kernels) {
        if (recur.spec != spec || recur.k != k.k || recur.v != k.v ||
            recur.role != delta::KernelRole::recur)
          continue;
        // The overlapped launch (codegen/gpu/prefill/PrefillOverlap.cpp) and the raw q/k
        // form, each where this recur and chunks' form for it exist.
        bool overlaps = recur.overlapBlocksPerSM > 0 && queue;
        bool rawQK = recur.rawQK && chunksRaw;
        // The shared overlapped launch's recur, beside the variant that
        // overlaps, of its V tile (its launch values are that recur's
        // altTarget ones).
        const EmittedKernel *recurShared = nullptr;
        for (const EmittedKernel &p : kernels)
          if (p.spec == spec && p.k == k.k && p.v == k.v &&
              p.role == delta::KernelRole::recur_shared && p.valueTile == recur.valueTile)
            recurShared = &p;
        bool shared = overlaps && recurShared;
        Row &row = rows.emplace_back();
        row.set("K", k.k);
        row.set("V", k.v);
        row.set("chunk", k.chunk);
        row.set("io", dtypeEnum(k.ioType));
        row.set("state", dtypeEnum(k.stateType));
        row.set("gate", gateKind(k.gate));
        row.set("stateVFirst", k.layout == delta::StateLayout::vk ? "true" : "false");
        row.set("callOptions", callOptions(k));
        row.set("threads", k.threads);
        row.set("chunksThreads", chunks->threads);
        row.set("recurThreads", recur.threads);
        row.set("valueTiles", recur.gridX);
        row.set("minBlocksPerSM", recur.minBlocksPerSM);
        row.set("smemPrep", k.smem);
        row.set("smemChunks", chunks->smem);
        row.set("smemRecur", recur.smem);
        row.set("smemRecurStage", recur.smemStage);
        row.kernel("prep", k.name);
        row.kernel("chunks", chunks->name);
        row.kernel("recur", recur.name);
        altFields(row, *chunks, recur, overlaps || rawQK);
        // The overlapped launch: its variant's bound and chunks' queue form.
        if (overlaps) {
          row.set("overlapBlocksPerSM", recur.overlapBlocksPerSM);
          row.kernel("queue", queue->name);
          row.set("smemQueue", queue->smem);
        }
        // recur reads raw q and k where the host asks (qk_raw), after
        // chunks' form that writes the factors instead of Qg and Kd.
        if (rawQK)
          row.kernel("chunksRaw", chunksRaw->name);
        if (shared) {
          row.kernel("recurShared", recurShared->name);
          row.set("sharedMinTokens", recurShared->minTokens);
          row.set("sharedMaxTokens", recurShared->maxTokens);
          row.set("sharedQuartersPerSM", recurShared->overlapBlocksPerSM);
        }
        // Context parallelism (codegen/gpu/prefill/PrefillSegments.cpp), beside
        // the recur of its V tile: all three kernels or none.
        auto segmentPart = [&](delta::KernelRole role) -> const EmittedKernel * {
          for (const EmittedKernel &p : kernels)
            if (p.spec == spec && p.k == k.k && p.v == k.v && p.role == role &&
                p.valueTile == recur.valueTile)
              return &p;
          return nullptr;
        };
        const EmittedKernel *recurCp = segmentPart(delta::KernelRole::recur_cp),
                            *chain = segmentPart(delta::KernelRole::cp_chain),
                            *correct = segmentPart(delta::KernelRole::cp_correct);
        if (recurCp && chain && correct) {
          row.kernel("recurCp", recurCp->name);
          row.kernel("segmentChain", chain->name);
          row.kernel("segmentCorrection", correct->name);
          row.set("segmentThreads", chain->threads);
          row.set("smemSegmentChain", chain->smem);
          row.set("smemSegmentCorrection", correct->smem);
          row.set("segmentMinTokens", recurCp->minTokens);
          row.set("segmentEighthsPerSM", recurCp->cpEighthsPerSM);
        }
      }
    }
    int64_t count = rows.size();
    if (count == 0)
      continue;
    std::string cName = libName.str() + "_" + spec + "_prefill";
    std::string table = spec + "_prefill_variants";
    std::string ns = libName.str() + "::" + spec;
    cxxDecls += "namespace " + spec + " {\n"
                "/// Chunked prefill for spec @" + spec +
                "; dispatches on args.K and args.V.\n"
                "deltac::Status prefill(const deltac_prefill_args &args, "
                "void *stream);\n"
                "/// Workspace bytes prefill needs for T tokens in N sequences "
                "over HV heads\n/// (-1: no specialization for K, V).\n"
                "int64_t prefill_workspace_bytes(int64_t K, int64_t V, "
                "int64_t T, int64_t N, int64_t HV);\n} // namespace " + spec +
                "\n";
    cDecls += "/* spec @" + spec + ": chunked prefill; returns DELTAC_OK or a "
              "code; see " + libName.str() + "_last_error(). */\nint " + cName +
              "(const deltac_prefill_args *args, void *stream);\n"
              "int64_t " + cName + "_workspace_bytes(int64_t K, int64_t V, "
              "int64_t T, int64_t N, int64_t HV);\n";
    definitions +=
        "namespace {\n" + variantTable("PrefillVariant", table, rows) +
        "} // namespace\n\n" +
        "deltac::Status " + ns +
        "::prefill(const deltac_prefill_args &args, void *stream) {\n"
        "  return deltac_rt::runPrefill(" + table + "(), " +
        std::to_string(count) + ", args, stream);\n}\n\n"
        "int64_t " + ns + "::prefill_workspace_bytes(int64_t K, int64_t V, "
        "int64_t T, int64_t N, int64_t HV) {\n"
        "  deltac::Status status;\n"
        "  const deltac_rt::PrefillVariant *v = deltac_rt::findPrefillVariant(" +
        table + "(), " + std::to_string(count) + ", K, V, status);\n"
        "  return v ? deltac_rt::prefillWorkspaceBytes(*v, T, N, HV) : -1;\n}\n\n"
        "extern \"C\" int " + cName +
        "(const deltac_prefill_args *args, void *stream) {\n"
        "  if (!args)\n"
        "    return deltac_rt::setLastError({DELTAC_INVALID_ARGUMENT, "
        "\"args must not be null\"});\n"
        "  return deltac_rt::setLastError(" + ns +
        "::prefill(*args, stream));\n}\n\n"
        "extern \"C\" int64_t " + cName +
        "_workspace_bytes(int64_t K, int64_t V, int64_t T, int64_t N, "
        "int64_t HV) {\n  return " + ns +
        "::prefill_workspace_bytes(K, V, T, N, HV);\n}\n\n";
  }

  // The Python module's table: one entry per spec with kernels, the entry
  // points it has, its (K, V) pairs, max_t (decode) and chunk (prefill).
  std::string pySpecs;
  for (const std::string &spec : specs) {
    const EmittedKernel *first = nullptr;
    std::string dims;
    bool decode = false, prefill = false;
    int64_t maxT = 0, chunk = 0;
    for (const EmittedKernel &k : kernels) {
      if (k.spec != spec)
        continue;
      decode |= k.entry == "decode";
      prefill |= k.entry == "prefill";
      maxT = std::max(maxT, k.maxT);
      chunk = std::max(chunk, k.chunk);
      std::string pair =
          "(" + std::to_string(k.k) + ", " + std::to_string(k.v) + ")";
      if (dims.find(pair) != std::string::npos)
        continue; // another kernel of a specialization already listed
      if (!first)
        first = &k;
      dims += (dims.empty() ? "" : ", ") + pair;
    }
    if (!first)
      continue;
    std::string entries = std::string(decode ? "\"decode\"" : "") +
                          (decode && prefill ? ", " : "") +
                          (prefill ? "\"prefill\"" : "");
    pySpecs += "    dict(name=\"" + spec + "\", rule=\"" + first->rule +
               "\", gate=\"" +
               delta::stringifyGateForm(first->gate).str() + "\", beta=\"" +
               first->beta + "\", l2norm=" +
               (first->l2normCall ? "\"call\""
                : first->qkL2Norm ? "True"
                                  : "False") +
               ", per_value=" +
               (first->perValue ? "True" : "False") + ", io=\"" +
               first->ioType + "\", state=\"" + first->stateType +
               "\", layout=\"" +
               delta::stringifyStateLayout(first->layout).str() +
               "\", dims=[" + dims + "], entries=[" + entries +
               "], max_t=" + std::to_string(maxT) +
               ", chunk=" + std::to_string(chunk) + "),\n";
  }

  std::string targetList;
  for (const std::string &t : targets)
    targetList += (targetList.empty() ? "" : " ") + t;
  std::string guard = llvm::StringRef(libName).upper() + "_H";
  llvm::StringMap<std::string> values;
  values["LIB"] = libName.str();
  values["VERSION"] = DELTAC_VERSION;
  values["LLVM_VERSION"] = LLVM_VERSION_STRING;
  values["SPEC_FILE"] = specFile.str();
  values["GUARD"] = guard;
  values["CXX_DECLS"] = cxxDecls;
  values["C_DECLS"] = cDecls;
  values["IMAGE_DECLS"] = imageDecls;
  values["KERNELS"] = kernelDefs;
  values["DEFINITIONS"] = definitions;
  values["KERNEL_LIST"] = kernelList;
  values["TARGET_LIST"] = targetList;
  values["SPECS"] = pySpecs;
  values["LIB_UPPER"] = StringRef(libName).upper();
  if (runtimeDir.empty() || runtimeDir == ".") {
    values["RUNTIME_PATH"] = "${_dir}";
    values["RUNTIME_IMPORT"] = "";
  } else {
    values["RUNTIME_PATH"] = "${_dir}/" + runtimeDir.str();
    // Indented: the else branch of python.py.in's `if __package__:`.
    values["RUNTIME_IMPORT"] =
        "    import os as _os\n    import sys as _sys\n\n"
        "    # deltac_torch.py is in the shared runtime folder (deltac "
        "--runtime-dir).\n"
        "    _RUNTIME = _os.path.normpath(_os.path.join(\n"
        "        _os.path.dirname(_os.path.abspath(__file__)), \"" +
        runtimeDir.str() +
        "\"))\n"
        "    if _RUNTIME not in _sys.path:\n"
        "        _sys.path.insert(0, _RUNTIME)\n";
  }
  if (!writeText(path((libName + ".h").str()),
                 substitute(getTemplate("library.h.in"), values), error) ||
      !writeText(path((libName + ".cpp").str()),
                 substitute(getTemplate("library.cpp.in"), values), error) ||
      !writeText(path("CMakeLists.txt"),
                 substitute(getTemplate("library.cmake.in"), values), error) ||
      !writeText(path((libName + ".py").str()),
                 substitute(getTemplate("python.py.in"), values), error) ||
      !writeText(path("pyproject.toml"),
                 substitute(getTemplate("pyproject.toml.in"), values), error))
    return error;
  return "";
}

std::string deltac::writeEmbeddedImages(
    StringRef dir, StringRef libName,
    const std::vector<EmittedKernel> &kernels) {
  if (std::string error = checkLibraryName(libName); !error.empty())
    return error;
  std::string text = "// " + libName.str() +
                     "_images.cpp - generated by deltac " DELTAC_VERSION
                     ": the PTX of every kernel, embedded.\n"
                     "#include \"deltac_runtime.h\"\n\n";
  for (const EmittedKernel &k : kernels) {
    std::string table;
    for (const auto &[target, ptx] : k.ptx) {
      std::string symbol = k.name + "_" + target + "_ptx";
      text += "alignas(64) static const unsigned char " + symbol + "[] = {";
      int column = 0;
      for (unsigned char c : ptx) {
        text += (column++ % 24 == 0 ? "\n  " : "") + std::to_string(c) + ",";
      }
      text += "\n  0};\n";
      table += "    {\"" + target + "\", reinterpret_cast<const char *>(" +
               symbol + ")},\n";
    }
    text += "static const deltac_rt::PtxImage " + k.name + "_ptx[] = {\n" +
            table + "};\n";
    text += "extern const deltac_rt::KernelImages " + libName.str() + "_" +
            k.name + "_images = {\"" + k.name + "\", " + k.name + "_ptx, " +
            std::to_string(k.ptx.size()) + ", nullptr};\n\n";
  }
  SmallString<256> path(dir);
  llvm::sys::path::append(path, (libName + "_images.cpp").str());
  std::string error;
  if (!writeText(path, text, error))
    return error;
  return "";
}
