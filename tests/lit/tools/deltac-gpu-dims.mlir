// The GPU dims rule of the spec verifier applies once deltac attaches the
// targets: the error carries the spec's location and nothing is written.
// RUN: rm -rf %t && not deltac %s --target=sm_90a -o %t 2>&1 | FileCheck %s
// RUN: not test -e %t
// CHECK: deltac-gpu-dims.mlir:[[@LINE+1]]:1: error: 'delta.spec' op specialization 16x16 has no GPU prefill kernel: prefill supports K and V multiples of 32
delta.spec @small rule = gated dims = [16x16] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [prefill]
