// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk | deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{value-tiles=16,64}))' | FileCheck %s --check-prefix=OVERRIDE
// RUN: deltac-opt %s --delta-spec-to-chunk | deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{value-tiles=64,32,16}))' 2>&1 | FileCheck %s --check-prefix=DEAD
// RUN: deltac-opt %s --delta-spec-to-chunk | not deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{value-tiles=24}))' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: deltac-opt %s --delta-spec-to-chunk | not deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{target-model=amdgpu}))' 2>&1 | FileCheck %s --check-prefix=MODEL
// RUN: deltac-opt %s --delta-spec-to-chunk | deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{segment-min-tokens=4096 segment-eighths-per-sm=0}))' | FileCheck %s --check-prefix=CP
// RUN: deltac-opt %s --delta-spec-to-chunk | not deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{segment-eighths-per-sm=-3}))' 2>&1 | FileCheck %s --check-prefix=CPBAD
// RUN: deltac-opt %s --delta-spec-to-chunk | deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{shared-min-tokens=512 shared-quarters-per-sm=0}))' | FileCheck %s --check-prefix=SHARED
// RUN: deltac-opt %s --delta-spec-to-chunk | not deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{shared-max-tokens=100}))' 2>&1 | FileCheck %s --check-prefix=SHAREDBAD
// RUN: deltac-opt %s --delta-spec-to-chunk | not deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{shared-quarters-per-sm=-2}))' 2>&1 | FileCheck %s --check-prefix=SHAREDNEG

// The dispatch table: the widest V tile whose recur grid covers half the
// SMs (min_blocks_per_sm counts quarters of a block per SM: 2), tile 64 of
// a scalar gate from a quarter (1), the narrowest otherwise
// (unconditional, last). Tile 64 only where the state fits its warps'
// registers (K <= 128). Tile 64 of a scalar gate also takes the overlapped
// launch (chunks and recur side by side) where its grid needs at most a
// quarter of the SMs (overlap_blocks_per_sm, in quarters too). A variant
// the host could never launch is not emitted: after a scalar gate's tile
// 64 (a quarter wave of 64-wide blocks) tile 32's half a wave asks for the
// same busy * HV, so the default table of @gdn has no tile 32 (@kda's
// tile 64 waits for half a wave, and tile 32 is launched below that). A
// tile named in `value-tiles` and dropped gets a remark.
delta.spec @gdn rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given chunk = 64 entries = [prefill]
delta.spec @kda rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given chunk = 64 entries = [prefill]
delta.spec @wide rule = gated dims = [256x256] io = bf16 state = f32
    layout = kv gate = log beta = given chunk = 32 entries = [prefill]

// The shared overlapped launch's range (delta.shared_overlap) is the
// target model's too.
// Context parallelism (docs/context-parallelism.md): the host splits a
// sequence of at least min_tokens tokens into segments where recur's grid
// has at most eighths_per_sm eighths of a block per SM; the options set
// both (0 eighths: only forced calls and multi-GPU ranks split).
// CHECK-LABEL: func.func @gdn_k128_v128_prefill
// CHECK-SAME: delta.context_parallel = #delta.context_parallel<min_tokens = 8192, eighths_per_sm = 1>
// CHECK-SAME: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = 1>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]
// CHECK-SAME: delta.shared_overlap = #delta.shared_overlap<min_tokens = 1024, max_tokens = 16384, quarters_per_sm = 2>
// CHECK-LABEL: func.func @kda_k128_v128_prefill
// CHECK-SAME: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 2, overlap_blocks_per_sm = 0>, #delta.recur_variant<value_tile = 32, min_blocks_per_sm = 2, overlap_blocks_per_sm = 0>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]
// CHECK-LABEL: func.func @wide_k256_v256_prefill
// CHECK-SAME: delta.recur_variants = [#delta.recur_variant<value_tile = 32, min_blocks_per_sm = 2, overlap_blocks_per_sm = 0>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]

// OVERRIDE: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = 1>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]

// The remarks come first (stderr, while the pass runs): tile 32 of @gdn
// and of @wide (tile 64 named, so it is used for K = 256 too); none for
// @kda, whose table keeps all three.
// DEAD: remark: value tile 32 is not emitted: tile 64 is launched on every grid it would be
// DEAD-NEXT: func.func @gdn_k128_v128_prefill
// DEAD: remark: value tile 32 is not emitted: tile 64 is launched on every grid it would be
// DEAD-NEXT: func.func @wide_k256_v256_prefill
// DEAD-NOT: remark:
// DEAD: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = 1>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]
// DEAD: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 2, overlap_blocks_per_sm = 0>, #delta.recur_variant<value_tile = 32, min_blocks_per_sm = 2, overlap_blocks_per_sm = 0>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]
// DEAD: delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = 1>, #delta.recur_variant<value_tile = 16, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]

// BAD: error: value tile 24 must be a multiple of 8 that divides V = 128

// The costs come from a registered target model (passes/PlanTarget.h).
// MODEL: error: delta-plan-prefill: no target model 'amdgpu' is registered (registered: nvidia)

// CP-LABEL: func.func @gdn_k128_v128_prefill
// CP-SAME: delta.context_parallel = #delta.context_parallel<min_tokens = 4096, eighths_per_sm = 0>
// CPBAD: segment-min-tokens and segment-eighths-per-sm must be non-negative (or -1: the target model's), got -1 and -3

// The shared launch's options (0 quarters: taken only when forced); a range
// the options leave empty is an error.
// SHARED-LABEL: func.func @gdn_k128_v128_prefill
// SHARED-SAME: delta.shared_overlap = #delta.shared_overlap<min_tokens = 512, max_tokens = 16384, quarters_per_sm = 0>
// SHAREDBAD: the shared overlapped launch's range is empty: 1024 to 100 tokens per sequence
// SHAREDNEG: shared-min-tokens, shared-max-tokens and shared-quarters-per-sm must be non-negative (or -1: the target model's), got -1, -1 and -2
