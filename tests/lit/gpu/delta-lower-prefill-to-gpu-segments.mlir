// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s --check-prefix=NONE
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --delta-gpu-to-ptx | FileCheck %s --check-prefix=PTX
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s --check-prefix=SPLIT
// RUN: rm -rf %t && deltac %s --target=sm_80,sm_90a -o %t --name=lib > /dev/null
// RUN: FileCheck %s --check-prefix=TABLE < %t/lib.cpp
// RUN: rm -rf %t.off && deltac %s --target=sm_90a -o %t.off --name=lib --prefill-plan="segment-min-tokens=16384 segment-eighths-per-sm=0" > /dev/null
// RUN: FileCheck %s --check-prefix=OFF < %t.off/lib.cpp
// RUN: not grep -q cp.async.mbarrier.arrive %t/kernels/gkv_k128_v128_prefill_recur_cp.sm_90a.ptx
// RUN: grep -q cp.async.mbarrier.arrive %t/kernels/gkv_k128_v128_prefill_recur.sm_90a.ptx

// Context parallelism (PrefillSegments.cpp): the kernels exist beside the
// recur of V tile 64 in every kind of code (sm_90a's: the wgmma recur,
// the transposed form for a scalar gate, the warpgroup form for kda;
// sm_80's: the mma.sync recur with the state in registers): the segmented
// recur with the tile-64 recur's block and shared memory, the chain (128
// threads, K x 4 f32 columns) and the correction (128 threads, Q^
// [64][136] and S_start [128][136] in 16 bits).
module attributes {delta.targets = ["sm_80", "sm_90a"]} {
  delta.spec @gkv rule = gated dims = [128x128] io = bf16 state = f32
      layout = kv gate = log beta = given l2norm chunk = 64 entries = [prefill]
  delta.spec @kkv rule = kda dims = [128x128] io = bf16 state = f32
      layout = kv gate = channel_log beta = given l2norm chunk = 64 entries = [prefill]
}

