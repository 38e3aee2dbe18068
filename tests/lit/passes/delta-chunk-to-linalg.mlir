// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-chunk-to-linalg))' -split-input-file -verify-diagnostics | FileCheck %s

// K K^T: a contraction over K, then the strictly-lower mask with beta and
// the decay; the exponent is selected to 0 above the diagonal before
// math.exp (the overflow trap of DESIGN.md).
// CHECK-LABEL: func.func @kkt
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[BELOW:.*]] = arith.cmpi ugt, %[[I]], %[[J]]
// CHECK: %[[D:.*]] = arith.subf
// CHECK: %[[ARG:.*]] = arith.select %[[BELOW]], %[[D]], %{{.*}}
// CHECK: math.exp %[[ARG]]
// CHECK-NOT: delta.chunk_kkt
func.func @kkt(%k: tensor<16x16xf32>, %b: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16x16xf32> {
  %l = delta.chunk_kkt %k, %b gamma(%g : tensor<16xf32>)
      : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>
  return %l : tensor<16x16xf32>
}

// -----

// The triangular solve is a forward substitution: rows, columns below the
// diagonal, and the inner sum, on an identity start.
// CHECK-LABEL: func.func @solve
// CHECK: linalg.generic
// CHECK: arith.cmpi eq
// CHECK: scf.for %[[I:.*]] = %c1 to %c16
// CHECK: scf.for %[[J:.*]] = %c0 to %[[I]]
// CHECK: scf.for %{{.*}} = %[[J]] to %[[I]]
// CHECK: arith.negf
// CHECK: tensor.insert %{{.*}}[%[[I]], %[[J]]]
func.func @solve(%l: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %a = delta.solve_tril %l : tensor<16x16xf32>
  return %a : tensor<16x16xf32>
}

// -----

// Loads clamp the row to len - 1 and zero the padding; stores insert only
// the first len rows, converted to the destination type.
// CHECK-LABEL: func.func @movers
// CHECK: linalg.generic
// CHECK: arith.minui
// CHECK: tensor.extract %{{.*}} : tensor<1x?x?x16xbf16>
// CHECK: arith.extf
// CHECK: arith.cmpi ult
// CHECK: arith.select
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%{{.*}}, 16] [1, 1] : tensor<16x16xf32> to tensor<?x16xf32>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, 0] [1, %{{.*}}, 1, 16] [1, 1, 1, 1] : tensor<?x16xbf16> into tensor<1x?x?x16xbf16>
func.func @movers(%q: tensor<1x?x?x16xbf16>, %i: index, %n: index) -> tensor<1x?x?x16xbf16> {
  %c = delta.chunk_load %q[%i, %i, %i] len(%n) : tensor<1x?x?x16xbf16> -> tensor<16x16xf32>
  %o = delta.chunk_store %c into %q[%i, %i, %i] len(%n) : tensor<16x16xf32> into tensor<1x?x?x16xbf16>
  return %o : tensor<1x?x?x16xbf16>
}

// -----

// The sequence-level recurrence must be chunked first.
func.func @unchunked(%q: tensor<1x?x4x64xf32>, %k: tensor<1x?x4x64xf32>,
                     %v: tensor<1x?x4x64xf32>, %beta: tensor<1x?x4xf32>,
                     %scale: f32) -> tensor<1x4x64x64xf32> {
  // expected-error @+1 {{delta-chunk-to-linalg cannot lower this op; run delta-chunk first}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x?x4x64xf32>) k(%k : tensor<1x?x4x64xf32>)
      v(%v : tensor<1x?x4x64xf32>) beta(%beta : tensor<1x?x4xf32>)
      scale(%scale : f32) -> tensor<1x?x4x64xf32>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}
