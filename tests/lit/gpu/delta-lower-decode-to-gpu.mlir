// RUN: deltac-opt %s --delta-expand-spec --delta-lower-decode-to-gpu -split-input-file | FileCheck %s

// Up to three kernels per decode function, each in a gpu.module with one
// #nvvm.target per SM of delta.targets: "_staged" (a gate and beta per
// head; vk: 128 rows per block, the call's token inputs copied to shared
// memory before the token loop, used from 3 tokens a row and 3/4 of a
// block per SM), "bulk" (vk: 64 rows per block, used from 4 blocks per SM:
// min_blocks_per_sm counts quarters) and "_small" (vk: 32 rows per block,
// prefetching; no kv spec with a staged form has it). All keep the fixed
// ABI of codegen/gpu/decode/DecodeKernel.h. Prefill stays at sequence
// level. Each kernel gets one module per kind of code: sm_80's (code =
// all) and, named _bulk where both exist, sm_90+'s (code = bulk), which
// the host launches as a programmatic dependent: it waits for the grid
// before it (griddepcontrol.wait) before its first memory access.

// CHECK-LABEL: module attributes {delta.targets = ["sm_80", "sm_90a"], gpu.container_module}
// CHECK: func.func @gdn_k128_v128_prefill
// The stage: q and k of max_t = 4 tokens (2 * 4 * 128), the block's 128 v
// columns of each (4 * 128), g and beta (2 * 4) floats.
// CHECK: gpu.module @gdn_k128_v128_decode_staged_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: llvm.mlir.global internal @gdn_k128_v128_decode_staged_stage() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1544 x f32>
// CHECK: gpu.func @gdn_k128_v128_decode_staged(
// CHECK-SAME: delta.kernel = #delta.kernel<role = decode, code = all, k = 128, v = 128, value_tile = 128, grid_x = 1, block_threads = 128, min_blocks_per_sm = 3, min_tokens = 3>
// Staged in 16-byte pieces, one barrier, then the token loop reads the
// stage (q and k pieces as vector loads).
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xf32>
// CHECK: gpu.shuffle  xor
// CHECK-NOT: griddepcontrol
// CHECK: gpu.module @gdn_k128_v128_decode_staged_gpu_bulk [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @gdn_k128_v128_decode_staged(
// CHECK-SAME: code = bulk
// CHECK-NEXT: nvvm.griddepcontrol  wait
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK: gpu.module @gdn_k128_v128_decode_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @gdn_k128_v128_decode(
// CHECK-SAME: %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias},
// CHECK-SAME: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: f32, %{{[[:alnum:]_]+}}: i32, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: i64, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %[[SLOTSTRIDE:[[:alnum:]_]+]]: i64, %[[BOUND:[[:alnum:]_]+]]: f32, %[[GV:[[:alnum:]_]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK-SAME: kernel
// CHECK-SAME: delta.entry = #delta<entry decode>
// CHECK-SAME: delta.kernel = #delta.kernel<role = decode, code = all, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 128, min_blocks_per_sm = 16>
// CHECK-SAME: delta.max_t = 4 : i64
// CHECK-SAME: delta.spec = @gdn
// Varlen rows: with cu_seqlens (the last parameter) row b is tokens
// [cu[b], cu[b + 1]); the whole array is checked first (a loop over its
// entries, int32 or int64, and a warp vote), the row against max_t, before
// anything is computed; tokens past cu[B] are zeroed.
// CHECK: scf.if %{{.*}} -> (i64, i32, i1, i64)
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: nvvm.vote.sync all
// CHECK: arith.cmpi sle, %{{.*}}, %c4_i64
// num_accepted_tokens is range-checked before it indexes the 2-D slots.
// CHECK: arith.cmpi sge, %{{.*}}, %c1_i64
// The entering state: zeros with kZeroState, else state_in (null: the
// pool), slot_stride apart, as 16-bit pieces (bf16 or f16 by a select) or
// as the f32 pool's 16-byte pieces, all issued before the token loop.
// CHECK: arith.muli %{{.*}}, %[[SLOTSTRIDE]] : i64
// CHECK: scf.if %{{.*}} -> (f32, f32
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: scf.if %{{.*}} -> (f32, f32
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<4xi16>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: scf.for
// beta: two 16-bit loads serve bf16 and f32 (kBetaF32), no branch.
// CHECK: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> i16
// CHECK: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> i16
// Raw gate fused: the call's form from the lower_bound parameter (a number:
// FLA's bounded gate lower_bound * sigmoid(s x); NaN: -s softplus(x)), one
// ex2 for both, softplus threshold 20.
// CHECK: arith.cmpf ord, %[[BOUND]], %[[BOUND]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK: llvm.call_intrinsic "llvm.nvvm.div.approx.f"(%[[BOUND]], %{{.*}})
// Row dots reduced across the 8 lanes of a row.
// CHECK: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: scf.yield
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK-NOT: griddepcontrol
// CHECK: gpu.module @gdn_k128_v128_decode_gpu_bulk [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @gdn_k128_v128_decode(
// CHECK-SAME: code = bulk
// CHECK-NEXT: nvvm.griddepcontrol  wait
// CHECK-NEXT: nvvm.griddepcontrol  launch_dependents
// CHECK: gpu.module @gdn_k128_v128_decode_small_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @gdn_k128_v128_decode_small(
// CHECK-SAME: delta.kernel = #delta.kernel<role = decode, code = all, k = 128, v = 128, value_tile = 32, grid_x = 4, block_threads = 128>
// CHECK: gpu.module @gdn_k128_v128_decode_small_gpu_bulk [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK-NOT: func.func @gdn_k128_v128_decode
module attributes {delta.targets = ["sm_80", "sm_90a"]} {
  delta.spec @gdn rule = gated dims = [128x128] io = bf16 state = f32
      layout = vk gate = raw beta = sigmoid l2norm chunk = 64
      entries = [prefill, decode] max_t = 4
}

// -----

// kv layout: a bf16 state is read in 16-byte pieces of 8 elements; dots over
// K end with a reduction across warps in shared memory.
// CHECK-LABEL: module attributes {delta.targets = ["sm_90a"], gpu.container_module}
// CHECK: gpu.module @kvs_k128_v64_decode_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: llvm.mlir.global internal @kvs_k128_v64_decode_partials() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<{{[0-9]+}} x f32>
// CHECK: gpu.func @kvs_k128_v64_decode(
// CHECK-SAME: code = bulk, k = 128, v = 64, value_tile = 32, grid_x = 2
// CHECK-NEXT: nvvm.griddepcontrol  wait
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kvs rule = gated dims = [128x64] io = bf16 state = bf16
      layout = kv gate = log beta = given chunk = 64 entries = [decode]
      max_t = 2
}

// -----

// A spec without decode gets no GPU module (and no container attribute).
// CHECK-LABEL: module attributes {delta.targets = ["sm_90a"]} {
// CHECK-NEXT: delta.spec @kimi
// CHECK-NOT: gpu.module
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_log beta = given chunk = 64
      entries = [prefill]
}