// sm_80's code first: the segmented recur with its tile-64 recur's launch
// values, the chain and the correction in cp.async code.
// CHECK: gpu.module @gkv_k128_v128_prefill_recur_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @gkv_k128_v128_prefill_recur(
// CHECK-SAME: role = recur, code = cp_async, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[ASMEM:[0-9]+]], dynamic_smem_stage = [[ASTAGE:[0-9]+]]
// CHECK: gpu.module @gkv_k128_v128_prefill_recur_cp_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: gpu.func @gkv_k128_v128_prefill_recur_cp(
// CHECK-SAME: role = recur_cp, code = cp_async, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[ASMEM]], dynamic_smem_stage = [[ASTAGE]], min_tokens = 8192, cp_eighths_per_sm = 1>
// The transfer flag (it picks column 0 as a transfer tile's first); the
// tile's state starts as the identity's columns (the first f32 constants
// of the function), and in the chain's loop the flag selects 0 over U.
// CHECK: arith.select %[[TR:[0-9]+]], %c0_i32{{[_0-9]*}}, %{{[0-9]+}} : i32
// CHECK: %cst = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[ONE:cst_[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: arith.select %{{[0-9]+}}, %[[ONE]], %cst : f32
// CHECK: scf.for
// CHECK: arith.select %[[TR]], %cst{{.*}}, %{{.*}} : f32
// CHECK: gpu.module @gkv_k128_v128_prefill_cp_chain_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: role = cp_chain, code = cp_async
// CHECK: gpu.module @gkv_k128_v128_prefill_cp_correct_gpu [#nvvm.target<O = 3, chip = "sm_80">]
// CHECK: role = cp_correct, code = cp_async
// CHECK: gpu.module @gkv_k128_v128_prefill_recur_wgmma_gpu
// CHECK: gpu.func @gkv_k128_v128_prefill_recur(
// CHECK-SAME: role = recur, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[SMEM:[0-9]+]], dynamic_smem_stage = [[STAGE:[0-9]+]]
// CHECK: gpu.module @gkv_k128_v128_prefill_recur_cp_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @gkv_k128_v128_prefill_recur_cp(
// CHECK-SAME: role = recur_cp, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[SMEM]], dynamic_smem_stage = [[STAGE]], min_tokens = 8192, cp_eighths_per_sm = 1>
// CHECK: gpu.module @gkv_k128_v128_prefill_cp_chain_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @gkv_k128_v128_prefill_cp_chain(
// CHECK-SAME: role = cp_chain, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 128, dynamic_smem = 2048>
// The chain's steps carry the next step's operands with the state's 4
// columns: b's 4 columns and the thread's column of M_seg (128).
// CHECK: %{{.*}}:136 = scf.for
// CHECK: gpu.module @gkv_k128_v128_prefill_cp_correct_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @gkv_k128_v128_prefill_cp_correct(
// CHECK-SAME: role = cp_correct, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 128, dynamic_smem = 69632>
// kda's per-channel decays: the same three kernels on its tile-64
// warpgroup recur (each state row, and so each row of M, decays by its
// own factor), with that recur's block and shared memory.
// CHECK: gpu.module @kkv_k128_v128_prefill_recur_wgmma_gpu
// CHECK: gpu.func @kkv_k128_v128_prefill_recur(
// CHECK-SAME: role = recur, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[KSMEM:[0-9]+]], dynamic_smem_stage = [[KSTAGE:[0-9]+]]
// CHECK: gpu.module @kkv_k128_v128_prefill_recur_cp_wgmma_gpu [#nvvm.target<O = 3, chip = "sm_90a">]
// CHECK: gpu.func @kkv_k128_v128_prefill_recur_cp(
// CHECK-SAME: role = recur_cp, code = wgmma, k = 128, v = 128, value_tile = 64, grid_x = 2, block_threads = 256, dynamic_smem = [[KSMEM]], dynamic_smem_stage = [[KSTAGE]], min_tokens = 8192, cp_eighths_per_sm = 1>
// A transfer tile's state starts as the identity's columns.
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: gpu.func @kkv_k128_v128_prefill_cp_chain(
// CHECK: gpu.func @kkv_k128_v128_prefill_cp_correct(

// The split is made on the device: one segment length for the call, the
// longest sequence's chunks over the segments (at least 1), so that a
// sequence no longer than a segment runs whole. prep leaves the longest
// count (an atomic maximum over its threads) after its order; recur_cp and
// cp_correct take it from there, or with up to 32 sequences from the
// inline map's lanes by a butterfly maximum.
// SPLIT-LABEL: gpu.func @gkv_k128_v128_prefill_prep(
// SPLIT: llvm.atomicrmw umax
// SPLIT-LABEL: gpu.func @gkv_k128_v128_prefill_recur_cp(
// SPLIT-COUNT-5: arith.maxui %{{.*}}, %shuffleResult
// SPLIT: } else {
// SPLIT: llvm.load
// SPLIT: arith.divui %{{.*}}, %arg41
// SPLIT: %[[LEN:.*]] = arith.maxui %{{.*}}, %c1_i32
// A sequence fills ceil(chunks / L) of them (at least 1, at most n): a
// block of a segment past its own runs nothing, and the chain stops at
// its last occupied segment.
// SPLIT: arith.divui %{{.*}}, %[[LEN]]
// SPLIT: %[[OWN:.*]] = arith.minui %{{.*}}, %arg41
// SPLIT: arith.cmpi ult, %{{.*}}, %[[OWN]]
// SPLIT-LABEL: gpu.func @gkv_k128_v128_prefill_cp_chain(
// SPLIT: %[[CLEN:.*]] = arith.maxui %{{.*}}, %c1_i32
// SPLIT: arith.divui %{{.*}}, %[[CLEN]]
// SPLIT: %[[COWN:.*]] = arith.minui %{{.*}}, %arg41
// SPLIT: scf.for %{{.*}} = %{{.*}} to %[[COWN]]
// SPLIT-LABEL: gpu.func @gkv_k128_v128_prefill_cp_correct(
// SPLIT-COUNT-5: arith.maxui %{{.*}}, %shuffleResult
// SPLIT: } else {
// SPLIT: llvm.load
// SPLIT: arith.divui %{{.*}}, %arg41
// SPLIT: arith.maxui %{{.*}}, %c1_i32

// None for the narrow tiles.
// NONE-NOT: recur_cp_v

// The segmented recur is the transposed recur (wgmma with S^T as register
// A) without the overlapped launch's flags or the raw q/k form; the chain
// writes S_start in bf16, then runs its f32 FMAs and loads the next step's
// operands after them; the correction is mma.sync on operands brought by
// cp.async.
// PTX: gpu.binary @gkv_k128_v128_prefill_recur_cp_wgmma_gpu
// PTX-NOT: ld.acquire.gpu
// PTX-SAME: griddepcontrol.wait
// PTX-SAME: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX: gpu.binary @gkv_k128_v128_prefill_cp_chain_wgmma_gpu
// PTX-SAME: cvt.rn.bf16x2.f32
// PTX-SAME: fma.rn.f32
// PTX-SAME: ld.global.b32
// PTX: gpu.binary @gkv_k128_v128_prefill_cp_correct_wgmma_gpu
// PTX-SAME: cp.async.cg.shared.global
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

// The variant table names the three kernels, their launch values and the
// plan's #delta.context_parallel (when the dispatch splits by itself).
// TABLE: v.recurCp = &gkv_k128_v128_prefill_recur_cp_kernel;
// TABLE-NEXT: v.segmentChain = &gkv_k128_v128_prefill_cp_chain_kernel;
// TABLE-NEXT: v.segmentCorrection = &gkv_k128_v128_prefill_cp_correct_kernel;
// TABLE-NEXT: v.segmentThreads = 128;
// TABLE-NEXT: v.smemSegmentChain = 2048;
// TABLE-NEXT: v.smemSegmentCorrection = 69632;
// TABLE-NEXT: v.segmentMinTokens = 8192;
// TABLE-NEXT: v.segmentEighthsPerSM = 1;
// kda's variant the same, so the dispatch splits a KDA call by the same rule.
// TABLE: v.recurCp = &kkv_k128_v128_prefill_recur_cp_kernel;
// TABLE-NEXT: v.segmentChain = &kkv_k128_v128_prefill_cp_chain_kernel;
// TABLE-NEXT: v.segmentCorrection = &kkv_k128_v128_prefill_cp_correct_kernel;
// TABLE: v.segmentMinTokens = 8192;
// TABLE-NEXT: v.segmentEighthsPerSM = 1;

// The driver's --prefill-plan sets the plan's thresholds: with 0 eighths
// the kernels are still there (forced calls, multi-GPU ranks), but the
// dispatch never splits by itself.
// OFF: v.recurCp = &gkv_k128_v128_prefill_recur_cp_kernel;
// OFF: v.segmentMinTokens = 16384;
// OFF-NEXT: v.segmentEighthsPerSM = 0;
