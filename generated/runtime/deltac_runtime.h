// deltac_runtime.h - the CUDA driver seen through dlopen, and lazy kernels.
//
// Copied verbatim into every generated library. Nothing links against CUDA:
// libcuda.so.1 is opened at first use (as Triton's launcher does), so a
// program using a generated library starts, validates arguments and reports
// a clear status on a machine without a GPU.
#ifndef DELTAC_RUNTIME_H
#define DELTAC_RUNTIME_H

#include "deltac_abi.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace deltac_rt {

/// The PTX of one kernel for one target (e.g. "sm_90a").
struct PtxImage {
  const char *target;
  const char *ptx;
};

/// Everything a kernel can be loaded from: per-target PTX and, when ptxas
/// and fatbinary were found at build time, a fatbin with SASS for each
/// target plus PTX (null otherwise).
struct KernelImages {
  const char *name;
  const PtxImage *ptx;
  int numPtx;
  const unsigned char *fatbin;
};

/// Tests only: open the driver library `path` (a fake driver; "": the
/// program itself, linked with the fake's entry points exported) instead of
/// libcuda.so.1. Takes effect only before the first call that needs the
/// driver; returns false (and changes nothing) after it.
bool useDriverLibrary(const char *path);

/// A kernel loaded on first launch, once, thread-safely (double-checked:
/// the loaded handle is published with a release store after everything
/// else the load sets, and read with an acquire load). Loading uses the
/// context-independent library API (cuLibraryLoadData), so the same handle
/// serves every context. DELTAC_FORCE_TARGET=sm_80 (read at load) loads that
/// target's PTX instead of the best image, e.g. to run sm_80 code on Hopper.
class Kernel {
public:
  explicit Kernel(const KernelImages &images) : images(images) {}
  /// Loads the kernel if needed. Returns false with a message on failure; a
  /// later call tries again.
  bool load(std::string *error);
  /// The kernel's name (its images').
  const char *name() const { return images.name; }
  /// Launches on `stream` (a CUstream; null = the legacy default stream).
  /// `args` points at each kernel parameter in order; `sharedBytes` of
  /// dynamic shared memory (above 48 KiB the kernel's limit is raised).
  /// `programmatic`: a programmatic dependent launch (sm_90+), which may
  /// start before the previous kernel in the stream has finished; only for
  /// code that waits for it itself (griddepcontrol.wait).
  /// `maxSharedCarveout`: ask for the SMs' largest shared-memory carveout
  /// (a hint), so that blocks of two kernels that share an SM need no
  /// other configuration than the one it runs.
  bool launch(unsigned gridX, unsigned gridY, unsigned gridZ,
              unsigned blockX, void *stream, void **args,
              std::string *error, unsigned sharedBytes = 0,
              bool programmatic = false, bool maxSharedCarveout = false);
  /// The target whose image was loaded ("fatbin" when the driver chose).
  const std::string &loadedTarget() const { return target; }
  /// The compute capability the loaded code was generated for (80, 90,
  /// 100): its PTX target's, or, from the fatbin, that of the image the
  /// device runs (the one bestPtx picks). 0 before loading.
  int loadedCapability() const { return capability; }
  /// The PTX target of the code the device runs ("sm_90a"), also when it
  /// came from the fatbin. Empty before loading.
  const std::string &imageTarget() const { return imageChip; }

private:
  const KernelImages &images;
  std::mutex mutex;
  void *library = nullptr;             // CUlibrary
  std::atomic<void *> kernel{nullptr}; // CUkernel, set once loaded
  std::string target, imageChip;
  int capability = 0;
};

/// Whether programmatic dependent launches are available (the driver has
/// cuLaunchKernelEx) and not switched off (DELTAC_PDL=0, to time without).
bool programmaticLaunches();

/// The number of SMs of the current context's device (cached per device);
/// 0 with a message on failure.
int multiprocessorCount(std::string *error);

/// The most dynamic shared memory one block of the current context's device
/// may opt in to (cached per device); 0 with a message on failure.
int maxSharedPerBlock(std::string *error);

/// The shared memory of one SM of the current context's device (cached per
/// device); 0 with a message on failure.
int maxSharedPerSM(std::string *error);

