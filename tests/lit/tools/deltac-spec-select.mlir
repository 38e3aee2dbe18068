// RUN: deltac %s --target=sm_90a --spec=second | FileCheck %s
// RUN: deltac %s --target=sm_90a | FileCheck %s --check-prefix=ALL
// RUN: not deltac %s --target=sm_90a --spec=third 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not deltac %s --target=sm_90a --spec=first,first 2>&1 | FileCheck %s --check-prefix=TWICE

// --spec generates a subset of a file's specs (e.g. the one a benchmark
// uses out of a test matrix); a name that is not a spec of the file is an
// error naming those it has.
// CHECK: deltac: {{.*}}deltac-spec-select.mlir: 2 kernels planned, 2 generated
// CHECK-NEXT: second_k64_v64_decode.sm_90a
// CHECK-NEXT: second_k64_v64_decode_small.sm_90a
// CHECK-NOT: first_
// ALL: deltac: {{.*}}deltac-spec-select.mlir: 4 kernels planned, 4 generated
// ALL-NEXT: first_k128_v128_decode.sm_90a
// ALL-NEXT: first_k128_v128_decode_small.sm_90a
// ALL-NEXT: second_k64_v64_decode.sm_90a
// UNKNOWN: deltac: error: no spec 'third' in the file (it has first, second)
// TWICE: deltac: error: spec 'first' is listed twice

delta.spec @first rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = log beta = given chunk = 64 entries = [decode] max_t = 1
delta.spec @second rule = delta dims = [64x64] io = bf16 state = f32
    layout = kv gate = none beta = given chunk = 64 entries = [decode] max_t = 1
