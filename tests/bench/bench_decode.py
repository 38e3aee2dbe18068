"""Decode benchmark: deltac against FLA's Triton fused_recurrent_gated_delta_rule.

Same inputs (timing.decode_inputs), same options (given g and beta,
in-kernel q/k l2norm, fp32 state), same timing (timing.graph_ms: one call
per CUDA graph, median with L2 flushed, the method of the FLA anchor
numbers; and 32 calls on 32 distinct state pools in one graph). deltac runs in both state layouts: kv ([K, V],
FLA's) and vk ([V, K], serving pools). Also reports the error of both against
the fp64 reference on the same inputs.
FLA (flash-linear-attention on PYTHONPATH) is the optional anchor: with
--no-fla, or where it is not importable, its columns are nan.
Usage: bench_decode.py --lib libdeltac_test_decode.so --out DIR [--no-fla]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("FLA_FLASH_QLA", "0")
import torch

import timing as H

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "generated", "deltac_test_decode"))
import deltac_test_decode  # noqa: E402  (the generated Python module)


class Library:
    """The generated module's decode entry, called as the kernels see it
    (state updated in place, no allocation)."""

    def __init__(self, path):
        deltac_test_decode.load(path)
        self.specs = {s["name"]: s for s in deltac_test_decode.SPECS}

    def decode(self, spec, q, k, v, o, state, g, beta):
        deltac_test_decode._library._decode(self.specs[spec], q, k, v, o, state, g, beta, None)

SPEC = {"kv": "gdn_log_kv", "vk": "gdn_log"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--batches", default="1,4,16,64,256,512")
    ap.add_argument("--no-fla", action="store_true", help="time deltac alone (FLA's columns nan)")
    ap.add_argument("--gdn-lib", default=None,
                    help="libgdn.so: also time its fused_recurrent_kda (KDA decode) against FLA's")
    args = ap.parse_args()
    fused_recurrent_gated_delta_rule = None
    if not args.no_fla:
        if H.import_fla() is None:
            print("FLA is not importable: its columns are nan (put it on PYTHONPATH)", flush=True)
        else:
            from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    nan = float("nan")
    lib = Library(args.lib)
    rows = []
    dev = torch.cuda.get_device_name()

    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    copy_tbps = 2 * n / H.as_called_ms(lambda: b.copy_(a)) / 1e9
    # Issue 32's B = 1 floor: a graph holding one device copy of the bytes a
    # B = 1 call moves (its state, HV * K * V fp32, read and written), timed
    # as the decode calls are (one call per graph).
    one = 32 * 128 * 128 * 4
    copy1_us = H.graph_ms(lambda: b[:one].copy_(a[:one])) * 1e3
    del a, b
    torch.cuda.empty_cache()
    print(f"device: {dev}; copy ceiling {copy_tbps:.2f} TB/s; a graph of one {one >> 20} MiB "
          f"copy {copy1_us:.2f} us", flush=True)

    # Accuracy against fp64 on the same inputs (B=16, T=4).
    q, k, v, g, beta, h0 = H.decode_inputs(16, T=4, seed=3)
    Bq, T = q.shape[0], q.shape[1]
    cu = [i * T for i in range(Bq + 1)]
    flat = lambda x: x.reshape(1, Bq * T, *x.shape[2:])
    scale = q.shape[-1] ** -0.5
    ro, rh = H.ref_fp64(flat(q), flat(k), flat(v), flat(g), flat(beta), h0, scale, cu)
    acc = []
    if fused_recurrent_gated_delta_rule is not None:
        fo, fh = fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0,
                                                  output_final_state=True,
                                                  use_qk_l2norm_in_kernel=True)
        acc.append(("fla", H.rel(flat(fo), ro), H.rel(fh, rh)))
    for layout in ("kv", "vk"):
        pool = h0.clone() if layout == "kv" else h0.transpose(-1, -2).contiguous()
        o = torch.full_like(v, float("nan"))
        lib.decode(SPEC[layout], q, k, v, o, pool, g=g, beta=beta)
        final = pool if layout == "kv" else pool.transpose(-1, -2)
        acc.append((f"deltac_{layout}", H.rel(flat(o), ro), H.rel(final, rh)))
    for name, eo, es in acc:
        rows.append(f"accuracy,{name},o={eo:.2e},state={es:.2e}")
        print(rows[-1], flush=True)

    table = []
    for T in (1, 4):
        for B in [int(x) for x in args.batches.split(",")]:
            q, k, v, g, beta, h0 = H.decode_inputs(B, T=T)
            state_bytes = h0.numel() * 4
            res = {}

            def fla():
                return fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0,
                                                        output_final_state=True,
                                                        use_qk_l2norm_in_kernel=True)
            res["fla"] = H.graph_ms(fla) * 1e3 if fused_recurrent_gated_delta_rule else nan

            # The FLA-named function of the generated module, as users call
            # it (out of place: one kernel, a new final state): in a graph
            # and as called, against FLA called the same way.
            def named():
                return deltac_test_decode.fused_recurrent_gated_delta_rule(
                    q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True)
            res["named"] = H.graph_ms(named) * 1e3
            res["named_called"] = H.as_called_ms(named) * 1e3
            res["fla_called"] = H.as_called_ms(fla) * 1e3 \
                if fused_recurrent_gated_delta_rule else nan
            o = torch.empty_like(v)
            for layout in ("kv", "vk"):
                pool = h0.clone() if layout == "kv" else h0.transpose(-1, -2).contiguous()
                res[layout] = H.graph_ms(
                    lambda: lib.decode(SPEC[layout], q, k, v, o, pool, g=g, beta=beta)) * 1e3
                del pool
            # 32 calls on 32 distinct pools in one graph (per-call time).
            many = 32 if B <= 64 else 0
            if many:
                pools = [h0.transpose(-1, -2).contiguous() for _ in range(many)]

                def calls():
                    for p in pools:
                        lib.decode(SPEC["vk"], q, k, v, o, p, g=g, beta=beta)
                res["vk32"] = H.graph_ms(calls, calls_per_graph=1) * 1e3 / many
                hs = [h0.clone() for _ in range(many)]

                def fla_calls():
                    for hh in hs:
                        fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=hh,
                                                         output_final_state=True,
                                                         use_qk_l2norm_in_kernel=True)
                res["fla32"] = H.graph_ms(fla_calls, calls_per_graph=1) * 1e3 / many \
                    if fused_recurrent_gated_delta_rule else nan
                del pools, hs
            bw = {key: 2 * state_bytes / (us * 1e-6) / 1e12 for key, us in res.items()
                  if key in ("fla", "kv", "vk")}
            line = (f"decode,T={T},B={B},fla_us={res['fla']:.2f},kv_us={res['kv']:.2f},"
                    f"vk_us={res['vk']:.2f},fla_TBps={bw['fla']:.2f},kv_TBps={bw['kv']:.2f},"
                    f"vk_TBps={bw['vk']:.2f},best_pct_copy={100 * max(bw['kv'], bw['vk']) / copy_tbps:.0f},"
                    f"speedup={res['fla'] / min(res['kv'], res['vk']):.2f}")
            if "vk32" in res:
                line += f",vk32_us={res['vk32']:.2f},fla32_us={res['fla32']:.2f}"
            line += (f",named_us={res['named']:.2f},named_called_us={res['named_called']:.2f},"
                     f"fla_called_us={res['fla_called']:.2f}")
            rows.append(line)
            print(line, flush=True)
            table.append((T, B, res, bw))
            del q, k, v, g, beta, h0, o
            torch.cuda.empty_cache()

    # KDA decode (the example library's kda_kv spec) through its FLA-named
    # function against FLA's fused_recurrent_kda: same inputs but g per key
    # channel [B, T, HV, K].
    kda = []
    if args.gdn_lib:
        sys.path.insert(0, os.path.join(ROOT, "generated", "gdn"))
        import gdn  # noqa: E402
        gdn.load(args.gdn_lib)
        fla_kda = None
        if fused_recurrent_gated_delta_rule is not None:
            from fla.ops.kda import fused_recurrent_kda as fla_kda
        for T in (1, 4):
            for B in [int(x) for x in args.batches.split(",")]:
                q, k, v, g, beta, h0 = H.decode_inputs(B, T=T)
                gk = torch.nn.functional.logsigmoid(
                    torch.randn(B, T, v.shape[2], q.shape[3], device="cuda"))

                def ours():
                    return gdn.fused_recurrent_kda(q, k, v, gk, beta, initial_state=h0,
                                                   output_final_state=True,
                                                   use_qk_l2norm_in_kernel=True)

                def theirs():
                    return fla_kda(q, k, v, gk, beta, initial_state=h0, output_final_state=True,
                                   use_qk_l2norm_in_kernel=True)
                d_us = H.graph_ms(ours) * 1e3
                f_us = H.graph_ms(theirs) * 1e3 if fla_kda else nan
                tb = 2 * h0.numel() * 4 / (d_us * 1e-6) / 1e12
                kda.append((T, B, d_us, f_us, tb))
                rows.append(f"kda_decode,T={T},B={B},deltac_us={d_us:.2f},fla_us={f_us:.2f},"
                            f"deltac_TBps={tb:.2f}")
                print(rows[-1], flush=True)
                del q, k, v, g, beta, h0, gk
                torch.cuda.empty_cache()

    with open(os.path.join(args.out, "bench_decode.csv"), "w") as fh:
        fh.write(f"device,{dev}\ncopy_TBps,{copy_tbps:.2f}\ncopy_graph_2MiB_us,{copy1_us:.2f}\n"
                 + "\n".join(rows) + "\n")
    print(f"\n{dev}: decode, H16/HV32 K=V=128 fp32 state, one call per graph (us); copy {copy_tbps:.2f} TB/s")
    print("  T    B |    FLA |  deltac kv |  deltac vk | best/FLA | state TB/s (% copy) | 32-call vk / FLA")
    for T, B, res, bw in table:
        best = min(res["kv"], res["vk"])
        tb = max(bw["kv"], bw["vk"])
        extra = f"{res['vk32']:6.2f} / {res['fla32']:6.2f}" if "vk32" in res else "-"
        print(f"  {T}  {B:4d} | {res['fla']:6.1f} | {res['kv']:10.1f} | {res['vk']:10.1f} | "
              f"{res['fla'] / best:7.2f}x | {tb:5.2f} ({100 * tb / copy_tbps:3.0f}%) | {extra}")
    print(f"\n{dev}: FLA-named fused_recurrent_gated_delta_rule of the module (kv, out of "
          f"place) against FLA's (us)")
    print("  T    B |  graph: deltac    FLA  FLA/deltac | as called: deltac    FLA  FLA/deltac")
    for T, B, res, bw in table:
        print(f"  {T}  {B:4d} | {res['named']:13.1f} {res['fla']:6.1f} {res['fla'] / res['named']:10.2f}x"
              f" | {res['named_called']:17.1f} {res['fla_called']:6.1f} "
              f"{res['fla_called'] / res['named_called']:10.2f}x")
    if kda:
        print(f"\n{dev}: KDA decode, fused_recurrent_kda of gdn (kv, out of place) against "
              f"FLA's (us, one call per graph)")
        print("  T    B | deltac    FLA  FLA/deltac | state TB/s (% copy)")
        for T, B, d_us, f_us, tb in kda:
            print(f"  {T}  {B:4d} | {d_us:6.1f} {f_us:6.1f} {f_us / d_us:10.2f}x | "
                  f"{tb:5.2f} ({100 * tb / copy_tbps:3.0f}%)")
    for T, B, res, bw in table:
        if (T, B) == (1, 1):
            best = min(res["kv"], res["vk"])
            print(f"\n{dev}: B = 1, T = 1: deltac {best:.2f} us (best layout), a graph of one "
                  f"copy of the same bytes {copy1_us:.2f} us: {best / copy1_us:.2f}x the copy "
                  f"(issue 32's target: <= 1.1x)")
    for name, eo, es in acc:
        print(f"  error vs fp64 {name:10s} o {eo:.2e} state {es:.2e}")


if __name__ == "__main__":
    main()
