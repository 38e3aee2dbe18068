// RUN: deltac-opt %s --delta-spec-to-chunk --delta-plan-prefill --delta-lower-prefill-to-gpu | FileCheck %s

// f16 activations keep f16 tensor-core operands end to end (3 more mantissa
// bits than bf16, as FLA's f16 path): no bf16 value anywhere in the kernels.
module attributes {delta.targets = ["sm_90a"]} {
  delta.spec @half rule = gated dims = [64x64] io = f16 state = f32
      layout = kv gate = log beta = given l2norm chunk = 64 entries = [prefill]
}

// CHECK-NOT: bf16
// CHECK: gpu.func @half_k64_v64_prefill_chunks(
// CHECK-NOT: bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK-NOT: bf16
// CHECK: gpu.func @half_k64_v64_prefill_recur(
// CHECK-NOT: bf16
// CHECK: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k16.f32.f16.f16
// CHECK-NOT: bf16
