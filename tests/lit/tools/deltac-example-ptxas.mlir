// REQUIRES: ptxas
// RUN: deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_90a,sm_80 | FileCheck %s

// Where ptxas is found, deltac reports each kernel's registers, stack and
// spills: the prefill kernels of the README's example use no stack and
// spill nothing (a regression in a kernel's register use shows here).
// CHECK: deltac: {{.*}}qwen3_next_gdn.mlir: 23 kernels planned, 23 generated
// CHECK-NEXT: qwen3_next_k128_v128_prefill_prep.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_prep.sm_80 {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_queue.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks_raw.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks.sm_80 {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_shared.sm_90a {{.*}} 256 threads x 2 blocks/head; 168 regs, 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_cp.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_chain.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_correct.sm_90a {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur.sm_80 {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_cp.sm_80 {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_chain.sm_80 {{.*}} 0 B stack, 0 B spills
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_correct.sm_80 {{.*}} 0 B stack, 0 B spills
