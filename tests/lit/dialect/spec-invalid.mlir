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

// The duplicate check runs once per block (by its last spec) over every
// spec, whatever lies between them.
delta.spec @third rule = gated dims = [64x64] io = bf16 state = f32
    layout = kv gate = log beta = given chunk = 64 entries = [prefill]
func.func @between() { return }
delta.spec @other rule = gated dims = [64x64] io = f16 state = f32
    layout = kv gate = log beta = given chunk = 64 entries = [prefill]
// expected-error @+1 {{duplicate specialization 64x64: spec @third already emits it with the same options}}
delta.spec @fourth rule = gated dims = [32x32, 64x64] io = bf16 state = f32
    layout = kv gate = log beta = given chunk = 64 entries = [decode]
    max_t = 2
func.func @after() { return }

// -----

// expected-error @+1 {{io type must be bf16, f16 or f32, got 'i8'}}
delta.spec @bad_io rule = gated dims = [128x128] io = i8 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{state type must be f32, bf16 or f16, got 'i8'}}
delta.spec @bad_state rule = gated dims = [128x128] io = bf16 state = i8
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 2

// -----

// expected-error @+1 {{rule 'kda' needs a per-channel gate (channel_log, channel_raw or channel_call), got 'log'}}
delta.spec @kda_per_head rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{rule 'kda' needs a per-channel gate (channel_log, channel_raw or channel_call), got 'raw'}}
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

// -----

// Names become C and C++ identifiers, symbols and file names
// (dialect/GeneratedNames.cpp): `a b-c` once aborted in the NVPTX printer,
// `class` and `1abc` once wrote libraries g++ rejects.

// expected-error @+1 {{name 'a b-c' holds ' '; it must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)}}
delta.spec @"a b-c" rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name '1abc' starts with a digit}}
delta.spec @"1abc" rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name 'class' is a C or C++ keyword or a name the generated code uses}}
delta.spec @class rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name 'deltac_rt' is a C or C++ keyword or a name the generated code uses}}
delta.spec @deltac_rt rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name 'a__b' is reserved in C and C++}}
delta.spec @a__b rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name '_Gdn' is reserved in C and C++}}
delta.spec @_Gdn rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{name 'g\0A' holds '\x0A'}}
delta.spec @"g\0A" rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// expected-error @+1 {{is longer than 128 characters}}
delta.spec @a123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

// Dims the GPU lowering of an asked-for entry cannot build: prefill's
// tiles need K and V multiples of 32 (16x16 and 256x16 once reached
// delta-plan-prefill and failed there on an internal V tile, at 1:1).

module attributes {delta.targets = ["sm_90a"]} {
// expected-error @+1 {{specialization 16x16 has no GPU prefill kernel: prefill supports K and V multiples of 32 (32, 64, ..., 256)}}
delta.spec @prefill_16 rule = gated dims = [16x16] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
}

// -----

// Without targets (the CPU chunk pipeline) the same dims are valid.
delta.spec @prefill_16_cpu rule = gated dims = [16x16] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]

// -----

module attributes {delta.targets = ["sm_80"]} {
// expected-error @+1 {{specialization 256x16 has no GPU prefill kernel}}
delta.spec @prefill_256x16 rule = gated dims = [128x128, 256x16] io = bf16
    state = f32 layout = kv gate = log beta = given chunk = 64
    entries = [prefill, decode] max_t = 4
}

// -----

module attributes {delta.targets = ["sm_90a"]} {
// expected-error @+1 {{specialization 48x128 has no GPU prefill kernel}}
delta.spec @prefill_48 rule = kda dims = [48x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given chunk = 32 entries = [prefill]
}

// -----

// Decode alone builds every K x V the verifier takes: 16x16 stays valid.
delta.spec @decode_16 rule = gated dims = [16x16, 48x80] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1

// -----

// gv and a per-value beta have no chunked form: decode only.
// expected-error @+1 {{per_value (FLA's gv and per-value beta) has no chunked form: a per_value spec lists only the 'decode' entry point}}
delta.spec @pv_prefill rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given per_value chunk = 64
    entries = [prefill, decode] max_t = 2

// -----

// per_value makes different kernels: not a duplicate of the same options
// without it.
delta.spec @head_beta rule = gated dims = [64x64] io = bf16 state = f32
    layout = kv gate = log beta = given chunk = 64 entries = [decode] max_t = 2
delta.spec @value_beta rule = gated dims = [64x64] io = bf16 state = f32
    layout = kv gate = log beta = given per_value chunk = 64
    entries = [decode] max_t = 2
// expected-error @+1 {{duplicate specialization 64x64: spec @value_beta already emits it with the same options}}
delta.spec @value_beta_again rule = gated dims = [64x64] io = bf16
    state = f32 layout = kv gate = log beta = given per_value chunk = 64
    entries = [decode] max_t = 4

// -----

// Only the generic form can set both: the custom syntax has one of
// `l2norm` and `l2norm = call`.
// expected-error @+1 {{'l2norm' and 'l2norm = call' exclude each other}}
"delta.spec"() <{beta = #delta<beta given>, chunk_size = 64 : i64, dims = [#delta.dims<k = 64, v = 64>], entries = [#delta<entry decode>], gate = #delta<gate log>, io_type = bf16, l2norm_call, qk_l2norm, layout = #delta<layout kv>, max_t = 1 : i64, rule = #delta<rule gated>, state_type = f32, sym_name = "both"}> : () -> ()

// -----

delta.spec @l2norm_eq rule = gated dims = [64x64] io = bf16 state = f32
    // expected-error @+1 {{custom op 'delta.spec' expected 'call' after 'l2norm =' (the call chooses)}}
    layout = kv gate = log beta = given l2norm = on chunk = 64
    entries = [decode] max_t = 1
