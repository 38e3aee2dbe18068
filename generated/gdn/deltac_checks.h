// deltac_checks.h - argument checks shared by the decode and prefill hosts.
#ifndef DELTAC_CHECKS_H
#define DELTAC_CHECKS_H

#include "deltac_api.h"

#include <cstdint>
#include <string>

namespace deltac_rt {

/// The spec's gate form; the Channel forms carry one decay per K channel
/// (rule kda: g is [tokens, HV, K], dt_bias [HV * K]).
enum class GateKind { None, Log, Linear, Raw, ChannelLog, ChannelRaw };

inline bool perChannel(GateKind gate) {
  return gate == GateKind::ChannelLog || gate == GateKind::ChannelRaw;
}

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
inline bool aligned4(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 3) == 0;
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

/// The call's dtypes against the specialization's.
inline std::string checkDtypes(deltac_dtype io, deltac_dtype state,
                               deltac_dtype wantIo, deltac_dtype wantState) {
  if (io != wantIo)
    return std::string("io_dtype is ") + dtypeName(io) +
           "; this library was generated for " + dtypeName(wantIo);
  if (state != wantState)
    return std::string("state_dtype is ") + dtypeName(state) +
           "; this library was generated for " + dtypeName(wantState);
  return "";
}

/// H and HV positive, HV a grid dimension and a multiple of H (GVA).
inline std::string checkHeads(int64_t H, int64_t HV) {
  if (H < 1 || HV < 1 || HV > 65535)
    return "H = " + std::to_string(H) + " and HV = " + std::to_string(HV) +
           " must be positive, HV at most 65535";
  if (HV % H != 0)
    return "HV = " + std::to_string(HV) + " must be a multiple of H = " +
           std::to_string(H);
  return "";
}

/// The gate inputs the spec's gate form needs, and none it has no use for.
inline std::string checkGateInputs(GateKind gate, const void *g,
                                   const void *aLog, const void *dtBias) {
  if (gate != GateKind::None && !g)
    return "g must not be null (the spec has a gate)";
  if (gate == GateKind::None && g)
    return "g must be null (the spec's rule has no gate)";
  if ((gate == GateKind::Raw || gate == GateKind::ChannelRaw) && (!aLog || !dtBias))
    return std::string(!aLog ? "A_log" : "dt_bias") +
           " must not be null (the spec's gate is raw)";
  return "";
}

} // namespace deltac_rt

#endif // DELTAC_CHECKS_H
