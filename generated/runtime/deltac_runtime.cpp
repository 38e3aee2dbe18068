// deltac_runtime.cpp - the CUDA driver seen through dlopen, and lazy kernels.
#include "deltac_runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace deltac_rt {
namespace {
// The few driver entry points the generated libraries use, declared here so
// no cuda.h is needed to build them. Signatures follow cuda.h (CUDA 12+).
using CUresult = int;
using CUdevice = int;
using Fn_cuInit = CUresult (*)(unsigned);
using Fn_cuGetErrorName = CUresult (*)(CUresult, const char **);
using Fn_cuGetErrorString = CUresult (*)(CUresult, const char **);
using Fn_cuCtxGetDevice = CUresult (*)(CUdevice *);
using Fn_cuDeviceGetAttribute = CUresult (*)(int *, int, CUdevice);
using Fn_cuLibraryLoadData = CUresult (*)(void **, const void *, void *,
                                          void *, unsigned, void *, void *,
                                          unsigned);
using Fn_cuLibraryGetKernel = CUresult (*)(void **, void *, const char *);
using Fn_cuLaunchKernel = CUresult (*)(void *, unsigned, unsigned, unsigned,
                                       unsigned, unsigned, unsigned, unsigned,
                                       void *, void **, void **);
// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and
// CUlaunchAttribute, CUDA 12+), with the one attribute used.
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void *hStream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
};
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
constexpr int kLaunchAttrProgrammatic = 6;
using Fn_cuLaunchKernelEx = CUresult (*)(const LaunchConfig *, void *,
                                         void **, void **);
using Fn_cuMemcpyDtoHAsync = CUresult (*)(void *, unsigned long long, size_t,
                                          void *);
using Fn_cuStreamSynchronize = CUresult (*)(void *);
using Fn_cuMemsetD32Async = CUresult (*)(unsigned long long, unsigned, size_t,
                                         void *);
using Fn_cuThreadExchangeStreamCaptureMode = CUresult (*)(int *);
using Fn_cuKernelSetAttribute = CUresult (*)(int, int, void *, CUdevice);
constexpr int kCaptureModeRelaxed = 2; // CU_STREAM_CAPTURE_MODE_RELAXED
// cuTensorMapEncodeTiled (CUDA 12+; the enums are C enums, int-sized).
using Fn_cuTensorMapEncodeTiled = CUresult (*)(void *, int, unsigned, void *,
                                               const uint64_t *,
                                               const uint64_t *,
                                               const unsigned *,
                                               const unsigned *, int, int,
                                               int, int);
constexpr int kTensorMapFloat16 = 6;  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
constexpr int kTensorMapBfloat16 = 9; // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
constexpr int kTensorMapSwizzle128B = 3; // CU_TENSOR_MAP_SWIZZLE_128B
constexpr int kTensorMapL2Promote128B = 2; // CU_TENSOR_MAP_L2_PROMOTION_L2_128B

constexpr int kAttrMajor = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrMinor = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kAttrMaxDynamicShared = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kAttrSharedCarveout = 9; // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
constexpr int kAttrSMs = 16;   // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kAttrSharedOptin = 97;
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
constexpr int kAttrSharedPerSM = 81;

struct Driver {
  bool ok = false;
  std::string error;
  Fn_cuInit cuInit = nullptr;
  Fn_cuGetErrorName cuGetErrorName = nullptr;
  Fn_cuGetErrorString cuGetErrorString = nullptr;
  Fn_cuCtxGetDevice cuCtxGetDevice = nullptr;
  Fn_cuDeviceGetAttribute cuDeviceGetAttribute = nullptr;
  Fn_cuLibraryLoadData cuLibraryLoadData = nullptr;
  Fn_cuLibraryGetKernel cuLibraryGetKernel = nullptr;
  Fn_cuLaunchKernel cuLaunchKernel = nullptr;
  Fn_cuLaunchKernelEx cuLaunchKernelEx = nullptr; // optional
  Fn_cuKernelSetAttribute cuKernelSetAttribute = nullptr;
  Fn_cuMemcpyDtoHAsync cuMemcpyDtoHAsync = nullptr;
  Fn_cuStreamSynchronize cuStreamSynchronize = nullptr;
  Fn_cuMemsetD32Async cuMemsetD32Async = nullptr;
  Fn_cuThreadExchangeStreamCaptureMode cuThreadExchangeStreamCaptureMode =
      nullptr;
  Fn_cuTensorMapEncodeTiled cuTensorMapEncodeTiled = nullptr; // optional
};

