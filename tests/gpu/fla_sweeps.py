"""The sweeps of the Python module's GPU tests over the example library's
prefill specializations, against FLA and fp64: most of the suite's time is
FLA compiling each configuration, so test_python.py may run them in a
process of their own beside the rest (DELTAC_PY_PART=sweeps / main; run.sh
test-python does). `ctx` carries test_python.py's helpers and modules."""
import torch
import torch.nn.functional as F


def prefill_sweep(ctx):
    H, gdn, fla_chunk, check, R = ctx.H, ctx.gdn, ctx.fla_chunk, ctx.check, ctx.R
    # Every prefill specialization of the example library against FLA and
    # fp64: K = V = 64 / 128 / 256 (256: chunks of 32), both state layouts, f16.
    for K, v_first, dtype in [(64, False, torch.bfloat16), (128, True, torch.bfloat16),
                              (256, False, torch.bfloat16), (256, True, torch.bfloat16),
                              (128, False, torch.float16)]:
        lens = [3, 130, 64, 33]
        q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, 2, 4, K=K, V=K, dtype=dtype, seed=K)
        scale = K ** -0.5
        ro, rh = H.ref_fp64(q, k, v, g, beta, h0, scale, cu.tolist())
        fo, fh = fla_chunk(q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True,
                           use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
        init = h0.transpose(-1, -2).contiguous() if v_first else h0
        po, ph = gdn.chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=init,
                                            output_final_state=True, use_qk_l2norm_in_kernel=True,
                                            cu_seqlens=cu, state_v_first=v_first)
        if v_first:
            ph = ph.transpose(-1, -2)
        e = dict(fo=R(fo, ro), fh=R(fh, rh), do=R(po, ro), dh=R(ph, rh))
        check(f"chunk_gated_delta_rule K=V={K} {'vk' if v_first else 'kv'} {str(dtype)[6:]}",
              e["do"] <= max(1.1 * e["fo"], 1e-3) and e["dh"] <= max(1.1 * e["fh"], 1e-3),
              f"o {e['do']:.2e} (FLA {e['fo']:.2e}), state {e['dh']:.2e} (FLA {e['fh']:.2e})")


