"""Context parallelism across ranks (issue 36) through the generated Python
module (generated/gdn/gdn.py): chunk_gated_delta_rule / chunk_delta_rule /
chunk_kda with cp_context, against the fp64 token-by-token reference and
the same call on one GPU without it.

Modes (each prints a table, exits non-zero on a failed check):
  test_cp.py BUILD OUT                 one process, one GPU: R = 2, 3, 4
      emulated ranks through the two-phase use (cp_context without a
      group: every rank's phase 1, the transfers stacked, every rank's
      cp_finish), one long sequence with odd slices and a varlen batch
      with a sequence over three ranks, initial states and final states;
      GDN kv and vk, DeltaNet, KDA kv.
  torchrun --nproc-per-node R test_cp.py BUILD OUT --distributed
      the same cases over torch.distributed (NCCL, one GPU per rank):
      each rank checks its slice of o and the final states that end on it;
      and the whole call (NCCL's all_gather included) replayed from a CUDA
      graph gives the eager call's bits.
  test_cp.py BUILD OUT --quick           one GPU, R = 3 against one GPU's
      result (for compute-sanitizer: no fp64 loop, no FLA).
  test_cp.py BUILD OUT --profile-rank    one GPU: the kernels of a middle
      rank of a 2^20-token sequence over 4 ranks at H = HV = 16.
  torchrun --nproc-per-node R test_cp.py BUILD OUT --bench [--tokens N]
      one sequence of N tokens (default 2^20) at H = HV = 16: the
      context-parallel call on R GPUs against the single-GPU call of the
      same shape on rank 0's GPU, and the phases' shares.
Tolerance: o and the final states within 1e-2 of fp64 (relative L2, bf16
operands), and the context-parallel error at most 1.1x the single-GPU
error plus 5e-4 (the issue's "within 10 %", with room for rounding noise
at errors near 3e-3) and below FLA's error on the same tokens (FLA's
chunked call on the whole batch; FLA must be importable, on PYTHONPATH,
unless DELTAC_TEST_NO_FLA=1 or --quick).
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD, OUT = sys.argv[1], sys.argv[2]
ARGS = sys.argv[3:]
sys.path.insert(0, os.path.join(ROOT, "generated", "gdn"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
os.environ.setdefault("DELTAC_GDN_LIB", os.path.join(BUILD, "gdn", "libgdn.so"))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import timing as H  # noqa: E402
import references  # noqa: E402
import gdn  # noqa: E402

DIST = "--distributed" in ARGS or "--bench" in ARGS
if DIST:
    import torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
else:
    RANK, WORLD = 0, 1
DEV = torch.device("cuda", torch.cuda.current_device())
H.DEV = DEV
# --quick (compute-sanitizer): R = 3 only, one GPU's result as the
# reference, no FLA. Within 1e-2 of it: two results each about 5e-3 from
# fp64 (DeltaNet) differ by up to 6.4e-3 (H100, 2026-11-27).
QUICK = "--quick" in ARGS
SLACK = 1e-2 if QUICK else 5e-4
NO_FLA = os.environ.get("DELTAC_TEST_NO_FLA", "0") not in ("", "0")
FLA = None if QUICK or NO_FLA else H.import_fla()
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))
    if not ok:
        print(f"FAIL [rank {RANK}] {name}: {detail}", flush=True)


def inputs(lens, HV, K, seed, delta, kda=False):
    q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, HV // 2, HV, K=K, V=K, seed=seed)
    if delta:
        g = torch.zeros_like(g)
    if kda:  # a decay per key channel: the head's, scaled from 1/4 to 1 over K
        g = (g[..., None] * torch.linspace(0.25, 1.0, K, device=g.device)).contiguous()
    return q, k, v, g, beta, cu, h0


def call(fn, layout_vk, q, k, v, g, beta, h0, **kw):
    if fn == "kda":
        return gdn.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                             use_qk_l2norm_in_kernel=True, state_v_first=layout_vk, **kw)
    if fn == "delta":
        return gdn.chunk_delta_rule(q, k, v, beta, initial_state=h0, output_final_state=True,
                                    use_qk_l2norm_in_kernel=True, **kw)
    return gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                      output_final_state=True, use_qk_l2norm_in_kernel=True,
                                      state_v_first=layout_vk, **kw)


def local(x, lo, hi):
    return None if x is None else x[:, lo:hi].contiguous()


CASES = [
    # name, rule, vk layout, lengths
    ("gdn kv, one sequence", "gated", False, [8400]),
    ("gdn kv, varlen", "gated", False, [1000, 5000, 300, 2100]),
    ("gdn vk, varlen", "gated", True, [700, 6100, 1600]),
    # A rank's continued piece of odd length (2501 at R = 2): the rest's
    # beta rows start 8 bytes off 16 (HV = 4, bf16) and are copied.
    ("gdn kv, odd piece", "gated", False, [701, 6000, 1699]),
    ("deltanet, one sequence", "delta", False, [8400]),
    # KDA: recur_cp on its warpgroup recur, a decay per key channel.
    ("kda kv, varlen", "kda", False, [1000, 5000, 300, 2100]),
]


def run_case(name, rule, vk, lens, worlds, make_calls):
    """make_calls(rule, vk)(ctxs, inputs, part) -> {rank: (o_local,
    final_local)} for the ranks this process runs; checks them against
    fp64 and one GPU, for each world size R in `worlds` that divides T."""
    q, k, v, g, beta, cu, h0 = inputs(lens, 4, 128, seed=len(lens) * 7, delta=rule == "delta",
                                      kda=rule == "kda")
    if vk:
        h0 = h0.transpose(-1, -2).contiguous()
    o1, f1 = call(rule, vk, q, k, v, g, beta, h0, cu_seqlens=cu)
    h0k = h0.transpose(-1, -2) if vk else h0
    if QUICK:  # under compute-sanitizer: one GPU's result is the reference
        ofla, ro, rf = None, o1, f1
    else:
        ofla = fla_output(rule, q, k, v, g, beta, h0k, cu)
        ref = references.kda_ref if rule == "kda" else H.ref_fp64
        ro, rf = ref(q, k, v, g, beta, h0k, 128 ** -0.5, cu.tolist())
        if vk:
            rf = rf.transpose(-1, -2)
    for R in worlds:
        if sum(lens) % R == 0:
            check_world(name, lens, R, make_calls(rule, vk), (q, k, v, g, beta, h0, cu),
                        o1, f1, ro, rf, ofla)


def fla_output(rule, q, k, v, g, beta, h0, cu):
    """FLA's o on the whole batch (the issue's "below FLA's"), or None
    without FLA (DELTAC_TEST_NO_FLA=1 or not importable)."""
    if FLA is None:
        return None
    if rule == "kda":
        from fla.ops.kda import chunk_kda
        o, _ = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                         use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
        return o
    # DeltaNet as FLA's gated rule with g = 0 (its chunk_delta_rule gave
    # NaN on these inputs, H100 2026-11-27).
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    o, _ = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                  use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    return o


def check_world(name, lens, R, rank_calls, tensors, o1, f1, ro, rf, ofla):
    cu = tensors[-1]
    part = sum(lens) // R
    ctxs = [gdn.build_cp_context(cu, rank=r, world_size=R) for r in range(R)]
    got = rank_calls(ctxs, tensors, part)
    for r, (o_r, f_r) in got.items():
        lo, hi = r * part, (r + 1) * part
        ctx = ctxs[r]
        # The global sequences of this rank's local ones.
        first = int(torch.searchsorted(cu.cpu()[1:], lo, right=True))
        n_local = ctx.cu_seqlens_cpu.numel() - 1
        ends = [int(cu[first + i + 1]) <= hi for i in range(n_local)]
        e_cp = H.rel(o_r, ro[:, lo:hi])
        e_one = H.rel(o1[:, lo:hi], ro[:, lo:hi])
        tag = f"{name}, R = {R}, rank {r}"
        e_fla = H.rel(ofla[:, lo:hi], ro[:, lo:hi]) if ofla is not None else float("inf")
        check(f"{tag}: o vs fp64", e_cp < 1e-2 and e_cp <= 1.1 * e_one + SLACK and e_cp < e_fla,
              f"cp {e_cp:.3e}, one GPU {e_one:.3e}, FLA {e_fla:.3e}")
        rows = [i for i in range(n_local) if ends[i]]
        for i in range(n_local):
            if not ends[i]:
                check(f"{tag}: row {i} (goes on) is zero", f_r[i].abs().max().item() == 0.0)
        if rows:
            want = rf[[first + i for i in rows]]
            s_cp = H.rel(f_r[rows], want)
            s_one = H.rel(f1[[first + i for i in rows]], want)
            check(f"{tag}: final states vs fp64", s_cp < 1e-2 and s_cp <= 1.1 * s_one + SLACK,
                  f"cp {s_cp:.3e}, one GPU {s_one:.3e}")
            results[-1] = results[-1][:2] + (f"cp {s_cp:.3e} / one GPU {s_one:.3e}; o cp "
                                             f"{e_cp:.3e} / one GPU {e_one:.3e} / FLA "
                                             f"{e_fla:.3e}",)


def slice_inputs(ctx, tensors, lo, hi):
    q, k, v, g, beta, h0, cu = tensors
    first = int(torch.searchsorted(cu.cpu()[1:], lo, right=True))
    n_local = ctx.cu_seqlens_cpu.numel() - 1
    return [local(t, lo, hi) for t in (q, k, v, g, beta)] + [h0[first:first + n_local]]


def emulated(rule, vk):
    def rank_calls(ctxs, tensors, part):
        pend = []
        for r, ctx in enumerate(ctxs):
            q, k, v, g, beta, h0 = slice_inputs(ctx, tensors, r * part, (r + 1) * part)
            pend.append(call(rule, vk, q, k, v, g, beta, h0, cp_context=ctx))
        gathered = torch.stack([p.transfer for p in pend])
        return {r: gdn.cp_finish(p, gathered) for r, p in enumerate(pend)}
    return rank_calls


def distributed(rule, vk):
    def rank_calls(ctxs, tensors, part):
        ctx = gdn.build_cp_context(tensors[-1], group=dist.group.WORLD)
        q, k, v, g, beta, h0 = slice_inputs(ctx, tensors, RANK * part, (RANK + 1) * part)
        return {RANK: call(rule, vk, q, k, v, g, beta, h0, cp_context=ctx)}
    return rank_calls


def graph_capture():
    """The whole context-parallel call (phase 1, NCCL's all_gather, the
    fold, phase 2) captured in one CUDA graph: its replay gives the eager
    call's bits."""
    lens = [1000, 5000, 300, 2100]
    q, k, v, g, beta, cu, h0 = inputs(lens, 4, 128, seed=11, delta=False)
    ctx = gdn.build_cp_context(cu, group=dist.group.WORLD)
    part = sum(lens) // WORLD
    lq, lk, lv, lg, lb, lh = slice_inputs(ctx, (q, k, v, g, beta, h0, cu), RANK * part,
                                          (RANK + 1) * part)
    run = lambda: call("gated", False, lq, lk, lv, lg, lb, lh, cp_context=ctx)  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager = run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            captured = run()
        for x in captured:
            x.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        same = all(torch.equal(a, b) for a, b in zip(eager, captured))
        check("the context-parallel call replayed from a CUDA graph gives the eager bits", same)
    except Exception as e:  # a capture that fails is a failed check, not a crash
        check("the context-parallel call replayed from a CUDA graph gives the eager bits",
              False, f"{type(e).__name__}: {e}")


