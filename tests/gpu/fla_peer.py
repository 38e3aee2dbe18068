"""flash-linear-attention's own forward tests, run through deltac (issue 33).

Reads the pinned FLA's test files (tests/ops/test_gdn.py, test_kda.py,
test_delta.py: read from FLA's tree, never copied into this repository),
and runs each test function's parameter cases with the call under test
served by generated/gdn: in every assignment to a `tri...` name (FLA's
name for the kernel under test; `ref...` is the reference) and inside a
nested `run_tri...` function, a call of chunk_gated_delta_rule,
fused_recurrent_gated_delta_rule, chunk_kda, fused_recurrent_kda,
fused_recurrent_kda_fwd, chunk_delta_rule or fused_recurrent_delta_rule
goes to the module's function of that name instead of FLA's. Everything
else is FLA's code as written: its inputs, its reference (its naive
functions or its own kernels), its assert_close with its tolerance. Two
more rules (tests/gpu/fla_port.py, which does the rewriting): where the
`ref...` call is the function under test itself with other options (FLA
checking a function against itself), it goes to deltac too; a test with
no `tri` names (a shape test) sends every such call outside
`pytest.raises` to deltac, and its plain asserts are its checks.

Forward only, under torch.inference_mode: `.backward()` statements are
dropped, and so is every statement that reads a gradient (`.grad`) or a
name assigned from one (a `return` keeps its place with None there), so
the gradient checks go and the forward checks stay. A case that ran no
forward check at all fails (nothing vacuous).

Each case ends as one of:
  pass         deltac served the call under test and every check held
  FAIL         a check failed, a case deltac must cover was refused, or
               the harness could not run it (its traceback's last line)
  not covered  deltac refused the call with its reason (no spec with
               those dims, dtypes or options): listed, never silent
  skipped      FLA's own test skipped it (its reason)
  not ported   the test function has no call under test (below)
A case "must be covered" where every call under test had q, k and v of
one dtype, bf16 or f16, and K = V of 64 or 128 (the issue's bar for the
example library); its refusal is a FAIL. Test functions without a call
under test (FLA's gate kernels, its naive functions, other backends) are
listed as not ported, with the reason.

Usage: fla_peer.py --fla-tests FLA/tests/ops --lib libgdn.so [--out DIR]
       [--only test_gdn.py::test_chunk] [--case chunk_size32]
Needs the pinned FLA on PYTHONPATH (its fla package) and einops.
"""
import argparse
import inspect
import itertools
import os
import sys
import traceback
import warnings

os.environ.setdefault("FLA_FLASH_QLA", "0")
# FLA's tests skip GQA cases unless the backend dispatch is off (they run
# them in their Triton baseline job); deltac serves them, so run them.
os.environ["FLA_DISABLE_BACKEND_DISPATCH"] = "1"
os.environ.pop("FLA_CI_ENV", None)  # FLA's CI relaxes assert_close to a warning

import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fla_port import PREFIX, SERVED, UNSERVED, port_module  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FILES = ("test_gdn.py", "test_kda.py", "test_delta.py")


class Refused(Exception):
    """deltac refused the call under test (its message)."""


# --------------------------------------------------------------------------
# deltac's side and the checks
# --------------------------------------------------------------------------

class Case:
    """What one case's calls under test and checks did."""

    def __init__(self):
        self.calls = []   # (function, q dtype, k dtype, v dtype, K, V)
        self.checks = []  # (name, ratio, tolerance, warning only)


CURRENT = [None]


def deltac_function(module, name):
    def call(*args, **kwargs):
        q = kwargs.get("q", args[0] if args else None)
        k = kwargs.get("k", args[1] if len(args) > 1 else None)
        v = kwargs.get("v", args[2] if len(args) > 2 else None)
        info = (name,) + tuple(str(t.dtype).replace("torch.", "") if torch.is_tensor(t) else None
                               for t in (q, k, v)) + \
            tuple(t.shape[-1] if torch.is_tensor(t) else None for t in (q, v))
        CURRENT[0].calls.append(info)
        if name in UNSERVED:
            raise Refused(UNSERVED[name])
        try:
            return getattr(module, name)(*args, **kwargs)
        except (ValueError, TypeError) as e:  # TypeError: an argument it does not take
            raise Refused(f"{type(e).__name__}: {e}") from None
    return call


def checking_assert_close(fla_assert_close):
    def check(prefix, ref, tri, ratio, warning=False, err_atol=1e-6):
        if ref is None or tri is None:  # a gradient (inference only)
            return
        from fla.utils._testing import get_err_ratio
        CURRENT[0].checks.append((prefix, get_err_ratio(ref, tri), ratio, warning))
        fla_assert_close(prefix, ref, tri, ratio, warning=warning, err_atol=err_atol)
    return check


def peer_assert(cond, msg):
    """FLA's plain assert; it counts as a check once deltac has been
    called (an assert on the parameters alone does not)."""
    if CURRENT[0].calls:
        CURRENT[0].checks.append(("assert", 0.0, 0.0, False))
    assert cond, msg


def must_cover(case):
    return bool(case.calls) and all(
        q == k == v and q in ("bfloat16", "float16") and K == V and K in (64, 128)
        for _, q, k, v, K, V in case.calls)


