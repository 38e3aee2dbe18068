// RUN: deltac-opt %s -split-input-file -verify-diagnostics

// Every rule of the sequence-level verifier (docs/verifier.md lists them).

func.func @h_mismatch(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x3x64xbf16>,
                      %v: tensor<1x4x6x64xbf16>, %g: tensor<1x4x6xf32>,
                      %b: tensor<1x4x6xbf16>, %scale: f32) {
  // expected-error @+1 {{H differs between operands: 'q' has 2, 'k' has 3}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x3x64xbf16>)
      v(%v : tensor<1x4x6x64xbf16>) g(%g : tensor<1x4x6xf32>)
      beta(%b : tensor<1x4x6xbf16>) scale(%scale : f32)
      -> tensor<1x4x6x64xbf16>, tensor<1x6x64x64xf32>
  return
}

// -----

func.func @gva_not_multiple(%q: tensor<1x4x4x64xbf16>, %k: tensor<1x4x4x64xbf16>,
                            %v: tensor<1x4x6x64xbf16>, %g: tensor<1x4x6xf32>,
                            %b: tensor<1x4x6xbf16>, %scale: f32) {
  // expected-error @+1 {{value heads HV = 6 must be a multiple of the query heads H = 4}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x4x64xbf16>) k(%k : tensor<1x4x4x64xbf16>)
      v(%v : tensor<1x4x6x64xbf16>) g(%g : tensor<1x4x6xf32>)
      beta(%b : tensor<1x4x6xbf16>) scale(%scale : f32)
      -> tensor<1x4x6x64xbf16>, tensor<1x6x64x64xf32>
  return
}

// -----

func.func @state_layout(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                        %v: tensor<1x4x2x128xbf16>, %g: tensor<1x4x2xf32>,
                        %b: tensor<1x4x2xbf16>, %scale: f32) {
  // A vk state is [N, HV, V, K]: a [K, V] state is wrong.
  // expected-error @+1 {{K differs between operands: 'q' has 64, 'final_state' has 128}}
  %o, %s = delta.recurrence gated layout = vk gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x128xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x128xbf16>, tensor<1x2x64x128xf32>
  return
}

// -----

