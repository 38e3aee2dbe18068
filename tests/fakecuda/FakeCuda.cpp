//===- FakeCuda.cpp - a fake CUDA driver for host-only tests --------------===//
//
// The driver entry points deltac's runtime resolves with dlsym (signatures
// as templates/runtime/deltac_runtime.cpp declares them, CUDA 12), and the
// control functions of FakeCuda.h. Thread-safe: the ThreadSanitizer test
// calls it from eight threads at once. See FakeCuda.h.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {
struct Library {
  std::string image; // the first bytes of the image, for debugging
};
struct KernelHandle {
  std::string name;
};

struct State {
  std::mutex mutex;
  std::deque<Library> libraries;    // never freed: the runtime keeps handles
  std::deque<KernelHandle> kernels;
  std::vector<std::pair<uintptr_t, size_t>> memory;
  std::vector<std::string> launchNames;
  fakecuda_launch_hook hook = nullptr;
  void *hookUser = nullptr;
  int major = 9, minor = 0, sms = 132, sharedOptin = 232448,
      sharedPerSM = 233472;
  std::atomic<int> launches{0}, memsets{0}, copies{0}, loads{0};
  std::atomic<int> loadDelayUs{0}, loadedTwice{0};
};

State &state() {
  static State *s = new State; // outlives every static destructor
  return *s;
}

thread_local int captureMode = 0;

int record(void *f, const unsigned grid[3], unsigned block, unsigned shared,
           void **params) {
  State &s = state();
  if (!f)
    return 400; // CUDA_ERROR_INVALID_HANDLE
  const char *name = static_cast<KernelHandle *>(f)->name.c_str();
  fakecuda_launch_hook hook;
  void *user;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.launchNames.size() < 64)
      s.launchNames.push_back(name);
    hook = s.hook;
    user = s.hookUser;
  }
  s.launches.fetch_add(1);
  if (hook)
    hook(name, grid, block, shared, params, user);
  return 0;
}
} // namespace

// --- driver entry points ---------------------------------------------------

FAKE_API int cuInit(unsigned) { return 0; }

FAKE_API int cuGetErrorName(int code, const char **name) {
  *name = code == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_FAKE";
  return 0;
}

FAKE_API int cuGetErrorString(int code, const char **text) {
  *text = code == 1 ? "invalid argument (fake driver)" : "fake driver error";
  return 0;
}

FAKE_API int cuCtxGetDevice(int *device) {
  *device = 0;
  return 0;
}

FAKE_API int cuDeviceGetAttribute(int *value, int attribute, int) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  switch (attribute) {
  case 75: *value = s.major; return 0;
  case 76: *value = s.minor; return 0;
  case 16: *value = s.sms; return 0;
  case 97: *value = s.sharedOptin; return 0;
  case 81: *value = s.sharedPerSM; return 0;
  }
  *value = 0;
  return 1;
}

FAKE_API int cuLibraryLoadData(void **library, const void *image, void *,
                               void *, unsigned, void *, void *, unsigned) {
  State &s = state();
  s.loads.fetch_add(1);
  if (int us = s.loadDelayUs.load())
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  if (!image)
    return 1;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.libraries.push_back(
      {std::string(static_cast<const char *>(image),
                   strnlen(static_cast<const char *>(image), 32))});
  *library = &s.libraries.back();
  return 0;
}

FAKE_API int cuLibraryGetKernel(void **kernel, void *library,
                                const char *name) {
  if (!library || !name)
    return 1;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const KernelHandle &k : s.kernels)
    if (k.name == name)
      s.loadedTwice.fetch_add(1);
  s.kernels.push_back({name});
  *kernel = &s.kernels.back();
  return 0;
}

FAKE_API int cuKernelSetAttribute(int, int, void *kernel, int) {
  return kernel ? 0 : 400;
}

FAKE_API int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned, unsigned, unsigned shared,
                            void *, void **params, void **) {
  const unsigned grid[3] = {gx, gy, gz};
  return record(f, grid, bx, shared, params);
}

namespace {
// deltac_runtime.cpp's LaunchConfig (cuda.h's CUlaunchConfig).
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void *hStream;
  void *attrs;
  unsigned numAttrs;
};
} // namespace

FAKE_API int cuLaunchKernelEx(const void *config, void *f, void **params,
                              void **) {
  const auto *c = static_cast<const LaunchConfig *>(config);
  const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  return record(f, grid, c->blockDimX, c->sharedMemBytes, params);
}

FAKE_API int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src,
                                  size_t bytes, void *) {
  State &s = state();
  bool inside = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto [base, size] : s.memory)
      if (src >= base && bytes <= size && src - base <= size - bytes)
        inside = true;
  }
  if (!inside)
    return 1; // CUDA_ERROR_INVALID_VALUE: not device memory
  std::memcpy(dst, reinterpret_cast<const void *>(uintptr_t(src)), bytes);
  s.copies.fetch_add(1);
  return 0;
}

FAKE_API int cuStreamSynchronize(void *) { return 0; }

FAKE_API int cuMemsetD32Async(unsigned long long, unsigned, size_t, void *) {
  state().memsets.fetch_add(1);
  return 0;
}

FAKE_API int cuThreadExchangeStreamCaptureMode(int *mode) {
  std::swap(*mode, captureMode);
  return 0;
}

FAKE_API int cuTensorMapEncodeTiled(void *map, int, unsigned, void *,
                                    const uint64_t *, const uint64_t *,
                                    const unsigned *, const unsigned *, int,
                                    int, int, int) {
  std::memset(map, 0xAB, 128);
  return 0;
}

// --- control ---------------------------------------------------------------

FAKE_API void fakecuda_reset(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.memory.clear();
  s.launchNames.clear();
  s.launches = 0;
  s.memsets = 0;
  s.copies = 0;
}

FAKE_API void fakecuda_set_device(int major, int minor, int sms,
                                  int sharedOptin, int sharedPerSM) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.major = major;
  s.minor = minor;
  s.sms = sms;
  s.sharedOptin = sharedOptin;
  s.sharedPerSM = sharedPerSM;
}

FAKE_API void fakecuda_register_memory(const void *base, size_t bytes) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.memory.push_back({reinterpret_cast<uintptr_t>(base), bytes});
}

FAKE_API void fakecuda_set_launch_hook(fakecuda_launch_hook hook,
                                       void *user) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.hook = hook;
  s.hookUser = user;
}

FAKE_API int fakecuda_launches(void) { return state().launches.load(); }
FAKE_API int fakecuda_memsets(void) { return state().memsets.load(); }
FAKE_API int fakecuda_copies(void) { return state().copies.load(); }
FAKE_API int fakecuda_library_loads(void) { return state().loads.load(); }

FAKE_API const char *fakecuda_launch_name(int i) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return i >= 0 && size_t(i) < s.launchNames.size()
             ? s.launchNames[i].c_str()
             : "";
}

FAKE_API int fakecuda_kernels_loaded_twice(void) {
  return state().loadedTwice.load();
}

FAKE_API void fakecuda_set_load_delay_us(int us) {
  state().loadDelayUs.store(us);
}
