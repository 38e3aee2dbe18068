// RUN: deltac-opt %s -split-input-file | FileCheck %s
// RUN: deltac-opt %s -split-input-file | deltac-opt -split-input-file | FileCheck %s
// RUN: deltac-opt %s -split-input-file --mlir-print-op-generic | deltac-opt -split-input-file | FileCheck %s

// Gated DeltaNet: raw gate with A_log/dt_bias, sigmoid beta, l2norm, GVA
// (H = 16, HV = 32), v-first state.
// CHECK-LABEL: func.func @gated_raw
// CHECK: delta.recurrence gated layout = vk gate = raw beta = sigmoid l2norm
// CHECK-SAME: q(%{{[[:alnum:]_]+}} : tensor<2x5x16x128xbf16>) k(%{{[[:alnum:]_]+}} : tensor<2x5x16x128xbf16>)
// CHECK-SAME: v(%{{[[:alnum:]_]+}} : tensor<2x5x32x128xbf16>) g(%{{[[:alnum:]_]+}} : tensor<2x5x32xbf16>)
// CHECK-SAME: beta(%{{[[:alnum:]_]+}} : tensor<2x5x32xbf16>) a_log(%{{[[:alnum:]_]+}} : tensor<32xf32>) dt_bias(%{{[[:alnum:]_]+}} : tensor<32xf32>)
// CHECK-SAME: state(%{{[[:alnum:]_]+}} : tensor<2x32x128x128xf32>) scale(%{{[[:alnum:]_]+}} : f32)
// CHECK-SAME: -> tensor<2x5x32x128xbf16>, tensor<2x32x128x128xf32>
func.func @gated_raw(%q: tensor<2x5x16x128xbf16>, %k: tensor<2x5x16x128xbf16>,
                     %v: tensor<2x5x32x128xbf16>, %a: tensor<2x5x32xbf16>,
                     %b: tensor<2x5x32xbf16>, %alog: tensor<32xf32>,
                     %dt: tensor<32xf32>, %s0: tensor<2x32x128x128xf32>,
                     %scale: f32) -> (tensor<2x5x32x128xbf16>, tensor<2x32x128x128xf32>) {
  %o, %s = delta.recurrence gated layout = vk gate = raw beta = sigmoid l2norm
      q(%q : tensor<2x5x16x128xbf16>) k(%k : tensor<2x5x16x128xbf16>)
      v(%v : tensor<2x5x32x128xbf16>) g(%a : tensor<2x5x32xbf16>)
      beta(%b : tensor<2x5x32xbf16>) a_log(%alog : tensor<32xf32>)
      dt_bias(%dt : tensor<32xf32>) state(%s0 : tensor<2x32x128x128xf32>)
      scale(%scale : f32) -> tensor<2x5x32x128xbf16>, tensor<2x32x128x128xf32>
  return %o, %s : tensor<2x5x32x128xbf16>, tensor<2x32x128x128xf32>
}

// -----

// Plain DeltaNet, varlen (B = 1 with cu_seqlens), no initial state, kv layout.
// CHECK-LABEL: func.func @delta_varlen
// CHECK: delta.recurrence delta layout = kv gate = none beta = given
// CHECK-NOT: g(
// CHECK-SAME: cu_seqlens(%{{[[:alnum:]_]+}} : tensor<4xi32>)
// CHECK-SAME: -> tensor<1x?x8x64xf16>, tensor<3x8x64x64xf32>
func.func @delta_varlen(%q: tensor<1x?x8x64xf16>, %k: tensor<1x?x8x64xf16>,
                        %v: tensor<1x?x8x64xf16>, %beta: tensor<1x?x8xf16>,
                        %cu: tensor<4xi32>, %scale: f32) -> tensor<1x?x8x64xf16> {
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x?x8x64xf16>) k(%k : tensor<1x?x8x64xf16>)
      v(%v : tensor<1x?x8x64xf16>) beta(%beta : tensor<1x?x8xf16>)
      cu_seqlens(%cu : tensor<4xi32>) scale(%scale : f32)
      -> tensor<1x?x8x64xf16>, tensor<3x8x64x64xf32>
  return %o : tensor<1x?x8x64xf16>
}

// -----

// Kimi Delta Attention: a decay per K channel ([B, T, HV, K]), K != V.
// CHECK-LABEL: func.func @kda
// CHECK: delta.recurrence kda layout = kv gate = channel_log beta = given
// CHECK-SAME: g(%{{[[:alnum:]_]+}} : tensor<?x?x4x64xf32>)
func.func @kda(%q: tensor<?x?x4x64xbf16>, %k: tensor<?x?x4x64xbf16>,
               %v: tensor<?x?x4x128xbf16>, %g: tensor<?x?x4x64xf32>,
               %beta: tensor<?x?x4xbf16>, %s0: tensor<?x4x64x128xf32>,
               %scale: f32) -> tensor<?x4x64x128xf32> {
  %o, %s = delta.recurrence kda layout = kv gate = channel_log beta = given
      q(%q : tensor<?x?x4x64xbf16>) k(%k : tensor<?x?x4x64xbf16>)
      v(%v : tensor<?x?x4x128xbf16>) g(%g : tensor<?x?x4x64xf32>)
      beta(%beta : tensor<?x?x4xbf16>) state(%s0 : tensor<?x4x64x128xf32>)
      scale(%scale : f32) -> tensor<?x?x4x128xbf16>, tensor<?x4x64x128xf32>
  return %s : tensor<?x4x64x128xf32>
}

