// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | deltac-opt --pass-pipeline='builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})' | FileCheck %s --check-prefix=PTX

// Kimi Delta Attention (decays per K channel) on the GPU: the chunks kernel
// scans the decays per channel, computes P and L's diagonal 16-row blocks
// elementwise and the blocks below them by mma.sync with FLA's reference
// row (operands x ⊙ e^(G - G_r) and k ⊙ e^(G_r - G)), and leaves G_last
// as K floats per chunk; recur copies those and decays each state row by
// its own factor. Raw per-channel gates read dt_bias per (head, channel).
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @kimi rule = kda dims = [64x64] io = bf16 state = f32
      layout = vk gate = channel_raw beta = sigmoid l2norm chunk = 64 entries = [prefill]
}

// CHECK: gpu.func @kimi_k64_v64_prefill_chunks(
// CHECK: llvm.inline_asm "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK: gpu.func @kimi_k64_v64_prefill_recur(

// PTX: gpu.binary @kimi_k64_v64_prefill_chunks_gpu
// The raw gate per channel: softplus (lg2 of 1 + e^x) and A_log's exp.
// PTX-SAME: lg2.approx
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: gpu.binary @kimi_k64_v64_prefill_recur_gpu
// PTX-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
