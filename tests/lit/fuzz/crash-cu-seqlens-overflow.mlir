// RUN: not deltac-opt %s -split-input-file 2>&1 | FileCheck %s

// Found by deltac-spec-fuzzer (tests/fuzz, UBSan): a static sequence count
// N = INT64_MAX in the state made the cu_seqlens check compute N + 1, a
// signed overflow (undefined behaviour; the gcc build happens to wrap and
// still reports). Must be rejected with a diagnostic; only a sanitizer build
// (the fuzzer) sees the overflow itself.

// CHECK: error: 'delta.recurrence' op
func.func @n_max(%q: tensor<?x?x?x?xf32>, %b: tensor<?x?x?xf32>,
                 %cu: tensor<3xi32>, %scale: f32) {
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<?x?x?x?xf32>) k(%q : tensor<?x?x?x?xf32>)
      v(%q : tensor<?x?x?x?xf32>) beta(%b : tensor<?x?x?xf32>)
      cu_seqlens(%cu : tensor<3xi32>) scale(%scale : f32)
      -> tensor<?x?x?x?xf32>, tensor<9223372036854775807x?x?x?xf32>
  return
}
