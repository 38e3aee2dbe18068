"""Where prefill's error against fp64 comes from: the chunked GDN recurrence
in numpy, fp32 everywhere but at the points where the kernels round to 16
bits, each of which can be turned off or made f16 instead of bf16. CPU
only (numpy); no GPU, no deltac library.

The rounding points (the transposed recur with the raw q/k form, and the
warpgroup chunks, docs/architecture.md):
  kop  the normalised q and k rows as products' operands (Qg and Kd as the
       ordinary forms store them; the raw q/k form multiplies the raw bf16
       rows, exact, and scales the products after)
  T    the solve's inverse as W's and U's operand (A_w, A_u)
  W    W = A_w (beta e^G k) as W S's operand
  U    U in the workspace
  P    P = scale (Q K^T) e^(G_i - G_j), lower triangle, in the workspace
  S    the state as W S's and Q S's operand
  Vp   V' = U - W S as the state update's operand (V'^T K)
  Vo   V' as the output's operand (P V')
  o    the output (io dtype)
  qk   (not a kernel point) the normalised q and k rounded to bf16 before
       every use, as FLA's separate l2norm kernel leaves them: with every
       point and this one, a model of FLA's chunk_gated_delta_rule, whose
       output the model also compares with deltac's (FLA's layer test
       asks the two to agree within 0.005)

Inputs are bench_prefill's (timing.prefill_inputs: bf16 randn q, k, v,
logsigmoid(randn) g, sigmoid(rand) beta, h0 randn * 0.1), l2-normalised q
and k, K = V = 128, chunks of 64. With every point bf16 (the ordinary
forms) the model gives o 2.93e-3 and state 2.39e-3 at T = 1024, where the
H200 measures 2.91e-3 and 2.45e-3 (docs/PERFORMANCE.md). Without `kop`
(the raw q/k form) it gives 2.92e-3 / 1.71e-3 against the H200's raw form
2.91e-3 / 2.31e-3: that form's state has a rounding the model misses.

Usage: rounding_model.py [T] (default 1024; T a multiple of 64)
"""
import sys

import numpy as np

POINTS = ["kop", "T", "W", "U", "P", "S", "Vp", "Vo", "o"]


def bf16(x):
    """Round to bfloat16 (nearest even), returned as float32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def inputs(T, HV=2, K=128, V=128, seed=0):
    rng = np.random.default_rng(seed)
    q = bf16(rng.standard_normal((T, HV, K)))
    k = bf16(rng.standard_normal((T, HV, K)))
    v = bf16(rng.standard_normal((T, HV, V)))
    g = (-np.log1p(np.exp(-rng.standard_normal((T, HV))))).astype(np.float32)
    beta = bf16(1 / (1 + np.exp(-rng.random((T, HV)))))
    h0 = (rng.standard_normal((HV, K, V)) * 0.1).astype(np.float32)
    return q, k, v, g, beta, h0


def reference(q, k, v, g, beta, h0):
    """fp64, token by token."""
    T, HV, K = q.shape
    scale = K ** -0.5
    o = np.zeros(v.shape)
    S = h0.astype(np.float64).copy()
    qn = q / np.linalg.norm(q.astype(np.float64), axis=-1, keepdims=True)
    kn = k / np.linalg.norm(k.astype(np.float64), axis=-1, keepdims=True)
    for t in range(T):
        for h in range(HV):
            S[h] *= np.exp(g[t, h])
            u = v[t, h] - kn[t, h] @ S[h]
            S[h] += beta[t, h] * np.outer(kn[t, h], u)
            o[t, h] = scale * qn[t, h] @ S[h]
    return o, S


def chunked(q, k, v, g, beta, h0, bf=(), half=(), C=64):
    """The chunked form in fp32; the points in `bf` rounded to bf16, those
    in `half` to f16."""
    def R(name, x):
        x = np.asarray(x, np.float32)
        return f16(x) if name in half else bf16(x) if name in bf else x
    T, HV, K = q.shape
    scale = K ** -0.5
    o = np.zeros(v.shape, np.float32)
    S = h0.copy()
    qn = (q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float32)
    kn = (k / np.linalg.norm(k, axis=-1, keepdims=True)).astype(np.float32)
    if "qk" in bf:
        qn, kn = bf16(qn), bf16(kn)
    strict = np.tril(np.ones((C, C), bool), -1)
    lower = np.tril(np.ones((C, C), bool))
    for c0 in range(0, T, C):
        rows = slice(c0, c0 + C)
        for h in range(HV):
            Q, Kc, Vc, b = qn[rows, h], kn[rows, h], v[rows, h], beta[rows, h]
            G = np.cumsum(g[rows, h]).astype(np.float32)
            D = np.exp(G[:, None] - G[None, :])
            A = np.where(strict, (b[:, None] * Kc) @ Kc.T * D, 0).astype(np.float32)
            inv = np.linalg.inv(np.eye(C, dtype=np.float32) + A).astype(np.float32)
            Kb, Qb = R("kop", Kc), R("kop", Q)
            W = R("W", R("T", inv * (b * np.exp(G))[None, :]) @ Kb)
            U = R("U", R("T", inv * b[None, :]) @ Vc)
            P = R("P", np.where(lower, scale * (Q @ Kc.T) * D, 0))
            Sb = R("S", S[h])
            Vp = U - W @ Sb
            o[rows, h] = (Qb * (scale * np.exp(G))[:, None]) @ Sb + P @ R("Vo", Vp)
            S[h] = np.exp(G[-1]) * S[h] + (Kb * np.exp(G[-1] - G)[:, None]).T @ R("Vp", Vp)
    return R("o", o), S


def main():
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    if T <= 0 or T % 64:
        sys.exit(f"Error: T must be a positive multiple of 64 (the chunk), got {T}")
    x = inputs(T)
    ro, rs = reference(*x)

    def err(a, b):
        return np.linalg.norm(a - b) / np.linalg.norm(b)

    def row(label, **kw):
        o, s = chunked(*x, **kw)
        print(f"| {label} | {err(o, ro):.2e} | {err(s, rs):.2e} |")

    print(f"T = {T}, HV = 2, K = V = 128, chunks of 64; error vs fp64 (relative L2)")
    print("| rounding | o | state |\n|---|---|---|")
    row("none (fp32)")
    row("every point bf16 (the kernels)", bf=POINTS)
    for p in POINTS:
        row(f"bf16 but {p}", bf=[q for q in POINTS if q != p])
        row(f"{p} alone", bf=[p])
    # f16 where the hardware allows it: a product's two operands share a
    # type, so P with V' as the output's operand, V' and k in the state
    # update; U and P are workspace storage.
    for half in (["U"], ["P", "Vo"], ["U", "P", "Vo"], ["U", "P", "Vo", "Vp", "kop"]):
        row(f"f16 for {', '.join(half)}, the rest bf16", bf=POINTS, half=half)
    fla, _ = chunked(*x, bf=POINTS + ["qk"])
    print(f"\nFLA's model: o {err(fla, ro):.2e} from fp64 (the H200: 4.05e-3)")
    print("| deltac | o vs fp64 | o vs FLA's model |\n|---|---|---|")
    for label, half in (("as built", []), ("f16 U, P, Vo", ["U", "P", "Vo"])):
        o, _ = chunked(*x, bf=POINTS, half=half)
        print(f"| {label} | {err(o, ro):.2e} | {err(o, fla):.2e} |")


if __name__ == "__main__":
    main()
