// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking))' -split-input-file -verify-diagnostics | FileCheck %s
// RUN: deltac-opt %s --pass-pipeline='builtin.module(func.func(delta-prepare-chunking{chunk-size=16}))' -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=C16

// Prefill: decays summed inside chunks (restarting at cu_seqlens), then the
// chunked recurrence. The chunk size comes from the function.
// CHECK-LABEL: func.func @prefill
// CHECK: %[[GM:.*]] = delta.chunk_cumsum %{{.*}} cu_seqlens(%[[CU:.*]] : tensor<?xi64>) chunk = 32 : tensor<1x?x4xf32> -> tensor<1x?x4xf32>
// CHECK: delta.chunked_recurrence gated layout = vk chunk = 32
// CHECK-SAME: gamma(%[[GM]] : tensor<1x?x4xf32>)
// CHECK-SAME: cu_seqlens(%[[CU]] : tensor<?xi64>)
// CHECK-NOT: delta.recurrence
// C16-LABEL: func.func @prefill
// C16: delta.chunk_cumsum {{.*}} chunk = 16
// C16: delta.chunked_recurrence gated layout = vk chunk = 16
func.func @prefill(%q: tensor<1x?x4x64xf32>, %k: tensor<1x?x4x64xf32>,
                   %v: tensor<1x?x4x64xbf16>, %g: tensor<1x?x4xf32>,
                   %beta: tensor<1x?x4xf32>, %s0: tensor<?x4x64x64xf32>,
                   %cu: tensor<?xi64>, %scale: f32) -> tensor<?x4x64x64xf32>
    attributes {delta.entry = #delta<entry prefill>, delta.chunk_size = 32} {
  %o, %s = delta.recurrence gated layout = vk gate = log beta = given
      q(%q : tensor<1x?x4x64xf32>) k(%k : tensor<1x?x4x64xf32>)
      v(%v : tensor<1x?x4x64xbf16>) g(%g : tensor<1x?x4xf32>)
      beta(%beta : tensor<1x?x4xf32>) state(%s0 : tensor<?x4x64x64xf32>)
      cu_seqlens(%cu : tensor<?xi64>) scale(%scale : f32)
      -> tensor<1x?x4x64xbf16>, tensor<?x4x64x64xf32>
  return %s : tensor<?x4x64x64xf32>
}

// -----

// DeltaNet has no decays to sum.
// CHECK-LABEL: func.func @deltanet
// CHECK-NOT: delta.chunk_cumsum
// CHECK: delta.chunked_recurrence delta layout = kv chunk = 64
// CHECK-NOT: gamma(
func.func @deltanet(%q: tensor<1x?x4x64xf32>, %k: tensor<1x?x4x64xf32>,
                    %v: tensor<1x?x4x64xbf16>, %beta: tensor<1x?x4xf32>,
                    %scale: f32) -> tensor<1x4x64x64xf32>
    attributes {delta.entry = #delta<entry prefill>, delta.chunk_size = 64} {
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x?x4x64xf32>) k(%k : tensor<1x?x4x64xf32>)
      v(%v : tensor<1x?x4x64xbf16>) beta(%beta : tensor<1x?x4xf32>)
      scale(%scale : f32) -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}

// -----

// Decode functions are not chunked.
// CHECK-LABEL: func.func @decode
// CHECK: delta.recurrence gated
// CHECK-NOT: delta.chunked_recurrence
func.func @decode(%q: tensor<?x?x4x64xf32>, %k: tensor<?x?x4x64xf32>,
                  %v: tensor<?x?x4x64xbf16>, %g: tensor<?x?x4xf32>,
                  %beta: tensor<?x?x4xf32>, %scale: f32) -> tensor<?x4x64x64xf32>
    attributes {delta.entry = #delta<entry decode>, delta.max_t = 2} {
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<?x?x4x64xf32>) k(%k : tensor<?x?x4x64xf32>)
      v(%v : tensor<?x?x4x64xbf16>) g(%g : tensor<?x?x4xf32>)
      beta(%beta : tensor<?x?x4xf32>) scale(%scale : f32)
      -> tensor<?x?x4x64xbf16>, tensor<?x4x64x64xf32>
  return %s : tensor<?x4x64x64xf32>
}

// -----

// Non-canonical options must be normalised first.
func.func @not_canonical(%q: tensor<1x?x4x64xf32>, %k: tensor<1x?x4x64xf32>,
                         %v: tensor<1x?x4x64xbf16>, %g: tensor<1x?x4xf32>,
                         %b: tensor<1x?x4xf32>, %scale: f32) -> tensor<1x4x64x64xf32>
    attributes {delta.entry = #delta<entry prefill>, delta.chunk_size = 64} {
  // expected-error @+1 {{recurrence has non-canonical options; run delta-normalize-options before delta-prepare-chunking}}
  %o, %s = delta.recurrence gated layout = kv gate = linear beta = sigmoid
      q(%q : tensor<1x?x4x64xf32>) k(%k : tensor<1x?x4x64xf32>)
      v(%v : tensor<1x?x4x64xbf16>) g(%g : tensor<1x?x4xf32>)
      beta(%b : tensor<1x?x4xf32>) scale(%scale : f32)
      -> tensor<1x?x4x64xbf16>, tensor<1x4x64x64xf32>
  return %s : tensor<1x4x64x64xf32>
}