// -----

// KDA decode (per key channel decays): the vk kernel loads each lane's
// pieces of g [tokens, HV, K] (f32, 16 bytes) with its q and k pieces and
// decays its state pieces elementwise; the raw form adds dt_bias [HV, K]
// (0 where null: a branch between the loaded and zero values).
// CHECK-LABEL: module attributes {delta.targets = ["sm_90a"], gpu.container_module}
// CHECK: gpu.func @kimi_vk_k128_v128_decode(
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: gpu.func @kimi_raw_k128_v128_decode(
// CHECK: scf.if %{{.*}} -> (f32) {
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi_vk rule = kda dims = [128x128] io = bf16 state = f32
      layout = vk gate = channel_log beta = given l2norm chunk = 64
      entries = [decode] max_t = 2
  delta.spec @kimi_raw rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_raw beta = sigmoid l2norm chunk = 64
      entries = [decode] max_t = 2
}

// -----

// KDA kv with max_t >= 3 has the staged form: one warp a block, the stage
// holding q, k, v, g and beta of 4 tokens (2 * 4 * 128 + 4 * 32 + 2 * 4 =
// 1160 floats), then every token's 128 decays from a 16-byte boundary
// (1160 + 4 * 128 = 1672): exp(g) once a channel while staging, the state
// rows decayed first in the token loop; no vk stage (its loop reads its
// gates from memory), and no small form beside it.
// CHECK-LABEL: module attributes {delta.targets = ["sm_90a"], gpu.container_module}
// CHECK: gpu.module @kimi_kv_k128_v128_decode_staged_gpu
// CHECK: llvm.mlir.global internal @kimi_kv_k128_v128_decode_staged_stage() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1672 x f32>
// CHECK: gpu.func @kimi_kv_k128_v128_decode_staged(
// CHECK-SAME: block_threads = 32, min_blocks_per_sm = 7, min_tokens = 2>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: gpu.barrier
// CHECK: gpu.module @kimi_kv_k128_v128_decode_gpu
// CHECK-NOT: kimi_kv_k128_v128_decode_small
// CHECK-NOT: kimi_vk4_k128_v128_decode_staged
// CHECK: gpu.module @kimi_vk4_k128_v128_decode_gpu
// CHECK: gpu.module @kimi_vk4_k128_v128_decode_small_gpu
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi_kv rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_log beta = given l2norm chunk = 64
      entries = [decode] max_t = 4
  delta.spec @kimi_vk4 rule = kda dims = [128x128] io = bf16 state = f32
      layout = vk gate = channel_log beta = given l2norm chunk = 64
      entries = [decode] max_t = 4
}