def cases_of(fn):
    """(id, kwargs) per parameter case of a test function, or a reason to skip it all."""
    marks = getattr(fn, "pytestmark", [])
    for m in marks:
        if m.name == "skipif" and m.args and m.args[0]:
            return None, f"skipif: {m.kwargs.get('reason', '')}"
    lists = []
    for m in marks:
        if m.name != "parametrize":
            continue
        names, values = m.args[0], m.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        cases = []
        for i, val in enumerate(values):
            vals = val.values if hasattr(val, "values") else (val if len(names) > 1 else (val,))
            cid = getattr(val, "id", None) or "-".join(str(x) for x in vals) or str(i)
            # A case's own marks: FLA's skip of it stands.
            skip = next((pm.kwargs.get("reason", pm.name) for pm in getattr(val, "marks", ())
                         if pm.name == "skip" or (pm.name == "skipif" and pm.args and pm.args[0])),
                        None)
            cases.append((cid, dict(zip(names, vals)), skip))
        lists.append(cases)
    out = []
    for combo in itertools.product(*lists):
        kwargs, ids, skip = {}, [], None
        for cid, kw, why in combo:
            kwargs.update(kw)
            ids.append(cid)
            skip = skip or why
        out.append(("-".join(ids), kwargs, skip))
    return out, None


def run_case(fn, kwargs):
    case = Case()
    CURRENT[0] = case
    monkeypatch = None
    try:
        args = dict(kwargs)
        params = inspect.signature(fn).parameters
        if "monkeypatch" in params:
            monkeypatch = pytest.MonkeyPatch()
            args["monkeypatch"] = monkeypatch
        missing = [p for p in params if p not in args]
        if missing:
            return case, "not ported", f"needs pytest fixtures {missing}"
        torch.manual_seed(0)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(**args)
        if not case.checks:
            return case, "FAIL", "no forward check ran"
        return case, "pass", ""
    except Refused as e:
        if must_cover(case):
            return case, "FAIL", f"must be covered, refused: {e}"
        return case, "not covered", str(e)
    except pytest.skip.Exception as e:
        return case, "skipped", f"FLA's test skips it: {e}"
    except AssertionError as e:
        return case, "FAIL", str(e).strip().splitlines()[0] if str(e).strip() else "assertion"
    except Exception:  # noqa: BLE001 - any other failure is reported, not hidden
        return case, "FAIL", traceback.format_exc(limit=3).strip().splitlines()[-1]
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fla-tests", required=True, help="the pinned FLA's tests/ops folder")
    ap.add_argument("--lib", required=True, help="libgdn.so of generated/gdn")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="FILE.py or FILE.py::test_name")
    ap.add_argument("--case", default=None,
                    help="only the cases whose id contains this text (e.g. chunk_size32)")
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(ROOT, "generated", "gdn"))
    import gdn  # noqa: E402  (the generated module)
    gdn.load(args.lib)
    import fla.utils

    rows = []
    for fname in FILES:
        if args.only and not args.only.startswith(fname):
            continue
        path = os.path.join(args.fla_tests, fname)
        tree, served = port_module(path)
        namespace = {"__name__": "fla_peer_" + fname[:-3], "__file__": path}
        exec(compile(tree, path, "exec"), namespace)
        namespace["assert_close"] = checking_assert_close(fla.utils.assert_close)
        namespace["__peer_assert"] = peer_assert
        for name in SERVED + tuple(UNSERVED):
            namespace[PREFIX + name] = deltac_function(gdn, name)
        for test, (count, self_refs) in served.items():
            if args.only and "::" in args.only and args.only.split("::")[1] != test:
                continue
            if count == 0:
                rows.append((fname, test, "-", "not ported",
                             "no call under test of a function deltac provides"))
                continue
            cases, reason = cases_of(namespace[test])
            if cases is None:
                rows.append((fname, test, "-", "skipped", reason))
                continue
            for cid, kwargs, skip in cases or [("-", {}, None)]:
                if args.case and args.case not in cid:
                    continue
                if skip:
                    rows.append((fname, test, cid, "skipped", f"FLA's case mark: {skip}"))
                    continue
                case, status, detail = run_case(namespace[test], kwargs)
                if status == "pass":
                    asserts = sum(n == "assert" for n, *_ in case.checks)
                    detail = ", ".join(f"{n} {r:.2e} < {t}" for n, r, t, _ in case.checks
                                       if n != "assert")
                    if asserts:
                        detail += f"{', ' if detail else ''}{asserts} of FLA's asserts"
                    if self_refs:
                        detail += " (reference: deltac's same function, other options)"
                rows.append((fname, test, cid, status, detail))
                print(f"{status:12s} {fname}::{test}[{cid}] {detail}", flush=True)

    counts = {}
    for r in rows:
        counts[r[3]] = counts.get(r[3], 0) + 1
    lines = ["| file | test | case | result | detail |", "|---|---|---|---|---|"]
    lines += [f"| {f} | {t} | {c} | {s} | {d.replace('|', '/')} |" for f, t, c, s, d in rows]
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fla_peer.md"), "w") as fh:
            fh.write("\n".join(lines) + "\n\n" + summary + "\n")
    print("\n".join(lines))
    print(f"\n== FLA peer suite: {summary} ==")
    return 1 if counts.get("FAIL", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
