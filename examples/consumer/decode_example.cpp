// decode_example.cpp - calling a generated decode kernel library.
//
// Fills deltac_decode_args for the Qwen3-Next spec (K = V = 128, bf16
// activations, fp32 v-first state pool, raw gate) and calls it. Device
// buffers come from the caller (here: none, so the example shows what the
// API reports): on a machine without a GPU the call ends with the driver
// status, and an argument mistake is named before anything runs.
#include "gdn.h"

#include <cstdio>

int main() {
  deltac_decode_args args{};
  args.K = 128;
  args.V = 128;
  args.B = 4;
  args.T = 1;
  args.H = 16;
  args.HV = 32;
  args.io_dtype = DELTAC_BF16;
  args.state_dtype = DELTAC_F32;
  args.slots = 64; // the pool holds 64 states
  args.scale = 0.08838835f;
  // q, k, v, o, a, b, A_log, dt_bias and the state pool would be device
  // pointers here; leaving q null shows the host-side check.
  deltac::Status status = gdn::qwen3_next::decode(args, /*stream=*/nullptr);
  std::printf("decode without q: code %d: %s\n", status.code,
              status.message.c_str());
  return status.code == DELTAC_INVALID_ARGUMENT ? 0 : 1;
}