// The driver library to open (tests: a fake one, useDriverLibrary), and
// whether driver() has opened it (after which it is fixed).
std::atomic<const char *> driverPath{"libcuda.so.1"};
std::atomic<bool> driverOpened{false};

template <typename T> bool bind(void *handle, const char *name, T &fn,
                                std::string &error) {
  fn = reinterpret_cast<T>(dlsym(handle, name));
  if (!fn)
    error = std::string(driverPath.load()) + " lacks " + name +
            " (a CUDA 12 or newer driver is required)";
  return fn != nullptr;
}

const Driver &driver() {
  static Driver d = [] {
    Driver d;
    driverOpened.store(true);
    const char *path = driverPath.load();
    // "" (tests): the program itself, which then defines the entry points.
    void *handle = dlopen(*path ? path : nullptr, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      d.error = std::string("cannot load the CUDA driver (") + path + "): " +
                (why ? why : "not found");
      return d;
    }
    if (!bind(handle, "cuInit", d.cuInit, d.error) ||
        !bind(handle, "cuGetErrorName", d.cuGetErrorName, d.error) ||
        !bind(handle, "cuGetErrorString", d.cuGetErrorString, d.error) ||
        !bind(handle, "cuCtxGetDevice", d.cuCtxGetDevice, d.error) ||
        !bind(handle, "cuDeviceGetAttribute", d.cuDeviceGetAttribute,
              d.error) ||
        !bind(handle, "cuLibraryLoadData", d.cuLibraryLoadData, d.error) ||
        !bind(handle, "cuLibraryGetKernel", d.cuLibraryGetKernel, d.error) ||
        !bind(handle, "cuLaunchKernel", d.cuLaunchKernel, d.error) ||
        !bind(handle, "cuKernelSetAttribute", d.cuKernelSetAttribute,
              d.error) ||
        !bind(handle, "cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync, d.error) ||
        !bind(handle, "cuStreamSynchronize", d.cuStreamSynchronize, d.error) ||
        !bind(handle, "cuMemsetD32Async", d.cuMemsetD32Async, d.error) ||
        !bind(handle, "cuThreadExchangeStreamCaptureMode",
              d.cuThreadExchangeStreamCaptureMode, d.error))
      return d;
    d.cuLaunchKernelEx =
        reinterpret_cast<Fn_cuLaunchKernelEx>(dlsym(handle, "cuLaunchKernelEx"));
    d.cuTensorMapEncodeTiled = reinterpret_cast<Fn_cuTensorMapEncodeTiled>(
        dlsym(handle, "cuTensorMapEncodeTiled"));
    CUresult rc = d.cuInit(0);
    if (rc != 0) {
      d.error = describe(rc, "cuInit");
      return d;
    }
    d.ok = true;
    return d;
  }();
  return d;
}

/// The PTX target that runs natively on compute capability major.minor:
/// sm_90a and sm_100a code runs only on exactly 9.0 and 10.0; sm_80 PTX is
/// compiled by the driver for any newer device.
const PtxImage *bestPtx(const KernelImages &images, int major, int minor) {
  const PtxImage *fallback = nullptr;
  for (int i = 0; i < images.numPtx; ++i) {
    const PtxImage &image = images.ptx[i];
    if (major == 9 && minor == 0 && !std::strcmp(image.target, "sm_90a"))
      return &image;
    if (major == 10 && minor == 0 && !std::strcmp(image.target, "sm_100a"))
      return &image;
    if (major >= 8 && !std::strcmp(image.target, "sm_80"))
      fallback = &image;
  }
  return fallback;
}

/// 90 for "sm_90a", 0 when unreadable.
int capabilityOf(const char *target) {
  return std::strncmp(target, "sm_", 3) ? 0 : std::atoi(target + 3);
}
} // namespace

