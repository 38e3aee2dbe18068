// RUN: deltac-opt %s --delta-spec-to-chunk | FileCheck %s --check-prefix=CHUNK
// RUN: deltac-opt %s --delta-spec-to-chunk --delta-cpu-pipeline | FileCheck %s

// A spec all the way to the LLVM dialect for the CPU, the path
// tests/unit/ChunkCpuTest.cpp JIT-runs against the fp64 reference.
delta.spec @qwen rule = gated dims = [32x32] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 16 entries = [prefill]

// CHUNK-LABEL: func.func @qwen_k32_v32_prefill
// CHUNK: delta.l2norm
// CHUNK: delta.gate_from_raw
// CHUNK: delta.beta_sigmoid
// CHUNK: delta.chunk_cumsum
// CHUNK: delta.chunk_kkt
// CHUNK: delta.solve_tril
// CHUNK: delta.chunk_state_step
// CHUNK-NOT: delta.chunked_recurrence

// CHECK: llvm.func @qwen_k32_v32_prefill(
// CHECK-NOT: = delta.
// CHECK-NOT: = linalg.
// CHECK-NOT: = tensor.
// CHECK: llvm.intr.exp

// Options by call in a 16-bit io: the branches without l2norm widen q and k
// by arith.extf on whole tensors, which the pipeline makes linalg before
// bufferizing (ChunkCpuTest's GatedRawGivenBf16IoByCall runs it).
delta.spec @bycall rule = gated dims = [32x32] io = bf16 state = f32
    layout = kv gate = call beta = call l2norm = call chunk = 16 entries = [prefill]

// CHUNK-LABEL: func.func @bycall_k32_v32_prefill
// CHUNK: arith.extf {{.*}} : tensor<1x?x?x32xbf16> to tensor<1x?x?x32xf32>

// CHECK: llvm.func @bycall_k32_v32_prefill(
// CHECK-NOT: = linalg.
// CHECK-NOT: = tensor.
// CHECK: llvm.return
