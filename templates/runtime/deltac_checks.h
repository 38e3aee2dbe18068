// deltac_checks.h - argument checks shared by the decode and prefill hosts.
#ifndef DELTAC_CHECKS_H
#define DELTAC_CHECKS_H

#include "deltac_abi.h"
#include "deltac_api.h"

#include <cmath>
#include <limits>
#include <initializer_list>
#include <cstdint>
#include <cstring>
#include <string>

namespace deltac_rt {

/// The spec's gate form; the Channel forms carry one decay per K channel
/// (rule kda: g is [tokens, HV, K], dt_bias [HV * K]); Call and ChannelCall
/// are log or raw, chosen per call.
enum class GateKind { None, Log, Linear, Raw, ChannelLog, ChannelRaw, Call, ChannelCall };

inline bool perChannel(GateKind gate) {
  return gate == GateKind::ChannelLog || gate == GateKind::ChannelRaw ||
         gate == GateKind::ChannelCall;
}

/// The gate form a call runs: the spec's, or for a gate by call the one
/// the call's raw_gate chooses.
inline GateKind callGate(GateKind spec, int32_t rawGate) {
  if (spec == GateKind::Call)
    return rawGate ? GateKind::Raw : GateKind::Log;
  if (spec == GateKind::ChannelCall)
    return rawGate ? GateKind::ChannelRaw : GateKind::ChannelLog;
  return spec;
}

/// Raw gates: g is the raw `a` (io dtype), with A_log and dt_bias.
inline bool rawGate(GateKind gate) {
  return gate == GateKind::Raw || gate == GateKind::ChannelRaw;
}

/// A dtype field as the int a C caller stored: any value may arrive
/// through the C API, and loading an out-of-range enumerator is undefined.
inline int rawDtype(const deltac_dtype &d) {
  int raw;
  std::memcpy(&raw, &d, sizeof raw);
  return raw;
}
inline std::string dtypeName(int d) {
  switch (d) {
  case DELTAC_BF16: return "bf16";
  case DELTAC_F16: return "f16";
  case DELTAC_F32: return "f32";
  }
  return "unknown (" + std::to_string(d) + ")";
}
inline int64_t dtypeBytes(deltac_dtype d) { return d == DELTAC_F32 ? 4 : 2; }

/// Sizes the host checks before a kernel forms addresses from them: every
/// tensor a call describes must span at most 2^48 bytes (the GPUs' virtual
/// address space), so no element offset or byte size computed in 64 bits
/// (host or kernel) can wrap.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// a * b, false where it overflows int64 (no wrap).
inline bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}
/// The product of `factors` (all >= 0) when it is at most `limit`, else -1.
inline int64_t boundedProduct(std::initializer_list<int64_t> factors,
                              int64_t limit = kMaxTensorBytes) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (f < 0 || !checkedMul(p, f, p) || p > limit)
      return -1;
  return p;
}
/// "" when the product of `factors` (e.g. tokens, token stride, element
/// bytes) is at most kMaxTensorBytes; else a message naming `name`.
inline std::string checkExtent(const char *name,
                               std::initializer_list<int64_t> factors) {
  if (boundedProduct(factors) < 0)
    return std::string(name) + " would span more than 2^48 bytes (its "
           "sizes and strides overflow the address space)";
  return "";
}

inline deltac::Status invalid(const std::string &message) {
  return {DELTAC_INVALID_ARGUMENT, message};
}
inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}
inline bool aligned4(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 3) == 0;
}
inline bool alignedTo(const void *p, int64_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & uintptr_t(bytes - 1)) == 0;
}

/// Checks an optional device pointer's natural alignment (`bytes`: the size
/// of the element the kernels load, `what` its type for the message).
inline std::string needAligned(const char *name, const void *p, int64_t bytes,
                               const char *what) {
  if (p && !alignedTo(p, bytes))
    return std::string(name) + " must be " + std::to_string(bytes) +
           "-byte aligned (" + what + ")";
  return "";
}

