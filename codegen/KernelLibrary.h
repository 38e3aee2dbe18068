//===- KernelLibrary.h - from GPU kernels to a generated library -*- C++ -*-===//
//
// After the GPU lowerings, every kernel is a gpu.func in a gpu.module with
// one #nvvm.target per SM. lowerToPtx runs the NVPTX pipeline and collects
// each kernel's PTX per target with the metadata the host wrapper needs;
// writeLibrary renders templates/ into a library folder that builds without
// LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_KERNELLIBRARY_H
#define DELTAC_CODEGEN_KERNELLIBRARY_H

#include "dialect/DeltaOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace deltac {

/// One generated kernel: what the wrapper must know to check and launch it.
struct EmittedKernel {
  std::string name;  ///< the kernel symbol, e.g. gdn_k128_v128_decode
  std::string spec;  ///< the delta.spec it implements
  std::string entry; ///< "decode" or "prefill"
  /// Its part of the entry point and the kind of target code of the module
  /// it came from (#delta.kernel).
  mlir::delta::KernelRole role = mlir::delta::KernelRole::decode;
  mlir::delta::KernelCode code = mlir::delta::KernelCode::all;
  int64_t k = 0, v = 0, maxT = 0, threads = 0, gridX = 0;
  int64_t valueTile = 0; ///< V columns one block covers
  int64_t chunk = 0; ///< prefill: chunk size
  int64_t smem = 0;  ///< dynamic shared memory bytes at launch
  int64_t smemStage = 0; ///< bytes of one more pipeline stage (0: none)
  int64_t minBlocksPerSM = 0; ///< dispatch: used from this many blocks/SM
  /// decode dispatch: from this many tokens a row; recur_cp: from this many
  /// tokens a busy sequence.
  int64_t minTokens = 0;
  /// recur_cp: up to this many eighths of a block per SM (0: never chosen).
  int64_t cpEighthsPerSM = 0;
  /// recur_shared: up to this many tokens a sequence (with minTokens).
  int64_t maxTokens = 0;
  /// prefill recur: the overlapped launch up to this many quarter blocks
  /// per SM, for altTarget's code (0: none).
  int64_t overlapBlocksPerSM = 0;
  /// prefill recur: altTarget's code can read raw q and k (qk_raw).
  bool rawQK = false;
  std::string ioType, stateType; ///< "bf16", "f16", "f32"
  std::string rule, beta;         ///< as the spec spells them
  bool qkL2Norm = false;
  bool l2normCall = false; ///< `l2norm = call`: the call chooses
  bool perValue = false; ///< the spec's per_value (FLA's gv, per-value beta)
  mlir::delta::GateForm gate = mlir::delta::GateForm::none;
  mlir::delta::StateLayout layout = mlir::delta::StateLayout::vk;
  std::vector<std::pair<std::string, std::string>> ptx; ///< target, text
  /// The one target whose code takes another block size and shared memory
  /// (the prefill chunks' and recur's wgmma forms, sm_90a), and those
  /// (empty: none).
  std::string altTarget;
  int64_t altThreads = 0, altSmem = 0, altSmemStage = 0;
};

/// Lowers every gpu.module of `module` to PTX (convert-gpu-to-nvvm, then
/// gpu-module-to-binary{format=isa}) and returns the kernels, in module
/// order. Reports failures through the context's diagnostic handler.
mlir::FailureOr<std::vector<EmittedKernel>>
lowerToPtx(mlir::ModuleOp module);

/// Why `libName` cannot name a generated library ("" when it can): it must
/// pass delta::checkGeneratedName (a C identifier, no keyword), be no
/// Python keyword (it is the Python module's name) and differ, ignoring
/// case, from the runtime files' stems that the library folder also holds
/// (deltac_runtime, deltac_api, ...: <lib>.h would overwrite one, and its
/// include guard <LIB>_H would hide one). The message names the library.
std::string checkLibraryName(llvm::StringRef libName);

/// Writes the library `libName` into `dir`: kernels/<kernel>.<target>.ptx,
/// <lib>.h, <lib>.cpp, the runtime, CMakeLists.txt. The text depends only on
/// its inputs (no timestamps, no absolute paths), so checked-in output can
/// be compared with a fresh run. Returns an error message or "" (a name
/// checkLibraryName refuses: its message, before anything is written).
///
/// The runtime files (templates/runtime/) go to `runtimeDir`, a relative
/// path from `dir` ("" keeps them in `dir`: the library is self-contained);
/// the library's CMakeLists and Python module find them there. Libraries
/// that share one copy (generated/ keeps a single runtime/) point at it.
std::string writeLibrary(llvm::StringRef dir, llvm::StringRef libName,
                         llvm::StringRef specFile,
                         const std::vector<EmittedKernel> &kernels,
                         llvm::StringRef runtimeDir = "");

/// Writes <lib>_images.cpp into `dir`: every kernel's PTX embedded as a
/// null-terminated byte array with its deltac_rt::KernelImages, so the
/// library's sources are a fixed list that builds without running anything
/// (the form deltac_generate_kernels() compiles; the driver compiles the
/// PTX at first use). Returns an error message or "".
std::string writeEmbeddedImages(llvm::StringRef dir, llvm::StringRef libName,
                                const std::vector<EmittedKernel> &kernels);

} // namespace deltac

#endif // DELTAC_CODEGEN_KERNELLIBRARY_H
