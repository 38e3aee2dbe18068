// RUN: deltac-opt %s -split-input-file -verify-diagnostics

// Verifiers of the elementwise preparation ops.

func.func @raw_rank(%a: tensor<4x2xbf16>, %al: tensor<2xf32>, %dt: tensor<2xf32>) {
  // expected-error @+1 {{expects 'a' of rank 3 [B, T, HV] or rank 4 [B, T, HV, K], got rank 2}}
  %g = delta.gate_from_raw %a, %al, %dt : tensor<4x2xbf16>, tensor<2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @raw_params(%a: tensor<1x4x2xbf16>, %al: tensor<1x2xf32>, %dt: tensor<2xf32>) {
  // expected-error @+1 {{expects 'a_log' and 'dt_bias' of rank 1}}
  %g = delta.gate_from_raw %a, %al, %dt : tensor<1x4x2xbf16>, tensor<1x2xf32>, tensor<2xf32> -> tensor<1x4x2xf32>
  return
}

// -----

func.func @raw_shape(%a: tensor<1x4x2xbf16>, %al: tensor<2xf32>, %dt: tensor<2xf32>) {
  // expected-error @+1 {{result shape must equal the shape of 'a'}}
  %g = delta.gate_from_raw %a, %al, %dt : tensor<1x4x2xbf16>, tensor<2xf32>, tensor<2xf32> -> tensor<1x4x3xf32>
  return
}

// -----

func.func @beta_factor(%b: tensor<1x4x2xbf16>) {
  // expected-error @+1 {{factor must be 1 or 2, got 3}}
  %beta = delta.beta_sigmoid %b factor = 3.0 : tensor<1x4x2xbf16> -> tensor<1x4x2xf32>
  return
}

// -----

func.func @cumsum_chunk(%g: tensor<1x4x2xf32>) {
  // expected-error @+1 {{chunk size 100 is not supported; use 16, 32 or 64}}
  %gm = delta.chunk_cumsum %g chunk = 100 : tensor<1x4x2xf32> -> tensor<1x4x2xf32>
  return
}

// -----

func.func @cumsum_rank(%g: tensor<4x2xf32>) {
  // expected-error @+1 {{expects decays of rank 3 [B, T, HV] or 4 [B, T, HV, K], got rank 2}}
  %gm = delta.chunk_cumsum %g chunk = 64 : tensor<4x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @cumsum_cu(%g: tensor<1x4x2xf32>, %cu: tensor<1x3xi64>) {
  // expected-error @+1 {{expects 'cu_seqlens' of rank 1 [N + 1]}}
  %gm = delta.chunk_cumsum %g cu_seqlens(%cu : tensor<1x3xi64>) chunk = 64 : tensor<1x4x2xf32> -> tensor<1x4x2xf32>
  return
}

// -----

func.func @l2norm_shape(%q: tensor<1x4x2x64xbf16>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %n = delta.l2norm %q : tensor<1x4x2x64xbf16> -> tensor<1x4x2x32xf32>
  return
}
