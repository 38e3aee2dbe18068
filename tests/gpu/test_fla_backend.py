"""deltac as flash-linear-attention's backend (generated/runtime/deltac_fla.py)
on the GPU, against the pinned FLA (deltac_torch.FLA_VERSION) on PYTHONPATH.

FLA's GatedDeltaNet and KimiDeltaAttention layers (head dim 128, 16 q/k
heads, 32 v heads, expand_v 1, bf16, eval, torch.inference_mode) at T =
512, 4K and a varlen batch: the output with deltac registered matches FLA's
own within FLA's assert_close ratio (0.005), the backend's counter shows
deltac served the call, and the layer is faster with it (the same timing
as tests/bench/timing.py: CUDA events, L2 flushed). KDA's decode (the
layer's fused_recurrent path, T <= 64) the same, without the timing. The
attention call inside the GatedDeltaNet layer at T = 512 against the fp64
recurrence, FLA's and deltac's. A call the library does not cover (one
that needs gradients) falls back to FLA: nothing served, FLA's bits. Usage: test_fla_backend.py BUILD_DIR OUT_DIR
"""
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing as H  # noqa: E402
import installed  # noqa: E402
from checks import Checks  # noqa: E402
gdn, dt, _ = installed.gdn_module(ROOT, BUILD)
import fla  # noqa: E402
from fla.layers.gated_deltanet import GatedDeltaNet  # noqa: E402
from fla.layers.kda import KimiDeltaAttention  # noqa: E402
from fla.utils import get_err_ratio  # noqa: E402

# The checks' record (tests/gpu/checks.py, shared with test_python).
CHECKS = Checks()
check = CHECKS.check


def layer_case(name, layer, fn, shapes, timed=True):
    """layer(x) for each (label, x, cu_seqlens) with FLA alone and with
    deltac registered."""
    for label, x, cu in shapes:
        kw = {} if cu is None else {"cu_seqlens": cu}
        run = lambda: layer(x, **kw)[0]  # noqa: E731
        with torch.inference_mode():
            ref = run()
            backend = gdn.register_fla_backend()
            try:
                got = run()
                served = backend.served.get(fn, 0)
                why = backend.rejected.get(fn, "")
                t_deltac = H.bench(run) if timed else None
            finally:
                gdn.unregister_fla_backend(backend)
            t_fla = H.bench(run) if timed else None
            again = run()
        ratio = get_err_ratio(ref, got)
        speed = f", {t_deltac:.3f} ms against FLA's {t_fla:.3f} ({t_fla / t_deltac:.2f}x)" \
            if timed else ""
        check(f"{name} {label}: deltac served it{', faster' if timed else ''}",
              served == 1 and torch.equal(again, ref) and (not timed or t_deltac < t_fla),
              f"served {served}{speed}{', rejected: ' + why if why else ''}")
        check(f"{name} {label}: within FLA's assert_close ratio 0.005", ratio < 0.005,
              f"ratio {ratio:.5f}")


def gdn_op_accuracy(layer, x):
    """The attention call inside the layer (the inputs the backend got):
    FLA's and deltac's o against the fp64 recurrence, and their ratio."""
    captured = []
    with torch.inference_mode():
        backend = gdn.register_fla_backend()
        plain = type(backend)._run
        backend._run = lambda fn, *a, **kw: (captured.append(kw or a), plain(backend, fn, *a, **kw))[1]
        try:
            layer(x)
        finally:
            gdn.unregister_fla_backend(backend)
        kw = captured[0]
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
        o_fla = fla_chunk(**kw)[0]
        o_dc = gdn.chunk_gated_delta_rule(**kw)[0]
        q, k, v = kw["q"], kw["k"], kw["v"]
        a = kw["g"].double()
        glog = -torch.exp(kw["A_log"].double()) * torch.nn.functional.softplus(
            a + kw["dt_bias"].double())
        beta = torch.sigmoid(kw["beta"].double())
        T, HV, K, V = q.shape[1], v.shape[2], q.shape[3], v.shape[3]
        h0 = torch.zeros(1, HV, K, V, device=q.device, dtype=torch.float64)
        ro, _ = H.ref_fp64(q, k, v, glog, beta, h0, K ** -0.5, [0, T])
    e_fla, e_dc = H.rel(o_fla, ro), H.rel(o_dc, ro)
    check("GatedDeltaNet T = 512, the attention call: deltac at least as accurate as FLA",
          e_dc <= 1.05 * e_fla,
          f"vs fp64: deltac {e_dc:.2e}, FLA {e_fla:.2e}; FLA vs deltac ratio "
          f"{get_err_ratio(o_fla, o_dc):.5f}")


def main():
    print(f"FLA {fla.__version__} (pinned {dt.FLA_VERSION}), torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    torch.manual_seed(0)
    dev, bf16 = "cuda", torch.bfloat16
    hidden = 16 * 128

    def shapes(seed):
        g = torch.Generator(device=dev).manual_seed(seed)
        x = lambda T: torch.randn(1, T, hidden, device=dev, dtype=bf16, generator=g)  # noqa: E731
        lens = [1024, 3000, 512, 2000, 1500]
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device=dev)
        return [("T = 512", x(512), None), ("T = 4K", x(4096), None),
                (f"varlen {lens}", x(sum(lens)), cu)]

    gdn_layer = GatedDeltaNet(hidden_size=hidden, expand_v=1, head_dim=128, num_heads=16,
                              num_v_heads=32, mode="chunk").to(dev, bf16).eval()
    gdn_shapes = shapes(1)
    layer_case("GatedDeltaNet", gdn_layer, "chunk_gated_delta_rule", gdn_shapes)
    gdn_op_accuracy(gdn_layer, gdn_shapes[0][1])
    kda_layer = KimiDeltaAttention(hidden_size=hidden, expand_v=1, head_dim=128, num_heads=16,
                                   num_v_heads=32, mode="chunk").to(dev, bf16).eval()
    layer_case("KimiDeltaAttention", kda_layer, "chunk_kda", shapes(2))
    # The layer's decode path (T <= 64 in eval): fused_recurrent_kda's kernel.
    g = torch.Generator(device=dev).manual_seed(3)
    decode = [(f"decode B = 8, T = {T}", torch.randn(8, T, hidden, device=dev, dtype=bf16,
                                                       generator=g), None) for T in (1, 4)]
    layer_case("KimiDeltaAttention", kda_layer, "fused_recurrent_kda", decode, timed=False)

    # Not covered: a call that needs gradients (training) goes to FLA, with
    # the kernels FLA already compiled above.
    x = gdn_shapes[0][1].clone().requires_grad_()
    with torch.no_grad():
        ref = gdn_layer(x)[0]
    backend = gdn.register_fla_backend()
    try:
        got = gdn_layer(x)[0]
    finally:
        gdn.unregister_fla_backend(backend)
    why = backend.rejected.get("chunk_gated_delta_rule", "")
    check("GatedDeltaNet with grad (not covered): FLA runs it",
          not backend.served and torch.equal(got.detach(), ref) and "grad" in why, why[:100])

    return CHECKS.summary("FLA backend tests", os.path.join(OUT, "fla_backend_test.txt"))


if __name__ == "__main__":
    sys.exit(main())