/// The scale must be a finite number.
inline std::string checkScale(float scale) {
  if (!std::isfinite(scale))
    return "scale must be finite";
  return "";
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
  if (given < 0 || stride < minimum)
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
inline std::string checkDtypes(const deltac_dtype &io,
                               const deltac_dtype &state,
                               deltac_dtype wantIo, deltac_dtype wantState) {
  if (rawDtype(io) != int(wantIo))
    return "io_dtype is " + dtypeName(rawDtype(io)) +
           "; this library was generated for " + dtypeName(wantIo);
  if (rawDtype(state) != int(wantState))
    return "state_dtype is " + dtypeName(rawDtype(state)) +
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

/// The gate inputs the gate form that runs needs, and none it has no use
/// for (A_log and dt_bias only with a raw gate: a caller who passes them to
/// a log gate is told, never ignored); the bounded raw gate (FLA's KDA
/// lower_bound) only with a raw gate and a finite lower_bound. A_log may be
/// null only for the bounded gate (a factor 1, as FLA); dt_bias may always
/// be null (0). `nullLogGate` (decode): a log gate's g may be null, read as
/// 0 (FLA's g=None: no decay; the kernels' zero array).
inline std::string checkGateInputs(GateKind gate, const void *g,
                                   const void *aLog, const void *dtBias,
                                   int32_t boundedGate, float lowerBound,
                                   bool nullLogGate = false) {
  if (gate != GateKind::None && !g && !(nullLogGate && gate == GateKind::Log))
    return nullLogGate ? "g must not be null (the spec's gate is not log; a "
                         "null log g means no decay)"
                       : "g must not be null (the spec has a gate)";
  if (gate == GateKind::None && g)
    return "g must be null (the spec's rule has no gate)";
  if (boundedGate && !rawGate(gate))
    return "bounded_gate needs a spec with a raw gate (raw or channel_raw)";
  if ((aLog || dtBias) && !rawGate(gate))
    return std::string(aLog ? "A_log" : "dt_bias") +
           " must be null: the gate that runs is not raw (A_log and dt_bias are "
           "read only with a raw gate: a raw spec, or raw_gate with a gate by call)";
  if (boundedGate && !std::isfinite(lowerBound))
    return "lower_bound must be finite (bounded_gate)";
  if (rawGate(gate) && !aLog && !boundedGate)
    return "A_log must not be null (the spec's gate is raw; only the bounded "
           "gate may omit it)";
  // Per-channel gates are read 16 bytes at a time (a token's K decays).
  if (perChannel(gate) && !aligned16(g))
    return "g must be 16-byte aligned (per-channel gates)";
  return "";
}

/// The bytes of g's elements: a fixed raw gate's a is in the io dtype; a
/// gate by call's raw a is f32 or, with gate_io_dtype, the io dtype; log
/// decays are f32.
inline int64_t gateBytes(GateKind spec, GateKind runs, int32_t gateIoDtype, deltac_dtype io) {
  bool byCall = spec == GateKind::Call || spec == GateKind::ChannelCall;
  return rawGate(runs) && (!byCall || gateIoDtype) ? dtypeBytes(io) : 4;
}

/// The elements between state slots (decode's pool and state_in, prefill's
/// initial and final states): slot_stride, 0 meaning one state of
/// `oneState` elements. It must cover one state and keep every slot 16-byte
/// aligned for elements of `bytes` (checked as a multiple of 16 / bytes
/// elements: no product that could wrap before the extent checks). Sets
/// `stride` and returns "", or the message.
inline std::string checkSlotStride(int64_t slotStride, int64_t oneState,
                                   int64_t bytes, int64_t &stride) {
  stride = slotStride == 0 ? oneState : slotStride;
  if (slotStride < 0 || stride < oneState)
    return "slot_stride = " + std::to_string(slotStride) +
           " is smaller than one slot's HV * K * V = " +
           std::to_string(oneState) + " elements";
  if (stride % (16 / bytes) != 0)
    return "slot_stride = " + std::to_string(slotStride) +
           " must keep every slot 16-byte aligned";
  return "";
}

/// The kernels' lower_bound parameter: the bound for the bounded gate, NaN
/// for the softplus form.
inline float kernelLowerBound(int32_t boundedGate, float lowerBound) {
  return boundedGate ? lowerBound : std::numeric_limits<float>::quiet_NaN();
}

/// The kernels' deltac_abi::CallOptions bits for a call's qk_l2norm,
/// beta_form, raw_gate and gate_io_dtype (`a`: deltac_decode_args or
/// deltac_prefill_args), where `byCall` holds the bits the spec leaves to
/// the call. A spec that fixes an option refuses a nonzero value for it
/// (DELTAC_UNSUPPORTED, never ignored); beta_form must be 0, 1 or 2.
template <typename Args>
inline deltac::Status callOptionBits(int32_t byCall, const Args &a, int32_t &bits) {
  using namespace deltac_abi;
  const int32_t qkL2norm = a.qk_l2norm, betaForm = a.beta_form;
  bits = 0;
  if ((a.raw_gate || a.gate_io_dtype) && !(byCall & kCallGateRaw))
    return {DELTAC_UNSUPPORTED, std::string(a.raw_gate ? "raw_gate" : "gate_io_dtype") +
                                    ": this spec fixes the gate form (a spec with "
                                    "'gate = call' leaves it to the call)"};
  if (a.gate_io_dtype && !a.raw_gate)
    return invalid("gate_io_dtype needs raw_gate (log decays are f32)");
  if (betaForm < 0 || betaForm > 2)
    return invalid("beta_form = " + std::to_string(betaForm) +
                   " must be 0 (given), 1 (sigmoid) or 2 (2 sigmoid)");
  if (qkL2norm && !(byCall & kCallL2Norm))
    return {DELTAC_UNSUPPORTED, "qk_l2norm: this spec fixes the q/k normalisation "
                                "(a spec with 'l2norm = call' leaves it to the call)"};
  if (betaForm && !(byCall & kCallBetaSigmoid))
    return {DELTAC_UNSUPPORTED, "beta_form: this spec fixes the beta form (a spec "
                                "with 'beta = call' leaves it to the call)"};
  bits = (qkL2norm ? kCallL2Norm : 0) | (betaForm ? kCallBetaSigmoid : 0) |
         (betaForm == 2 ? kCallBetaTwice : 0) | (a.raw_gate ? kCallGateRaw : 0) |
         (a.gate_io_dtype ? kCallGate16 : 0);
  return {};
}

/// What a call's options make of its spec (decode and prefill alike): the
/// kernels' option bits, the gate form that runs and the bytes of g's
/// elements. `v` is the spec's variant (callOptions, gate, io).
struct CallForm {
  int32_t bits = 0;
  GateKind gate = GateKind::None;
  int64_t gateBytes = 4;
};
template <typename Variant, typename Args>
inline deltac::Status callForm(const Variant &v, const Args &a, CallForm &form) {
  if (deltac::Status s = callOptionBits(v.callOptions, a, form.bits); !s.ok())
    return s;
  form.gate = callGate(v.gate, a.raw_gate);
  form.gateBytes = gateBytes(v.gate, form.gate, a.gate_io_dtype, v.io);
  return {};
}

} // namespace deltac_rt

#endif // DELTAC_CHECKS_H
