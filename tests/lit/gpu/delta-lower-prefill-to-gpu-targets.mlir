// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=PTX

// chunks and recur differ per kind of target: recur fills its operand
// ring by cp.async on sm_80 and by bulk copies with mbarriers on sm_90 and
// later, where it also takes part, with chunks, in a programmatic
// dependent launch (chunks lets it launch early, recur waits for chunks'
// results with griddepcontrol.wait); on sm_90a its products are wgmma and
// chunks writes the workspace as wgmma's swizzled images (the plan's
// RecurForm::Warpgroup). Targets of several kinds give chunks and each recur
// kernel one gpu.module per kind (one kernel name: the library embeds each
// target's PTX under it); prep keeps one.
module attributes {delta.targets = ["sm_80", "sm_90a", "sm_100a"]} {
  delta.spec @t rule = gated dims = [64x64] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 64 entries = [prefill]
}

// CHECK: gpu.module @t_k64_v64_prefill_prep_gpu [#nvvm.target<O = 3, chip = "sm_80">, #nvvm.target<O = 3, chip = "sm_90a">, #nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.module @t_k64_v64_prefill_chunks_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @t_k64_v64_prefill_chunks(
// CHECK-SAME: role = chunks, code = cp_async,
// CHECK: gpu.module @t_k64_v64_prefill_chunks_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @t_k64_v64_prefill_chunks(
// CHECK-SAME: role = chunks, code = wgmma,
// CHECK: gpu.module @t_k64_v64_prefill_chunks_bulk_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.func @t_k64_v64_prefill_chunks(
// CHECK-SAME: role = chunks, code = bulk,
// CHECK: gpu.module @t_k64_v64_prefill_recur_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @t_k64_v64_prefill_recur(
// CHECK-SAME: role = recur, code = cp_async,
// CHECK: gpu.module @t_k64_v64_prefill_recur_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @t_k64_v64_prefill_recur(
// CHECK-SAME: role = recur, code = wgmma, k = 64, v = 64, value_tile = 64, grid_x = 1, block_threads = 256,
// CHECK: gpu.module @t_k64_v64_prefill_recur_bulk_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.func @t_k64_v64_prefill_recur(
// CHECK-SAME: role = recur, code = bulk,
// sm_100a's ptxas holds some recur kernels to 128 registers (and spills)
// unless the kernel names its limit.
// CHECK-SAME: nvvm.maxnreg = 255

// PTX: gpu.binary @t_k64_v64_prefill_chunks_gpu
// PTX-NOT: griddepcontrol
// PTX: gpu.binary @t_k64_v64_prefill_chunks_wgmma_gpu
// PTX-SAME: griddepcontrol.launch_dependents
// PTX: gpu.binary @t_k64_v64_prefill_chunks_bulk_gpu
// PTX-SAME: griddepcontrol.launch_dependents
// PTX: gpu.binary @t_k64_v64_prefill_recur_gpu
// PTX-SAME: cp.async.cg.shared.global
// PTX-NOT: mbarrier
// PTX-NOT: griddepcontrol
// PTX: gpu.binary @t_k64_v64_prefill_recur_wgmma_gpu
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-SAME: wgmma.mma_async
// PTX: gpu.binary @t_k64_v64_prefill_recur_bulk_gpu
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-NOT: wgmma
// PTX: gpu.binary @t_k64_v64_prefill_recur_v16_gpu
