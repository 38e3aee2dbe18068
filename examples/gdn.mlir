// The example library behind the Python module (gdn.py): decode and chunked
// prefill for FLA's fused_recurrent_gated_delta_rule / chunk_gated_delta_rule
// options (log-space g, given beta) in both state layouts for K = V in
// {64, 128, 256}, f16 activations and FLA's default of no in-kernel q/k
// l2norm at K = V in {64, 128}, plain DeltaNet (chunk_delta_rule,
// fused_recurrent_delta_rule), Kimi Delta Attention (chunk_kda,
// fused_recurrent_kda), FLA's per-value terms in decode (gv and a beta per
// value column, with and without l2norm, and with KDA's per-key decays),
// and the serving form of Qwen3-Next /
// Qwen3.5 (raw a with A_log/dt_bias, sigmoid b) with an fp32, bf16 or f16
// state pool. Decode advances up to 8 tokens per call (speculative decoding,
// multi-token prediction). K = V = 256 prefill uses chunks of 32 tokens: a
// chunk of 64 needs more shared memory than a block has.

// FLA: state [N, HV, K, V]; use_qk_l2norm_in_kernel=True.
delta.spec @fla_kv rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = log beta = given l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_kv_256 rule = gated dims = [256x256] io = bf16
    state = f32 layout = kv gate = log beta = given l2norm chunk = 32
    entries = [prefill, decode] max_t = 8

// FLA with state_v_first=True: state [N, HV, V, K].
delta.spec @fla_vk rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = vk gate = log beta = given l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_vk_256 rule = gated dims = [256x256] io = bf16
    state = f32 layout = vk gate = log beta = given l2norm chunk = 32
    entries = [prefill, decode] max_t = 8

// f16 activations.
delta.spec @fla_kv_f16 rule = gated dims = [64x64, 128x128] io = f16
    state = f32 layout = kv gate = log beta = given l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

// FLA's default use_qk_l2norm_in_kernel=False (q and k normalised by the
// caller, as FLA's own tests do), bf16 and f16.
delta.spec @fla_kv_nonorm rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = log beta = given chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_kv_f16_nonorm rule = gated dims = [64x64, 128x128] io = f16
    state = f32 layout = kv gate = log beta = given chunk = 64
    entries = [prefill, decode] max_t = 8

// Plain DeltaNet (chunk_delta_rule, fused_recurrent_delta_rule, and the
// gated functions' g=None): no decay, with and without in-kernel l2norm.
delta.spec @deltanet_kv rule = delta dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = none beta = given l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @deltanet_kv_nonorm rule = delta dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = none beta = given chunk = 64
    entries = [prefill, decode] max_t = 8

// vLLM / SGLang / FlashInfer pools: raw gate and beta logits, v-first.
delta.spec @serving rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @serving_bf16 rule = gated dims = [128x128] io = bf16
    state = bf16 layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

// ... and an f16 pool with f16 activations.
delta.spec @serving_f16 rule = gated dims = [128x128] io = f16
    state = f16 layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

// Kimi Delta Attention (decays per key channel): FLA's chunk_kda and
// fused_recurrent_kda (kv state, log decays, given beta, l2norm), the
// serving decode of Kimi Linear (raw gate with A_log / dt_bias, sigmoid
// beta), and FLA's KDA layer (raw gate, sigmoid beta, l2norm,
// state_v_first) for prefill and decode.
delta.spec @kda_kv rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @kda_kv_raw rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_raw beta = sigmoid l2norm chunk = 64
    entries = [decode] max_t = 8

delta.spec @kda_vk rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = channel_log beta = given l2norm chunk = 64
    entries = [decode] max_t = 8

delta.spec @kda_vk_raw rule = kda dims = [128x128] io = bf16 state = f32
    layout = vk gate = channel_raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 8

// FLA's per-value terms: fused_recurrent_gated_delta_rule's gv (log decays
// per value column) and a beta [B, T, HV, V]; fused_recurrent_delta_rule's
// per-value beta. Decode only: they have no chunked form.
delta.spec @fla_kv_pv rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = log beta = given per_value chunk = 64
    entries = [decode] max_t = 8

delta.spec @fla_kv_pv_l2norm rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = log beta = given l2norm per_value
    chunk = 64 entries = [decode] max_t = 8

delta.spec @deltanet_kv_pv rule = delta dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = none beta = given per_value chunk = 64
    entries = [decode] max_t = 8

// fused_recurrent_gated_delta_rule's gk (per-key decays) with gv: KDA's
// recurrence with per-value terms, the options of kda_kv.
delta.spec @kda_kv_pv rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_log beta = given l2norm per_value chunk = 64
    entries = [decode] max_t = 8
