// RUN: not deltac-opt %s -split-input-file --delta-spec-to-chunk --delta-lower-prefill-to-gpu 2>&1 | FileCheck %s

// The chunks kernel converts raw 16-bit rows in place.
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @wide rule = gated dims = [128x128] io = f32 state = f32
      layout = kv gate = log beta = given chunk = 64 entries = [prefill]
}
// CHECK: error: prefill on the GPU needs bf16 or f16 activations, got 'f32'

// -----

// Small chunks are rejected with the supported range (small heads, 16x16,
// already by the spec verifier: dialect/spec-invalid.mlir, @prefill_16).
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @small rule = gated dims = [32x32] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 16 entries = [prefill]
}
// CHECK: error: prefill on the GPU needs chunk 32 or 64 and K, V multiples of 32 up to 256, got chunk 16, K = 32, V = 32

// -----

// Buffers that no block of the smallest target can hold (recur: with its
// one-stage ring, the least it runs with) are rejected at
// compile time (not at launch), with the way out: K = V = 256 fits with
// chunk 32 (the sm_80 limit, 163 KiB, is the binding one here).
module attributes {delta.targets = ["sm_80", "sm_90a"]} {
  delta.spec @big rule = gated dims = [256x256] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 64 entries = [prefill]
}
// CHECK: error: prefill K = 256, V = 256, chunk 64: the recur kernel needs 167424 bytes of shared memory, more than the 166912 a block can have on sm_80; use chunk = 32
