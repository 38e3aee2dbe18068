// deltac_decode.h - host-side checks and launch of decode kernels.
//
// The generated code describes each specialization with a DecodeVariant; the
// checks and the launch are written once, here.
#ifndef DELTAC_DECODE_H
#define DELTAC_DECODE_H

#include "deltac_api.h"
#include "deltac_checks.h"
#include "deltac_runtime.h"

namespace deltac_rt {

/// One decode kernel of a spec: its options, tiling and images.
struct DecodeVariant {
  int64_t K, V;
  deltac_dtype io, state;
  GateKind gate;
  bool stateVFirst; // vk layout: [slots, HV, V, K]
  int64_t maxT;
  unsigned gridX, threads;
  /// Dispatch: the first variant of a (K, V) whose grid has at least this
  /// many blocks per SM is launched (0: always).
  int64_t minBlocksPerSM;
  Kernel *kernel;
};

/// Validates `args` against the variants (everything the host can see) and
/// launches the matching kernel: variants of the call's (K, V) are tried in
/// order, the first whose dispatch predicate holds for the call's grid and
/// the device's SM count wins. Nothing is launched on a rejected call.
deltac::Status runDecode(const DecodeVariant *variants, int count,
                         const deltac_decode_args &args, void *stream);

/// The kernel parameters runDecode passes, by name, in order (the compiler's
/// list is decodeKernelParams() in passes/DecodeKernel.h; a unit test
/// compares the two).
const char *const *decodeParamNames(int *count);

/// Records `status.message` as the calling thread's last error (extern "C").
int setLastError(const deltac::Status &status);
const char *lastError();

} // namespace deltac_rt

#endif // DELTAC_DECODE_H
