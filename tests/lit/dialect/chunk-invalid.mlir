// RUN: deltac-opt %s -split-input-file -verify-diagnostics

// Shape rules of the chunk-level ops (docs/verifier.md lists them).

func.func @kkt_rows(%k: tensor<16x16xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'beta' dim 0 is 32 but C is 16 elsewhere}}
  %l = delta.chunk_kkt %k, %b : tensor<16x16xf32>, tensor<32xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @chunk_rows(%k: tensor<24x16xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{chunk of 24 rows is not supported; use 16, 32 or 64}}
  %l = delta.chunk_kkt %k, %b : tensor<24x16xf32>, tensor<24xf32> -> tensor<24x24xf32>
  return
}

// -----

func.func @gamma_channels(%k: tensor<16x16xf32>, %b: tensor<16xf32>, %g: tensor<16x32xf32>) {
  // expected-error @+1 {{'gamma' dim 1 is 32 but K is 16 elsewhere}}
  %l = delta.chunk_kkt %k, %b gamma(%g : tensor<16x32xf32>) : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @solve_dynamic(%l: tensor<?x16xf32>) {
  // expected-error @+1 {{expects a static shape for 'l'}}
  %a = delta.solve_tril %l : tensor<?x16xf32>
  return
}

// -----

func.func @residual_state(%u: tensor<16x32xf32>, %w: tensor<16x16xf32>, %s: tensor<32x16xf32>) {
  // expected-error @+1 {{'state' dim 0 is 32 but K is 16 elsewhere}}
  %vn = delta.chunk_residual %u, %w, %s : tensor<16x32xf32>, tensor<16x16xf32>, tensor<32x16xf32> -> tensor<16x32xf32>
  return
}

// -----

func.func @load_width(%q: tensor<1x?x?x64xbf16>, %i: index) {
  // expected-error @+1 {{chunk row of 32 elements does not match the tensor's 64}}
  %c = delta.chunk_load %q[%i, %i, %i] len(%i) : tensor<1x?x?x64xbf16> -> tensor<16x32xf32>
  return
}

// -----

func.func @load_rank(%b: tensor<1x?x?xf32>, %i: index) {
  // expected-error @+1 {{expects a static chunk of rank 1}}
  %c = delta.chunk_load %b[%i, %i, %i] len(%i) : tensor<1x?x?xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @state_layout(%s0: tensor<?x?x32x16xf32>, %i: index) {
  // expected-error @+1 {{does not hold [K, V] = [32, 16] states in layout vk}}
  %s = delta.state_load %s0[%i, %i] layout = vk : tensor<?x?x32x16xf32> -> tensor<32x16xf32>
  return
}
