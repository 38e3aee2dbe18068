// RUN: rm -rf %t && deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_90a,sm_80 -o %t | FileCheck %s
// RUN: FileCheck %s --check-prefix=LIST < %t/kernels.txt
// RUN: FileCheck %s --check-prefix=IR < %t/qwen3_next_gdn.expanded.mlir
// RUN: deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_100a --print-ir | FileCheck %s --check-prefix=PRINT

// The README's main job on the shipped example: verify, expand, list.
// CHECK: deltac: {{.*}}qwen3_next_gdn.mlir: 4 kernels planned
// CHECK-NEXT: qwen3_next_k128_v128_prefill_sm_90a {{ *}}prefill  K=128 V=128
// CHECK-NEXT: qwen3_next_k128_v128_prefill_sm_80 {{ *}}prefill  K=128 V=128
// CHECK-NEXT: qwen3_next_k128_v128_decode_sm_90a {{ *}}decode  K=128 V=128
// CHECK-NEXT: qwen3_next_k128_v128_decode_sm_80 {{ *}}decode  K=128 V=128
// CHECK-NEXT: deltac: wrote {{.*}}/qwen3_next_gdn.expanded.mlir and kernels.txt

// LIST: # kernel, spec, entry, K, V, target
// LIST-NEXT: qwen3_next_k128_v128_prefill_sm_90a, qwen3_next, prefill, 128, 128, sm_90a

// IR: module attributes {delta.targets = ["sm_90a", "sm_80"]}
// IR: func.func @qwen3_next_k128_v128_prefill
// IR: delta.chunk_cumsum
// IR: delta.chunked_recurrence gated layout = vk chunk = 64
// IR: func.func @qwen3_next_k128_v128_decode
// IR: delta.recurrence gated layout = vk gate = log beta = given

// PRINT: module attributes {delta.targets = ["sm_100a"]}
// PRINT: 2 kernels planned
