"""Prefill benchmark: deltac against FLA's Triton chunk_gated_delta_rule.

Same inputs (timing.prefill_inputs: bf16 q/k/v, fp32 log g, bf16
beta, fp32 initial state [N, HV, K, V]), same options (q/k L2 norm in the
kernel, final state out), same timing (timing.graph_ms: one call per
CUDA graph, median with L2 flushed between replays, the method of the FLA
anchor numbers), same shapes (timing.PREFILL_SHAPES). FLA
(flash-linear-attention on PYTHONPATH) is needed only without --no-fla. deltac runs the `gkv` spec of
tests/gpu/prefill_matrix.mlir (kv state, FLA's layout) through its C API,
cu_seqlens on the device (no host copy). Also reports both errors against
the fp64 reference on the harness's accuracy case.
With `--rule kda` the same for Kimi Delta Attention: FLA's chunk_kda
against deltac's `kkv` spec (per-channel log decays g = logsigmoid(randn)
of [1, T, HV, K], fp32; otherwise the same inputs and options), errors
against an fp64 token-by-token KDA recurrence written here.
Usage: bench_prefill.py --lib libdeltac_test_prefill.so --out DIR
  [--rule gdn|kda] [--shapes a,b] [--profile] [--no-fla] [--accuracy-only]
  [--no-max-seqlen] [--host-us] [--checkpoints f32|bf16]
(`--shapes mixed32k_h16 [--no-max-seqlen]` times the longest-sequence
dispatch, with and without max_seqlen. `--checkpoints DTYPE` with
--no-fla times each shape without and with FLA's return_intermediate_states
(the state entering every chunk, stored by recur) in the same run: the
cost of keeping them.)
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("FLA_FLASH_QLA", "0")
import torch

import timing as H
from references import kda_ref

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "generated", "runtime"))  # the one deltac_torch.py
# deltac_prefill_args as the generated Python module declares it.
from deltac_torch import _PrefillArgs as PrefillArgs  # noqa: E402

P = ctypes.c_void_p
I64 = ctypes.c_int64


class Deltac:
    def __init__(self, path, spec="gkv"):
        self.lib = ctypes.CDLL(path)
        self.prefill = getattr(self.lib, f"deltac_test_prefill_{spec}_prefill")
        self.prefill.argtypes = [ctypes.POINTER(PrefillArgs), P]
        self.workspace = getattr(self.lib, f"deltac_test_prefill_{spec}_prefill_workspace_bytes")
        self.workspace.restype = I64
        self.workspace.argtypes = [I64] * 5
        self.lib.deltac_test_prefill_last_error.restype = ctypes.c_char_p
        self.lib.deltac_test_prefill_last_launches.restype = ctypes.c_size_t
        self.lib.deltac_test_prefill_last_launches.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def last_launches(self):
        buf = ctypes.create_string_buffer(4096)
        self.lib.deltac_test_prefill_last_launches(buf, 4096)
        return buf.value.decode()

    def prepare(self, q, k, v, g, beta, cu, h0, scale, tell_max_seqlen=True,
                checkpoints=None, chunk=64):
        """Everything a call needs, allocated once (the call allocates nothing).
        checkpoints: None, or a dtype (f32 / bf16) for FLA's
        return_intermediate_states, the state entering every chunk."""
        T, Hh, K = q.shape[1], q.shape[2], q.shape[3]
        HV, V = v.shape[2], v.shape[3]
        N = cu.numel() - 1
        o = torch.empty_like(v)
        ht = torch.empty_like(h0)
        ws_bytes = self.workspace(K, V, T, N, HV)
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
        if checkpoints is not None:
            lens = (cu[1:] - cu[:-1]).tolist()
            rows = sum((n + chunk - 1) // chunk for n in lens)
            cp = torch.empty(rows, HV, K, V, dtype=checkpoints, device=q.device)
            a.checkpoints, a.checkpoint_rows = cp.data_ptr(), rows
            a.checkpoint_dtype = 2 if checkpoints == torch.float32 else 0
            keep += (cp,)

        def call():
            rc = self.prefill(ctypes.byref(a), P(torch.cuda.current_stream().cuda_stream))
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


def host_us(fn, calls=200):
    """Host time per eager call (us): calls issued back to back while the
    GPU is still busy with earlier ones, so none waits for the device (the
    graph timing leaves this out; it includes ctypes' own cost)."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


# Shapes beyond the harness's, timed only when --shapes names them: one
# 32K sequence among 63 of 100 tokens, where the dispatch's busy sequences
# (T / max_seqlen = 1, not N = 64) choose the narrow recur tile; and T = 32K
# with fewer heads (fewer recur blocks: whether recur's time per block
# depends on how many share the GPU's L2); and lengths between and beyond
# the harness's with H16/HV32 (recur's grid 64 or 128 blocks, under a wave:
# where the shared overlapped launch is taken, and where it stops paying);
# and the harness's varlen lengths shortest first (the longest chain last
# in cu_seqlens: what recur's longest-first order is for), and 40 sequences
# with the longest last (more than the inline map's 32: prep's order).
EXTRA_SHAPES = [("mixed32k_h16", [32768] + [100] * 63, 16, 16),
                ("varlen16k_rev_h16_hv32", [100, 200, 500, 900, 1800, 2500, 3000, 7000], 16, 32),
                ("t32k_h8", [32768], 8, 8), ("t32k_h4", [32768], 4, 4),
                ("t1k_h16_hv32", [1024], 16, 32), ("t2k_h16_hv32", [2048], 16, 32),
                ("t16k_h16_hv32", [16384], 16, 32),
                ("n2_t2k_h16_hv32", [2048, 2048], 16, 32),
                ("n2_t4k_h16_hv32", [4096, 4096], 16, 32),
                ("n40_long_last_h16_hv32", [200] * 39 + [8192], 16, 32),
                # Few heads per GPU (tensor parallelism's shards): recur's
                # grid leaves most SMs idle, where context parallelism pays.
                ("t32k_h2", [32768], 2, 2), ("t128k_h4", [131072], 4, 4),
                # ... and a varlen batch there, split on the device by its
                # longest sequence (the short ones run whole).
                ("mixed48k_h4", [32768, 8192, 4096, 2048, 1024, 512, 256, 128], 4, 4),
                # FlashInfer's many-sequence shapes (issue 35's targets).
                ("n4_t8k_h16_hv32", [8192] * 4, 16, 32),
                ("n8_t1k_h16_hv32", [1024] * 8, 16, 32),
                # One chunks item per SM of an H200 (132 chunks, one head),
                # then two: the chunk work's latency for a block alone on
                # its SM, which bounds a fused step (docs/context-
                # parallelism.md; time with a form forced, e.g. ordinary).
                ("one_wave_h1", [8448], 1, 1), ("two_per_sm_h2", [8448], 2, 2)]


def cp_accuracy(lib, fla_fn):
    """Error vs fp64 where the dispatch splits sequences into segments
    (context parallelism): an odd length (9000 tokens, 141 chunks), strong
    decay, and DeltaNet (g = 0: the transfers do not contract) over 128K
    tokens; FLA's error on the same inputs where it is importable."""
    out = []
    for name, lens, g_fill in (("odd9000", [9000], None), ("strong_decay9000", [9000], -16.0),
                               ("deltanet128k", [131072], 0.0)):
        q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, 1, 2, seed=3)
        if g_fill is not None:
            g.fill_(g_fill)
        scale = 128 ** -0.5
        ro, rh = H.ref_fp64(q, k, v, g, beta, h0, scale, cu.tolist())
        ours, o, ht, flag, keep = lib.prepare(q, k, v, g, beta, cu, h0, scale)
        ours()
        torch.cuda.synchronize()
        assert flag.item() == 0, "device error flag raised"
        line = (f"cp_rel_err,{name},deltac_o={H.rel(o, ro):.2e},deltac_state={H.rel(ht, rh):.2e},"
                f"launches={lib.last_launches()}")
        if fla_fn is not None:
            fo, fh = fla_fn(q, k, v, g, beta, scale=scale, initial_state=h0,
                            output_final_state=True, use_qk_l2norm_in_kernel=True)
            line += f",fla_o={H.rel(fo, ro):.2e},fla_state={H.rel(fh, rh):.2e}"
        print(line, flush=True)
        out.append(line)
    return out


