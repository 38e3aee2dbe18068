// RUN: not deltac-opt %s --delta-spec-to-chunk --delta-lower-prefill-to-gpu 2>&1 | FileCheck %s

// KDA's per-channel decays stay on the CPU path for now; small tiles are
// rejected with the supported range.
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32
      layout = vk gate = channel_log beta = given chunk = 64 entries = [prefill]
}
// CHECK: error: prefill on the GPU does not support per-channel decays (rule kda) yet
