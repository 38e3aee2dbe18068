// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=PTX
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=RAW
// RUN: rm -rf %t && deltac %s --target=sm_80,sm_90a -o %t --name=lib > /dev/null
// RUN: FileCheck %s --check-prefix=TABLE < %t/lib.cpp
// RUN: grep -c wgmma.mma_async %t/kernels/qwen_k128_v128_prefill_chunks_raw.sm_90a.ptx | FileCheck %s --check-prefix=RAWPRODUCTS
// RUN: grep -c ex2.approx.ftz %t/kernels/qwen_k128_v128_prefill_chunks_raw.sm_90a.ptx | FileCheck %s --check-prefix=RAWEXP2
// RUN: grep -c ex2.approx.ftz %t/kernels/qwen_k128_v128_prefill_chunks.sm_90a.ptx | FileCheck %s --check-prefix=EXP2
// RUN: grep -c ex2.approx.ftz %t/kernels/qwen_k128_v128_prefill_queue.sm_90a.ptx | FileCheck %s --check-prefix=EXP2
// RUN: grep -c fma.rn.f32 %t/kernels/qwen_k128_v128_prefill_chunks.sm_90a.ptx | FileCheck %s --check-prefix=SOLVEFMA
// RUN: grep -c fma.rn.f32 %t/kernels/qwen_k128_v128_prefill_chunks.sm_80.ptx | FileCheck %s --check-prefix=SOLVEFMA

// On sm_90a recur is two warpgroups of wgmma (PrefillRecurWarpgroup.cpp):
// the state warpgroup runs V' = U - W S and S = e^G_last S + Kd^T V' with
// the state in its accumulators, storing S^T and V'^T as swizzled B images
// (stmatrix.trans, then a proxy fence); the output warpgroup computes
// O = Qg S + P V' from them and refills the ring. chunks is two wgmma
// warpgroups too (PrefillChunksWarpgroup.cpp): q, k, v land as swizzled
// images (cp.async to XORed addresses), Q K^T and K K^T run one per
// warpgroup, then W and U; chunks writes W, Qg, Kd and P as wgmma's
// 128-byte-swizzled images, so that recur's ring gets each tile by one
// bulk copy. Block sizes and shared memory differ from the mma.sync forms,
// so a library with both carries sm_90a's launch values beside the others
// in its variant table.
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @qwen rule = gated dims = [128x128] io = bf16 state = f32
      layout = vk gate = raw beta = sigmoid l2norm chunk = 64 entries = [prefill]
}

// chunks: 256 threads, ChunksWarpgroupSmem's 53.5 KiB with v copied late
// into a region it frees, held to 64 registers: four blocks per SM.
// CHECK: gpu.func @qwen_k128_v128_prefill_chunks(
// CHECK-SAME: delta.kernel = #delta.kernel<role = chunks, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 54800>
// CHECK-SAME: nvvm.minctasm = 4
// chunks' form for the overlapped launch (PrefillOverlap.cpp): v copied
// with q and k (69.5 KiB), held to three blocks per SM.
// CHECK: gpu.func @qwen_k128_v128_prefill_queue(
// CHECK-SAME: delta.kernel = #delta.kernel<role = queue, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 71184>
// CHECK-SAME: nvvm.minctasm = 3
// chunks' form beside the recur that reads raw q and k: chunks' block.
// CHECK: gpu.func @qwen_k128_v128_prefill_chunks_raw(
// CHECK-SAME: delta.kernel = #delta.kernel<role = chunks_raw, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = 54800>
// CHECK-SAME: nvvm.minctasm = 4

