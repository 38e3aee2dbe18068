// GpuTestUtil.cpp - small helpers of the GPU tests.
#include "GpuTestUtil.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

namespace gputest {

static uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return uint16_t(u >> 16);
}
static float fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

size_t bytesOf(deltac_dtype d) { return d == DELTAC_F32 ? 4 : 2; }

std::vector<uint8_t> encode(deltac_dtype d, const std::vector<double> &x) {
  std::vector<uint8_t> out(x.size() * bytesOf(d));
  for (size_t i = 0; i < x.size(); ++i) {
    float f = float(x[i]);
    if (d == DELTAC_F32) {
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint16_t h = d == DELTAC_BF16 ? toBf16(f)
                                    : __half_as_ushort(__float2half_rn(f));
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

std::vector<double> decode(deltac_dtype d, const std::vector<uint8_t> &b) {
  size_t n = b.size() / bytesOf(d);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (d == DELTAC_F32) {
      float f;
      std::memcpy(&f, &b[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      out[i] = d == DELTAC_BF16 ? fromBf16(h)
                                : __half2float(__ushort_as_half(h));
    }
  }
  return out;
}

double roundTo(deltac_dtype d, double x) { return decode(d, encode(d, {x}))[0]; }

void check(int err, const char *what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what,
                 cudaGetErrorString(cudaError_t(err)));
    std::exit(2);
  }
}
void sync() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

DeviceBuffer::DeviceBuffer(size_t n, int fill) : bytes(n) {
  check(cudaMalloc(&ptr, n ? n : 16), "cudaMalloc");
  check(cudaMemset(ptr, fill, n ? n : 16), "cudaMemset");
}
DeviceBuffer::~DeviceBuffer() { cudaFree(ptr); }
void DeviceBuffer::upload(const void *src, size_t n, size_t offset) {
  check(cudaMemcpy(static_cast<char *>(ptr) + offset, src, n,
                   cudaMemcpyHostToDevice),
        "upload");
}
void DeviceBuffer::download(void *dst, size_t n, size_t offset) const {
  check(cudaMemcpy(dst, static_cast<const char *>(ptr) + offset, n,
                   cudaMemcpyDeviceToHost),
        "download");
}

std::string fmt(const char *format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

void Results::add(const std::string &name, bool pass,
                  const std::string &detail) {
  rows.push_back({name, pass, detail});
  std::printf("%s %-58s %s\n", pass ? "PASS" : "FAIL", name.c_str(),
              detail.c_str());
  std::fflush(stdout);
}

int Results::finish(const char *title) {
  int failed = 0;
  for (const Row &r : rows)
    failed += !r.pass;
  std::printf("\n== %s: %zu checks, %d failed ==\n", title, rows.size(),
              failed);
  for (const Row &r : rows)
    if (!r.pass)
      std::printf("  FAILED %s: %s\n", r.name.c_str(), r.detail.c_str());
  return failed ? 1 : 0;
}

} // namespace gputest