def profile_rank(tokens):
    """One GPU: the kernels of a middle rank (its slice continues in and
    out) of a `tokens`-long sequence over 4 ranks at H = HV = 16, timed by
    the torch profiler (phase 1, then phase 2 from a made-up entering
    state); the share of each kernel."""
    HV, K, R = 16, 128, 4
    part = tokens // R
    gen = torch.Generator(device=DEV).manual_seed(5)
    q, k, v = (torch.randn(1, part, HV, K, dtype=torch.bfloat16, device=DEV, generator=gen)
               for _ in range(3))
    g = F.logsigmoid(torch.randn(1, part, HV, device=DEV, generator=gen))
    beta = torch.rand(1, part, HV, device=DEV, generator=gen).sigmoid().to(torch.bfloat16)
    cu = torch.tensor([0, tokens], dtype=torch.int64)
    ctx = gdn.build_cp_context(cu, rank=1, world_size=R)
    transfers = torch.randn(R, HV, K * 2 * K, device=DEV) * 1e-3

    def once():
        p = gdn.chunk_gated_delta_rule(q, k, v, g, beta, cp_context=ctx,
                                       use_qk_l2norm_in_kernel=True)
        gdn.cp_finish(p, transfers)
    once()
    torch.cuda.synchronize()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            once()
        torch.cuda.synchronize()
    times = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            name = e.name
            for key in ("prefill_chunks", "recur_cp", "cp_chain", "cp_correct", "prefill_prep"):
                if key in name:
                    name = key
            times[name] = times.get(name, 0.0) + e.device_time / 3 / 1e3
    total = sum(times.values())
    print(f"| kernel (middle rank, {part} tokens, H = HV = 16) | ms per call | share |")
    print("|---|---|---|")
    for name, t in sorted(times.items(), key=lambda x: -x[1])[:8]:
        print(f"| {name[:60]} | {t:.3f} | {100 * t / total:.0f} % |")


