// Decode specs the GPU tests run (generated into generated/deltac_test_decode):
// every gate and beta form, both io types, both state types, GVA-ready
// dims with K != V. The example library (examples/qwen3_next_gdn.mlir) is
// tested too.

// FLA's fused_recurrent_gated_delta_rule options: given g and beta, l2norm.
delta.spec @gdn_log rule = gated dims = [128x128, 64x64] io = bf16 state = f32
    layout = vk gate = log beta = given l2norm chunk = 64
    entries = [decode] max_t = 8

// Qwen3-Next's raw gate with A_log/dt_bias and sigmoid beta, bf16 state.
delta.spec @gdn_raw_bf16 rule = gated dims = [128x128] io = bf16 state = bf16
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 4

// Linear decay factor, 2*sigmoid beta, f16 activations, K != V, no l2norm.
delta.spec @gdn_linear rule = gated dims = [64x128, 128x64] io = f16
    state = f32 layout = vk gate = linear beta = sigmoid2 chunk = 64
    entries = [decode] max_t = 4

// Plain DeltaNet.
delta.spec @deltanet rule = delta dims = [128x128] io = bf16 state = f32
    layout = vk gate = none beta = given l2norm chunk = 64
    entries = [decode] max_t = 2

// The kv layout ([K, V] states, FLA's default), same options as above.
delta.spec @gdn_log_kv rule = gated dims = [128x128, 64x128] io = bf16
    state = f32 layout = kv gate = log beta = given l2norm chunk = 64
    entries = [decode] max_t = 8

delta.spec @gdn_raw_kv_bf16 rule = gated dims = [128x128, 128x48] io = bf16
    state = bf16 layout = kv gate = raw beta = sigmoid2 chunk = 64
    entries = [decode] max_t = 4

delta.spec @deltanet_kv rule = delta dims = [64x64] io = f16 state = f32
    layout = kv gate = none beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 2

// f16 state pools (decode only), both layouts, f16 activations, the
// serving gate. (kv with a 16-bit state and a log gate makes ptxas spill 4
// bytes on sm_90a, bf16 states too: not in these libraries, see
// docs/PERFORMANCE.md.)
delta.spec @gdn_raw_f16 rule = gated dims = [128x128] io = f16 state = f16
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 4

delta.spec @gdn_raw_kv_f16 rule = gated dims = [128x128] io = f16 state = f16
    layout = kv gate = raw beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 4

// FLA's per-value terms (gv and beta [B, T, HV, V]), decode only: both
// layouts, gated (log and raw gates), KDA and DeltaNet.
delta.spec @gdn_pv_kv rule = gated dims = [128x128, 64x64] io = bf16
    state = f32 layout = kv gate = log beta = given per_value chunk = 64
    entries = [decode] max_t = 4

delta.spec @gdn_pv_vk rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm per_value chunk = 64
    entries = [decode] max_t = 4

delta.spec @kda_pv_kv rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = sigmoid l2norm per_value chunk = 64
    entries = [decode] max_t = 4

delta.spec @kda_pv_vk rule = kda dims = [64x64] io = f16 state = f32
    layout = vk gate = channel_log beta = given l2norm per_value chunk = 64
    entries = [decode] max_t = 2

delta.spec @dn_pv_vk rule = delta dims = [64x128] io = bf16 state = f32
    layout = vk gate = none beta = given per_value chunk = 64
    entries = [decode] max_t = 2
