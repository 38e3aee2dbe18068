"""chunk_kda(chunk_size=32) of generated/gdn at K = V = 64 (f16 and bf16,
kv layout, FLA's test_chunk options: gate in kernel with the bounded gate,
no in-kernel l2norm) against an fp64 token-by-token recurrence: relative
error ||out - ref|| / ||ref|| of o and the final state (tolerance 6e-3
with bf16, 2e-3 with f16: about twice the roundings' share); o poisoned
with NaN before the call. Strong decays (the test's dt_bias) and weak ones
(dt_bias - 6: the state carried over many chunks and h0 matter), T a
multiple of 32 and not. Usage: kda_chunk32_check.py LIBGDN.so"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "generated", "gdn"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import gdn  # noqa: E402
from references import pv_ref  # noqa: E402

gdn.load(sys.argv[1])
fails = 0
cases = [(dtype, T, shift) for dtype in (torch.float16, torch.bfloat16) for T in (160, 97)
         for shift in (0.0, -6.0)]
for dtype, T, shift in cases:
    torch.manual_seed(7)
    B, H, HV, D, lb, scale = 2, 2, 4, 64, -5.0, 0.1
    dev = "cuda"
    q = F.normalize(torch.rand(B, T, H, D, device=dev), dim=-1).to(dtype)
    k = F.normalize(torch.rand(B, T, H, D, device=dev), dim=-1).to(dtype)
    v = torch.rand(B, T, HV, D, device=dev).to(dtype)
    g = torch.randn(B, T, HV, D, device=dev).to(dtype)
    A_log = torch.randn(HV, device=dev)
    dt_bias = torch.randn(HV * D, device=dev) + shift
    beta = torch.randn(B, T, HV, device=dev).sigmoid().to(dtype)
    h0 = torch.randn(B, HV, D, D, device=dev)
    poison = torch.full((B, T, HV, D), float("nan"), dtype=dtype, device=dev)
    o, ht = gdn.chunk_kda(q, k, v, g, beta, scale=scale, initial_state=h0,
                          output_final_state=True, use_gate_in_kernel=True, A_log=A_log,
                          dt_bias=dt_bias, safe_gate=True, lower_bound=lb, chunk_size=32,
                          output=poison)
    assert o.data_ptr() == poison.data_ptr()
    # fp64 reference: gate lb * sigmoid(exp(A_log) (g + dt_bias)) per key channel.
    gl = lb * torch.sigmoid(A_log.double().exp()[None, None, :, None] *
                            (g.double() + dt_bias.double().view(HV, D)))
    flat = lambda x: x.reshape(1, B * T, *x.shape[2:])  # noqa: E731
    ref, S = pv_ref(flat(q), flat(k), flat(v), None, None, flat(beta), h0, scale,
                    [0, T, 2 * T], False, gk=flat(gl))
    ref = ref.view(B, T, HV, D)
    eo = ((o.double() - ref).norm() / ref.norm()).item()
    es = ((ht.double() - S).norm() / S.norm()).item()
    tol = 6e-3 if dtype == torch.bfloat16 else 2e-3
    ok = eo < tol and es < tol and torch.isfinite(o).all().item()
    fails += not ok
    print(f"{'PASS' if ok else 'FAIL'} chunk_kda chunk_size=32 {str(dtype)[6:]} T={T} "
          f"dt_bias{shift:+.0f}: o err {eo:.2e}, state err {es:.2e} (tolerance {tol:g})")
print(f"== kda chunk 32: {len(cases) - fails} of {len(cases)} pass ==")
sys.exit(1 if fails else 0)
