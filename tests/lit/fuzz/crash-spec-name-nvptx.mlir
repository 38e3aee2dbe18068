// target=sm_80
// RUN: rm -rf %t && not deltac %s --target=sm_80 -o %t 2>&1 | FileCheck %s
// RUN: not ls %t

// A spec name that is no identifier reached the NVPTX printer as a kernel
// symbol: "LLVM ERROR: Symbol name with unsupported characters", rc 134.
// deltac-spec-fuzzer finds it within one input once it lowers to PTX (shown
// with the verifier's name check taken out); the leading `// target=` line
// is its header, so as a seed this file replays that path on every run.
// CHECK: crash-spec-name-nvptx.mlir:[[@LINE+2]]:1: error: 'delta.spec' op name 'a b-c' holds ' '
// CHECK-NOT: LLVM ERROR
delta.spec @"a b-c" rule = gated dims = [64x64] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
