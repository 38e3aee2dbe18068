// RUN: deltac-opt %s --delta-expand-spec --delta-gpu-kernels | FileCheck %s --check-prefixes=CHECK,FORM
// RUN: deltac-opt %s --delta-expand-spec --delta-gpu-kernels | FileCheck %s --check-prefixes=CHECK,NOT

// One GPU-IR check per kernel form (codegen/gpu): every kernel's
// #delta.kernel (its role and the kind of code of its module), the
// instructions that make it that form (FORM) and those it must not have
// (NOT). The library targets sm_80, sm_90a and sm_100a, so chunks and recur
// are built once per kind of code (cp_async, wgmma, bulk) under one kernel
// name; prep and decode have one code for all. Each CHECK-LABEL is a
// gpu.module, so the checks below it see that module only.
module attributes {delta.targets = ["sm_80", "sm_90a", "sm_100a"]} {
  delta.spec @gdn rule = gated dims = [128x128] io = bf16 state = f32
      layout = vk gate = raw beta = sigmoid l2norm chunk = 64
      entries = [prefill, decode] max_t = 4
  delta.spec @kda rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_log beta = given l2norm chunk = 64
      entries = [prefill]
  delta.spec @gkv rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = log beta = given l2norm chunk = 64
      entries = [decode] max_t = 4
}


// prep: norms, gates and the cumulative decays, one code for every target.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_prep_gpu 
// CHECK: delta.kernel = #delta.kernel<role = prep, code = all

// chunks on sm_80: cp.async copies, mma.sync products, no dependent launch.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_chunks_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = cp_async
// FORM-DAG: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: nvvm.griddepcontrol
// NOT-NOT: wgmma

// chunks on sm_90a: two wgmma warpgroups, q/k/v by TMA tensor copies.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_chunks_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = wgmma
// FORM-DAG: nvvm.griddepcontrol launch_dependents
// FORM-DAG: cp.async.bulk.tensor.3d
// FORM-DAG: wgmma.mma_async
// NOT-NOT: nvvm.mma.sync

// the overlapped launch's chunks: items from a queue (an atomic counter), a ready flag each, rows by cp.async.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_queue_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = queue, code = wgmma
// FORM-DAG: atom.relaxed.gpu.global.add.u32
// FORM-DAG: st.relaxed.gpu.global.u32
// FORM-DAG: wgmma.mma_async
// FORM-DAG: nvvm.minctasm = 3
// NOT-NOT: cp.async.bulk.tensor

// chunks beside recur's raw q/k form: factors instead of Qg and Kd.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_chunks_raw_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks_raw, code = wgmma
// FORM-DAG: wgmma.mma_async
// NOT-NOT: nvvm.mma.sync

// chunks on sm_100a: mma.sync, a programmatic dependent launch.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_chunks_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = bulk
// FORM-DAG: nvvm.griddepcontrol launch_dependents
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: wgmma

// recur on sm_80: the mma.sync warp roles, its ring by cp.async.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = cp_async
// FORM-DAG: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: cp.async.bulk
// NOT-NOT: nvvm.griddepcontrol
// NOT-NOT: wgmma

// recur on sm_90a at tile 64: the transposed wgmma form, raw q/k by TMA where the host asks (raw_qk).
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = wgmma
// FORM-DAG: nvvm.griddepcontrol wait
// FORM-DAG: cp.async.bulk.tensor.3d
// FORM-DAG: wgmma.mma_async
// FORM-DAG: raw_qk = true
// NOT-NOT: nvvm.setmaxregister

// recur beside one queue or chunks block per SM: 168 registers, rebalanced by setmaxnreg.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_shared_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur_shared, code = wgmma
// FORM-DAG: nvvm.setmaxregister decrease 104
// FORM-DAG: nvvm.setmaxregister increase 232
// FORM-DAG: wgmma.mma_async
// FORM-DAG: nvvm.maxnreg = 168
// NOT-NOT: cp.async.bulk.tensor

// recur on sm_100a: mma.sync, its ring by bulk copies on mbarriers.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = bulk
// FORM-DAG: nvvm.griddepcontrol wait
// FORM-DAG: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: wgmma

