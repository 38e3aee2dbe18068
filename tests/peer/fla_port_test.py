"""CI check of tests/gpu/fla_port.py (the port behind the FLA peer suite,
tests/gpu/fla_peer.py) on sample_fla_style.py: which calls go to deltac,
which statements go, and what the ported tests do when run with
stand-ins (no torch, no GPU). Exits non-zero on any failure."""
import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
import fla_port  # noqa: E402

failures = []


def check(what, ok):
    print(f"{'PASS' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)


path = os.path.join(HERE, "sample_fla_style.py")
tree, served = fla_port.port_module(path)
code = ast.unparse(tree)
funcs = {n.name: ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef)}

check("calls under test and self-references counted",
      served == {"test_chunk": (1, 0), "test_state_v_first": (1, 1),
                 "test_chunk_size": (1, 0), "test_shapes": (1, 0), "test_gate": (0, 0)})
check("tri's call goes to deltac",
      "tri, tri_ht = __deltac_chunk_gated_delta_rule(" in funcs["test_chunk"])
check("a naive reference stays FLA's",
      "ref, ref_ht = naive_recurrent_gated_delta_rule(" in funcs["test_chunk"])
check("backward and gradient statements are gone",
      ".backward(" not in code and ".grad" not in code and "tri_dq" not in funcs["test_chunk"]
      and "assert_close('dq'" not in funcs["test_chunk"])
check("the forward checks stay",
      "assert_close('o', ref, tri, 0.005)" in funcs["test_chunk"] and
      "assert_close('ht', ref_ht, tri_ht, 0.005)" in funcs["test_chunk"])
check("a reference by the function under test goes to deltac too",
      funcs["test_state_v_first"].count("__deltac_fused_recurrent_gated_delta_rule(") == 2)
check("run_tri's call goes to deltac, run_ref's stays FLA's",
      "o = __deltac_chunk_delta_rule(q=x)" in funcs["test_chunk_size"] and
      "o = naive_recurrent_gated_delta_rule(q=x)" in funcs["test_chunk_size"])
check("a return keeps its place with None for the gradient",
      funcs["test_chunk_size"].count("return (o, None)") == 2)
check("without tri names the calls outside pytest.raises go to deltac",
      "o, final, h = __deltac_chunk_kda(" in funcs["test_shapes"] and
      "bad = chunk_kda(q=x, chunk_size=16)" in funcs["test_shapes"])
check("plain asserts become counted checks",
      "__peer_assert(x > 0, None)" in funcs["test_shapes"] and
      "__peer_assert(o == x, 'output')" in funcs["test_shapes"])
check("a gate-kernel test is left alone", "__deltac_" not in funcs["test_gate"])

# Run the ported tests with stand-ins: deltac's calls and FLA's are told
# apart by what they return.
calls = []


class _Raises:
    """pytest.raises for the sample (CI has no pytest)."""

    def __init__(self, exc):
        self.exc = exc

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, self.exc)


sys.modules["pytest"] = type(sys)("pytest")
sys.modules["pytest"].raises = _Raises

ns = {"__name__": "sample"}
exec(compile(tree, path, "exec"), ns)
checks = []
# As fla_peer's assert_close: a None side is a gradient the port took out.
ns["assert_close"] = lambda name, ref, tri, tol, **kw: (
    checks.append((name, ref, tri)) if ref is not None and tri is not None else None)
ns["__peer_assert"] = lambda cond, msg: checks.append(("assert", cond, msg))
ns["naive_recurrent_gated_delta_rule"] = lambda **kw: (calls.append("naive") or (1.0, 2.0)
                                                       if "k" in kw else 1.0)
ns["__deltac_chunk_gated_delta_rule"] = lambda **kw: (calls.append("deltac") or (1.0, 2.0))
ns["__deltac_fused_recurrent_gated_delta_rule"] = lambda **kw: (calls.append("deltac") or (1.0, 2.0))
ns["__deltac_chunk_delta_rule"] = lambda **kw: calls.append("deltac") or 1.0
ns["__deltac_chunk_kda"] = lambda **kw: calls.append("deltac") or (kw["q"], 0, 0)
ns["chunk_kda"] = lambda **kw: (_ for _ in ()).throw(ValueError("refused"))
for test in ("test_chunk", "test_state_v_first", "test_chunk_size", "test_shapes"):
    calls.clear()
    checks.clear()
    ns[test](1.0)
    names = [c[0] for c in checks]
    check(f"{test} runs: deltac called, forward checks only ({names})",
          "deltac" in calls and names and not any(n.startswith("d") for n in names))

print(f"== fla_port: {len(failures)} failed ==")
sys.exit(1 if failures else 0)
