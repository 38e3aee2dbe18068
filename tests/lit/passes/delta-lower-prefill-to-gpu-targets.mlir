// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --pass-pipeline='builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})' | FileCheck %s --check-prefix=PTX

// recur fills its operand ring differently per kind of target: cp.async
// on sm_80, bulk copies with mbarriers on sm_90 and later, where it also
// takes part, with chunks, in a programmatic dependent launch (chunks lets it launch early, recur waits
// for chunks' results with griddepcontrol.wait). Targets of both kinds give
// chunks and each recur kernel two gpu.modules (one kernel name: the
// library embeds both PTX files under it); prep keeps one.
module attributes {delta.targets = ["sm_80", "sm_90a", "sm_100a"]} {
  delta.spec @t rule = gated dims = [64x64] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 64 entries = [prefill]
}

// CHECK: gpu.module @t_k64_v64_prefill_prep_gpu [#nvvm.target<O = 3, chip = "sm_80">, #nvvm.target<O = 3, chip = "sm_90a">, #nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.module @t_k64_v64_prefill_chunks_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @t_k64_v64_prefill_chunks(
// CHECK: gpu.module @t_k64_v64_prefill_chunks_bulk_gpu [#nvvm.target<O = 3, chip = "sm_90a">, #nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.func @t_k64_v64_prefill_chunks(
// CHECK: gpu.module @t_k64_v64_prefill_recur_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @t_k64_v64_prefill_recur(
// CHECK: gpu.module @t_k64_v64_prefill_recur_bulk_gpu [#nvvm.target<O = 3, chip = "sm_90a">, #nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.func @t_k64_v64_prefill_recur(

// PTX: gpu.binary @t_k64_v64_prefill_chunks_gpu
// PTX-NOT: griddepcontrol
// PTX: gpu.binary @t_k64_v64_prefill_chunks_bulk_gpu
// PTX-SAME: griddepcontrol.launch_dependents
// PTX: gpu.binary @t_k64_v64_prefill_recur_gpu
// PTX-SAME: cp.async.cg.shared.global
// PTX-NOT: mbarrier
// PTX-NOT: griddepcontrol
// PTX: gpu.binary @t_k64_v64_prefill_recur_bulk_gpu
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