def kda_inputs(lens, Hh, HV, seed=0):
    """The harness's inputs with KDA's per-channel decays: g [1, T, HV, K]."""
    q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, Hh, HV, seed=seed)
    gen = torch.Generator(device=q.device).manual_seed(seed + 7)
    g = torch.nn.functional.logsigmoid(
        torch.randn(*g.shape, q.shape[-1], dtype=torch.float32, device=q.device, generator=gen))
    return q, k, v, g, beta, cu, h0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--profile", action="store_true",
                    help="also print each kernel's time (torch.profiler) for both sides")
    ap.add_argument("--no-fla", action="store_true",
                    help="time deltac alone (e.g. under ncu, or a variant); the accuracy "
                         "part then checks deltac's error only")
    ap.add_argument("--accuracy-only", action="store_true",
                    help="time nothing: only the accuracy case (with DELTAC_PREFILL_FORCE "
                         "set, a smoke check of the form they force)")
    ap.add_argument("--no-max-seqlen", action="store_true",
                    help="leave max_seqlen unknown (0): the dispatch counts all N sequences")
    ap.add_argument("--host-us", action="store_true",
                    help="with --no-fla: also the host time per eager call")
    ap.add_argument("--rule", default="gdn", choices=["gdn", "kda"],
                    help="kda: FLA's chunk_kda against deltac's kkv spec")
    ap.add_argument("--module", action="store_true",
                    help="also time each shape through the generated Python module's "
                         "FLA-named chunk_gated_delta_rule (o and the final state allocated "
                         "per call, as users call it)")
    ap.add_argument("--gdn-lib", default=None,
                    help="also time each shape through generated/gdn's chunk_gated_delta_rule "
                         "(its specs leave gate, beta form and l2norm to the call), beside "
                         "--module's fixed-option spec: what the options by call cost")
    ap.add_argument("--cp-accuracy", action="store_true",
                    help="also the error vs fp64 at context-parallel shapes (9000 tokens, "
                         "strong decay, DeltaNet over 128K; slow: an fp64 token loop)")
    ap.add_argument("--checkpoints", default=None, choices=["f32", "bf16"],
                    help="with --no-fla: time each shape also keeping the state entering "
                         "every chunk (FLA's return_intermediate_states) in this dtype")
    args = ap.parse_args()
    if args.checkpoints and not args.no_fla:
        sys.exit("Error: --checkpoints times deltac against itself: pass --no-fla")
    kda = args.rule == "kda"
    lib = Deltac(args.lib, "kkv" if kda else "gkv")
    inputs = kda_inputs if kda else H.prefill_inputs
    if not args.no_fla:
        if H.import_fla() is None:
            sys.exit("Error: FLA is not importable: put it on PYTHONPATH, or pass --no-fla")
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        from fla.ops.kda import chunk_kda
    module = None
    if args.module and not kda:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "generated",
                                        "deltac_test_prefill"))
        import deltac_test_prefill as module  # the generated module (gkv: kv state)
        module.load(args.lib)
    gdn = None
    if args.gdn_lib and not kda:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "generated", "gdn"))
        import gdn  # the example library: options by call
        gdn.load(args.gdn_lib)
    dev = torch.cuda.get_device_name()
    rows, table = [], []
    named = args.shapes.split(",") if args.shapes else []
    shapes = [s for s in H.PREFILL_SHAPES if not named or s[0] in named]
    shapes += [s for s in EXTRA_SHAPES if s[0] in named]
    if args.accuracy_only:
        shapes = []
    for name, lens, Hh, HV in shapes:
        q, k, v, g, beta, cu, h0 = inputs(lens, Hh, HV)
        scale = 128 ** -0.5
        cu_arg, cu_cpu = (cu, cu.cpu()) if len(lens) > 1 else (None, None)
        def fla():
            fla_fn = chunk_kda if kda else chunk_gated_delta_rule
            return fla_fn(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                          use_qk_l2norm_in_kernel=True, cu_seqlens=cu_arg, cu_seqlens_cpu=cu_cpu)
        ours, o, ht, flag, keep = lib.prepare(q, k, v, g, beta, cu, h0, scale,
                                              tell_max_seqlen=not args.no_max_seqlen)
        if args.no_fla:  # deltac alone: for ncu, or to compare its variants
            t_ours = H.graph_ms(ours)
            if args.checkpoints:
                dtype = torch.float32 if args.checkpoints == "f32" else torch.bfloat16
                kept, _, _, kflag, kkeep = lib.prepare(
                    q, k, v, g, beta, cu, h0, scale,
                    tell_max_seqlen=not args.no_max_seqlen, checkpoints=dtype)
                t_kept = H.graph_ms(kept)
                assert kflag.item() == 0, "device error flag raised"
                print(f"checkpoints,{name},{args.checkpoints},deltac_ms={t_ours:.4f},"
                      f"with_checkpoints_ms={t_kept:.4f},ratio={t_kept / t_ours:.3f}", flush=True)
                del kept, kkeep
            if args.profile:
                profile("deltac", name, ours)
            if args.host_us:
                print(f"host,{name},us_per_call={host_us(ours):.2f}", flush=True)
            print(f"deltac,{name},deltac_ms={t_ours:.4f}", flush=True)
            continue
        t_fla = H.graph_ms(fla)
        t_ours = H.graph_ms(ours)
        t_module = float("nan")
        if module is not None:
            def named():
                return module.chunk_gated_delta_rule(
                    q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True, cu_seqlens=cu_arg, cu_seqlens_cpu=cu_cpu)
            t_module = H.graph_ms(named)
        t_gdn = float("nan")
        if gdn is not None:
            def by_call():
                return gdn.chunk_gated_delta_rule(
                    q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True, cu_seqlens=cu_arg, cu_seqlens_cpu=cu_cpu)
            t_gdn = H.graph_ms(by_call)
        if args.profile:
            for who, fn in (("fla", fla), ("deltac", ours)):
                profile(who, name, fn)
        assert flag.item() == 0, "device error flag raised"
        line = f"prefill,{name},fla_ms={t_fla:.4f},deltac_ms={t_ours:.4f},ratio={t_fla / t_ours:.2f}"
        if module is not None:
            line += f",module_ms={t_module:.4f},module_ratio={t_fla / t_module:.2f}"
        if gdn is not None:
            line += f",gdn_ms={t_gdn:.4f},gdn_ratio={t_fla / t_gdn:.2f}"
        rows.append(line)
        table.append((name, t_fla, t_ours))
        print(line, flush=True)
        del q, k, v, g, beta, cu, h0, keep, o, ht
        torch.cuda.empty_cache()
    # Accuracy: the harness's varlen case with an initial state, both vs fp64
    # (deltac's alone with --no-fla: a variant's smoke check).
    lens, Hh, HV = [5, 100, 64, 300], 4, 8
    q, k, v, g, beta, cu, h0 = inputs(lens, Hh, HV, seed=1)
    scale = 128 ** -0.5
    ro, rh = (kda_ref if kda else H.ref_fp64)(q, k, v, g, beta, h0, scale, cu.tolist())
    ours, o, ht, flag, keep = lib.prepare(q, k, v, g, beta, cu, h0, scale)
    ours()
    torch.cuda.synchronize()
    if args.no_fla:
        eo, es = H.rel(o, ro), H.rel(ht, rh)
        print(f"deltac_rel_err,o={eo:.2e},state={es:.2e}", flush=True)
        # A variant's smoke check: far above the tests' bounds, or NaN.
        if not (eo < 1e-2 and es < 1e-2):
            sys.exit("Error: deltac's error vs fp64 is above 1e-2")
        if args.cp_accuracy and not kda:
            cp_accuracy(lib, None)
        return
    fo, fh = (chunk_kda if kda else chunk_gated_delta_rule)(
        q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True,
        use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    acc = [("fla", H.rel(fo, ro), H.rel(fh, rh)), ("deltac", H.rel(o, ro), H.rel(ht, rh))]
    for who, eo, es in acc:
        rows.append(f"prefill_rel_err,{who},o={eo:.2e},state={es:.2e}")
    if args.cp_accuracy and not kda:
        rows += cp_accuracy(lib, chunk_gated_delta_rule)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"bench_prefill{'_kda' if kda else ''}.csv"), "w") as fh_:
        fh_.write("\n".join(rows) + "\n")
    what = "chunk_kda vs deltac kkv" if kda else "chunk_gated_delta_rule vs deltac gkv"
    print(f"\n{dev}: prefill, {what} (K=V=128, bf16, fp32 kv state, "
          f"L2 norm), one call per graph (ms)")
    print("  shape                 |    FLA | deltac | FLA/deltac")
    for name, a, b in table:
        print(f"  {name:21s} | {a:6.3f} | {b:6.3f} | {a / b:5.2f}x")
    for who, eo, es in acc:
        print(f"  error vs fp64 {who:7s} o {eo:.2e} state {es:.2e}")


if __name__ == "__main__":
    main()
