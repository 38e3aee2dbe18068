#!/usr/bin/env python3
"""The budget of intra-card context parallelism for prefill (issue 35):
FLOPs, HBM bytes, recur waves and chain latency of today's serial schedule
and of the two ways to finish the segments, at the benchmark's long shapes.
No GPU: a model, its inputs stated below; docs/context-parallelism.md
quotes its output and says what it leaves out.

    python3 tests/bench/cp_budget.py [--t-step 1.2] [--sms 132]
        [--measured T:H:n:ms ...]

--measured: a call the dispatch ran as the built schedule (correct, n
segments, the ordinary chunks' 72 KiB workspace) and its time; prints its
floor (the largest of FLOP floor, byte floor and latency) and the time as a
multiple of it, the fraction issue 35 asks for.

Per chunk c (C tokens, per value head; GDN, kv layout):
    S_{c+1} = M_c S_c + b_c,  M_c = Diag(e^G_last) - Kd^T W (K x K),
    b_c = Kd^T U (K x V);  O_c = Qg S_c + P V'_c,  V'_c = U - W S_c.
A segment from a zero state gives O0, b_seg; run on K more columns from I it
gives M_seg (the same recurrence: "M is recur on K extra value columns").
With the true entering state S0 of the segment, O_c = O0_c + Qh_c S0 where
Qh_c = (Qg_c - P_c W_c) Mpre_c and Mpre_c = M_{c-1} ... M_{c1}.
"""
import argparse
import math

# Ceilings measured on the H200 these numbers target (shared/DESIGN.md):
COPY_TBS = 4.24        # device copy, TB/s
GEMM_TFLOPS = 679.0    # bf16 GEMM on random data, TFLOP/s


def budget(T, H, K=128, V=128, C=64, BV=64, n=1, form="serial", t_step=1.2, sms=132,
           ws_kib=72, reread=0):
    """One schedule at T tokens, H = HV heads, n segments. Returns a dict of
    FLOP (G), bytes (GB), recur blocks, waves and the latency terms (us)."""
    tokens = T * H
    nt = math.ceil(T / C)
    base_flop = 6 * C * K + 4 * C * V + 6 * K * V          # per token and head
    io = 2 * (2 * K + 2 * V)                              # q, k, v, o in bf16
    ws = ws_kib * 1024 / C                                # workspace per token
    frac = (n - 1) / n                                    # segments past the first
    # The workspace is written once and read once; `reread` bytes per token
    # are read once more (the raw q/k form: recur reads q and k again).
    flop, bytes_, extra_pass = base_flop, io + 2 * ws + reread, 0.0
    v_blocks, k_blocks = H * n * (V // BV), H * n * (K // BV)
    if form == "serial":
        blocks, chain_chunks, passes = H * (V // BV), nt, 1
    elif form == "rerun":
        # pass 1: b_seg (state part only, 4KV) and M_seg (4K^2) of segments
        # 2..n from zero / I; pass 2: every segment again from its state.
        flop += frac * (4 * K * V + 4 * K * K)
        bytes_ += frac * ws * 48 / 72                     # W, U, Kd re-read in pass 1
        blocks = v_blocks + k_blocks
        chain_chunks, passes = nt / n, 2
    elif form == "correct":
        # one pass: O0 and b_seg on the V columns, Mpre on K more columns
        # (4K^2), Qh = (Qg - P W) Mpre (2CK + 2K^2), then O += Qh S0 (2KV)
        # in a parallel pass reading Qh (f32) and O0, writing O.
        flop += frac * (4 * K * K + 2 * C * K + 2 * K * K + 2 * K * V)
        extra_pass = frac * (2 * 4 * K + 2 * 2 * V)        # Qh written + read, O0 read + O rewritten
        bytes_ += extra_pass
        blocks = v_blocks + k_blocks
        chain_chunks, passes = nt / n, 1
    else:
        raise ValueError(form)
    waves = math.ceil(blocks / sms)
    chain_us = passes * chain_chunks * t_step * (waves if form != "serial" else 1)
    if form == "rerun":  # pass 2 has only the V blocks
        w2 = math.ceil(v_blocks / sms)
        chain_us = chain_chunks * t_step * (waves + w2)
    gflop = flop * tokens / 1e9
    gbytes = bytes_ * tokens / 1e9
    combine_us = 0.0 if n == 1 else n * 2.0               # n dependent K x K x V steps
    gemm_us = 0.0
    if form == "correct":
        gemm_us = max(2 * K * V * tokens * frac / (GEMM_TFLOPS * 1e6),
                      extra_pass * tokens / 2 / (COPY_TBS * 1e6))
    return dict(gflop=gflop, gbytes=gbytes, blocks=blocks, waves=waves,
                flop_floor_us=gflop * 1e3 / GEMM_TFLOPS, byte_floor_us=gbytes * 1e3 / COPY_TBS,
                chain_us=chain_us, combine_us=combine_us, gemm_us=gemm_us,
                latency_us=chain_us + combine_us + gemm_us)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--t-step", type=float, default=1.2,
                    help="recur's time per chunk and block, us (measured ~1.2 at 32K H16)")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--measured", nargs="*", default=[], metavar="T:H:n:ms",
                    help="built calls (H = HV) and their times, ms")
    a = ap.parse_args()
    if a.measured:
        print("| shape | n | FLOP floor us | byte floor us | latency us | floor us | measured us "
              "| measured / floor |")
        print("|---|---|---|---|---|---|---|---|")
        for m in a.measured:
            T, H, n, ms = m.split(":")
            T, H, n, us = int(T), int(H), int(n), float(ms) * 1e3
            r = budget(T, H, n=n, form="correct" if n > 1 else "serial", t_step=a.t_step,
                       sms=a.sms)
            floor = max(r["flop_floor_us"], r["byte_floor_us"], r["latency_us"])
            print(f"| T = {T // 1024}K H{H} | {n} | {r['flop_floor_us']:.0f} | "
                  f"{r['byte_floor_us']:.0f} | {r['latency_us']:.0f} | {floor:.0f} | {us:.0f} | "
                  f"{us / floor:.2f} |")
        return
    print("| shape | schedule | n | workspace KiB | GFLOP | GB | recur blocks | waves | "
          "FLOP floor us | byte floor us | chain us | combine + GEMM us | latency us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    # Workspace per (chunk, head): 72 KiB today (W, U, Qg, Kd, P, G_last);
    # 32 KiB in the raw q/k form, whose recur reads q and k again (2K bf16
    # per token); 0 where recur does the chunk work itself (no such form
    # yet: its time per chunk step is not measured, --t-step assumes today's).
    for T in (32768, 131072):
        rows = [("serial", 1, 72, 0), ("serial", 1, 32, 4 * 128)]
        for ws, reread in ((72, 0), (32, 4 * 128), (0, 0)):
            rows += [("rerun", 4, ws, reread)] + [("correct", n, ws, reread) for n in (2, 4)]
        for form, n, ws, reread in rows:
            r = budget(T, 16, n=n, form=form, t_step=a.t_step, sms=a.sms, ws_kib=ws,
                       reread=reread)
            print(f"| T = {T // 1024}K H16 | {form} | {n} | {ws} | {r['gflop']:.0f} | {r['gbytes']:.2f} | "
                  f"{r['blocks']} | {r['waves']} | {r['flop_floor_us']:.0f} | "
                  f"{r['byte_floor_us']:.0f} | {r['chain_us']:.0f} | "
                  f"{r['combine_us'] + r['gemm_us']:.0f} | {r['latency_us']:.0f} |")


if __name__ == "__main__":
    main()
