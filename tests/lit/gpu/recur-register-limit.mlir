// RUN: deltac-opt %s --delta-expand-spec --delta-gpu-kernels | FileCheck %s

// recur's register limit (recurTakesAllRegisters, PrefillPlan.h): KDA's
// register-state recur at chunk 32, which ptxas held to 128 registers and
// spilled (K = V = 64, gate by call: 4-12 B on sm_80 and sm_90a), is
// compiled with the hardware's 255 as its limit on every target and every
// V tile; at chunk 64 the same recur keeps ptxas's own count, as does the
// gated rule's at chunk 32, and no other kernel of the entry gets a limit.
module attributes {delta.targets = ["sm_80", "sm_90a"]} {
  delta.spec @kda32 rule = kda dims = [64x64] io = bf16 state = f32
      layout = kv gate = channel_call beta = call l2norm = call chunk = 32
      entries = [prefill]
  delta.spec @kda64 rule = kda dims = [64x64] io = bf16 state = f32
      layout = kv gate = channel_call beta = call l2norm = call chunk = 64
      entries = [prefill]
  delta.spec @gdn32 rule = gated dims = [64x64] io = bf16 state = f32
      layout = kv gate = call beta = call l2norm = call chunk = 32
      entries = [prefill]
}

// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_prep_gpu
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_chunks_gpu
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_chunks_bulk_gpu
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_gpu
// CHECK: role = recur, code = cp_async
// CHECK-SAME: nvvm.maxnreg = 255
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_bulk_gpu
// CHECK: role = recur, code = bulk
// CHECK-SAME: nvvm.maxnreg = 255
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_v32_gpu
// CHECK: role = recur, code = cp_async, k = 64, v = 64, value_tile = 32
// CHECK-SAME: nvvm.maxnreg = 255
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_v32_bulk_gpu
// CHECK: role = recur, code = bulk, k = 64, v = 64, value_tile = 32
// CHECK-SAME: nvvm.maxnreg = 255
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_v16_gpu
// CHECK: role = recur, code = cp_async, k = 64, v = 64, value_tile = 16
// CHECK-SAME: nvvm.maxnreg = 255
// CHECK-LABEL: gpu.module @kda32_k64_v64_prefill_recur_v16_bulk_gpu
// CHECK: role = recur, code = bulk, k = 64, v = 64, value_tile = 16
// CHECK-SAME: nvvm.maxnreg = 255

// CHECK-LABEL: gpu.module @kda64_k64_v64_prefill_recur_gpu
// CHECK: role = recur, code = cp_async
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @kda64_k64_v64_prefill_recur_wgmma_gpu
// CHECK: role = recur, code = wgmma
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @kda64_k64_v64_prefill_recur_v16_wgmma_gpu

// CHECK-LABEL: gpu.module @gdn32_k64_v64_prefill_recur_gpu
// CHECK: role = recur, code = cp_async
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @gdn32_k64_v64_prefill_recur_bulk_gpu
// CHECK: role = recur, code = bulk
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @gdn32_k64_v64_prefill_recur_v16_gpu
// CHECK-NOT: maxnreg
// CHECK-LABEL: gpu.module @gdn32_k64_v64_prefill_recur_v16_bulk_gpu
// CHECK-NOT: maxnreg
