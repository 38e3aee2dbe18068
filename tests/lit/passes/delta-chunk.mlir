// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-chunk))' -split-input-file | FileCheck %s

// Gated, vk state, varlen: sequences from cu_seqlens, value heads, chunks;
// q/k read at head hv / (HV / H); the summed decays are edge-padded; the
// state is carried across chunks and stored in its layout.
// CHECK-LABEL: func.func @gated
// CHECK: %[[O0:.*]] = tensor.empty({{.*}}) : tensor<1x?x?x64xbf16>
// CHECK: %[[S0:.*]] = tensor.empty({{.*}}) : tensor<?x?x64x64xf32>
// CHECK: scf.for %[[N:[[:alnum:]_]+]] = {{.*}} iter_args({{.*}} = %[[O0]], {{.*}} = %[[S0]])
// CHECK: tensor.extract %{{.*}}[%[[N]]] : tensor<?xi64>
// CHECK: arith.ceildivui %{{.*}}, %c32
// CHECK: scf.for %[[HV:[[:alnum:]_]+]] =
// CHECK: %[[H:.*]] = arith.divui %[[HV]], %{{.*}} : index
// CHECK: %[[SIN:.*]] = delta.state_load %{{.*}}[%[[N]], %[[HV]]] layout = vk : tensor<?x?x64x64xf32> -> tensor<64x64xf32>
// CHECK: scf.for {{.*}} iter_args(%[[S:.*]] = %[[SIN]], %[[O:.*]] = {{.*}}) -> (tensor<64x64xf32>, tensor<1x?x?x64xbf16>)
// CHECK: %[[ROWS:.*]] = arith.minui %c32
// CHECK: %[[Q:.*]] = delta.chunk_load %{{.*}}[%c0, %[[T0:.*]], %[[H]]] len(%[[ROWS]]) : tensor<1x?x?x64xf32> -> tensor<32x64xf32>
// CHECK: %[[K:.*]] = delta.chunk_load %{{.*}}[%c0, %[[T0]], %[[H]]] len(%[[ROWS]]) : tensor<1x?x?x64xf32> -> tensor<32x64xf32>
// CHECK: %[[V:.*]] = delta.chunk_load %{{.*}}[%c0, %[[T0]], %[[HV]]] len(%[[ROWS]]) : tensor<1x?x?x64xbf16> -> tensor<32x64xf32>
// CHECK: %[[B:.*]] = delta.chunk_load %{{.*}}[%c0, %[[T0]], %[[HV]]] len(%[[ROWS]]) : tensor<1x?x?xf32> -> tensor<32xf32>
// CHECK: %[[G:.*]] = delta.chunk_load %{{.*}}[%c0, %[[T0]], %[[HV]]] len(%[[ROWS]]) edge : tensor<1x?x?xf32> -> tensor<32xf32>
// CHECK: %[[L:.*]] = delta.chunk_kkt %[[K]], %[[B]] gamma(%[[G]] : tensor<32xf32>)
// CHECK: %[[A:.*]] = delta.solve_tril %[[L]] : tensor<32x32xf32>
// CHECK: %[[W:.*]], %[[U:.*]] = delta.chunk_wy %[[A]], %[[K]], %[[V]], %[[B]] gamma(%[[G]]
// CHECK: %[[VN:.*]] = delta.chunk_residual %[[U]], %[[W]], %[[S]]
// CHECK: %[[OC:.*]] = delta.chunk_output %[[Q]], %[[K]], %[[VN]], %[[S]] scale(%{{.*}}) gamma(%[[G]]
// CHECK: %[[S1:.*]] = delta.chunk_state_step %[[S]], %[[K]], %[[VN]] gamma(%[[G]]
// CHECK: %[[O1:.*]] = delta.chunk_store %[[OC]] into %[[O]][%c0, %[[T0]], %[[HV]]] len(%[[ROWS]])
// CHECK: scf.yield %[[S1]], %[[O1]]
// CHECK: delta.state_store %{{.*}} into %{{.*}}[%[[N]], %[[HV]]] layout = vk
// CHECK-NOT: delta.chunked_recurrence
func.func @gated(%q: tensor<1x?x?x64xf32>, %k: tensor<1x?x?x64xf32>,
                 %v: tensor<1x?x?x64xbf16>, %gm: tensor<1x?x?xf32>,
                 %beta: tensor<1x?x?xf32>, %s0: tensor<?x?x64x64xf32>,
                 %cu: tensor<?xi64>, %scale: f32)
    -> (tensor<1x?x?x64xbf16>, tensor<?x?x64x64xf32>) {
  %o, %s = delta.chunked_recurrence gated layout = vk chunk = 32
      q(%q : tensor<1x?x?x64xf32>) k(%k : tensor<1x?x?x64xf32>)
      v(%v : tensor<1x?x?x64xbf16>) gamma(%gm : tensor<1x?x?xf32>)
      beta(%beta : tensor<1x?x?xf32>) state(%s0 : tensor<?x?x64x64xf32>)
      cu_seqlens(%cu : tensor<?xi64>) scale(%scale : f32)
      -> tensor<1x?x?x64xbf16>, tensor<?x?x64x64xf32>
  return %o, %s : tensor<1x?x?x64xbf16>, tensor<?x?x64x64xf32>
}

