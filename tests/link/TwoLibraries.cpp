// TwoLibraries.cpp - two generated kernel libraries in one program.
//
// Each library carries its own copy of the runtime; linked together they
// must neither clash nor mix: each call is checked by its own library, so
// each rejects what its own spec does not cover, naming it. No GPU needed:
// every call here is refused on the host before the driver is touched.
#include "deltanet.h"
#include "qwen3_next_gdn.h"

#include <cstdio>

static deltac_decode_args decodeArgs(int64_t kv, deltac_dtype io) {
  deltac_decode_args args{};
  args.K = kv;
  args.V = kv;
  args.B = 2;
  args.T = 1;
  args.H = 4;
  args.HV = 4;
  args.io_dtype = io;
  args.state_dtype = DELTAC_F32;
  args.slots = 2;
  args.scale = 0.125f;
  return args; // q and the other tensors stay null
}

int main() {
  // Each library's own spec: the null q is the first thing named.
  deltac::Status a =
      deltanet::deltanet::decode(decodeArgs(64, DELTAC_F16), nullptr);
  deltac::Status b = qwen3_next_gdn::qwen3_next::decode(
      decodeArgs(128, DELTAC_BF16), nullptr);
  // The other library's dims: refused by the library called.
  deltac::Status c =
      deltanet::deltanet::decode(decodeArgs(128, DELTAC_F16), nullptr);
  std::printf("deltanet: code %d: %s\n", a.code, a.message.c_str());
  std::printf("qwen3_next_gdn: code %d: %s\n", b.code, b.message.c_str());
  std::printf("deltanet with K=V=128: code %d: %s\n", c.code,
              c.message.c_str());
  int64_t bytes = qwen3_next_gdn::qwen3_next::prefill_workspace_bytes(
      128, 128, 4096, 1, 32);
  std::printf("qwen3_next_gdn prefill workspace: %lld bytes\n",
              (long long)bytes);
  return a.code == DELTAC_INVALID_ARGUMENT &&
                 b.code == DELTAC_INVALID_ARGUMENT && c.code != DELTAC_OK &&
                 bytes > 0
             ? 0
             : 1;
}
