// RUN: deltac-opt %s | FileCheck %s
// RUN: deltac-opt %s | deltac-opt | FileCheck %s
// RUN: deltac-opt %s --mlir-print-op-generic | deltac-opt | FileCheck %s

// One spec per rule, with every option spelled out; printing and parsing
// again gives the same text.

// CHECK-LABEL: delta.spec @gdn rule = gated dims = [128x128, 64x64] io = bf16 state = f32 layout = vk gate = raw beta = sigmoid l2norm chunk = 64 entries = [prefill, decode] max_t = 4
delta.spec @gdn rule = gated dims = [128x128, 64x64] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 4

// CHECK-LABEL: delta.spec @gdn_log rule = gated dims = [256x128] io = f16 state = bf16 layout = kv gate = log beta = given chunk = 32 entries = [prefill]
// CHECK-NOT: l2norm
delta.spec @gdn_log rule = gated dims = [256x128] io = f16 state = bf16
    layout = kv gate = log beta = given chunk = 32 entries = [prefill]

// CHECK-LABEL: delta.spec @gdn_linear rule = gated dims = [16x16] io = f32 state = f32 layout = kv gate = linear beta = sigmoid2 chunk = 16 entries = [decode] max_t = 1
delta.spec @gdn_linear rule = gated dims = [16x16] io = f32 state = f32
    layout = kv gate = linear beta = sigmoid2 chunk = 16 entries = [decode]
    max_t = 1

// CHECK-LABEL: delta.spec @deltanet rule = delta dims = [128x128] io = bf16 state = f32 layout = kv gate = none beta = sigmoid l2norm chunk = 64 entries = [prefill, decode] max_t = 64
delta.spec @deltanet rule = delta dims = [128x128] io = bf16 state = f32
    layout = kv gate = none beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 64

// CHECK-LABEL: delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32 layout = vk gate = channel_raw beta = sigmoid l2norm chunk = 64 entries = [decode, prefill] max_t = 2
delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = channel_raw beta = sigmoid l2norm chunk = 64
    entries = [decode, prefill] max_t = 2

// CHECK-LABEL: delta.spec @kimi_log rule = kda dims = [64x128] io = bf16 state = f32 layout = kv gate = channel_log beta = given chunk = 64 entries = [prefill]
delta.spec @kimi_log rule = kda dims = [64x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given chunk = 64 entries = [prefill]

// The same options as @gdn with other dims are a distinct specialization.
// CHECK-LABEL: delta.spec @gdn_small rule = gated dims = [32x32]
delta.spec @gdn_small rule = gated dims = [32x32] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 4

// FLA's per-value terms (decode only).
// CHECK-LABEL: delta.spec @per_value rule = gated dims = [128x128] io = bf16 state = f32 layout = kv gate = log beta = given l2norm per_value chunk = 64 entries = [decode] max_t = 8
delta.spec @per_value rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given l2norm per_value chunk = 64
    entries = [decode] max_t = 8

// Options left to each call (one set of kernels for every choice).
// CHECK-LABEL: delta.spec @gdn_call rule = gated dims = [128x128] io = bf16 state = f32 layout = kv gate = call beta = call l2norm = call chunk = 64 entries = [prefill, decode] max_t = 8
delta.spec @gdn_call rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

// CHECK-LABEL: delta.spec @kda_call rule = kda dims = [64x64] io = f16 state = f32 layout = vk gate = channel_call beta = given l2norm = call chunk = 64 entries = [decode] max_t = 2
delta.spec @kda_call rule = kda dims = [64x64] io = f16 state = f32
    layout = vk gate = channel_call beta = given l2norm = call chunk = 64
    entries = [decode] max_t = 2
