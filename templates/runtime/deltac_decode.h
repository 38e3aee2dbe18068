// deltac_decode.h - host-side checks and launch of decode kernels.
//
// The generated code describes each specialization with a DecodeVariant; the
// checks and the launch are written once, here.
#ifndef DELTAC_DECODE_H
#define DELTAC_DECODE_H

#include "deltac_api.h"
#include "deltac_checks.h"
#include "deltac_runtime.h"

#include <exception>
#include <functional>
#include <new>
#include <string>

namespace deltac_rt {

/// One decode kernel of a spec: its options, tiling and images.
struct DecodeVariant {
  int64_t K, V;
  deltac_dtype io, state;
  GateKind gate;
  bool stateVFirst; // vk layout: [slots, HV, V, K]
  bool perValue;    // per_value spec: gv and a per-value beta
  int64_t maxT;
  unsigned gridX, threads;
  /// Dispatch: the first variant of a (K, V) whose grid has at least this
  /// many quarters of a block per SM is launched (0: always).
  int64_t minBlocksPerSM;
  /// Launched only for calls of at least this many tokens a row (T, or
  /// with cu_seqlens T / B on average; 0: any call): the staged form.
  int64_t minTokens;
  Kernel *kernel;
  /// deltac_abi::CallOptions bits the spec leaves to the call (l2norm =
  /// call: kCallL2Norm; beta = call: kCallBetaSigmoid | kCallBetaTwice).
  int32_t callOptions = 0;
};

/// Validates `args` against the variants (everything the host can see) and
/// launches the matching kernel: variants of the call's (K, V) are tried in
/// order, the first whose dispatch predicate holds for the call's grid and
/// the device's SM count wins. Nothing is launched on a rejected call.
deltac::Status runDecode(const DecodeVariant *variants, int count,
                         const deltac_decode_args &args, void *stream);

/// The values of the decode kernel's parameters, and packDecodeParams, the
/// one place that lists them (in the order of decodeKernelParams() in
/// codegen/gpu/decode/DecodeKernel.h): runDecode launches the pack it builds, and
/// decodeParamLayout() reports the same pack's names, kinds and sizes
/// (tests/unit/DecodeAbiTest.cpp compares them with the compiler's types
/// and the generated PTX's .param list).
struct DecodeParams {
  const void *q, *k, *v, *g, *beta, *aLog, *dtBias;
  void *o, *state;
  const void *inIdx, *outIdx;
  void *steps, *flag;
  int32_t T, H, HV;
  int64_t slots, qStride, kStride, vStride, oStride;
  float scale;
  int32_t flags;
  const void *stepSlots, *accepted;
  int64_t stepSlotsStride;
  const void *cu;
  const void *stateIn;
  int64_t slotStride;
  float lowerBound; ///< kernelLowerBound(): NaN for the softplus gate
  const void *gv;   ///< per_value kernels: gv or null
};
void packDecodeParams(const DecodeParams &p, ParamPack &pack);
const ParamInfo *decodeParamLayout(int *count);

/// Debug mode: copies `count` device indices starting at entry `first`
/// (int32, or int64 with `wide`) to the host in bounded blocks and calls
/// `check(entry, value)` on each; its first non-empty message rejects the
/// call (DELTAC_INVALID_ARGUMENT), a failed copy is DELTAC_CUDA_ERROR.
deltac::Status scanDeviceIndices(
    const void *device, int64_t first, int64_t count, bool wide, void *stream,
    const std::function<std::string(int64_t, int64_t)> &check);

/// DELTAC_INTERNAL_ERROR with "`what`: `detail`", or with an empty message
/// where even that cannot be allocated (lastError() then says so).
inline deltac::Status internalError(const char *what,
                                    const char *detail) noexcept {
  try {
    return {DELTAC_INTERNAL_ERROR, std::string(what) + ": " + detail};
  } catch (...) {
    return {DELTAC_INTERNAL_ERROR, std::string()};
  }
}

/// Runs `body` (an entry point's work), turning any exception into a
/// status: none may cross the extern "C" API (DELTAC_INTERNAL_ERROR with
/// the exception's text; std::bad_alloc: out of host memory).
template <typename F> deltac::Status guarded(F &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return internalError("host exception", "out of host memory");
  } catch (const std::exception &e) {
    return internalError("host exception", e.what());
  } catch (...) {
    return internalError("host exception", "unknown");
  }
}

/// Records `status.message` as the calling thread's last error (extern "C")
/// and returns its code. Never throws: where even the message cannot be
/// stored, lastError() says so.
int setLastError(const deltac::Status &status) noexcept;
/// The same for a code and a static message (allocates nothing before the
/// message is stored, so a wrapper's own rejection cannot throw).
int setLastError(int code, const char *message) noexcept;
const char *lastError() noexcept;

} // namespace deltac_rt

#endif // DELTAC_DECODE_H
