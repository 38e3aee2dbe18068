// RUN: deltac-opt %s --delta-expand-spec -split-input-file | FileCheck %s

// One function per specialization and entry point; K, V and dtypes static,
// run-time sizes dynamic. Prefill is packed (B = 1, cu_seqlens); decode has
// one state per row. The spec stays for the later stages.

// CHECK-LABEL: delta.spec @gdn
delta.spec @gdn rule = gated dims = [128x128, 64x32] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 4

// CHECK: func.func @gdn_k128_v128_prefill(
// CHECK-SAME: %{{.*}}: tensor<1x?x?x128xbf16> {delta.name = "q"}
// CHECK-SAME: %{{.*}}: tensor<1x?x?x128xbf16> {delta.name = "k"}
// CHECK-SAME: %{{.*}}: tensor<1x?x?x128xbf16> {delta.name = "v"}
// CHECK-SAME: %{{.*}}: tensor<1x?x?xbf16> {delta.name = "a"}
// CHECK-SAME: %{{.*}}: tensor<1x?x?xbf16> {delta.name = "b"}
// CHECK-SAME: %{{.*}}: tensor<?xf32> {delta.name = "A_log"}
// CHECK-SAME: %{{.*}}: tensor<?xf32> {delta.name = "dt_bias"}
// CHECK-SAME: %{{.*}}: tensor<?x?x128x128xf32> {delta.name = "initial_state"}
// CHECK-SAME: %{{.*}}: tensor<?xi64> {delta.name = "cu_seqlens"}
// CHECK-SAME: %{{.*}}: f32 {delta.name = "scale"})
// CHECK-SAME: -> (tensor<1x?x?x128xbf16>, tensor<?x?x128x128xf32>)
// CHECK-SAME: attributes {delta.chunk_size = 64 : i64, delta.dims = #delta.dims<k = 128, v = 128>, delta.entry = #delta<entry prefill>, delta.spec = @gdn}
// CHECK: delta.recurrence gated layout = vk gate = raw beta = sigmoid l2norm
// CHECK-SAME: cu_seqlens(
// CHECK: return

// CHECK: func.func @gdn_k128_v128_decode(
// CHECK-SAME: tensor<?x?x?x128xbf16> {delta.name = "q"}
// CHECK-NOT: cu_seqlens
// CHECK-SAME: attributes {delta.dims = #delta.dims<k = 128, v = 128>, delta.entry = #delta<entry decode>, delta.max_t = 4 : i64, delta.spec = @gdn}
// CHECK: delta.recurrence gated layout = vk gate = raw beta = sigmoid l2norm

// K != V: the vk state is [N, HV, V, K].
// CHECK: func.func @gdn_k64_v32_prefill(
// CHECK-SAME: tensor<1x?x?x64xbf16> {delta.name = "q"}
// CHECK-SAME: tensor<1x?x?x32xbf16> {delta.name = "v"}
// CHECK-SAME: tensor<?x?x32x64xf32> {delta.name = "initial_state"}
// CHECK: func.func @gdn_k64_v32_decode(

// -----

// DeltaNet has no gate argument; given beta keeps its name; kv state.
// CHECK-LABEL: delta.spec @dn
delta.spec @dn rule = delta dims = [64x128] io = f16 state = bf16
    layout = kv gate = none beta = given chunk = 32 entries = [prefill]
// CHECK: func.func @dn_k64_v128_prefill(
// CHECK-NOT: delta.name = "g"
// CHECK-SAME: tensor<1x?x?xf16> {delta.name = "beta"}
// CHECK-SAME: tensor<?x?x64x128xbf16> {delta.name = "initial_state"}
// CHECK-SAME: delta.chunk_size = 32 : i64
// CHECK: delta.recurrence delta layout = kv gate = none beta = given
// CHECK-NOT: func.func @dn_k64_v128_decode

// -----

// KDA: per-channel decays [B, T, HV, K] in f32 for the log form.
// CHECK-LABEL: delta.spec @kimi
delta.spec @kimi rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = sigmoid chunk = 64 entries = [decode]
    max_t = 1
// CHECK: func.func @kimi_k128_v128_decode(
// CHECK-SAME: tensor<?x?x?x128xf32> {delta.name = "g"}
// CHECK-SAME: tensor<?x?x?xbf16> {delta.name = "b"}
// CHECK: delta.recurrence kda layout = kv gate = channel_log beta = sigmoid

// -----

// Options left to the call: the function takes them last, as `options`
// (i32), and the recurrence reads them.
// CHECK-LABEL: delta.spec @by_call
delta.spec @by_call rule = gated dims = [64x64] io = f16 state = f32
    layout = kv gate = call beta = call l2norm = call chunk = 64
    entries = [decode] max_t = 2

// A gate by call takes g as f32 (log decays, or a raw a; the host also
// takes a raw a in the io dtype) and A_log, dt_bias as the raw forms do.
// CHECK: func.func @by_call_k64_v64_decode(
// CHECK-SAME: tensor<?x?x?xf32> {delta.name = "g"}
// CHECK-SAME: tensor<?x?x?xf16> {delta.name = "beta"}
// CHECK-SAME: tensor<?xf32> {delta.name = "A_log"}
// CHECK-SAME: tensor<?xf32> {delta.name = "dt_bias"}
// CHECK-SAME: f32 {delta.name = "scale"}, %[[OPT:.*]]: i32 {delta.name = "options"})
// CHECK: delta.recurrence gated layout = kv gate = call beta = call l2norm = call
// CHECK-SAME: options(%[[OPT]] : i32)
