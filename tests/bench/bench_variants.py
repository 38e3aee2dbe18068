"""Times decode code-shape variants (deltac --decode-tuning) against each other.

Each variant library holds gdn_log (vk) and gdn_log_kv (kv), K = V = 128,
FLA's decode options; timing is timing.graph_ms (one call per graph; the
method of the FLA anchor numbers, tests/bench/timing.py). Needs no FLA.
Usage: bench_variants.py DIR   (DIR/LIST: "name options..." per line, and
DIR/build/<name>/lib<name>.so built by run.sh)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import torch

import importlib.util

import timing as H


class Library:
    """A variant's generated Python module (VARIANTS/<name>/<name>.py)."""

    def __init__(self, root, name):
        sys.path.insert(0, os.path.join(root, name))  # for its deltac_torch
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, name, f"{name}.py"))
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.module.load(os.path.join(root, "build", name, f"lib{name}.so"))
        self.specs = {s["name"]: s for s in self.module.SPECS}

    def decode(self, spec, q, k, v, o, state, g, beta):
        self.module._library._decode(self.specs[spec], q, k, v, o, state, g, beta, None)


def main():
    root = sys.argv[1]
    variants = [line.split(" ", 1) for line in open(os.path.join(root, "LIST")).read().splitlines()]
    shapes = [(1, 1), (1, 256), (2, 256), (4, 1), (4, 16), (4, 64), (4, 256), (8, 256)]
    if os.environ.get("SHAPES"):  # e.g. SHAPES="4x64,4x256" (T x B)
        shapes = [tuple(int(x) for x in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    # Agreement with the first variant (the reference shape) on one input:
    # every variant must compute the same thing.
    check = H.decode_inputs(40, T=4, seed=9)
    outs = {}
    print(f"{torch.cuda.get_device_name()}: one call per graph, us (vk / kv)")
    print("variant  " + " | ".join(f"T={t} B={b:<3d}" for t, b in shapes) + " | options")
    for v in variants:
        name, opts = v[0], (v[1] if len(v) > 1 else "")
        lib = Library(root, name)
        agree = []
        cq, ck, cv, cg, cbeta, ch0 = check
        for spec, pool in (("gdn_log", ch0.transpose(-1, -2).contiguous()), ("gdn_log_kv", ch0.clone())):
            if spec not in lib.specs:  # a variant library of one layout
                continue
            o = torch.full_like(cv, float("nan"))
            lib.decode(spec, cq, ck, cv, o, pool, g=cg, beta=cbeta)
            if spec not in outs:
                outs[spec] = (o, pool)
            ro, rp = outs[spec]
            agree.append(max(H.rel(o, ro), H.rel(pool, rp)))
        cells = []
        for T, B in shapes:
            q, k, vv, g, beta, h0 = H.decode_inputs(B, T=T)
            o = torch.empty_like(vv)
            res = []
            for spec, pool in (("gdn_log", h0.transpose(-1, -2).contiguous()), ("gdn_log_kv", h0.clone())):
                try:  # nan: no such spec, or no kernel of the variant serves T
                    res.append(H.graph_ms(lambda: lib.decode(spec, q, k, vv, o, pool, g=g, beta=beta)) * 1e3
                               if spec in lib.specs else float("nan"))
                except (RuntimeError, ValueError):
                    res.append(float("nan"))
            cells.append(f"{res[0]:5.1f}/{res[1]:5.1f}")
        print(f"{name:8s} " + " | ".join(cells) + f" | diff {max(agree):.1e} | {opts}", flush=True)


if __name__ == "__main__":
    main()
