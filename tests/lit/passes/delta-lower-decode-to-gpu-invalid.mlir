// RUN: deltac-opt %s --delta-expand-spec --delta-lower-decode-to-gpu -verify-diagnostics

module attributes {delta.targets = ["sm_90a"]} {
  // expected-error @+1 {{decode for rule 'kda' is not implemented yet}}
  delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_log beta = given chunk = 64
      entries = [decode] max_t = 1
}