func.func @t_mismatch(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                      %v: tensor<1x5x2x64xbf16>, %g: tensor<1x4x2xf32>,
                      %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{T differs between operands: 'q' has 4, 'v' has 5}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x5x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x5x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @rank(%q: tensor<4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{expects 'q' of rank 4 [B, T, H, K], got 'tensor<4x2x64xbf16>'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @kda_gate_rank(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                         %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                         %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{expects 'g' of rank 4 [B, T, HV, K], got 'tensor<1x4x2xf32>'}}
  %o, %s = delta.recurrence kda layout = kv gate = channel_log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @kda_gate_k(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                      %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2x32xf32>,
                      %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{K differs between operands: 'q' has 64, 'g' has 32}}
  %o, %s = delta.recurrence kda layout = kv gate = channel_log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2x32xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @delta_with_g(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                        %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                        %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{rule 'delta' has no gate; use gate = none (got 'log')}}
  %o, %s = delta.recurrence delta layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @delta_g_operand(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                           %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                           %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{rule 'delta' takes no 'g'}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @gated_no_g(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                      %v: tensor<1x4x2x64xbf16>, %b: tensor<1x4x2xbf16>,
                      %scale: f32) {
  // expected-error @+1 {{rule 'gated' needs 'g'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) beta(%b : tensor<1x4x2xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @raw_needs_params(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                            %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xbf16>,
                            %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{gate 'raw' needs 'a_log' and 'dt_bias'}}
  %o, %s = delta.recurrence gated layout = kv gate = raw beta = sigmoid
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xbf16>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @params_not_raw(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                          %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                          %b: tensor<1x4x2xbf16>, %al: tensor<2xf32>,
                          %dt: tensor<2xf32>, %scale: f32) {
  // expected-error @+1 {{'a_log' and 'dt_bias' are only taken by the raw gate forms}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) a_log(%al : tensor<2xf32>)
      dt_bias(%dt : tensor<2xf32>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @varlen_batch(%q: tensor<2x4x2x64xbf16>, %k: tensor<2x4x2x64xbf16>,
                        %v: tensor<2x4x2x64xbf16>, %g: tensor<2x4x2xf32>,
                        %b: tensor<2x4x2xbf16>, %cu: tensor<3xi64>,
                        %scale: f32) {
  // expected-error @+1 {{with 'cu_seqlens' the batch must be 1, got B = 2}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<2x4x2x64xbf16>) k(%k : tensor<2x4x2x64xbf16>)
      v(%v : tensor<2x4x2x64xbf16>) g(%g : tensor<2x4x2xf32>)
      beta(%b : tensor<2x4x2xbf16>) cu_seqlens(%cu : tensor<3xi64>)
      scale(%scale : f32) -> tensor<2x4x2x64xbf16>, tensor<2x2x64x64xf32>
  return
}

// -----

func.func @varlen_count(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                        %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                        %b: tensor<1x4x2xbf16>, %cu: tensor<3xi64>,
                        %scale: f32) {
  // expected-error @+1 {{'cu_seqlens' has 3 entries for N = 3 sequences; expected N + 1}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) cu_seqlens(%cu : tensor<3xi64>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<3x2x64x64xf32>
  return
}

// -----

func.func @batch_state(%q: tensor<2x4x2x64xbf16>, %k: tensor<2x4x2x64xbf16>,
                       %v: tensor<2x4x2x64xbf16>, %g: tensor<2x4x2xf32>,
                       %b: tensor<2x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{without 'cu_seqlens' the state holds one entry per batch row: N = 3 but B = 2}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<2x4x2x64xbf16>) k(%k : tensor<2x4x2x64xbf16>)
      v(%v : tensor<2x4x2x64xbf16>) g(%g : tensor<2x4x2xf32>)
      beta(%b : tensor<2x4x2xbf16>) scale(%scale : f32)
      -> tensor<2x4x2x64xbf16>, tensor<3x2x64x64xf32>
  return
}

// -----

func.func @qk_types(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xf16>,
                    %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                    %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{expects 'q' and 'k' of one element type}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @vo_types(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                    %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                    %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{expects 'v' and 'o' of one element type}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xf32>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @state_types(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                       %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                       %b: tensor<1x4x2xbf16>, %s0: tensor<1x2x64x64xbf16>,
                       %scale: f32) {
  // expected-error @+1 {{expects the initial and final state of one type, got 'tensor<1x2x64x64xbf16>' and 'tensor<1x2x64x64xf32>'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) state(%s0 : tensor<1x2x64x64xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @chunked_bad_chunk(%q: tensor<1x4x2x64xf32>, %k: tensor<1x4x2x64xf32>,
                             %v: tensor<1x4x2x64xf32>, %gm: tensor<1x4x2xf32>,
                             %b: tensor<1x4x2xf32>, %scale: f32) {
  // expected-error @+1 {{chunk size 8 is not supported; use 16, 32 or 64}}
  %o, %s = delta.chunked_recurrence gated layout = kv chunk = 8
      q(%q : tensor<1x4x2x64xf32>) k(%k : tensor<1x4x2x64xf32>)
      v(%v : tensor<1x4x2x64xf32>) gamma(%gm : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xf32>) scale(%scale : f32)
      -> tensor<1x4x2x64xf32>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @chunked_gamma(%q: tensor<1x4x2x64xf32>, %k: tensor<1x4x2x64xf32>,
                         %v: tensor<1x4x2x64xf32>, %b: tensor<1x4x2xf32>,
                         %scale: f32) {
  // expected-error @+1 {{rule 'gated' needs 'gamma'}}
  %o, %s = delta.chunked_recurrence gated layout = kv chunk = 64
      q(%q : tensor<1x4x2x64xf32>) k(%k : tensor<1x4x2x64xf32>)
      v(%v : tensor<1x4x2x64xf32>) beta(%b : tensor<1x4x2xf32>)
      scale(%scale : f32) -> tensor<1x4x2x64xf32>, tensor<1x2x64x64xf32>
  return
}

// -----

// Found by the fuzzer: H = 0 divided HV.
func.func @zero_heads(%q: tensor<1x4x0x64xbf16>, %k: tensor<1x4x0x64xbf16>,
                      %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                      %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{H must be positive, got 0}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x0x64xbf16>) k(%k : tensor<1x4x0x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @gv_rank(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                   %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                   %gv: tensor<1x4x2xf32>, %b: tensor<1x4x2xbf16>,
                   %scale: f32) {
  // expected-error @+1 {{expects 'gv' of rank 4 [B, T, HV, V], got 'tensor<1x4x2xf32>'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      gv(%gv : tensor<1x4x2xf32>) beta(%b : tensor<1x4x2xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @gv_f32(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                  %v: tensor<1x4x2x64xbf16>, %gv: tensor<1x4x2x64xbf16>,
                  %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{expects 'gv' (log decays) of f32, got 'bf16'}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) gv(%gv : tensor<1x4x2x64xbf16>)
      beta(%b : tensor<1x4x2xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @gv_v(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                %v: tensor<1x4x2x64xbf16>, %gv: tensor<1x4x2x32xf32>,
                %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{V differs between operands: 'v' has 64, 'gv' has 32}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) gv(%gv : tensor<1x4x2x32xf32>)
      beta(%b : tensor<1x4x2xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @beta_per_value_v(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                            %v: tensor<1x4x2x64xbf16>, %b: tensor<1x4x2x16xbf16>,
                            %scale: f32) {
  // expected-error @+1 {{V differs between operands: 'v' has 64, 'beta' has 16}}
  %o, %s = delta.recurrence delta layout = kv gate = none beta = given
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) beta(%b : tensor<1x4x2x16xbf16>)
      scale(%scale : f32) -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @call_without_options(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                                %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                                %b: tensor<1x4x2xbf16>, %scale: f32) {
  // expected-error @+1 {{'gate = call', 'beta = call' and 'l2norm = call' need the call's 'options'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = call
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}

// -----

func.func @options_without_call(%q: tensor<1x4x2x64xbf16>, %k: tensor<1x4x2x64xbf16>,
                                %v: tensor<1x4x2x64xbf16>, %g: tensor<1x4x2xf32>,
                                %b: tensor<1x4x2xbf16>, %scale: f32, %opt: i32) {
  // expected-error @+1 {{'options' are only taken with 'gate = call', 'beta = call' or 'l2norm = call'}}
  %o, %s = delta.recurrence gated layout = kv gate = log beta = given l2norm
      q(%q : tensor<1x4x2x64xbf16>) k(%k : tensor<1x4x2x64xbf16>)
      v(%v : tensor<1x4x2x64xbf16>) g(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xbf16>) scale(%scale : f32) options(%opt : i32)
      -> tensor<1x4x2x64xbf16>, tensor<1x2x64x64xf32>
  return
}
