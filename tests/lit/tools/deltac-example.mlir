// RUN: rm -rf %t && deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_90a,sm_80 -o %t | FileCheck %s
// RUN: ls %t %t/kernels | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --check-prefix=HEADER < %t/qwen3_next_gdn.h
// RUN: deltac %deltac_src/examples/qwen3_next_gdn.mlir --target=sm_100a --print-ir | FileCheck %s --check-prefix=PRINT

// The README's main job on the shipped example: verify, expand, lower what
// has a lowering, write the library. (ptxas's part of each line, registers
// and spills, is checked by deltac-example-ptxas.mlir, which needs ptxas.)
// CHECK: deltac: {{.*}}qwen3_next_gdn.mlir: 23 kernels planned, 23 generated
// CHECK-NEXT: qwen3_next_k128_v128_prefill_prep.sm_90a {{ *}}prefill K=128 V=128  PTX {{[0-9]+}} B, 256 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_prep.sm_80 {{ *}}prefill K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks.sm_90a {{ *}}prefill K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_prefill_queue.sm_90a {{ *}}prefill K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks_raw.sm_90a {{ *}}prefill K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_prefill_chunks.sm_80 {{ *}}prefill K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 256 threads x 2 blocks/head
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_shared.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 256 threads x 2 blocks/head
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_cp.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 256 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_chain.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 128 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_correct.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 128 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur.sm_80 {{ *}}prefill
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_cp.sm_80 {{ *}}prefill K=128 V=128  PTX {{.*}} 256 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_chain.sm_80 {{ *}}prefill K=128 V=128  PTX {{.*}} 128 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_cp_correct.sm_80 {{ *}}prefill K=128 V=128  PTX {{.*}} 128 threads
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_v16.sm_90a {{ *}}prefill K=128 V=128  PTX {{.*}} 96 threads x 8 blocks/head
// CHECK-NEXT: qwen3_next_k128_v128_prefill_recur_v16.sm_80 {{ *}}prefill
// CHECK-NEXT: qwen3_next_k128_v128_decode_staged.sm_90a {{ *}}decode  K=128 V=128  PTX {{[0-9]+}} B, 128 threads x 1 blocks/head
// CHECK-NEXT: qwen3_next_k128_v128_decode_staged.sm_80 {{ *}}decode  K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_decode.sm_90a {{ *}}decode  K=128 V=128  PTX {{[0-9]+}} B, 128 threads x {{[0-9]+}} blocks/head
// CHECK-NEXT: qwen3_next_k128_v128_decode.sm_80 {{ *}}decode  K=128 V=128  PTX {{[0-9]+}} B
// CHECK-NEXT: qwen3_next_k128_v128_decode_small.sm_90a {{ *}}decode  K=128 V=128  PTX
// CHECK-NEXT: qwen3_next_k128_v128_decode_small.sm_80 {{ *}}decode  K=128 V=128  PTX
// CHECK-NEXT: deltac: wrote library 'qwen3_next_gdn' to

// FILES-DAG: CMakeLists.txt
// FILES-DAG: deltac_api.h
// FILES-DAG: deltac_decode.cpp
// FILES-DAG: deltac_runtime.cpp
// FILES-DAG: qwen3_next_gdn.cpp
// FILES-DAG: qwen3_next_gdn.h
// FILES-DAG: qwen3_next_k128_v128_decode.sm_80.ptx
// FILES-DAG: qwen3_next_k128_v128_decode.sm_90a.ptx
// FILES-DAG: deltac_prefill.cpp
// FILES-DAG: qwen3_next_k128_v128_prefill_chunks.sm_90a.ptx
// FILES-DAG: qwen3_next_k128_v128_prefill_recur.sm_80.ptx

// HEADER: namespace qwen3_next_gdn {
// HEADER: namespace qwen3_next {
// HEADER: deltac::Status decode(const deltac_decode_args &args, void *stream);
// HEADER: deltac::Status prefill(const deltac_prefill_args &args, void *stream);
// HEADER: int64_t prefill_workspace_bytes(int64_t K, int64_t V, int64_t T, int64_t N, int64_t HV);
// HEADER: int qwen3_next_gdn_qwen3_next_decode(const deltac_decode_args *args, void *stream);
// HEADER: int qwen3_next_gdn_qwen3_next_prefill(const deltac_prefill_args *args, void *stream);
// HEADER: const char *qwen3_next_gdn_last_error(void);

// PRINT: module attributes {delta.targets = ["sm_100a"], gpu.container_module}
// PRINT: gpu.module @qwen3_next_k128_v128_prefill_prep_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// PRINT: gpu.module @qwen3_next_k128_v128_prefill_chunks_gpu
// sm_100a's code has context parallelism too (the mma.sync recur's form).
// PRINT: gpu.module @qwen3_next_k128_v128_prefill_recur_cp_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// PRINT: gpu.module @qwen3_next_k128_v128_decode_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// PRINT: 10 kernels planned, 10 generated