// the narrow tile's recur, one module per kind of code as well.
// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_v16_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = cp_async
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: cp.async.bulk
// NOT-NOT: wgmma

// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_v16_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = wgmma
// FORM-DAG: wgmma.mma_async
// NOT-NOT: nvvm.mma.sync

// CHECK-LABEL: gpu.module @gdn_k128_v128_prefill_recur_v16_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = bulk
// FORM-DAG: cp.async.bulk.shared::cluster
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// NOT-NOT: wgmma

// decode: one code for every target: 128 values a block with the call's
// token inputs staged (_staged, from 3 tokens a row and 3/4 of a block per
// SM; min_blocks_per_sm counts quarters), then 64 from 4 blocks per SM,
// else 32 (_small).
// CHECK-LABEL: gpu.module @gdn_k128_v128_decode_staged_gpu 
// CHECK: delta.kernel = #delta.kernel<role = decode, code = all
// FORM-DAG: value_tile = 128
// FORM-DAG: min_blocks_per_sm = 3, min_tokens = 3
// FORM-DAG: gpu.barrier
// NOT-NOT: nvvm.mma.sync
// NOT-NOT: wgmma

// CHECK-LABEL: gpu.module @gdn_k128_v128_decode_gpu 
// CHECK: delta.kernel = #delta.kernel<role = decode, code = all
// FORM-DAG: value_tile = 64
// FORM-DAG: min_blocks_per_sm = 16
// FORM-DAG: nvvm.vote.sync
// NOT-NOT: nvvm.mma.sync
// NOT-NOT: wgmma

// CHECK-LABEL: gpu.module @gdn_k128_v128_decode_small_gpu 
// CHECK: delta.kernel = #delta.kernel<role = decode, code = all
// FORM-DAG: value_tile = 32
// FORM-DAG: nvvm.vote.sync
// NOT-NOT: nvvm.mma.sync
// NOT-NOT: wgmma

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_prep_gpu 
// CHECK: delta.kernel = #delta.kernel<role = prep, code = all

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_chunks_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = cp_async

// kda: per-channel decays keep chunks on mma.sync in sm_90a's module too (16 warps) ...
// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_chunks_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = wgmma
// FORM-DAG: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// FORM-DAG: block_threads = 512
// NOT-NOT: wgmma.mma_async

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_chunks_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = chunks, code = bulk

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = cp_async

// ... while recur is the wgmma warpgroup form (not transposed, no raw q/k form).
// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = wgmma
// FORM-DAG: wgmma.mma_async
// NOT-NOT: cp.async.bulk.tensor
// NOT-NOT: raw_qk

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = bulk

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v32_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = cp_async

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v32_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = wgmma

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v32_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = bulk

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v16_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = cp_async

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v16_wgmma_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = wgmma

// CHECK-LABEL: gpu.module @kda_k128_v128_prefill_recur_v16_bulk_gpu 
// CHECK: delta.kernel = #delta.kernel<role = recur, code = bulk

// kv decode (FLA's layout): staged as one warp a block (32 key rows of 4
// columns, reduced by shuffles alone: no exchange buffer), from 2 tokens a
// row and 7 quarters of a block per SM; else bulk (4 warps, the exchange
// through shared memory) for every other call. No small form.
// CHECK-LABEL: gpu.module @gkv_k128_v128_decode_staged_gpu
// CHECK: llvm.mlir.global internal @gkv_k128_v128_decode_staged_stage()
// CHECK: delta.kernel = #delta.kernel<role = decode, code = all
// FORM-DAG: value_tile = 32, grid_x = 4, block_threads = 32, min_blocks_per_sm = 7, min_tokens = 2
// FORM-DAG: gpu.shuffle  xor
// NOT-NOT: _partials
// NOT-NOT: nvvm.mma.sync

// CHECK-LABEL: gpu.module @gkv_k128_v128_decode_gpu
// CHECK: llvm.mlir.global internal @gkv_k128_v128_decode_partials()
// CHECK: delta.kernel = #delta.kernel<role = decode, code = all
// FORM-DAG: value_tile = 32, grid_x = 4, block_threads = 128>
// FORM-DAG: gpu.barrier
// NOT-NOT: gkv_k128_v128_decode_small
