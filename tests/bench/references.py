"""fp64 token-by-token references of the delta rules with FLA's per-value
and per-key terms, shared by the GPU tests (test_python.py,
kda_chunk32_check.py) and the prefill benchmark's accuracy part. Inputs
in FLA's varlen form: [1, T, heads, dim] with the sequences' bounds in
`cu` (a list)."""
import torch


def pv_ref(q, k, v, g, gv, beta, h0, scale, cu, l2norm, gk=None):
    """fp64 gated delta rule with FLA's per-value terms, state [K, V] per
    head: S = exp(g) S (g [1, T, HV] or None), S[i, :] *= exp(gk_i) (gk
    [1, T, HV, K] or None), S[:, j] *= exp(gv_j) (gv
    [1, T, HV, V] or None), u_j = beta_j (v_j - (S^T k)_j) (beta [1, T, HV]
    or [1, T, HV, V]), S += k u^T, o = scale S^T q."""
    q, k, v, beta = (x.double() for x in (q, k, v, beta))
    if l2norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    Hq, HV = q.shape[2], v.shape[2]
    q, k = q.repeat_interleave(HV // Hq, dim=2), k.repeat_interleave(HV // Hq, dim=2)
    if beta.dim() == 3:
        beta = beta[..., None].expand(*v.shape)
    o, finals = torch.zeros_like(v), []
    for n in range(len(cu) - 1):
        S = h0[n].double().clone()
        for t in range(int(cu[n]), int(cu[n + 1])):
            if g is not None:
                S = S * torch.exp(g[0, t].double())[:, None, None]
            if gk is not None:
                S = S * torch.exp(gk[0, t].double())[:, :, None]
            if gv is not None:
                S = S * torch.exp(gv[0, t].double())[:, None, :]
            u = beta[0, t] * (v[0, t] - torch.einsum("hkv,hk->hv", S, k[0, t]))
            S = S + torch.einsum("hk,hv->hkv", k[0, t], u)
            o[0, t] = scale * torch.einsum("hkv,hk->hv", S, q[0, t])
        finals.append(S)
    return o, torch.stack(finals)


def kda_ref(q, k, v, g, beta, h0, scale, cu):
    """fp64 KDA: S [K, V] per head, S = Diag(exp(g_t)) S, u = beta (v -
    S^T k), S += k u^T, o = scale S^T q; q, k L2-normalised; q [1, T, H,
    K], g [1, T, HV, K] (pv_ref with per-key decays alone)."""
    return pv_ref(q, k, v, None, None, beta, h0, scale, cu, True, gk=g)