bool useDriverLibrary(const char *path) {
  if (!path || driverOpened.load())
    return false;
  driverPath.store(path);
  return !driverOpened.load();
}

namespace {
/// The calling thread's launches since its last beginCall().
struct LaunchRecord {
  const char *names[kMaxLaunchesPerCall];
  int count = 0;
};
thread_local LaunchRecord launchRecord;

void recordLaunch(const char *name) {
  LaunchRecord &r = launchRecord;
  if (r.count < kMaxLaunchesPerCall)
    r.names[r.count++] = name;
}
} // namespace

void beginCall() { launchRecord.count = 0; }

std::string lastLaunches() {
  std::string out;
  for (int i = 0; i < launchRecord.count; ++i)
    out += (i ? "," : "") + std::string(launchRecord.names[i]);
  return out;
}

size_t copyLastLaunches(char *buf, size_t n) {
  size_t length = 0;
  auto put = [&](char c) {
    if (buf && length + 1 < n)
      buf[length] = c;
    ++length;
  };
  for (int i = 0; i < launchRecord.count; ++i) {
    if (i)
      put(',');
    for (const char *c = launchRecord.names[i]; *c; ++c)
      put(*c);
  }
  if (buf && n > 0)
    buf[length < n ? length : n - 1] = 0;
  return length;
}

bool programmaticLaunches() {
  static const bool on = [] {
    const char *e = std::getenv("DELTAC_PDL");
    return !(e && !std::strcmp(e, "0"));
  }();
  return on && driver().cuLaunchKernelEx != nullptr;
}

std::string describe(int code, const char *what) {
  const Driver &d = driver();
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName)
    d.cuGetErrorName(code, &name);
  if (d.cuGetErrorString)
    d.cuGetErrorString(code, &text);
  return std::string(what) + " failed: " + (name ? name : "CUDA error") +
         " (" + std::to_string(code) + "): " + (text ? text : "unknown");
}

bool Kernel::load(std::string *error) {
  const Driver &d = driver();
  if (!d.ok) {
    *error = d.error;
    return false;
  }
  // Double-checked: a kernel once published is never unpublished, and
  // everything load() sets is written before the release store below.
  if (kernel.load(std::memory_order_acquire))
    return true;
  std::lock_guard<std::mutex> lock(mutex);
  if (kernel.load(std::memory_order_relaxed))
    return true;
  const void *image = images.fatbin;
  std::string chosen = "fatbin", chip;
  const char *forced = std::getenv("DELTAC_FORCE_TARGET");
  if (forced && *forced) {
    image = nullptr;
    for (int i = 0; i < images.numPtx; ++i)
      if (!std::strcmp(images.ptx[i].target, forced)) {
        image = images.ptx[i].ptx;
        chosen = chip = forced;
        capability = capabilityOf(forced);
      }
    if (!image) {
      *error = std::string("DELTAC_FORCE_TARGET=") + forced + ": kernel " +
               images.name + " has no PTX for that target";
      return false;
    }
  } else {
    CUdevice device = 0;
    int major = 0, minor = 0;
    CUresult rc = d.cuCtxGetDevice(&device);
    if (rc == 0)
      rc = d.cuDeviceGetAttribute(&major, kAttrMajor, device);
    if (rc == 0)
      rc = d.cuDeviceGetAttribute(&minor, kAttrMinor, device);
    if (rc != 0) {
      *error = describe(rc, "querying the current device (is a CUDA "
                            "context current?)");
      return false;
    }
    const PtxImage *ptx = bestPtx(images, major, minor);
    if (!ptx) {
      *error = std::string("kernel ") + images.name +
               " has no image for compute capability " +
               std::to_string(major) + "." + std::to_string(minor);
      return false;
    }
    // The driver picks the same image from the fatbin.
    capability = capabilityOf(ptx->target);
    chip = ptx->target;
    if (!image) {
      image = ptx->ptx;
      chosen = ptx->target;
    }
  }
  void *lib = nullptr, *kern = nullptr;
  // A first call may happen while the caller captures a CUDA graph; loading
  // is not a stream operation, so allow it in this thread for the moment
  // (as cuBLAS and Triton do) and restore the caller's mode.
  int mode = kCaptureModeRelaxed;
  d.cuThreadExchangeStreamCaptureMode(&mode);
  CUresult rc = d.cuLibraryLoadData(&lib, image, nullptr, nullptr, 0,
                                    nullptr, nullptr, 0);
  CUresult rcKernel = rc == 0 ? d.cuLibraryGetKernel(&kern, lib, images.name)
                              : 0;
  d.cuThreadExchangeStreamCaptureMode(&mode);
  if (rc != 0) {
    *error = describe(rc, (std::string("loading kernel ") + images.name +
                           " (" + chosen + ")").c_str());
    return false;
  }
  if (rcKernel != 0) {
    *error = describe(rcKernel,
                      (std::string("finding kernel ") + images.name).c_str());
    return false;
  }
  library = lib;
  target = chosen;
  imageChip = chip;
  kernel.store(kern, std::memory_order_release);
  return true;
}

