// The prefill specializations the GPU tests and the benchmark exercise
// (generated into generated/deltac_test_prefill). The Qwen3-Next example
// (examples/qwen3_next_gdn.mlir: vk pool, raw gate, sigmoid beta, L2 norm)
// covers the serving form; these add FLA's chunk_gated_delta_rule form
// (kv state, log gate, given beta, L2 norm: what the benchmark compares), plain
// DeltaNet with a bf16 state and a linear gate with chunk 32 and an f16
// state.
delta.spec @gkv rule = gated dims = [128x128] io = bf16 state = f32
    layout = kv gate = log beta = given l2norm chunk = 64 entries = [prefill]
delta.spec @dn rule = delta dims = [64x64] io = bf16 state = bf16
    layout = vk gate = none beta = sigmoid2 l2norm chunk = 32 entries = [prefill]
delta.spec @glin rule = gated dims = [64x128] io = bf16 state = f16
    layout = vk gate = linear beta = given chunk = 32 entries = [prefill]
// Plain DeltaNet with chunk 64, K = V = 64 and f16 activations: on sm_90a
// the transposed recur without a decay, with one 64-column block of K and
// f16 operands.
delta.spec @d64 rule = delta dims = [64x64] io = f16 state = f32
    layout = kv gate = none beta = sigmoid l2norm chunk = 64 entries = [prefill]
// Kimi Delta Attention (per-channel decays): FLA's chunk_kda form (kv state,
// log decays per channel, given beta, L2 norm), the raw per-channel form
// with a v-first state and chunk 32, and K = 256 (state shared by rows).
delta.spec @kkv rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given l2norm chunk = 64 entries = [prefill]
delta.spec @kraw rule = kda dims = [64x64] io = bf16 state = f32
    layout = vk gate = channel_raw beta = sigmoid chunk = 32 entries = [prefill]
delta.spec @k256 rule = kda dims = [256x64] io = bf16 state = f32
    layout = kv gate = channel_log beta = given l2norm chunk = 32 entries = [prefill]
// KDA with chunk 64 at K = V = 64, f16 activations and a v-first state:
// the forms (context parallelism included) at one 64-column block of K and
// of V, f16 operands and the transposed state index.
delta.spec @k64 rule = kda dims = [64x64] io = f16 state = f32
    layout = vk gate = channel_log beta = given l2norm chunk = 64 entries = [prefill]