// Two warpgroups at every V tile; the shared memory of RecurWarpgroupSmem
// (two stages, one more where the device has room; at V tile 64 without
// the S^T and V'^T images).
// Only the transposed recur (V tile 64) takes the overlapped launch.
// CHECK: gpu.func @qwen_k128_v128_prefill_recur(
// CHECK-SAME: delta.kernel = #delta.kernel<role = recur, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[SMEM64:[0-9]+]], dynamic_smem_stage = [[STAGE64:[0-9]+]], min_blocks_per_sm = 1, overlap_blocks_per_sm = 1, raw_qk = true>
// The shared recur carries the plan's #delta.shared_overlap: taken up to
// 2 quarters of a block per SM, for 1024 to 16384 tokens a sequence.
// CHECK: gpu.func @qwen_k128_v128_prefill_recur_shared(
// CHECK-SAME: delta.kernel = #delta.kernel<role = recur_shared, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[SMEM64]], dynamic_smem_stage = [[STAGE64]], min_blocks_per_sm = 1, overlap_blocks_per_sm = 2, min_tokens = 1024, max_tokens = 16384>
// CHECK-SAME: nvvm.maxnreg = 168
// (No tile 32: the plan drops it after a scalar gate's tile 64.)
// CHECK-NOT: recur_v32
// CHECK: gpu.func @qwen_k128_v128_prefill_recur_v16(
// CHECK-SAME: delta.kernel = #delta.kernel<role = recur, code = wgmma, k = 128, v = 128, value_tile = 16, grid_x = 8, block_threads = 256, dynamic_smem = 135168, dynamic_smem_stage = 60416>

// chunks copies q, k, v into the swizzled images (the 16-byte group index
// XORed with the row), takes the norms from the diagonals of Q Q^T / K K^T
// and then runs Q K^T / K K^T, each eight k steps of m64n64 from K-major
// images, W and U 64 columns at a time with B read MN-major
// (imm-trans-b = 1), each product's result leaving by a bulk copy that the
// block waits for only until it has read the shared source.
// PTX: gpu.binary @qwen_k128_v128_prefill_chunks_gpu
// PTX-NOT: mma.sync
// PTX-SAME: xor.b32
// PTX-SAME: cp.async.cg.shared.global
// PTX-SAME: fence.proxy.async.shared::cta
// PTX-COUNT-16: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0, 0;
// PTX-SAME: stmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-SAME: cp.async.bulk.global.shared::cta.bulk_group
// PTX-SAME: cp.async.bulk.wait_group.read {{(\\09)?}}0
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0, 1;
// PTX-SAME: cp.async.bulk.global.shared::cta.bulk_group
// PTX-NOT: cp.async.bulk.wait_group {{(\\09)?}}0;
// PTX-SAME: cp.async.bulk.wait_group.read {{(\\09)?}}0
// PTX-NOT: fence.acq_rel.gpu
// The queue: the block's SM (those below `overlap` leave it to recur),
// items from the queue, and per item, once its results are complete
// (bulk copies waited for, the async proxy fenced), the release of its
// ready flag.
// PTX: gpu.binary @qwen_k128_v128_prefill_queue_gpu
// PTX-SAME: .minnctapersm 3
// PTX-SAME: griddepcontrol.launch_dependents
// PTX-SAME: mov.u32 {{[^;]*}}, %smid;
// PTX-SAME: atom.relaxed.gpu.global.add.u32
// PTX-SAME: cp.async.bulk.wait_group {{(\\09)?}}0;
// PTX-SAME: fence.proxy.async.global;
// PTX-SAME: fence.acq_rel.gpu;
// PTX-SAME: st.relaxed.gpu.global.u32
// PTX-SAME: wgmma.mma_async
// At V tile 64, recur is the transposed form (PrefillRecurTransposed.cpp):
// S^T and V'^T are wgmma's A operand from registers ({4 registers}, one
// immediate: imm-trans-b), U^T comes by ldmatrix.trans, and only O^T goes
// through shared memory (stmatrix.trans), leaving by 16-byte stores:
// V' = S^T W^T and O = S^T Qg^T (8 + 8 k steps), S^T += V'^T Kd (Kd read
// MN-major, 2 x 4), O += V'^T P^T (4).
// (The loop's staging of O^T is laid out before its products.)
// Overlapped, the refilling thread waits for the chunk's flag (acquire,
// then an async-proxy fence before its bulk copies) instead of the grid.
// PTX: gpu.binary @qwen_k128_v128_prefill_recur_gpu
// PTX-NOT: mma.sync
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: ld.acquire.gpu.global.u32
// PTX-SAME: nanosleep.u32
// PTX-SAME: fence.proxy.async.global;
// PTX-SAME: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-COUNT-16: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0;
// PTX-SAME: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// The state step: one m64n128k16 per k step over both 64-column blocks of Kd.
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0;
// In the raw q/k form the output warpgroup computes P, two chunks ahead
// of the chain (PrefillRecurTransposed.cpp, computeP): Q K^T from the
// stage's images, one ex2 per element, stmatrix into the stage's P image,
// a proxy fence for the chain's wgmma, then pReady; and it stores O.
// PTX-SAME: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0, 0;
// PTX-SAME: ex2.approx.ftz.f32
// PTX-SAME: stmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-SAME: fence.proxy.async.shared::cta
// PTX-SAME: bar.arrive
// PTX-SAME: st.global.v4.b32
// The shared overlapped launch's recur (RecurForm::TransposedShared): the
// same loops without the raw q/k form, 168 registers at launch so that it
// fits an SM beside one queue block, the chain's warpgroup raised to 232
// and the output warpgroup lowered to 104 by setmaxnreg.
// PTX: gpu.binary @qwen_k128_v128_prefill_recur_shared_gpu
// PTX-SAME: .maxnreg 168
// PTX-SAME: setmaxnreg.inc.sync.aligned.u32 {{(\\09)?}}232;
// PTX-SAME: setmaxnreg.dec.sync.aligned.u32 {{(\\09)?}}104;
// PTX-SAME: ld.acquire.gpu.global.u32
// PTX: gpu.binary @qwen_k128_v128_prefill_recur_v16_gpu
// PTX-NOT: mma.sync
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
// The output warpgroup (LLVM lays its blocks out first): Qg S + P V', 12
// k steps.
// PTX-COUNT-12: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0, 0;
// The state warpgroup: W S (A = W from its image, 8 k steps), V'^T stored
// transposed, then Kd^T V' (imm-trans-a = 1: Kd's image read transposed).
// PTX-SAME: wgmma.fence.sync.aligned
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 0, 0;
// PTX-SAME: wgmma.commit_group.sync.aligned
// PTX-SAME: wgmma.wait_group.sync.aligned 0
// PTX-SAME: stmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-SAME: fence.proxy.async.shared::cta
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{[^;]*}}, p, 1, 1, 1, 0;
// PTX-NOT: wgmma.mma_async

