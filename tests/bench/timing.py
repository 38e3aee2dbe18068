"""The benchmarks' and GPU tests' inputs, timing and fp64 reference.

The method of the FLA anchor numbers (shared/anchors/fla_harness.py, H200
2026-11-21), kept in the repository so that a clean checkout runs the
benchmarks and tests/gpu/test_python.py with torch alone; FLA itself
(flash-linear-attention on PYTHONPATH) is only the optional anchor they
are compared with.

Timing: bench() is the method of triton.testing.do_bench with
return_mode="median": a 256 MB buffer is zeroed before every timed call
(so no call finds its inputs in L2), the call count comes from a
five-call estimate (warmup / rep in ms), and each call is timed by its own
pair of CUDA events. graph_ms() times one replay of a CUDA graph holding
calls_per_graph calls (captured after three warm-up calls on a side
stream), as_called_ms() the eager call.
Inputs: prefill_inputs / decode_inputs (bf16 q/k/v, fp32 log g =
logsigmoid(randn), beta = sigmoid(rand), fp32 initial state [N, HV, K,
V]) on the standard shapes PREFILL_SHAPES / DECODE_BATCHES.
"""
import statistics

import torch
import torch.nn.functional as F

from references import pv_ref

DEV = "cuda"

# name, sequence lengths (packed, B = 1), H (q/k heads), HV (v heads)
PREFILL_SHAPES = [
    ("t512_h16_hv32", [512], 16, 32),
    ("t4k_h16_hv32", [4096], 16, 32),
    ("varlen16k_h16_hv32", [7000, 3000, 2500, 1800, 900, 500, 200, 100], 16, 32),
    ("t32k_h16", [32768], 16, 16),
    ("t128k_h16", [131072], 16, 16),
]
DECODE_BATCHES = [1, 4, 16, 64, 256, 512]

_L2_FLUSH = {}


def _flush_buffer():
    dev = torch.cuda.current_device()
    if dev not in _L2_FLUSH:  # larger than any GPU's L2
        _L2_FLUSH[dev] = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=DEV)
    return _L2_FLUSH[dev]


def bench(fn, warmup=25, rep=100):
    """Median time of fn() in ms, L2 flushed before each call."""
    fn()
    torch.cuda.synchronize()
    cache = _flush_buffer()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-6)
    n_warmup, n_repeat = max(1, int(warmup / estimate)), max(1, int(rep / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    # the lower middle value, as torch.median (which do_bench uses) takes it
    return statistics.median_low(s.elapsed_time(e) for s, e in zip(starts, ends))


def as_called_ms(fn):
    fn()
    torch.cuda.synchronize()
    return bench(fn, warmup=25, rep=100)


def graph_ms(fn, calls_per_graph=1):
    """Median time of one graph replay / calls_per_graph (L2 flushed between replays)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls_per_graph):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return bench(g.replay, warmup=25, rep=200) / calls_per_graph


def prefill_inputs(lens, H, HV, K=128, V=128, dtype=torch.bfloat16, seed=0):
    """bf16 q/k/v, fp32 log-space g = logsigmoid(randn), beta = sigmoid(rand),
    cu_seqlens (int64), fp32 h0 [N, HV, K, V]."""
    gen = torch.Generator(device=DEV).manual_seed(seed)
    T = sum(lens)
    q = torch.randn(1, T, H, K, dtype=dtype, device=DEV, generator=gen)
    k = torch.randn(1, T, H, K, dtype=dtype, device=DEV, generator=gen)
    v = torch.randn(1, T, HV, V, dtype=dtype, device=DEV, generator=gen)
    g = F.logsigmoid(torch.randn(1, T, HV, dtype=torch.float32, device=DEV, generator=gen))
    beta = torch.rand(1, T, HV, dtype=torch.float32, device=DEV, generator=gen).sigmoid().to(dtype)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.long, device=DEV)
    h0 = torch.randn(len(lens), HV, K, V, dtype=torch.float32, device=DEV, generator=gen) * 0.1
    return q, k, v, g, beta, cu, h0


def decode_inputs(B, H=16, HV=32, K=128, V=128, T=1, seed=0):
    """T decode steps per sequence; state [B, HV, K, V] fp32 (FLA's layout), given g and beta."""
    gen = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(B, T, H, K, dtype=torch.bfloat16, device=DEV, generator=gen)
    k = torch.randn(B, T, H, K, dtype=torch.bfloat16, device=DEV, generator=gen)
    v = torch.randn(B, T, HV, V, dtype=torch.bfloat16, device=DEV, generator=gen)
    g = F.logsigmoid(torch.randn(B, T, HV, dtype=torch.float32, device=DEV, generator=gen))
    beta = torch.rand(B, T, HV, dtype=torch.bfloat16, device=DEV, generator=gen).sigmoid()
    h0 = torch.randn(B, HV, K, V, dtype=torch.float32, device=DEV, generator=gen) * 0.1
    return q, k, v, g, beta, h0


def ref_fp64(q, k, v, g, beta, h0, scale, cu):
    """Token-by-token gated delta rule in float64, state [K, V]; q, k
    L2-normalised; GVA by repeating q/k heads (references.pv_ref with a
    decay per head alone)."""
    return pv_ref(q, k, v, g, None, beta, h0, scale, cu, True)


def rel(a, b):
    """Relative L2 error of a against b."""
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def import_fla():
    """flash-linear-attention's module `fla` (the optional anchor), or None
    when it is not importable."""
    try:
        import fla.ops.gated_delta_rule  # its kernels' module imports triton too
        return fla
    except ImportError:
        return None