# The specs of issue 32's FLA surface: FLA's default of no in-kernel
# q/k l2norm (q, k normalised by the caller, as FLA's tests do; the fp64
# reference's own normalisation is then the identity), f16 at K = 64, and
# plain DeltaNet through chunk_delta_rule / fused_recurrent_delta_rule
# (FLA's DeltaNet has H = HV) against FLA and fp64 (log g = 0).
def fla_surface(ctx):
    H, gdn, fla_chunk, check, R = ctx.H, ctx.gdn, ctx.fla_chunk, ctx.check, ctx.R
    flat, kernels_launched, FLA = ctx.flat, ctx.kernels_launched, ctx.FLA
    if FLA is not None:
        from fla.ops.delta_rule import chunk_delta_rule as fla_dn_chunk
        from fla.ops.delta_rule import fused_recurrent_delta_rule as fla_dn_recurrent
    else:
        fla_dn_chunk = fla_dn_recurrent = lambda *a, **k: (None, None)  # noqa: E731
    lens = [3, 130, 64, 33]
    for K in (64, 128):
        for dtype, norm in ((torch.bfloat16, False), (torch.float16, False),
                            (torch.float16, True)):
            if K == 128 and norm:
                continue  # 4c covers it
            q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, 2, 4, K=K, V=K, dtype=dtype,
                                                        seed=K + 7)
            if not norm:
                q, k = F.normalize(q.float(), dim=-1).to(dtype), F.normalize(k.float(), dim=-1).to(dtype)
            scale = K ** -0.5
            ro, rh = H.ref_fp64(q, k, v, g, beta, h0, scale, cu.tolist())
            fo, fh = fla_chunk(q, k, v, g, beta, scale=scale, initial_state=h0,
                               output_final_state=True, use_qk_l2norm_in_kernel=norm,
                               cu_seqlens=cu)
            po, ph = gdn.chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=h0,
                                                output_final_state=True,
                                                use_qk_l2norm_in_kernel=norm, cu_seqlens=cu)
            e = dict(fo=R(fo, ro), fh=R(fh, rh), do=R(po, ro), dh=R(ph, rh))
            check(f"chunk_gated_delta_rule K=V={K} {str(dtype)[6:]} l2norm={norm}",
                  e["do"] <= max(1.1 * e["fo"], 1e-3) and e["dh"] <= max(1.1 * e["fh"], 1e-3),
                  f"o {e['do']:.2e} (FLA {e['fo']:.2e}), state {e['dh']:.2e} (FLA {e['fh']:.2e})")
        for norm in (True, False):
            q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, 4, 4, K=K, V=K, seed=K + 9)
            if not norm:
                q, k = F.normalize(q.float(), dim=-1).bfloat16(), F.normalize(k.float(), dim=-1).bfloat16()
            zero = torch.zeros_like(g)
            ro, rh = H.ref_fp64(q, k, v, zero, beta, h0, K ** -0.5, cu.tolist())
            fo, fh = fla_dn_chunk(q, k, v, beta, initial_state=h0, output_final_state=True,
                                  use_qk_l2norm_in_kernel=norm, cu_seqlens=cu)
            po, ph = gdn.chunk_delta_rule(q, k, v, beta, initial_state=h0,
                                          output_final_state=True, use_qk_l2norm_in_kernel=norm,
                                          cu_seqlens=cu)
            e = dict(fo=R(fo, ro), fh=R(fh, rh), do=R(po, ro), dh=R(ph, rh))
            check(f"chunk_delta_rule K=V={K} l2norm={norm}",
                  e["do"] <= max(1.1 * e["fo"], 1e-3) and e["dh"] <= max(1.1 * e["fh"], 1e-3),
                  f"o {e['do']:.2e} (FLA {e['fo']:.2e}), state {e['dh']:.2e} (FLA {e['fh']:.2e})")
            # Decode: [B, T] rows of 3 tokens.
            B, T = 5, 3
            q, k, v, g, beta, h0 = H.decode_inputs(B, H=4, HV=4, K=K, V=K, T=T, seed=K + norm)
            if not norm:
                q, k = F.normalize(q.float(), dim=-1).bfloat16(), F.normalize(k.float(), dim=-1).bfloat16()
            cuT = [i * T for i in range(B + 1)]
            ro, rh = H.ref_fp64(flat(q), flat(k), flat(v), torch.zeros_like(flat(g)), flat(beta),
                                h0, K ** -0.5, cuT)
            fo, fh = fla_dn_recurrent(q, k, v, beta, initial_state=h0, output_final_state=True,
                                      use_qk_l2norm_in_kernel=norm)
            do, dh = gdn.fused_recurrent_delta_rule(q, k, v, beta, initial_state=h0,
                                                    output_final_state=True,
                                                    use_qk_l2norm_in_kernel=norm)
            e = dict(fo=R(flat(fo), ro), fh=R(fh, rh), do=R(flat(do), ro), dh=R(dh, rh))
            names = kernels_launched(lambda: gdn.fused_recurrent_delta_rule(
                q, k, v, beta, initial_state=h0, output_final_state=True,
                use_qk_l2norm_in_kernel=norm))
            check(f"fused_recurrent_delta_rule K=V={K} l2norm={norm}, one DeltaNet kernel",
                  e["do"] <= max(1.1 * e["fo"], 2.5e-3) and e["dh"] <= max(1.1 * e["fh"], 1e-5)
                  and len(names) == 1 and names[0].startswith("deltanet"),
                  f"o {e['do']:.2e} (FLA {e['fo']:.2e}), state {e['dh']:.2e} "
                  f"(FLA {e['fh']:.2e}), launched {names}")