def refusals():
    q, k, v, g, beta, cu, h0 = inputs([256], 4, 128, seed=3, delta=False)
    ctx = gdn.build_cp_context(cu, rank=1, world_size=2)
    for kw, text in (({"cu_seqlens": cu}, "cu_seqlens"),
                     ({"output_state": torch.empty_like(h0)}, "output_state")):
        try:
            gdn.chunk_gated_delta_rule(q[:, 128:], k[:, 128:], v[:, 128:], g[:, 128:],
                                       beta[:, 128:], cp_context=ctx, **kw)
            check(f"cp_context with {text} is refused", False, "no error")
        except ValueError as e:
            check(f"cp_context with {text} is refused", text in str(e), str(e))


def bench(tokens):
    """One sequence of `tokens` at H = HV = 16 (the issue's shape): the
    single-GPU call on rank 0 (alone, the others wait) and the
    context-parallel call over all ranks, each the median of 10 timed
    calls after 3 warm-ups, timed from a barrier to the slowest rank."""
    HV, K = 16, 128
    part = tokens // WORLD
    gen = torch.Generator(device=DEV).manual_seed(1234 + RANK)

    def make(T):
        q = torch.randn(1, T, HV, K, dtype=torch.bfloat16, device=DEV, generator=gen)
        k = torch.randn(1, T, HV, K, dtype=torch.bfloat16, device=DEV, generator=gen)
        v = torch.randn(1, T, HV, K, dtype=torch.bfloat16, device=DEV, generator=gen)
        g = F.logsigmoid(torch.randn(1, T, HV, device=DEV, generator=gen))
        beta = torch.rand(1, T, HV, device=DEV, generator=gen).sigmoid().to(torch.bfloat16)
        return q, k, v, g, beta

    def timed(fn, reps=10, warm=3, sync_all=True):
        ts = []
        for i in range(warm + reps):
            if sync_all:
                dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            if sync_all:
                dist.barrier()
            if i >= warm:
                ts.append((time.perf_counter() - t0) * 1e3)
        return sorted(ts)[len(ts) // 2]

    single = None
    if RANK == 0:
        q, k, v, g, beta = make(tokens)
        cu = torch.tensor([0, tokens], dtype=torch.int64, device=DEV)
        run = lambda: gdn.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu,  # noqa: E731
                                                 use_qk_l2norm_in_kernel=True)
        single = timed(run, sync_all=False)
        del q, k, v, g, beta
        torch.cuda.empty_cache()
    dist.barrier()
    cu = torch.tensor([0, tokens], dtype=torch.int64, device=DEV)
    ctx = gdn.build_cp_context(cu, group=dist.group.WORLD)
    q, k, v, g, beta = make(part)
    cp = timed(lambda: gdn.chunk_gated_delta_rule(q, k, v, g, beta, cp_context=ctx,
                                                  use_qk_l2norm_in_kernel=True))
    # The phases apart: phase 1 (and the other local calls), the exchange,
    # the fold and phase 2.
    lctx = gdn.build_cp_context(cu, rank=RANK, world_size=WORLD)
    pend = [None]
    gathered = torch.empty((WORLD, HV, K * 2 * K), device=DEV)
    p1 = timed(lambda: pend.__setitem__(0, gdn.chunk_gated_delta_rule(
        q, k, v, g, beta, cp_context=lctx, use_qk_l2norm_in_kernel=True)))
    ex = timed(lambda: dist.all_gather_into_tensor(gathered, pend[0].transfer))

    def finish():
        gdn.cp_finish(pend[0], gathered)
    p2 = timed(finish)
    row = torch.tensor([cp, p1, ex, p2], device=DEV)
    rows = [torch.empty_like(row) for _ in range(WORLD)]
    dist.all_gather(rows, row)
    if RANK == 0:
        rows = torch.stack(rows).cpu()
        line = (f"| {tokens} | {WORLD} | {single:.3f} | {cp:.3f} | {single / cp:.2f}x | "
                f"{rows[:, 1].max():.3f} | {rows[:, 2].max():.3f} | {rows[:, 3].max():.3f} |")
        print("| tokens | GPUs | one GPU (ms) | cp (ms) | speed-up | phase 1 max (ms) | "
              "exchange max (ms) | fold + phase 2 max (ms) |")
        print("|---|---|---|---|---|---|---|---|")
        print(line, flush=True)
        with open(os.path.join(OUT, f"cp_bench_{WORLD}.md"), "w") as f:
            f.write(f"{torch.cuda.get_device_name()} x {WORLD}, "
                    f"{time.strftime('%Y-%m-%d')}\n{line}\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    if "--profile-rank" in ARGS:
        profile_rank(1 << 20)
        return 0
    if "--bench" in ARGS:
        i = ARGS.index("--tokens") if "--tokens" in ARGS else -1
        bench(int(ARGS[i + 1]) if i >= 0 else 1 << 20)
        dist.destroy_process_group()
        return 0
    if FLA is None and not QUICK:
        # Without FLA the "below FLA's error" half of every o check is
        # vacuous: fail unless that was asked for (as test_python.py).
        check("FLA importable (the pinned flash-linear-attention)", NO_FLA,
              "not importable: comparisons against FLA are not made"
              + ("" if NO_FLA else "; set DELTAC_TEST_NO_FLA=1 to run without it"))
    if not DIST:
        refusals()
    else:
        graph_capture()
    for name, rule, vk, lens in CASES:
        run_case(name, rule, vk, lens, [WORLD] if DIST else [3] if QUICK else [2, 3, 4],
                 distributed if DIST else emulated)
    failed = sum(not ok for _, ok, _ in results)
    if DIST:
        t = torch.tensor([failed], device=DEV)
        dist.all_reduce(t)
        failed = int(t.item())
    if RANK == 0 or not DIST:
        for name, ok, detail in results:
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        mode = f"{WORLD} ranks over NCCL" if DIST else "emulated ranks, one GPU"
        print(f"== test_cp ({mode}): {len(results) - failed if not DIST else 'all'} "
              f"checks, {failed} failed")
    if DIST:
        dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