// -----

// FLA's per-value terms (per_value): the kernel's last parameter is gv; a
// null gv reads the kernel's own zeros (a select of the base and index, no
// branch), a kv thread loads its columns' gv in one 16-byte piece, and
// beta's index is per value column where flags bit 64 (kBetaPerValue) says.
// CHECK-LABEL: module attributes {delta.targets = ["sm_90a"], gpu.container_module}
// CHECK: llvm.mlir.global internal constant @fla_pv_k128_v128_decode_zeros(dense<0.000000e+00> : tensor<8xf32>) {addr_space = 1 : i32, alignment = 16 : i64} : !llvm.array<8 x f32>
// CHECK: gpu.func @fla_pv_k128_v128_decode(
// CHECK-SAME: f32, %[[GV:[[:alnum:]_]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK: scf.for
// CHECK: arith.andi %{{.*}}, %c64_i32{{.*}} : i32
// CHECK: %[[ZEROS:.*]] = llvm.mlir.addressof @fla_pv_k128_v128_decode_zeros : !llvm.ptr<1>
// CHECK-NEXT: %[[BASE:.*]] = arith.select %{{.*}}, %[[ZEROS]], %[[GV]] : !llvm.ptr<1>
// CHECK: %[[AT:.*]] = llvm.getelementptr %[[BASE]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT: llvm.load %[[AT]] {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// A log gate reads the same zeros for a null g (FLA's g=None: no decay)
// where flags bit 128 (kNullGate) says: a select of g's address.
// CHECK: gpu.module @fla_k128_v128_decode_gpu
// CHECK: llvm.mlir.global internal constant @fla_k128_v128_decode_zeros(
// CHECK: gpu.func @fla_k128_v128_decode(%{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %{{[[:alnum:]_]+}}: !llvm.ptr<1> {llvm.noalias}, %[[G:[[:alnum:]_]+]]: !llvm.ptr<1> {llvm.noalias}
// CHECK: %[[NULLG:.*]] = arith.andi %{{.*}}, %c128_i32 : i32
// CHECK: %[[GAT:.*]] = llvm.getelementptr %[[G]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT: %[[GZEROS:.*]] = llvm.mlir.addressof @fla_k128_v128_decode_zeros : !llvm.ptr<1>
// CHECK-NEXT: arith.select %{{.*}}, %[[GZEROS]], %[[GAT]] : !llvm.ptr<1>
// A raw gate needs its g (the host refuses a null one): no zero array.
// CHECK: gpu.module @fla_raw_k128_v128_decode_gpu
// CHECK-NOT: _zeros
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @fla_pv rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = log beta = given per_value chunk = 64
      entries = [decode] max_t = 2
  delta.spec @fla rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = log beta = given chunk = 64
      entries = [decode] max_t = 2
  delta.spec @fla_raw rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = raw beta = sigmoid chunk = 64
      entries = [decode] max_t = 2
}