// The variant table, one named field per line: the tile-64 row with sm_90a's
// launch values, the overlapped launch, the raw q/k form and the shared
// recur; the tile-16 row with its own and no overlapped launch.
// TABLE: deltac_rt::PrefillVariant &v = t[0];
// TABLE: v.recur = &qwen_k128_v128_prefill_recur_kernel;
// TABLE-NEXT: v.altTarget = "sm_90a";
// TABLE-NEXT: v.recurAltThreads = 256;
// TABLE-NEXT: v.smemRecurAlt = {{[0-9]+}};
// TABLE-NEXT: v.smemRecurAltStage = {{[0-9]+}};
// TABLE-NEXT: v.chunksAltThreads = 256;
// TABLE-NEXT: v.smemChunksAlt = 54800;
// TABLE-NEXT: v.overlapBlocksPerSM = 1;
// TABLE-NEXT: v.queue = &qwen_k128_v128_prefill_queue_kernel;
// TABLE-NEXT: v.smemQueue = 71184;
// TABLE-NEXT: v.chunksRaw = &qwen_k128_v128_prefill_chunks_raw_kernel;
// TABLE-NEXT: v.recurShared = &qwen_k128_v128_prefill_recur_shared_kernel;
// TABLE-NEXT: v.sharedMinTokens = 1024;
// TABLE-NEXT: v.sharedMaxTokens = 16384;
// TABLE-NEXT: v.sharedQuartersPerSM = 2;
// TABLE-NEXT: v.recurCp = &qwen_k128_v128_prefill_recur_cp_kernel;
// TABLE-NEXT: v.segmentChain = &qwen_k128_v128_prefill_cp_chain_kernel;
// TABLE-NEXT: v.segmentCorrection = &qwen_k128_v128_prefill_cp_correct_kernel;
// TABLE-NEXT: v.segmentThreads = 128;
// TABLE-NEXT: v.smemSegmentChain = 2048;
// TABLE-NEXT: v.smemSegmentCorrection = 69632;
// TABLE-NEXT: v.segmentMinTokens = 8192;
// TABLE-NEXT: v.segmentEighthsPerSM = 1;
// TABLE-NEXT: }
// TABLE: deltac_rt::PrefillVariant &v = t[1];
// TABLE: v.recurThreads = 96;
// TABLE-NEXT: v.valueTiles = 8;
// TABLE-NEXT: v.minBlocksPerSM = 0;
// TABLE: v.recur = &qwen_k128_v128_prefill_recur_v16_kernel;
// TABLE-NEXT: v.altTarget = "sm_90a";
// TABLE-NEXT: v.recurAltThreads = 256;
// TABLE-NEXT: v.smemRecurAlt = 135168;
// TABLE-NEXT: v.smemRecurAltStage = 60416;
// TABLE-NEXT: v.chunksAltThreads = 256;
// TABLE-NEXT: v.smemChunksAlt = 54800;
// TABLE-NEXT: }

