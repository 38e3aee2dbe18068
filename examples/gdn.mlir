// The example library behind the Python module (gdn.py): decode and chunked
// prefill for FLA's fused_recurrent_gated_delta_rule / chunk_gated_delta_rule
// in both state layouts for K = V in {64, 128} with bf16 and f16
// activations and {256} with bf16, plain DeltaNet (chunk_delta_rule,
// fused_recurrent_delta_rule), Kimi Delta Attention (chunk_kda,
// fused_recurrent_kda) at K = V in {64, 128} with bf16 and f16 in both
// layouts (and chunk_kda's chunk_size=32 at 64 in the kv layout), FLA's
// per-value terms in decode (gv and a beta per value column, and with
// KDA's per-key decays), and the serving pools of Qwen3-Next /
// Qwen3.5 in bf16 and f16 (the f32 pool is fla_vk's). Decode advances up
// to 8 tokens per call (speculative decoding, multi-token prediction).
// K = V = 256 prefill uses chunks of 32 tokens: a chunk of 64 needs more
// shared memory than a block has.
//
// Every spec leaves the options that cost the kernels only a select or a
// branch to each call: `gate = call` (log-space g, or FLA's
// use_gate_in_kernel: a raw a with A_log / dt_bias, f32 or the io dtype;
// `channel_call` per key channel), `beta = call` (as given, or logits with
// use_beta_sigmoid_in_kernel and allow_neg_eigval) and `l2norm = call`
// (use_qk_l2norm_in_kernel). One set of kernels serves every combination;
// the spec fixes what changes the kernels' shape: rule, dims, dtypes,
// layout, chunk.

// FLA: state [N, HV, K, V].
delta.spec @fla_kv rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_kv_f16 rule = gated dims = [64x64, 128x128] io = f16
    state = f32 layout = kv gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_kv_256 rule = gated dims = [256x256] io = bf16
    state = f32 layout = kv gate = call beta = call l2norm = call chunk = 32
    entries = [prefill, decode] max_t = 8

// FLA with state_v_first=True: state [N, HV, V, K]; also the f32 pools of
// vLLM / SGLang / FlashInfer (raw gate, v-first).
delta.spec @fla_vk rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = vk gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_vk_f16 rule = gated dims = [64x64, 128x128] io = f16
    state = f32 layout = vk gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @fla_vk_256 rule = gated dims = [256x256] io = bf16
    state = f32 layout = vk gate = call beta = call l2norm = call chunk = 32
    entries = [prefill, decode] max_t = 8

// Plain DeltaNet (chunk_delta_rule, fused_recurrent_delta_rule, and the
// gated functions' g=None): no decay. With f16 activations (and in the vk
// layout) the gated specs' kernels run it: a gate by call reads a null g
// as no decay.
delta.spec @deltanet_kv rule = delta dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = none beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

// Serving pools in bf16 (bf16 activations) and f16 (f16 activations).
delta.spec @serving_bf16 rule = gated dims = [128x128] io = bf16
    state = bf16 layout = vk gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @serving_f16 rule = gated dims = [128x128] io = f16
    state = f16 layout = vk gate = call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

// Kimi Delta Attention (decays per key channel): FLA's chunk_kda and
// fused_recurrent_kda (kv state), Kimi Linear's serving decode and FLA's
// KDA layer (state_v_first). The log-gate decode in the kv layout has its
// own spec, listed first so that the module takes it: the gate by call
// holds each channel's dt_bias beside its gate input, which took the kv
// decode kernel from 128 registers to 159 (3 blocks an SM instead of 4).
delta.spec @kda_kv_log rule = kda dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = channel_log beta = call l2norm = call
    chunk = 64 entries = [decode] max_t = 8

delta.spec @kda_kv rule = kda dims = [64x64, 128x128] io = bf16 state = f32
    layout = kv gate = channel_call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @kda_kv_f16 rule = kda dims = [64x64, 128x128] io = f16 state = f32
    layout = kv gate = channel_call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @kda_vk rule = kda dims = [64x64, 128x128] io = bf16 state = f32
    layout = vk gate = channel_call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

delta.spec @kda_vk_f16 rule = kda dims = [64x64, 128x128] io = f16 state = f32
    layout = vk gate = channel_call beta = call l2norm = call chunk = 64
    entries = [prefill, decode] max_t = 8

// FLA's chunk_kda(chunk_size=32) at K = V = 64 (its test_chunk cases, the
// safe gate's shorter chunks): prefill by chunks of 32. Listed after the
// chunk-64 specs, which a call that leaves the chunk to the library takes.
delta.spec @kda_kv_c32 rule = kda dims = [64x64] io = bf16 state = f32
    layout = kv gate = channel_call beta = call l2norm = call chunk = 32
    entries = [prefill]

delta.spec @kda_kv_f16_c32 rule = kda dims = [64x64] io = f16 state = f32
    layout = kv gate = channel_call beta = call l2norm = call chunk = 32
    entries = [prefill]

// FLA's per-value terms: fused_recurrent_gated_delta_rule's gv (log decays
// per value column) and a beta [B, T, HV, V]; fused_recurrent_delta_rule's
// per-value beta; with gk (per-key decays), KDA's recurrence. Decode only:
// they have no chunked form.
delta.spec @fla_kv_pv rule = gated dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = call beta = call l2norm = call per_value
    chunk = 64 entries = [decode] max_t = 8

delta.spec @deltanet_kv_pv rule = delta dims = [64x64, 128x128] io = bf16
    state = f32 layout = kv gate = none beta = call l2norm = call per_value
    chunk = 64 entries = [decode] max_t = 8

delta.spec @kda_kv_pv rule = kda dims = [128x128] io = bf16 state = f32
    layout = kv gate = channel_call beta = call l2norm = call per_value
    chunk = 64 entries = [decode] max_t = 8
