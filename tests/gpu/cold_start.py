"""Cold start: a new Python process to its first result.

measure(which, ...) starts one process that imports torch and initialises
CUDA, makes the inputs, then imports the deltac module (or FLA) and runs
one decode call (B = 4, T = 1, K = V = 128, FLA's
fused_recurrent_gated_delta_rule signature) to its result. It returns the
phases in ms: `import` (the module's import), `call` (its first call: the
library's dlopen, its kernels' module loads and the launch, synchronised),
`first` (import + call, the quantity test_python.py bounds) and `total`
(from process start, torch and the CUDA context included).

The module's bytecode is compiled first (cache_bytecode, into the
git-ignored __pycache__ folders, which generated_up_to_date's diff skips),
as pip does when it installs a wheel and as any earlier import does unless
bytecode writing is off. Without it the import compiles deltac_torch.py
from source: 38 ms against 12 ms with the bytecode on this project's build
machine (session 44), an installation's cost, not a process start's.
`--no-bytecode` measures that first.

Run alone (tests/gpu/run.sh cold-start) it prints each phase for a few
processes of each kind, so a regression shows where it went:
    cold_start.py BUILD_DIR [--runs N] [--fla]
"""
import argparse
import compileall
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

_CHILD = """
import json, os, sys, time
t0 = time.perf_counter()
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t1 = time.perf_counter()
sys.path.insert(0, {gen!r}); sys.path.insert(0, {harness!r})
import timing as H
q, k, v, g, beta, h0 = H.decode_inputs(4)
torch.cuda.synchronize()
t2 = time.perf_counter()
if {which!r} == "deltac":
    import {module} as gdn
    f = gdn.fused_recurrent_gated_delta_rule
else:
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as f
t3 = time.perf_counter()
o, h = f(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
         use_qk_l2norm_in_kernel=True)
torch.cuda.synchronize()
t4 = time.perf_counter()
ms = lambda a, b: round((b - a) * 1e3, 2)
print(json.dumps(dict(init=ms(t0, t1), import_=ms(t2, t3), call=ms(t3, t4),
                      first=ms(t2, t4), total=ms(t0, t4))))
"""


def cache_bytecode(gen=None):
    """Compiles the module and its runtime (generated/<lib> and
    generated/runtime) to __pycache__ beside them, for this interpreter."""
    gen = gen or os.path.join(ROOT, "generated", "gdn")
    for d in (gen, os.path.join(os.path.dirname(gen), "runtime")):
        if os.path.isdir(d):
            compileall.compile_dir(d, maxlevels=0, quiet=1)


def measure(which, module="gdn", gen=None, env=None):
    """One new process; the phases (ms) as a dict, NaN where it failed."""
    code = _CHILD.format(gen=gen or os.path.join(ROOT, "generated", "gdn"),
                         harness=os.path.join(ROOT, "tests", "bench"), which=which,
                         module=module)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(env or os.environ))
    lines = run.stdout.strip().splitlines()
    try:
        phases = json.loads(lines[-1])
        phases["import"] = phases.pop("import_")
        return phases
    except (IndexError, ValueError):
        sys.stderr.write(run.stderr[-2000:])
        return {k: float("nan") for k in ("init", "import", "call", "first", "total")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fla", action="store_true")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="measure first, without compiling the bytecode")
    args = ap.parse_args()
    env = dict(os.environ, DELTAC_GDN_LIB=os.path.join(os.path.abspath(args.build), "gdn",
                                                       "libgdn.so"))
    print(f"bytecode: dont_write_bytecode={sys.flags.dont_write_bytecode}, "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    print(f"{'which':14} | {'import':>8} | {'call':>8} | {'first':>8} | {'total':>8}  (ms)")

    def show(which, label):
        p = measure(which, env=env)
        print(f"{label:14} | {p['import']:8.1f} | {p['call']:8.1f} | {p['first']:8.1f} | "
              f"{p['total']:8.1f}", flush=True)

    if args.no_bytecode:
        for _ in range(args.runs):
            show("deltac", "deltac, source")
    cache_bytecode()
    for _ in range(args.runs):
        show("deltac", "deltac")
    if args.fla:
        show("fla", "fla")


if __name__ == "__main__":
    main()
