// deltac_checks.h - argument checks shared by the decode and prefill hosts.
#ifndef DELTAC_CHECKS_H
#define DELTAC_CHECKS_H

#include "deltac_api.h"

#include <cstdint>
#include <string>

namespace deltac_rt {

inline const char *dtypeName(deltac_dtype d) {
  switch (d) {
  case DELTAC_BF16: return "bf16";
  case DELTAC_F16: return "f16";
  case DELTAC_F32: return "f32";
  }
  return "unknown";
}
inline int64_t dtypeBytes(deltac_dtype d) { return d == DELTAC_F32 ? 4 : 2; }

inline deltac::Status invalid(const std::string &message) {
  return {DELTAC_INVALID_ARGUMENT, message};
}
inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

/// Checks a device pointer that must be present and 16-byte aligned.
inline std::string needPointer(const char *name, const void *p) {
  if (!p)
    return std::string(name) + " must not be null";
  if (!aligned16(p))
    return std::string(name) + " must be 16-byte aligned";
  return "";
}

/// Checks a token stride (0 = contiguous) and returns it in `stride`.
inline std::string tokenStride(const char *name, int64_t given,
                               int64_t minimum, int64_t multiple,
                               int64_t &stride) {
  stride = given == 0 ? minimum : given;
  if (stride < minimum)
    return std::string(name) + " = " + std::to_string(given) +
           " is smaller than one token's " + std::to_string(minimum) +
           " elements";
  if (stride % multiple != 0)
    return std::string(name) + " = " + std::to_string(given) +
           " must be a multiple of " + std::to_string(multiple) +
           " elements (16-byte aligned tokens)";
  return "";
}

} // namespace deltac_rt

#endif // DELTAC_CHECKS_H