bool Kernel::launch(unsigned gridX, unsigned gridY, unsigned gridZ,
                    unsigned blockX, void *stream, void **args,
                    std::string *error, unsigned sharedBytes,
                    bool programmatic, bool maxSharedCarveout) {
  if (!load(error))
    return false;
  void *kernel = this->kernel.load(std::memory_order_acquire);
  if (sharedBytes > 48 * 1024 || maxSharedCarveout) {
    // Above 48 KiB of dynamic shared memory a kernel must opt in, per
    // device (cheap; not a stream operation, so capture-safe).
    const Driver &d = driver();
    CUdevice device = 0;
    CUresult rc = d.cuCtxGetDevice(&device);
    if (rc == 0 && sharedBytes > 48 * 1024)
      rc = d.cuKernelSetAttribute(kAttrMaxDynamicShared, (int)sharedBytes,
                                  kernel, device);
    if (rc == 0 && maxSharedCarveout)
      rc = d.cuKernelSetAttribute(kAttrSharedCarveout, 100, kernel, device);
    if (rc != 0) {
      *error = describe(rc, (std::string("raising the shared memory of ") +
                             images.name).c_str());
      return false;
    }
  }
  // A CUkernel may be passed where a CUfunction is expected (CUDA 12+); the
  // driver loads it into the current context on first use.
  CUresult rc;
  if (programmatic && programmaticLaunches()) {
    LaunchAttribute attr{};
    attr.id = kLaunchAttrProgrammatic;
    attr.value.programmaticStreamSerializationAllowed = 1;
    LaunchConfig config{gridX, gridY, gridZ, blockX, 1, 1, sharedBytes,
                        stream, &attr, 1};
    rc = driver().cuLaunchKernelEx(&config, kernel, args, nullptr);
  } else {
    rc = driver().cuLaunchKernel(kernel, gridX, gridY, gridZ, blockX, 1, 1,
                                 sharedBytes, stream, args, nullptr);
  }
  if (rc != 0) {
    *error = describe(rc, (std::string("launching ") + images.name).c_str());
    return false;
  }
  recordLaunch(images.name);
  return true;
}

namespace {
/// A device attribute of the current context's device, cached per device
/// (devices are few; a fixed table keeps the call free of allocation).
int cachedAttribute(std::atomic<int> (&cache)[64], int attribute,
                    const char *what, std::string *error) {
  const Driver &d = driver();
  if (!d.ok) {
    *error = d.error;
    return 0;
  }
  CUdevice device = 0;
  CUresult rc = d.cuCtxGetDevice(&device);
  if (rc != 0) {
    *error = describe(rc, "querying the current device (is a CUDA context "
                          "current?)");
    return 0;
  }
  if (device >= 0 && device < 64 && cache[device].load() > 0)
    return cache[device].load();
  int value = 0;
  rc = d.cuDeviceGetAttribute(&value, attribute, device);
  if (rc != 0) {
    *error = describe(rc, what);
    return 0;
  }
  if (device >= 0 && device < 64)
    cache[device].store(value);
  return value;
}
} // namespace

