// RUN: not deltac-opt %s -split-input-file 2>&1 | FileCheck %s

// Found by deltac-spec-fuzzer (tests/fuzz): a static head count H = 0 made
// the sequence-level verifier compute HV % H and die of SIGFPE
// (RecurrenceVerifier.cpp, "value heads HV must be a multiple of H").
// Each case must be rejected with a diagnostic, not crash; `not` fails on a
// crash. The wording is the verifier's to choose.

// CHECK: error: 'delta.recurrence' op
func.func @recurrence_zero_heads(%q: tensor<?x?x0x?xf32>, %v: tensor<?x?x1x?xf32>,
                                 %b: tensor<?x?x?xf32>, %scale: f32) {
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<?x?x0x?xf32>) k(%q : tensor<?x?x0x?xf32>)
      v(%v : tensor<?x?x1x?xf32>) beta(%b : tensor<?x?x?xf32>)
      scale(%scale : f32) -> tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
  return
}

// -----

// CHECK: error: 'delta.chunked_recurrence' op
func.func @chunked_zero_heads(%q: tensor<?x?x0x?xf32>, %v: tensor<?x?x1x?xf32>,
                              %b: tensor<?x?x?xf32>, %scale: f32) {
  %o, %s = delta.chunked_recurrence delta layout = kv chunk = 64
      q(%q : tensor<?x?x0x?xf32>) k(%q : tensor<?x?x0x?xf32>)
      v(%v : tensor<?x?x1x?xf32>) beta(%b : tensor<?x?x?xf32>)
      scale(%scale : f32) -> tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
  return
}
