// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=PTX

// Kimi Delta Attention (decays per K channel) on the GPU: the chunks kernel
// scans the decays per channel, flagging the 16-row blocks too steep for the
// product form; it computes P and L by mma.sync with FLA's reference row
// (operands x ⊙ e^(G - G_r) and k ⊙ e^(G_r - G)), the diagonal blocks of
// flagged blocks elementwise, and leaves e^G_last as K floats per chunk;
// recur copies those and decays each state row by its own factor. Its
// shared memory leaves one chunks block per SM, so chunks runs 16 warps.
// Raw per-channel gates read dt_bias per (head, channel); f32 log decays
// (@kimi_log) are copied to shared memory by cp.async like q, k and v.
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi rule = kda dims = [64x64] io = bf16 state = f32
      layout = vk gate = channel_raw beta = sigmoid l2norm chunk = 64 entries = [prefill]
  delta.spec @kimi_log rule = kda dims = [64x64] io = bf16 state = f32
      layout = kv gate = channel_log beta = given l2norm chunk = 64 entries = [prefill]
}

// CHECK: gpu.func @kimi_k64_v64_prefill_prep(
// CHECK-SAME: delta.kernel = #delta.kernel<role = prep, code = all, k = 64, v = 64, value_tile = 64, grid_x = 1, block_threads = 256,
// CHECK: gpu.func @kimi_k64_v64_prefill_chunks(
// CHECK-SAME: %[[BOUND:[[:alnum:]_]+]]: f32, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: i32, %[[BETAF32:[[:alnum:]_]+]]: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: i32) kernel
// CHECK-SAME: delta.kernel = #delta.kernel<role = chunks, code = wgmma, k = 64, v = 64, value_tile = 64, grid_x = 1, block_threads = 512,
// beta (bf16 spec) is read as bf16 or, with beta_f32, as f32: two 16-bit
// loads either way (no branch, never past the array).
// CHECK: arith.cmpi ne, %[[BETAF32]], %{{.*}} : i32
// CHECK: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> i16
// CHECK: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> i16
// The raw gate's form is the call's: lower_bound (before slot_stride) a
// number gives FLA's bounded gate lower_bound * sigmoid(s x), NaN the
// softplus form; A_log and dt_bias may be null (1 and 0: branches).
// CHECK: scf.if %{{.*}} -> (f32)
// CHECK: arith.cmpf ord, %[[BOUND]], %[[BOUND]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.div.approx.f"(%[[BOUND]], %{{.*}})
// CHECK: nvvm.mma.sync {{.*}} multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK: gpu.func @kimi_k64_v64_prefill_recur(
// CHECK-SAME: %[[SLOTSTRIDE:[[:alnum:]_]+]]: i64, %[[CK:[[:alnum:]_]+]]: !llvm.ptr<1> {llvm.noalias}, %[[CKSTARTS:[[:alnum:]_]+]]: !llvm.ptr<1> {llvm.noalias}, %[[CKEVERY:[[:alnum:]_]+]]: i32, %[[CKROWS:[[:alnum:]_]+]]: i64, %[[CKF32:[[:alnum:]_]+]]: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: i32) kernel
// States slot_stride elements apart (vLLM's hybrid cache keeps other data
// in a slot): the slot index is scaled by the parameter.
// CHECK: arith.muli %{{.*}}, %[[SLOTSTRIDE]] : i64
// State checkpoints (PrefillCheckpoints.cpp): FlashInfer's form with
// checkpoint_starts alone, every >= 1, the first row read from
// checkpoint_starts[n] and bounded by checkpoint_rows before any store.
// CHECK: llvm.icmp "ne" %[[CKSTARTS]], %{{.*}} : !llvm.ptr<1>
// CHECK: arith.maxsi %[[CKEVERY]], %{{.*}} : i32
// CHECK: llvm.getelementptr %[[CKSTARTS]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64
// CHECK: arith.subi %[[CKROWS]], %{{.*}} : i64
// The chain's loop stores the state at the end of each chunk's step where
// that boundary is kept, in f32 or the io dtype (bf16).
// CHECK: scf.for
// CHECK: arith.cmpi ne, %[[CKF32]], %{{.*}} : i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: gpu.func @kimi_log_k64_v64_prefill_chunks(
// CHECK-SAME: block_threads = 512,
// Two copy groups, the decays' first: the cumsum waits for that one alone.
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.commit.group
// CHECK: "cp.async.wait_group 1;"

// PTX: gpu.binary @kimi_k64_v64_prefill_chunks_gpu
// The raw gate per channel: softplus (lg2 of 1 + e^x) and A_log's exp.
// PTX-SAME: lg2.approx
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// recur on sm_90a: the wgmma warpgroups.
// PTX: gpu.binary @kimi_k64_v64_prefill_recur_gpu
// PTX-SAME: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k16.f32.bf16.bf16