// -----

// The elementwise preparation ops that delta-normalize-options introduces.
// CHECK-LABEL: func.func @prep
// CHECK: delta.l2norm %{{[[:alnum:]_]+}} : tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xf32>
// CHECK: delta.gate_from_raw %{{[[:alnum:]_]+}}, %{{[[:alnum:]_]+}}, %{{[[:alnum:]_]+}} : tensor<?x?x?xbf16>, tensor<?xf32>, tensor<?xf32> -> tensor<?x?x?xf32>
// CHECK: delta.gate_from_linear %{{[[:alnum:]_]+}} : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
// CHECK: delta.beta_sigmoid %{{[[:alnum:]_]+}} factor = 2.000000e+00 : tensor<?x?x?xbf16> -> tensor<?x?x?xf32>
// CHECK: delta.chunk_cumsum %{{[[:alnum:]_]+}} cu_seqlens(%{{[[:alnum:]_]+}} : tensor<?xi64>) chunk = 32 : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
func.func @prep(%q: tensor<?x?x?x128xbf16>, %a: tensor<?x?x?xbf16>,
                %alog: tensor<?xf32>, %dt: tensor<?xf32>,
                %alpha: tensor<?x?x?xf32>, %b: tensor<?x?x?xbf16>,
                %cu: tensor<?xi64>) {
  %0 = delta.l2norm %q : tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xf32>
  %1 = delta.gate_from_raw %a, %alog, %dt
      : tensor<?x?x?xbf16>, tensor<?xf32>, tensor<?xf32> -> tensor<?x?x?xf32>
  %2 = delta.gate_from_linear %alpha : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  %3 = delta.beta_sigmoid %b factor = 2.0 : tensor<?x?x?xbf16> -> tensor<?x?x?xf32>
  %4 = delta.chunk_cumsum %1 cu_seqlens(%cu : tensor<?xi64>) chunk = 32
      : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  return
}

// -----

// The canonical recurrence with decays summed inside chunks.
// CHECK-LABEL: func.func @chunked
// CHECK: delta.chunked_recurrence gated layout = vk chunk = 64
// CHECK-SAME: gamma(%{{[[:alnum:]_]+}} : tensor<1x?x32xf32>)
// CHECK-SAME: cu_seqlens(%{{[[:alnum:]_]+}} : tensor<?xi64>)
func.func @chunked(%q: tensor<1x?x16x128xf32>, %k: tensor<1x?x16x128xf32>,
                   %v: tensor<1x?x32x128xbf16>, %gm: tensor<1x?x32xf32>,
                   %beta: tensor<1x?x32xf32>, %s0: tensor<?x32x128x128xf32>,
                   %cu: tensor<?xi64>, %scale: f32) -> tensor<?x32x128x128xf32> {
  %o, %s = delta.chunked_recurrence gated layout = vk chunk = 64
      q(%q : tensor<1x?x16x128xf32>) k(%k : tensor<1x?x16x128xf32>)
      v(%v : tensor<1x?x32x128xbf16>) gamma(%gm : tensor<1x?x32xf32>)
      beta(%beta : tensor<1x?x32xf32>) state(%s0 : tensor<?x32x128x128xf32>)
      cu_seqlens(%cu : tensor<?xi64>) scale(%scale : f32)
      -> tensor<1x?x32x128xbf16>, tensor<?x32x128x128xf32>
  return %s : tensor<?x32x128x128xf32>
}

// -----

// FLA's per-value terms: gv [B, T, HV, V] and beta [B, T, HV, V].
// CHECK-LABEL: func @per_value
// CHECK: delta.recurrence kda layout = kv gate = channel_log beta = sigmoid
// CHECK-SAME: gv(%{{[[:alnum:]_]+}} : tensor<?x?x4x64xf32>)
// CHECK-SAME: beta(%{{[[:alnum:]_]+}} : tensor<?x?x4x64xbf16>)
func.func @per_value(%q: tensor<?x?x2x32xbf16>, %k: tensor<?x?x2x32xbf16>,
                     %v: tensor<?x?x4x64xbf16>, %g: tensor<?x?x4x32xf32>,
                     %gv: tensor<?x?x4x64xf32>, %b: tensor<?x?x4x64xbf16>,
                     %scale: f32) -> tensor<?x4x32x64xf32> {
  %o, %s = delta.recurrence kda layout = kv gate = channel_log beta = sigmoid
      q(%q : tensor<?x?x2x32xbf16>) k(%k : tensor<?x?x2x32xbf16>)
      v(%v : tensor<?x?x4x64xbf16>) g(%g : tensor<?x?x4x32xf32>)
      gv(%gv : tensor<?x?x4x64xf32>) beta(%b : tensor<?x?x4x64xbf16>)
      scale(%scale : f32) -> tensor<?x?x4x64xbf16>, tensor<?x4x32x64xf32>
  return %s : tensor<?x4x32x64xf32>
}
