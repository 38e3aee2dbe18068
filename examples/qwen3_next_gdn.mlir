// Qwen3-Next / Qwen3.5 Gated DeltaNet: K = V = 128 heads, bf16 activations,
// an fp32 state pool stored v-first ([V, K], as vLLM/SGLang keep it), the
// gate computed in the kernel from the raw projection `a` with A_log and
// dt_bias, beta = sigmoid(b), q/k L2-normalised in the kernel.
// Decode advances up to 4 tokens per call (multi-token prediction).
delta.spec @qwen3_next rule = gated dims = [128x128] io = bf16 state = f32
    layout = vk gate = raw beta = sigmoid l2norm chunk = 64
    entries = [prefill, decode] max_t = 4