/// A TMA tensor map (cuda.h's CUtensorMap), passed to a kernel by value.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

/// Whether a [tokens][heads][width] tensor of 16-bit elements at `base`
/// (heads `width` elements apart, tokens `tokenStride` apart) meets
/// cuTensorMapEncodeTiled's rules, with fewer than 2^31 tokens (the
/// kernels' coordinates are 32-bit); host-side values only.
bool tensorMapUsable(const void *base, int64_t tokens, int64_t heads,
                     int64_t width, int64_t tokenStride);

/// Encodes `map` for such a tensor (bf16 if `bf16`, else f16), read in
/// boxes of `boxWidth` columns, one head and `boxRows` tokens, with the
/// 128-byte swizzle (wgmma's operand layout; boxWidth * 2 <= 128) and zeros
/// past the last token. False, with the map zeroed, where the tensor is not
/// usable or the driver has no cuTensorMapEncodeTiled (before CUDA 12) or
/// refuses it: the caller then copies the rows another way.
bool encodeRowsMap(TensorMap *map, const void *base, bool bf16, int64_t tokens,
                   int64_t heads, int64_t width, int64_t tokenStride,
                   unsigned boxWidth, unsigned boxRows);

/// Zeroes `words` 32-bit words of device memory at `ptr`, asynchronously on
/// `stream` (a memset node under graph capture).
bool zeroAsync(void *ptr, size_t words, void *stream, std::string *error);

/// Copies `bytes` from device memory to the host and waits (debug checks
/// only: it synchronises).
bool copyToHost(void *dst, const void *src, size_t bytes, void *stream,
                std::string *error);

/// Fills `message` with the driver's name and text for `code`.
std::string describe(int code, const char *what);

/// The kernels the calling thread's last call launched, in launch order.
/// Every entry point starts a new record (beginCall) and each successful
/// launch appends the kernel's name; a failed call leaves it empty (the C
/// entry points' setLastError clears it, also where the runtime was never
/// reached, as for null args). No
/// allocation: the names are the images' static strings.
constexpr int kMaxLaunchesPerCall = 8;
void beginCall();
/// The record, names joined by ','. (C API: copyLastLaunches.)
std::string lastLaunches();
/// Writes the record, names joined by ',', into `buf` (at most n - 1
/// characters and a NUL; nothing when n is 0) and returns its full length,
/// as snprintf does.
size_t copyLastLaunches(char *buf, size_t n);

/// What one kernel parameter carries (deltac_abi.h, shared with the
/// compiler).
using ParamKind = deltac_abi::ParamKind;
/// A parameter as the runtime packs it: its name, kind and size in bytes.
struct ParamInfo {
  const char *name;
  ParamKind kind;
  unsigned bytes;
};

/// The kernel parameter array handed to the driver, built one typed value
/// at a time so that each parameter's kind and size are recorded beside
/// its address (the ABI unit tests compare them with the compiler's list).
class ParamPack {
public:
  static constexpr int kMax = 48;
  void add(const char *name, const void *const *p) { push(name, ParamKind::Pointer, sizeof *p, p); }
  void add(const char *name, void *const *p) { push(name, ParamKind::Pointer, sizeof *p, p); }
  void add(const char *name, const int32_t *p) { push(name, ParamKind::I32, sizeof *p, p); }
  void add(const char *name, const int64_t *p) { push(name, ParamKind::I64, sizeof *p, p); }
  void add(const char *name, const float *p) { push(name, ParamKind::F32, sizeof *p, p); }
  void add(const char *name, const TensorMap *p) { push(name, ParamKind::TensorMap, sizeof *p, p); }
  /// Pointers to each value, in order: cuLaunchKernel's kernelParams.
  void **args() { return values; }
  int size() const { return count; }
  const ParamInfo *info() const { return infos; }

private:
  void push(const char *name, ParamKind kind, unsigned bytes, const void *p) {
    if (count < kMax) {
      values[count] = const_cast<void *>(p);
      infos[count] = {name, kind, bytes};
    }
    ++count; // a count above kMax fails the ABI tests
  }
  void *values[kMax] = {};
  ParamInfo infos[kMax] = {};
  int count = 0;
};

} // namespace deltac_rt

#endif // DELTAC_RUNTIME_H
