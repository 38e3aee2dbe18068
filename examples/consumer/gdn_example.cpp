// gdn_example.cpp - calling a generated kernel library: decode and prefill.
//
// Fills deltac_decode_args and deltac_prefill_args for the Qwen3-Next spec
// (K = V = 128, bf16 activations, fp32 v-first state pool, raw gate) and
// calls both entry points. Device buffers come from the caller (here: none,
// so the example shows what the API reports): an argument mistake is named
// before anything runs, and the workspace query needs no GPU.
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

  // Prefill of one 4096-token sequence: the caller sizes the workspace once
  // (no allocation inside the call), then passes it with every call.
  int64_t T = 4096, N = 1;
  int64_t bytes = gdn::qwen3_next::prefill_workspace_bytes(128, 128, T, N, 32);
  std::printf("prefill workspace for T=%lld N=%lld HV=32: %lld bytes\n",
              (long long)T, (long long)N, (long long)bytes);
  deltac_prefill_args p{};
  p.K = 128;
  p.V = 128;
  p.T = T;
  p.N = N;
  p.H = 16;
  p.HV = 32;
  p.io_dtype = DELTAC_BF16;
  p.state_dtype = DELTAC_F32;
  p.workspace_bytes = bytes;
  p.scale = 0.08838835f;
  deltac::Status pstatus = gdn::qwen3_next::prefill(p, /*stream=*/nullptr);
  std::printf("prefill without q: code %d: %s\n", pstatus.code,
              pstatus.message.c_str());
  bool ok = status.code == DELTAC_INVALID_ARGUMENT &&
            pstatus.code == DELTAC_INVALID_ARGUMENT && bytes > 0;
  return ok ? 0 : 1;
}