// -----

// KDA: per-channel decays load as [C, K]. Without cu_seqlens the sequences
// are the batch rows; without an initial state the chunk loop starts from
// zeros.
// CHECK-LABEL: func.func @kda_rows
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<32x16xf32>
// CHECK: scf.for %[[N:[[:alnum:]_]+]] =
// CHECK-NOT: tensor.extract
// CHECK: scf.for {{.*}} iter_args({{.*}} = %[[ZERO]],
// CHECK: delta.chunk_load %{{.*}}[%[[N]], {{.*}} edge : tensor<?x?x?x32xf32> -> tensor<16x32xf32>
// CHECK: delta.chunk_kkt {{.*}} gamma(%{{.*}} : tensor<16x32xf32>)
func.func @kda_rows(%q: tensor<?x?x?x32xf32>, %k: tensor<?x?x?x32xf32>,
                    %v: tensor<?x?x?x16xf32>, %gm: tensor<?x?x?x32xf32>,
                    %beta: tensor<?x?x?xf32>, %scale: f32)
    -> (tensor<?x?x?x16xf32>, tensor<?x?x32x16xf32>) {
  %o, %s = delta.chunked_recurrence kda layout = kv chunk = 16
      q(%q : tensor<?x?x?x32xf32>) k(%k : tensor<?x?x?x32xf32>)
      v(%v : tensor<?x?x?x16xf32>) gamma(%gm : tensor<?x?x?x32xf32>)
      beta(%beta : tensor<?x?x?xf32>) scale(%scale : f32)
      -> tensor<?x?x?x16xf32>, tensor<?x?x32x16xf32>
  return %o, %s : tensor<?x?x?x16xf32>, tensor<?x?x32x16xf32>
}

// -----

// DeltaNet: no decays anywhere in the chunk.
// CHECK-LABEL: func.func @deltanet
// CHECK-NOT: edge
// CHECK: delta.chunk_kkt %{{.*}}, %{{.*}} : tensor<64x16xf32>, tensor<64xf32> -> tensor<64x64xf32>
// CHECK-NOT: gamma(
// CHECK: delta.chunk_state_step %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xf32>
func.func @deltanet(%q: tensor<1x?x?x16xf32>, %k: tensor<1x?x?x16xf32>,
                    %v: tensor<1x?x?x16xf32>, %beta: tensor<1x?x?xf32>,
                    %cu: tensor<?xi32>, %scale: f32)
    -> (tensor<1x?x?x16xf32>, tensor<?x?x16x16xf32>) {
  %o, %s = delta.chunked_recurrence delta layout = kv chunk = 64
      q(%q : tensor<1x?x?x16xf32>) k(%k : tensor<1x?x?x16xf32>)
      v(%v : tensor<1x?x?x16xf32>) beta(%beta : tensor<1x?x?xf32>)
      cu_seqlens(%cu : tensor<?xi32>) scale(%scale : f32)
      -> tensor<1x?x?x16xf32>, tensor<?x?x16x16xf32>
  return %o, %s : tensor<1x?x?x16xf32>, tensor<?x?x16x16xf32>
}
