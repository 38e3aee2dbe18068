// GpuTestUtil.h - small helpers of the GPU tests: dtype conversion, device
// buffers, a result table.
#ifndef DELTAC_TESTS_GPU_GPUTESTUTIL_H
#define DELTAC_TESTS_GPU_GPUTESTUTIL_H

#include "deltac_api.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gputest {

/// Rounds to the dtype and back (the exact value the GPU will read).
double roundTo(deltac_dtype dtype, double x);
/// Encodes values as the dtype's bytes.
std::vector<uint8_t> encode(deltac_dtype dtype, const std::vector<double> &x);
std::vector<double> decode(deltac_dtype dtype, const std::vector<uint8_t> &b);
size_t bytesOf(deltac_dtype dtype);

/// A device allocation, freed on destruction. Fills with a byte pattern so
/// unwritten elements are visible (0xFF makes bf16/f16/f32 NaN).
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t bytes, int fill = 0xFF);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void upload(const void *src, size_t n, size_t offset = 0);
  void download(void *dst, size_t n, size_t offset = 0) const;
  template <typename T> std::vector<T> read(size_t count,
                                            size_t offset = 0) const {
    std::vector<T> out(count);
    download(out.data(), count * sizeof(T), offset);
    return out;
  }
};

/// Aborts with the CUDA runtime's message on failure.
void check(int cudaError, const char *what);
void sync();

/// Records one check; prints a line per check and a summary table at the end.
struct Results {
  struct Row {
    std::string name;
    bool pass;
    std::string detail;
  };
  std::vector<Row> rows;
  void add(const std::string &name, bool pass, const std::string &detail);
  int finish(const char *title); ///< prints the table, returns the exit code
};

std::string fmt(const char *format, ...);

} // namespace gputest

#endif // DELTAC_TESTS_GPU_GPUTESTUTIL_H