// The transposed recur has a second form, taken per call by qk_raw
// (RecurForm::TransposedRawQK): every thread of the output warpgroup copies
// raw q and k rows by cp.async into the ring, arriving on the stage's
// mbarrier when they land; the chain fences them for wgmma. The other V
// tiles have no such form.
// chunks' raw form writes each row's factor (one 4-byte store per row by
// the lane holding its norm) instead of the scaled rows (16 bytes per
// thread and step).
// Both take q, k and v either by cp.async or, when `tma` is set, by six TMA
// tensor copies (a box of 64 columns per 64-column block of each image) on
// two mbarriers; the queue form only by cp.async.
// RAW: gpu.binary @qwen_k128_v128_prefill_chunks_gpu
// RAW-SAME: .param .align 64 .b8 qwen_k128_v128_prefill_chunks_param_32[128]
// RAW-SAME: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}], %r{{[0-9]+}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW-SAME: st.global.v4.b32
// v late, into A's region once the WY factors have read it (after the
// proxy fence: generic reads before the async-proxy write).
// RAW-SAME: fence.proxy.async.shared::cta
// RAW-SAME: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}], %r{{[0-9]+}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes {{[^;]*}};
// RAW: gpu.binary @qwen_k128_v128_prefill_queue_gpu
// RAW-NOT: cp.async.bulk.tensor
// RAW: gpu.binary @qwen_k128_v128_prefill_chunks_raw_gpu
// RAW-NOT: st.global.v4.b32
// With qk_raw = 2 chunks_raw stores A_w's C x C image (8 KiB) where W's goes.
// RAW-SAME: mov.b32 {{[^,]*}}, 8192;{{[^;]*}}cp.async.bulk.global.shared::cta.bulk_group
// The raw form's recur takes q and k either by TMA tensor copies from the
// maps passed by value (when `tma` is set: 2 K / 64 boxes per stage, issued
// by the stage's one thread) or by cp.async with 128 mbarrier arrivals.
// RAW: gpu.binary @qwen_k128_v128_prefill_recur_gpu
// RAW-SAME: .param .align 64 .b8 qwen_k128_v128_prefill_recur_param_30[128]
// RAW-SAME: .param .align 64 .b8 qwen_k128_v128_prefill_recur_param_31[128]
// RAW-SAME: cvta.param.u64
// RAW-SAME: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// RAW-SAME: cp.async.mbarrier.arrive.noinc.shared.b64
// and, with qk_raw = 2, computes W = A_w K (the only SS product with B
// transposed: k's rows are its reduction index).
// RAW-SAME: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.[^}]*.}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 1;
// RAW: gpu.binary @qwen_k128_v128_prefill_recur_v16_gpu
// RAW-NOT: cp.async.mbarrier.arrive.noinc

// chunks_raw's products: the norms' Q Q^T and K K^T (8 k-steps, one code
// path for both warpgroups), whose K K^T is L's product too (no second one),
// then U = A_u V split over the warpgroups (2 blocks x 4 k-steps) with
// qk_raw = 2, or W and U (16) with qk_raw = 1: 32 wgmma in the PTX, 40
// while L multiplied K K^T again.
// RAWPRODUCTS: {{^}}32{{$}}
// Every warpgroup epilogue (L's here; P's and L's in chunks and the queue
// form, EXP2) as product x 2^(a_i - b_j): ex2.approx.ftz, which exp()
// (ex2.approx.f32 after a multiply by log2 e) does not use.
// RAWEXP2: {{^[1-9][0-9]*$}}
// EXP2: {{^[1-9][0-9]*$}}
// The solve's sums (solveTril) by fma, one instruction a term where a
// multiply and an add were (chunks 2-3 % faster, session 45): hundreds.
// SOLVEFMA: {{^[1-9][0-9][0-9]+$}}
