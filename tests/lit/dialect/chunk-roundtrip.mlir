// RUN: deltac-opt %s | deltac-opt | FileCheck %s

// Every chunk-level op prints and parses back.

// CHECK-LABEL: func.func @chunk
// CHECK: delta.state_load %{{.*}}[%{{.*}}, %{{.*}}] layout = vk : tensor<?x?x32x16xbf16> -> tensor<16x32xf32>
// CHECK: delta.chunk_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] len(%{{.*}}) : tensor<1x?x?x16xbf16> -> tensor<16x16xf32>
// CHECK: delta.chunk_load %{{.*}} len(%{{.*}}) edge : tensor<1x?x?xf32> -> tensor<16xf32>
// CHECK: delta.chunk_kkt %{{.*}}, %{{.*}} gamma(%{{.*}} : tensor<16xf32>) : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>
// CHECK: delta.solve_tril %{{.*}} : tensor<16x16xf32>
// CHECK: delta.chunk_wy
// CHECK: delta.chunk_residual
// CHECK: delta.chunk_output %{{.*}} scale(%{{.*}}) gamma(
// CHECK: delta.chunk_state_step
// CHECK: delta.chunk_store %{{.*}} into %{{.*}} len(%{{.*}}) : tensor<16x32xf32> into tensor<1x?x?x32xbf16>
// CHECK: delta.state_store %{{.*}} into %{{.*}} layout = vk : tensor<16x32xf32> into tensor<?x?x32x16xbf16>
func.func @chunk(%q: tensor<1x?x?x16xbf16>, %v: tensor<1x?x?x32xbf16>,
                 %gm: tensor<1x?x?xf32>, %beta: tensor<1x?x?xf32>,
                 %s0: tensor<?x?x32x16xbf16>, %o: tensor<1x?x?x32xbf16>,
                 %i: index, %n: index, %scale: f32)
    -> (tensor<1x?x?x32xbf16>, tensor<?x?x32x16xbf16>) {
  %s = delta.state_load %s0[%i, %i] layout = vk
      : tensor<?x?x32x16xbf16> -> tensor<16x32xf32>
  %qc = delta.chunk_load %q[%i, %i, %i] len(%n)
      : tensor<1x?x?x16xbf16> -> tensor<16x16xf32>
  %vc = delta.chunk_load %v[%i, %i, %i] len(%n)
      : tensor<1x?x?x32xbf16> -> tensor<16x32xf32>
  %bc = delta.chunk_load %beta[%i, %i, %i] len(%n)
      : tensor<1x?x?xf32> -> tensor<16xf32>
  %gc = delta.chunk_load %gm[%i, %i, %i] len(%n) edge
      : tensor<1x?x?xf32> -> tensor<16xf32>
  %l = delta.chunk_kkt %qc, %bc gamma(%gc : tensor<16xf32>)
      : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>
  %a = delta.solve_tril %l : tensor<16x16xf32>
  %w, %u = delta.chunk_wy %a, %qc, %vc, %bc gamma(%gc : tensor<16xf32>)
      : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x32xf32>,
        tensor<16xf32> -> tensor<16x16xf32>, tensor<16x32xf32>
  %vn = delta.chunk_residual %u, %w, %s
      : tensor<16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  %oc = delta.chunk_output %qc, %qc, %vn, %s scale(%scale)
      gamma(%gc : tensor<16xf32>) : tensor<16x16xf32>, tensor<16x16xf32>,
      tensor<16x32xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  %s1 = delta.chunk_state_step %s, %qc, %vn gamma(%gc : tensor<16xf32>)
      : tensor<16x32xf32>, tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  %o1 = delta.chunk_store %oc into %o[%i, %i, %i] len(%n)
      : tensor<16x32xf32> into tensor<1x?x?x32xbf16>
  %sf = delta.state_store %s1 into %s0[%i, %i] layout = vk
      : tensor<16x32xf32> into tensor<?x?x32x16xbf16>
  return %o1, %sf : tensor<1x?x?x32xbf16>, tensor<?x?x32x16xbf16>
}

// KDA: per-channel decays [C, K]; DeltaNet: none.
// CHECK-LABEL: func.func @kda_and_delta
// CHECK: delta.chunk_kkt %{{.*}}, %{{.*}} gamma(%{{.*}} : tensor<32x16xf32>)
// CHECK: delta.chunk_state_step %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xf32>
func.func @kda_and_delta(%k: tensor<32x16xf32>, %b: tensor<32xf32>,
                         %g: tensor<32x16xf32>, %s: tensor<16x16xf32>,
                         %vn: tensor<32x16xf32>)
    -> (tensor<32x32xf32>, tensor<16x16xf32>) {
  %l = delta.chunk_kkt %k, %b gamma(%g : tensor<32x16xf32>)
      : tensor<32x16xf32>, tensor<32xf32> -> tensor<32x32xf32>
  %s1 = delta.chunk_state_step %s, %k, %vn
      : tensor<16x16xf32>, tensor<32x16xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  return %l, %s1 : tensor<32x32xf32>, tensor<16x16xf32>
}
