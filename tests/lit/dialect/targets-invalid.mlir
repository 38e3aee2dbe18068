// RUN: deltac-opt %s -split-input-file -verify-diagnostics

// The `delta.targets` module attribute and the function attributes written
// by delta-expand-spec.

// expected-error @+1 {{unknown target 'sm_75'; supported targets are sm_80, sm_90a, sm_100a}}
module attributes {delta.targets = ["sm_90a", "sm_75"]} {}

// -----

// expected-error @+1 {{target 'sm_80' is listed twice}}
module attributes {delta.targets = ["sm_80", "sm_80"]} {}

// -----

// expected-error @+1 {{'delta.targets' must be a non-empty array of target names}}
module attributes {delta.targets = []} {}

// -----

// expected-error @+1 {{'delta.targets' must hold strings, got 80 : i64}}
module attributes {delta.targets = [80]} {}

// -----

module {
  // expected-error @+1 {{'delta.targets' must be set on a builtin.module}}
  func.func @f() attributes {delta.targets = ["sm_80"]} { return }
}

// -----

// expected-error @+1 {{unknown delta dialect attribute 'delta.bogus'}}
func.func @f() attributes {delta.bogus = 1} { return }

// -----

// expected-error @+1 {{chunk size 24 is not supported; use 16, 32 or 64}}
func.func @f() attributes {delta.chunk_size = 24} { return }

// -----

// expected-error @+1 {{'delta.max_t' must be a positive integer}}
func.func @f() attributes {delta.max_t = 0} { return }

// -----

// expected-error @+1 {{'delta.entry' must be an entry point attribute}}
func.func @f() attributes {delta.entry = "decode"} { return }

// -----

// expected-error @+1 {{'delta.spec' must name a delta.spec}}
func.func @f() attributes {delta.spec = "x"} { return }

// -----

// A kernel's launch values are one typed attribute: loose ones are unknown.
// expected-error @+1 {{unknown delta dialect attribute 'delta.grid_x'}}
func.func @f() attributes {delta.grid_x = 2} { return }

// -----

// expected-error @+1 {{'delta.kernel' must be a #delta.kernel}}
func.func @f() attributes {delta.kernel = {grid_x = 2 : i64}} { return }

// -----

// expected-error @+1 {{kernel: block_threads must be a positive multiple of 32, got 100}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = recur, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 100>} { return }

// -----

// expected-error @+1 {{kernel: dynamic_smem and dynamic_smem_stage must not be negative, the stage at most the whole, got 1024 and 2048}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = recur, code = bulk, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 1024, dynamic_smem_stage = 2048>} { return }

// -----

// expected-error @+1 {{kernel: min_blocks_per_sm and overlap_blocks_per_sm must not be negative, got -1 and 0}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = decode, code = all, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 128, min_blocks_per_sm = -1>} { return }

// -----

// expected-error @+2 {{expected ::mlir::delta::KernelRole to be one of: decode, prep, chunks, queue, chunks_raw, recur, recur_shared}}
// expected-error @+1 {{failed to parse Delta_KernelAttr parameter 'role'}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = mixer, code = all, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 128>} { return }

// -----

// The plan's entries are typed: a dictionary is not one.
// expected-error @+1 {{'delta.recur_variants' must be a non-empty array of #delta.recur_variant}}
func.func @f() attributes {delta.recur_variants = [{value_tile = 64 : i64, min_blocks_per_sm = 1 : i64}]} { return }

// -----

// expected-error @+1 {{recur variant: value_tile must be a positive multiple of 8, got 12}}
func.func @f() attributes {delta.recur_variants = [#delta.recur_variant<value_tile = 12, min_blocks_per_sm = 0, overlap_blocks_per_sm = 0>]} { return }

// -----

// expected-error @+1 {{recur variant: min_blocks_per_sm and overlap_blocks_per_sm must not be negative, got 1 and -1}}
func.func @f() attributes {delta.recur_variants = [#delta.recur_variant<value_tile = 64, min_blocks_per_sm = 1, overlap_blocks_per_sm = -1>]} { return }

// -----

// A function's specialization is a #delta.dims, not a loose pair.
// expected-error @+1 {{'delta.dims' must be a #delta.dims}}
func.func @f() attributes {delta.dims = [128, 128]} { return }

// -----

// Context parallelism's thresholds (delta-plan-prefill) are a typed
// attribute with non-negative fields.
// expected-error @+1 {{'delta.context_parallel' must be a #delta.context_parallel}}
func.func @f() attributes {delta.context_parallel = 8192 : i64} { return }

// -----

// expected-error @+1 {{context_parallel: min_tokens and eighths_per_sm must not be negative, got 8192 and -1}}
func.func @f() attributes {delta.context_parallel = #delta.context_parallel<min_tokens = 8192, eighths_per_sm = -1>} { return }

// -----

// expected-error @+1 {{kernel: min_tokens and cp_eighths_per_sm must not be negative, got 0 and -2}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = recur_cp, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, cp_eighths_per_sm = -2>} { return }

// -----

// The shared overlapped launch's range (delta-plan-prefill).
// expected-error @+1 {{shared_overlap: need 0 <= min_tokens <= max_tokens and quarters_per_sm >= 0, got 2048, 1024 and 2}}
func.func @f() attributes {delta.shared_overlap = #delta.shared_overlap<min_tokens = 2048, max_tokens = 1024, quarters_per_sm = 2>} { return }

// -----

// expected-error @+1 {{'delta.shared_overlap' must be a #delta.shared_overlap}}
func.func @f() attributes {delta.shared_overlap = [1024, 16384]} { return }

// -----

// expected-error @+1 {{kernel: max_tokens must be 0 (none) or at least min_tokens, got 10 below 20}}
func.func @f() attributes {delta.kernel = #delta.kernel<role = recur_shared, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, min_tokens = 20, max_tokens = 10>} { return }
