// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk | deltac-opt --pass-pipeline='builtin.module(func.func(delta-plan-prefill{value-tiles=32,16}),delta-lower-prefill-to-gpu)' | FileCheck %s --check-prefix=TILE32
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=PTX

// The chunk IR of a Qwen3-Next-style prefill becomes one gpu.module per
// kernel: prep (chunk offsets), chunks (parallel per chunk), and one recur
// kernel per dispatch-table entry, with launch shapes as attributes. This
// is recur's mma.sync form (sm_100a here; sm_80 alike but for the bulk
// copies); sm_90a's wgmma form: delta-lower-prefill-to-gpu-wgmma.mlir.
module attributes {delta.targets = ["sm_100a"]} {
  delta.spec @qwen rule = gated dims = [128x128] io = bf16 state = f32
      layout = vk gate = raw beta = sigmoid l2norm chunk = 64 entries = [prefill]
}

// CHECK-NOT: func.func @qwen_k128_v128_prefill
// CHECK: gpu.module @qwen_k128_v128_prefill_prep_gpu [#nvvm.target<O = 3, chip = "sm_100a">]
// CHECK: gpu.func @qwen_k128_v128_prefill_prep(
// CHECK-SAME: delta.kernel = #delta.kernel<role = prep, code = all, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 2064>
// After the offsets and its verdict, prep ranks the sequences longest
// first (ties in cu_seqlens order) where its 256 threads can: each
// sequence's chunk count in shared memory, its rank by a loop over all N,
// its index stored at N + 2 + rank (recur's order above 32 sequences).
// CHECK: arith.cmpi sle, %[[N:arg[0-9]+]], %c256_i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (i32)
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: arith.cmpi sgt
// CHECK: arith.addi %[[N]], %c2_i32
// CHECK: gpu.module @qwen_k128_v128_prefill_chunks_gpu
// CHECK: gpu.func @qwen_k128_v128_prefill_chunks(
// CHECK-SAME: delta.kernel = #delta.kernel<role = chunks, code = bulk, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 72192>
// cu_seqlens is checked as a whole (each warp's lanes over the offsets they
// read, one vote) before any bound derived from it is used.
// CHECK: nvvm.vote.sync any
// CHECK: nvvm.mma.sync {{.*}} multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// recur has a block size of its own: one state warp per 16 columns of its
// V tile, then the output warps (as many, at least two).
// CHECK: gpu.module @qwen_k128_v128_prefill_recur_gpu
// CHECK: gpu.func @qwen_k128_v128_prefill_recur(
// CHECK-SAME: delta.kernel = #delta.kernel<role = recur, code = bulk, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = {{[0-9]+}}, dynamic_smem_stage = {{[0-9]+}}, min_blocks_per_sm = 1>
// CHECK: nvvm.vote.sync any
// Its block takes the sequence ranked at its grid position, longest first
// (PrefillEmitter::longestFirst): each lane's rank from 32 shuffles of the
// lanes' chunk counts (ties in lane order), then the lane with that rank
// by a butterfly sum.
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[RANK:.*]] = %{{.*}}) -> (i32)
// CHECK: %[[OTHER:.*]], %{{.*}} = gpu.shuffle  idx %[[MINE:.*]], %[[J]],
// CHECK: arith.cmpi eq, %[[OTHER]], %[[MINE]]
// CHECK: arith.cmpi ugt, %[[OTHER]], %[[MINE]]
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// Above 32 sequences (no inline map), where prep ranked them (N <= its 256
// threads), the block reads prep's order at N + 2 + its position.
// CHECK: arith.cmpi sle, %[[RN:arg[0-9]+]], %c256_i32
// CHECK: scf.if %{{.*}} -> (i32)
// CHECK-NEXT: arith.constant 2 : i32
// CHECK-NEXT: arith.addi %[[RN]], %c2_i32
// Tokens past cu_seqlens[N] (all of them in a skipped call) get o = 0 from
// the whole grid, striding by the launch's block size.
// CHECK: gpu.block_dim  x
// (No tile 32: the plan drops it after a scalar gate's tile 64.)
// CHECK-NOT: recur_v32
// CHECK: gpu.module @qwen_k128_v128_prefill_recur_v16_gpu
// CHECK: gpu.func @qwen_k128_v128_prefill_recur_v16(
// CHECK-SAME: delta.kernel = #delta.kernel<role = recur, code = bulk, k = 128, v = 128, value_tile = 16, grid_x = 8, block_threads = 96, dynamic_smem = 143104, dynamic_smem_stage = 64768>

// Tile 32 where the plan keeps it (named here; by default for rule kda and
// for K > 128): the first entry, so `_recur`, with 4 warps.
// TILE32: gpu.func @qwen_k128_v128_prefill_recur(
// TILE32-SAME: delta.kernel = #delta.kernel<role = recur, code = bulk, k = 128, v = 128, value_tile = 32, grid_x = 4, block_threads = 128, dynamic_smem = {{[0-9]+}}, dynamic_smem_stage = {{[0-9]+}}, min_blocks_per_sm = 2>
// TILE32: gpu.func @qwen_k128_v128_prefill_recur_v16(

// Operands reach the tensor cores through ldmatrix (.trans where the
// operand's rows are the reduction index), raw rows arrive by cp.async.
// PTX: gpu.binary @qwen_k128_v128_prefill_chunks_gpu
// PTX-SAME: cp.async.cg.shared.global
// PTX-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-SAME: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// recur's state and output warps hand over through named barriers; on
// sm_90+ one thread fills the ring with bulk copies that complete on an
// mbarrier per stage (the U tile still by cp.async).
// PTX: gpu.binary @qwen_k128_v128_prefill_recur_gpu
// PTX-SAME: mbarrier.init.shared.b64
// PTX-SAME: bar.arrive
// PTX-SAME: mbarrier.try_wait.parity.shared::cta.b64
// PTX-SAME: bar.sync {{[^;]*}}, 256;
// The state warp's products take their A operand from its accumulators
// and their B operand as two 16x8 tiles per ldmatrix.x4.
// PTX: gpu.binary @qwen_k128_v128_prefill_recur_v16_gpu
// PTX-SAME: bar.sync {{[^;]*}}, 96;
// PTX-SAME: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-SAME: cvt.rn.bf16x2.f32
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-SAME: cp.async.cg.shared.global
// PTX-SAME: mbarrier.arrive.expect_tx.shared.b64
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
