// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-chunk{segments=4}))' | FileCheck %s

// delta-chunk's segmented form (context parallelism's schedule, issue 35;
// ChunkCpuTest runs it against the fp64 reference), split as the GPU
// splits: L = ceil(longest sequence's chunks / 4), at least 1, chunks a
// segment (a maximum over cu_seqlens first), and a sequence of N chunks in
// min(max(ceil(N / L), 1), 4) segments [j L, (j + 1) L) within N; each
// segment runs from the zero state and, on K = 64 more columns of zero
// values, from -I (X = -Mpre); each chunk's output is corrected by the
// segment's entering state, O0 - (-Qh) S_start, and the segment leaves
// b - X S_start = b + M S_start.
// CHECK-LABEL: func.func @gated
// CHECK-DAG: %[[ZS:.*]] = arith.constant dense<0.000000e+00> : tensor<64x32xf32>
// CHECK-DAG: %[[NEGI:.*]] = arith.constant dense<"0x000080BF{{.*}}"> : tensor<64x64xf32>
// CHECK-DAG: %[[ZK:.*]] = arith.constant dense<0.000000e+00> : tensor<32x64xf32>
// CHECK: %[[LONGEST:.*]] = scf.for
// CHECK: arith.maxui
// CHECK: %[[PER:.*]] = arith.ceildivui %[[LONGEST]], %c4
// CHECK: %[[L:.*]] = arith.maxui %[[PER]], %c1
// CHECK: %[[SIN:.*]] = delta.state_load
// CHECK: %[[FILL:.*]] = arith.ceildivui %{{.*}}, %[[L]]
// CHECK: %[[ATLEAST:.*]] = arith.maxui %[[FILL]], %c1
// CHECK: %[[OWN:.*]] = arith.minui %[[ATLEAST]], %c4
// CHECK: %[[SEGS:.*]]:2 = scf.for %[[J:[[:alnum:]_]+]] = %c0 to %[[OWN]] step %c1 iter_args(%[[START:.*]] = %[[SIN]], %{{.*}} = %{{.*}})
// CHECK: %[[JL:.*]] = arith.muli %[[J]], %[[L]]
// CHECK: %[[C0:.*]] = arith.minui %[[JL]], %{{.*}}
// CHECK: %[[C0L:.*]] = arith.addi %[[C0]], %[[L]]
// CHECK: %[[C1:.*]] = arith.minui %[[C0L]], %{{.*}}
// CHECK: %[[SEG:.*]]:3 = scf.for %{{.*}} = %[[C0]] to %[[C1]] step %c1 iter_args(%[[B:.*]] = %[[ZS]], %[[X:.*]] = %[[NEGI]], %[[O:.*]] = %{{.*}})
// CHECK: %[[W:.*]], %[[U:.*]] = delta.chunk_wy
// CHECK: %[[VN:.*]] = delta.chunk_residual %[[U]], %[[W]], %[[B]]
// CHECK: %[[O0:.*]] = delta.chunk_output %{{.*}}, %{{.*}}, %[[VN]], %[[B]]
// CHECK: %[[B1:.*]] = delta.chunk_state_step %[[B]], %{{.*}}, %[[VN]]
// CHECK: %[[VX:.*]] = delta.chunk_residual %[[ZK]], %[[W]], %[[X]] : tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
// CHECK: %[[NQH:.*]] = delta.chunk_output %{{.*}}, %{{.*}}, %[[VX]], %[[X]] {{.*}} -> tensor<32x64xf32>
// CHECK: %[[X1:.*]] = delta.chunk_state_step %[[X]], %{{.*}}, %[[VX]] {{.*}} -> tensor<64x64xf32>
// CHECK: %[[OC:.*]] = delta.chunk_residual %[[O0]], %[[NQH]], %[[START]] : tensor<32x32xf32>, tensor<32x64xf32>, tensor<64x32xf32> -> tensor<32x32xf32>
// CHECK: delta.chunk_store %[[OC]] into %[[O]]
// CHECK: scf.yield %[[B1]], %[[X1]]
// CHECK: %[[END:.*]] = delta.chunk_residual %[[SEG]]#0, %[[SEG]]#1, %[[START]] : tensor<64x32xf32>, tensor<64x64xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
// CHECK: scf.yield %[[END]], %[[SEG]]#2
// CHECK: delta.state_store %[[SEGS]]#0
func.func @gated(%q: tensor<1x?x?x64xf32>, %k: tensor<1x?x?x64xf32>,
                 %v: tensor<1x?x?x32xf32>, %gm: tensor<1x?x?xf32>,
                 %beta: tensor<1x?x?xf32>, %s0: tensor<?x?x64x32xf32>,
                 %cu: tensor<?xi64>, %scale: f32)
    -> (tensor<1x?x?x32xf32>, tensor<?x?x64x32xf32>) {
  %o, %s = delta.chunked_recurrence gated layout = kv chunk = 32
      q(%q : tensor<1x?x?x64xf32>) k(%k : tensor<1x?x?x64xf32>)
      v(%v : tensor<1x?x?x32xf32>) gamma(%gm : tensor<1x?x?xf32>)
      beta(%beta : tensor<1x?x?xf32>) state(%s0 : tensor<?x?x64x32xf32>)
      cu_seqlens(%cu : tensor<?xi64>) scale(%scale : f32)
      -> tensor<1x?x?x32xf32>, tensor<?x?x64x32xf32>
  return %o, %s : tensor<1x?x?x32xf32>, tensor<?x?x64x32xf32>
}