int multiprocessorCount(std::string *error) {
  static std::atomic<int> cache[64];
  return cachedAttribute(cache, kAttrSMs, "querying the SM count", error);
}

int maxSharedPerBlock(std::string *error) {
  static std::atomic<int> cache[64];
  return cachedAttribute(cache, kAttrSharedOptin,
                         "querying the shared memory per block", error);
}

int maxSharedPerSM(std::string *error) {
  static std::atomic<int> cache[64];
  return cachedAttribute(cache, kAttrSharedPerSM,
                         "querying the shared memory per SM", error);
}

bool tensorMapUsable(const void *base, int64_t tokens, int64_t heads,
                     int64_t width, int64_t tokenStride) {
  // cuTensorMapEncodeTiled's rules for 16-bit elements: a 16-byte aligned
  // base, dimensions in [1, 2^32], strides multiples of 16 bytes below 2^40;
  // and the kernels' box coordinates are signed 32-bit: tokens below 2^31.
  const int64_t dimLimit = int64_t(1) << 32, strideLimit = int64_t(1) << 40;
  return base && reinterpret_cast<uintptr_t>(base) % 16 == 0 && tokens >= 1 &&
         tokens < (int64_t(1) << 31) && heads >= 1 && heads <= dimLimit && width >= 1 &&
         width * 2 % 16 == 0 && tokenStride * 2 % 16 == 0 &&
         tokenStride >= heads * width && tokenStride * 2 < strideLimit;
}

bool encodeRowsMap(TensorMap *map, const void *base, bool bf16, int64_t tokens,
                   int64_t heads, int64_t width, int64_t tokenStride,
                   unsigned boxWidth, unsigned boxRows) {
  std::memset(map, 0, sizeof *map);
  const Driver &d = driver();
  if (!d.ok || !d.cuTensorMapEncodeTiled ||
      !tensorMapUsable(base, tokens, heads, width, tokenStride))
    return false;
  const uint64_t dims[3] = {uint64_t(width), uint64_t(heads), uint64_t(tokens)};
  const uint64_t strides[2] = {uint64_t(width) * 2, uint64_t(tokenStride) * 2};
  const unsigned box[3] = {boxWidth, 1, boxRows}, step[3] = {1, 1, 1};
  CUresult rc = d.cuTensorMapEncodeTiled(
      map, bf16 ? kTensorMapBfloat16 : kTensorMapFloat16, 3,
      const_cast<void *>(base), dims, strides, box, step, /*interleave=*/0,
      kTensorMapSwizzle128B, kTensorMapL2Promote128B, /*oobFill=*/0);
  if (rc != 0)
    std::memset(map, 0, sizeof *map);
  return rc == 0;
}

bool zeroAsync(void *ptr, size_t words, void *stream, std::string *error) {
  const Driver &d = driver();
  if (!d.ok) {
    *error = d.error;
    return false;
  }
  CUresult rc = d.cuMemsetD32Async(
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)), 0u,
      words, stream);
  if (rc != 0) {
    *error = describe(rc, "cuMemsetD32Async");
    return false;
  }
  return true;
}

bool copyToHost(void *dst, const void *src, size_t bytes, void *stream,
                std::string *error) {
  const Driver &d = driver();
  if (!d.ok) {
    *error = d.error;
    return false;
  }
  CUresult rc = d.cuMemcpyDtoHAsync(
      dst, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(src)),
      bytes, stream);
  if (rc == 0)
    rc = d.cuStreamSynchronize(stream);
  if (rc != 0) {
    *error = describe(rc, "copying indices for the debug checks");
    return false;
  }
  return true;
}

} // namespace deltac_rt
