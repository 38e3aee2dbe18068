//===- Passes.td - deltac's NVIDIA GPU passes ------------------*- tablegen -*-===//
//
// From the planned chunk IR to NVVM: the kernels of each entry and the
// kernel-ABI fix-ups the PTX lowering needs (keep in pipeline order;
// docs/passes.md describes each with its lit test).
//
//===----------------------------------------------------------------------===//

#ifndef DELTAC_CODEGEN_GPU_PASSES_TD
#define DELTAC_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeltaLowerDecodeToGPU : Pass<"delta-lower-decode-to-gpu",
                                 "::mlir::ModuleOp"> {
  let summary = "lower decode functions to one fused GPU kernel each";
  let description = [{
    Replaces every decode function (`delta.entry = decode`) by a
    `gpu.module` holding its `gpu.func` kernels (a "bulk" variant for grids
    that fill the GPU, a "small" one, `_small`, for few rows, and where the
    spec fits it a "staged" one, `_staged`, the bulk shape with a call's
    token inputs staged in shared memory, for calls of three or more tokens
    a row; the host picks by the `min_tokens` and
    `min_blocks_per_sm` of their `delta.kernel`) that advance a state pool
    by T <= max_t tokens: the recurrence (`delta`, `gated`, or `kda` with a
    decay per key channel) with its gate, beta and L2 norm fused, one pass
    over the state with 16-byte accesses, fp32 arithmetic; the entering
    state comes from the pool, a separate tensor (out of place) or zeros.
    The kernel's parameters are fixed by `codegen/gpu/decode/DecodeKernel.h`; its launch
    shape is recorded as `delta.block_threads`, `delta.rows_per_block` and
    `delta.grid_x` (grid y = HV, z = B). The module is given the targets in
    `delta.targets` as `#nvvm.target`s. Runs before
    `delta-normalize-options`, on the recurrence as the spec wrote it.
  }];
  let options = [
    Option<"rowsPerThread", "rows-per-thread", "int64_t", /*default=*/"0",
           "state rows per thread, 0 to 256 (0: chosen from K, V and "
           "the state type)">,
    Option<"variants", "variants", "std::string", /*default=*/"\"\"",
           "kernel variants to emit: staged, bulk, small, or all (empty)">,
    Option<"unswitchSteps", "unswitch-steps", "bool", /*default=*/"true",
           "emit the token loop with and without per-step stores">,
    Option<"dotPartials", "dot-partials", "int64_t", /*default=*/"4",
           "independent partial sums per dot product, 1 to 256">,
    Option<"stagedMinTokens", "staged-min-tokens", "int64_t", /*default=*/"0",
           "the fewest tokens a row the staged variant is launched for, "
           "0 to 64 (0: 2 for kv, 3 for vk)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def DeltaLowerPrefillToGPU : Pass<"delta-lower-prefill-to-gpu",
                                  "::mlir::ModuleOp"> {
  let summary = "lower chunk-level prefill functions to tensor-core kernels";
  let description = [{
    Replaces every prefill function (`delta.entry = prefill`) that
    `delta-chunk` has rewritten by a `gpu.module` with three kernels
    (codegen/gpu/prefill/PrefillPlan.h): `_prep` (chunk offsets from cu_seqlens on the
    device), `_chunks` (per chunk and value head, in parallel: the inputs'
    preparation, chunk_cumsum, chunk_kkt, solve_tril, chunk_wy and the
    intra-chunk part of chunk_output) and `_recur` (per sequence, value head
    and V tile: chunk_residual, chunk_output and chunk_state_step from chunk
    to chunk, the state in fp32 registers). Products are mma.sync m16n8k16
    with bf16 operands and fp32 accumulation. The options are read from the
    chunk IR (rule, gate and beta forms, L2 norm, layout, C, K, V).
    Per-channel decays (`kda`) decay each state row by its own factor.
  }];
  let options = [
    Option<"valueTile", "value-tile", "int64_t", /*default=*/"0",
           "V columns per recur block when the function has no "
           "delta.recur_variants (0: 32)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

def DeltaTensorMapParams : Pass<"delta-tensor-map-params"> {
  let summary = "pass TMA tensor maps to kernels by value, as grid constants";
  let description = [{
    Every argument of generic pointer type (`!llvm.ptr`, address space 0)
    of an LLVM kernel (`nvvm.kernel`) is a tensor map
    (`ParamKind::TensorMap`, codegen/gpu/KernelAbi.h): it becomes a 128-byte
    parameter passed by value and 64-byte aligned (`llvm.byval`,
    `llvm.align`) that the kernel reads in place (`nvvm.grid_constant`), so
    the pointer is the parameter's own address (`cvta.param`), which
    `cp.async.bulk.tensor` takes. Runs after `convert-gpu-to-nvvm`, which
    drops `llvm.byval` from a `gpu.func`'s arguments, and whose NVVM
    verifier accepts `nvvm.grid_constant` only on kernel `llvm.func`s.
    Global-memory pointers (address space 1) are left alone.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

#endif // DELTAC_CODEGEN_GPU_PASSES_TD
