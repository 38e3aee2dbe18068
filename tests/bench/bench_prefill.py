"""Prefill benchmark: deltac against FLA's Triton chunk_gated_delta_rule.

Same inputs (fla_harness.prefill_inputs: bf16 q/k/v, fp32 log g, bf16
beta, fp32 initial state [N, HV, K, V]), same options (q/k L2 norm in the
kernel, final state out), same timing (fla_harness.graph_ms: one call per
CUDA graph, do_bench median with L2 flushed between replays), same shapes
(fla_harness.PREFILL_SHAPES). deltac runs the `gkv` spec of
tests/gpu/prefill_matrix.mlir (kv state, FLA's layout) through its C API,
cu_seqlens on the device (no host copy). Also reports both errors against
the fp64 reference on the harness's accuracy case.
Usage: bench_prefill.py --lib libdeltac_test_prefill.so --out DIR
  [--shapes a,b] [--profile] [--no-fla] [--no-max-seqlen]
(`--shapes mixed32k_h16 [--no-max-seqlen]` times the longest-sequence
dispatch, with and without max_seqlen.)
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("FLA_FLASH_QLA", "0")
import torch

import fla_harness as H
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "generated", "deltac_test_prefill"))
# deltac_prefill_args as the generated Python module declares it.
from deltac_torch import _PrefillArgs as PrefillArgs  # noqa: E402

P = ctypes.c_void_p
I64 = ctypes.c_int64


class Deltac:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.deltac_test_prefill_gkv_prefill.argtypes = [ctypes.POINTER(PrefillArgs), P]
        self.lib.deltac_test_prefill_gkv_prefill_workspace_bytes.restype = I64
        self.lib.deltac_test_prefill_gkv_prefill_workspace_bytes.argtypes = [I64] * 5
        self.lib.deltac_test_prefill_last_error.restype = ctypes.c_char_p

    def prepare(self, q, k, v, g, beta, cu, h0, scale, tell_max_seqlen=True):
        """Everything a call needs, allocated once (the call allocates nothing)."""
        T, Hh, K = q.shape[1], q.shape[2], q.shape[3]
        HV, V = v.shape[2], v.shape[3]
        N = cu.numel() - 1
        o = torch.empty_like(v)
        ht = torch.empty_like(h0)
        ws_bytes = self.lib.deltac_test_prefill_gkv_prefill_workspace_bytes(K, V, T, N, HV)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device)
        flag = torch.zeros(1, dtype=torch.int32, device=q.device)
        a = PrefillArgs(K=K, V=V, T=T, N=N, H=Hh, HV=HV, io_dtype=0, state_dtype=2,
                        q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                        g=g.data_ptr(), beta=beta.data_ptr(), initial_state=h0.data_ptr(),
                        final_state=ht.data_ptr(), slots=N, cu_seqlens=cu.data_ptr(),
                        cu_seqlens_i64=1, workspace=ws.data_ptr(), workspace_bytes=ws_bytes,
                        error_flag=flag.data_ptr(), scale=scale,
                        # The longest sequence, as FLA's cu_seqlens_cpu tells it (0: unknown).
                        max_seqlen=int((cu[1:] - cu[:-1]).max()) if tell_max_seqlen else 0)
        keep = (o, ht, ws, flag, a)

        def call():
            rc = self.lib.deltac_test_prefill_gkv_prefill(
                ctypes.byref(a), P(torch.cuda.current_stream().cuda_stream))
            if rc != 0:
                raise RuntimeError(self.lib.deltac_test_prefill_last_error().decode())
        return call, o, ht, flag, keep


def profile(who, shape, fn, calls=10):
    """Mean device time per call of each kernel fn launches (eager calls)."""
    from torch.profiler import profile as prof, ProfilerActivity
    fn()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals = {}
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] = totals.get(e.name, 0.0) + e.device_time / calls
    for kname, us in sorted(totals.items(), key=lambda x: -x[1]):
        print(f"kernel,{who},{shape},{us:9.1f} us,{kname[:90]}", flush=True)


# Shapes beyond the harness's, timed only when --shapes names them: one
# 32K sequence among 63 of 100 tokens, where the dispatch's busy sequences
# (T / max_seqlen = 1, not N = 64) choose the narrow recur tile.
EXTRA_SHAPES = [("mixed32k_h16", [32768] + [100] * 63, 16, 16)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--profile", action="store_true",
                    help="also print each kernel's time (torch.profiler) for both sides")
    ap.add_argument("--no-fla", action="store_true",
                    help="time deltac alone (e.g. under ncu); no accuracy part")
    ap.add_argument("--no-max-seqlen", action="store_true",
                    help="leave max_seqlen unknown (0): the dispatch counts all N sequences")
    args = ap.parse_args()
    lib = Deltac(args.lib)
    dev = torch.cuda.get_device_name()
    rows, table = [], []
    named = args.shapes.split(",") if args.shapes else []
    shapes = [s for s in H.PREFILL_SHAPES if not named or s[0] in named]
    shapes += [s for s in EXTRA_SHAPES if s[0] in named]
    for name, lens, Hh, HV in shapes:
        q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, Hh, HV)
        scale = 128 ** -0.5
        cu_arg, cu_cpu = (cu, cu.cpu()) if len(lens) > 1 else (None, None)

        def fla():
            return chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                          use_qk_l2norm_in_kernel=True, cu_seqlens=cu_arg,
                                          cu_seqlens_cpu=cu_cpu)
        ours, o, ht, flag, keep = lib.prepare(q, k, v, g, beta, cu, h0, scale,
                                              tell_max_seqlen=not args.no_max_seqlen)
        if args.no_fla:  # deltac alone: for ncu, or to compare its variants
            t_ours = H.graph_ms(ours)
            if args.profile:
                profile("deltac", name, ours)
            print(f"deltac,{name},deltac_ms={t_ours:.4f}", flush=True)
            continue
        t_fla = H.graph_ms(fla)
        t_ours = H.graph_ms(ours)
        if args.profile:
            for who, fn in (("fla", fla), ("deltac", ours)):
                profile(who, name, fn)
        assert flag.item() == 0, "device error flag raised"
        line = f"prefill,{name},fla_ms={t_fla:.4f},deltac_ms={t_ours:.4f},ratio={t_fla / t_ours:.2f}"
        rows.append(line)
        table.append((name, t_fla, t_ours))
        print(line, flush=True)
        del q, k, v, g, beta, cu, h0, keep, o, ht
        torch.cuda.empty_cache()
    if args.no_fla:
        return
    # Accuracy: the harness's varlen case with an initial state, both vs fp64.
    lens, Hh, HV = [5, 100, 64, 300], 4, 8
    q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, Hh, HV, seed=1)
    scale = 128 ** -0.5
    ro, rh = H.ref_fp64(q, k, v, g, beta, h0, scale, cu.tolist())
    fo, fh = chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=h0,
                                    output_final_state=True, use_qk_l2norm_in_kernel=True,
                                    cu_seqlens=cu)
    ours, o, ht, flag, keep = lib.prepare(q, k, v, g, beta, cu, h0, scale)
    ours()
    torch.cuda.synchronize()
    acc = [("fla", H.rel(fo, ro), H.rel(fh, rh)), ("deltac", H.rel(o, ro), H.rel(ht, rh))]
    for who, eo, es in acc:
        rows.append(f"prefill_rel_err,{who},o={eo:.2e},state={es:.2e}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_prefill.csv"), "w") as fh_:
        fh_.write("\n".join(rows) + "\n")
    print(f"\n{dev}: prefill, chunk_gated_delta_rule vs deltac gkv (K=V=128, bf16, fp32 kv state, "
          f"L2 norm), one call per graph (ms)")
    print("  shape                 |    FLA | deltac | FLA/deltac")
    for name, a, b in table:
        print(f"  {name:21s} | {a:6.3f} | {b:6.3f} | {a / b:5.2f}x")
    for who, eo, es in acc:
        print(f"  error vs fp64 {who:7s} o {eo:.2e} state {es:.2e}")


if __name__ == "__main__":
    main()
