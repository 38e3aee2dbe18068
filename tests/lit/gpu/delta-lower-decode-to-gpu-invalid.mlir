// RUN: deltac-opt %s --delta-expand-spec --delta-lower-decode-to-gpu=variants=medium -verify-diagnostics

// expected-error @+1 {{variants must be staged, bulk, small or empty, got 'medium'}}
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @gdn rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 64
      entries = [decode] max_t = 1
}
