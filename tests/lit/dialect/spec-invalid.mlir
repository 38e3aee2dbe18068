// RUN: deltac-opt %s -split-input-file -verify-diagnostics

// Every rule of the spec verifier (docs/verifier.md lists them).

// expected-error @+1 {{key dim K = 100 must be a multiple of 16 in [16, 256]}}
delta.spec @k_not_multiple rule = gated dims = [100x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{value dim V = 512 must be a multiple of 16 in [16, 256]}}
delta.spec @v_too_large rule = gated dims = [128x512] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{key dim K = 0 must be a multiple of 16 in [16, 256]}}
delta.spec @k_zero rule = gated dims = [0x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{needs at least one (K, V) specialization}}
delta.spec @no_dims rule = gated dims = [] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{duplicate specialization 128x128}}
delta.spec @dup_dims rule = gated dims = [128x128, 64x64, 128x128] io = bf16
    state = f32 layout = vk gate = log beta = given chunk = 64
    entries = [prefill]

// -----

delta.spec @first rule = gated dims = [64x64, 128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
// expected-error @+1 {{duplicate specialization 128x128: spec @first already emits it with the same options}}
delta.spec @second rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{io type must be bf16, f16 or f32, got 'i8'}}
delta.spec @bad_io rule = gated dims = [128x128] io = i8 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{state type must be f32 or bf16, got 'f16'}}
delta.spec @bad_state rule = gated dims = [128x128] io = bf16 state = f16
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{rule 'kda' needs a per-channel gate (channel_log or channel_raw), got 'log'}}
delta.spec @kda_per_head rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{rule 'kda' needs a per-channel gate (channel_log or channel_raw), got 'raw'}}
delta.spec @kda_raw_per_head rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = raw beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{a linear gate (alpha) is not supported with rule 'kda'; use channel_log or channel_raw}}
delta.spec @kda_linear rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = linear beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{rule 'gated' takes one decay per head; the per-channel gate 'channel_log' belongs to rule 'kda'}}
delta.spec @gated_per_channel rule = gated dims = [128x128] io = bf16
    state = f32 layout = vk gate = channel_log beta = given chunk = 64
    entries = [prefill]

// -----

// expected-error @+1 {{rule 'gated' needs a per-head gate (log, linear or raw)}}
delta.spec @gated_no_gate rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = none beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{rule 'delta' has no gate; use gate = none (got 'log')}}
delta.spec @delta_with_gate rule = delta dims = [128x128] io = bf16
    state = f32 layout = vk gate = log beta = given chunk = 64
    entries = [prefill]

// -----

// expected-error @+1 {{chunk size 48 is not supported; use 16, 32 or 64}}
delta.spec @bad_chunk rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 48 entries = [prefill]

// -----

// expected-error @+1 {{chunk size 128 is not supported; use 16, 32 or 64}}
delta.spec @big_chunk rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 128 entries = [prefill]

// -----

// expected-error @+1 {{needs at least one entry point (prefill, decode)}}
delta.spec @no_entries rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = []

// -----

delta.spec @bad_entry rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64
    // expected-error @+1 {{unknown entry point 'mtp'; expected prefill or decode}}
    entries = [prefill, mtp]

// -----

// expected-error @+1 {{entry point 'prefill' is listed twice}}
delta.spec @dup_entry rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill, prefill]

// -----

// expected-error @+1 {{entry point 'decode' needs max_t, the largest number of tokens one decode call advances}}
delta.spec @decode_no_max_t rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode]

// -----

// expected-error @+1 {{max_t is only meaningful with the 'decode' entry point}}
delta.spec @max_t_no_decode rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill] max_t = 2

// -----

// expected-error @+1 {{max_t = 0 must lie in [1, 64]}}
delta.spec @max_t_zero rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 0

// -----

// expected-error @+1 {{max_t = 65 must lie in [1, 64]}}
delta.spec @max_t_big rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 65

// -----

delta.spec @bad_dims rule = gated
    // expected-error @+1 {{expected a specialization written KxV, e.g. 128x128}}
    dims = [128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+2 {{expected ::mlir::delta::Rule to be one of: delta, gated, kda}}
// expected-error @+1 {{failed to parse Delta_RuleAttr parameter 'value'}}
delta.spec @bad_rule rule = mamba dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

delta.spec @same rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
// expected-error @+2 {{redefinition of symbol named 'same'}}
// expected-note @-3 {{see existing symbol definition here}}
delta.spec @same rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
