"""The torch custom ops of the generated module (generated/runtime/
deltac_ops.py) on the GPU: torch.compile and CUDA graphs over the example
library (generated/gdn).

Checks: the ops' schemas (mutated pools declared), torch.library.opcheck of
each op on real inputs (schema, fake implementation, dynamic shapes
through AOT dispatch), a prefill + decode step compiled with
fullgraph=True and dynamic shapes (the same bits as eager at every call,
against the fp64 reference too, one compiled frame for three calls of
different T and numbers of sequences), the same step under
mode="reduce-overhead" (CUDA graphs: the same bits at warm-up, recording
and replay), the pool decode compiled (o and the updated pool as eager,
the same kernels launched: no copy of the pool), and the arguments no op
carries refused by name inside a compiled region.
Usage: test_compile.py BUILD_DIR OUT_DIR   (prints a table, exits non-zero
on a failed check)
"""
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing as H  # noqa: E402
import installed  # noqa: E402
from checks import Checks, kernels_launched  # noqa: E402
import torch._dynamo.testing  # noqa: E402
# generated/gdn, or with DELTAC_GDN_PACKAGE=deltac_gdn its installed wheel.
gdn, _, GDN_MODULE = installed.gdn_module(ROOT, BUILD)

# The checks' record (tests/gpu/checks.py, shared with test_python).
CHECKS = Checks()
check, guarded = CHECKS.check, CHECKS.guarded


def same(a, b):
    return a is None and b is None or (a is not None and b is not None and torch.equal(a, b))


ops = torch.ops.deltac_gdn  # the library's name, whichever way it is imported
H_, HV, K = 4, 8, 128  # q/k heads, v heads, head dim


def prefill_case(lens, Td, seed):
    """A varlen prefill batch and one decode step of Td tokens for each of
    its sequences (bf16, log g, FLA's kv layout)."""
    q, k, v, g, beta, cu, h0 = H.prefill_inputs(lens, H_, HV, seed=seed)
    qd, kd, vd, gd, bd, _ = H.decode_inputs(len(lens), H_, HV, T=Td, seed=seed + 1)
    return q, k, v, g, beta, cu, h0, qd, kd, vd, gd, bd


def step(q, k, v, g, beta, cu, h0, qd, kd, vd, gd, bd):
    """What a serving engine's layer does: the prompt chunked, then decode
    from the prompt's final state (both FLA-named calls)."""
    o, ht = gdn.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                       output_final_state=True,
                                       use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    od, hd = gdn.fused_recurrent_gated_delta_rule(qd, kd, vd, g=gd, beta=bd, initial_state=ht,
                                                  output_final_state=True,
                                                  use_qk_l2norm_in_kernel=True)
    return o, ht, od, hd


def schemas():
    for name, mutated in (("prefill", ["error_flag"]),
                          ("prefill_pool", ["initial_state", "error_flag"]),
                          ("recurrent", ["error_flag"]),
                          ("decode_pool", ["state", "intermediate_states", "error_flag"])):
        schema = getattr(ops, name).default._schema
        got = sorted(a.name for a in schema.arguments
                     if a.alias_info is not None and a.alias_info.is_write)
        check(f"schema deltac_gdn::{name}: mutates {', '.join(mutated)}",
              got == sorted(mutated), str(schema)[:120])


def opchecks():
    q, k, v, g, beta, cu, h0, qd, kd, vd, gd, bd = prefill_case([77, 130, 64], 2, seed=3)
    common = dict(scale=None, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, state_v_first=False, use_gate_in_kernel=False,
                  A_log=None, dt_bias=None, lower_bound=None, error_flag=None)
    pre = dict(common, cu_seqlens=cu, cu_seqlens_cpu=None, safe_gate=False, chunk_size=64,
               head_first=False)
    cases = [
        ("prefill", ("chunk_gated_delta_rule", q, k, v, g, beta),
         dict(pre, initial_state=h0, output_final_state=True)),
        ("prefill_pool", ("chunk_gated_delta_rule", q, k, v, g, beta),
         dict(pre, initial_state=torch.cat([h0, h0]), output_final_state=True,
              initial_state_indices=torch.tensor([4, 0, 2], device="cuda"),
              output_state_indices=torch.tensor([1, 3, 5], device="cuda"))),
        ("recurrent", ("fused_recurrent_gated_delta_rule", qd, kd, vd, gd, None, None, bd),
         dict(common, initial_state=h0, output_final_state=True, cu_seqlens=None)),
    ]
    B, T = 5, 3
    sq, sk, sv, a, b, A_log, dt_bias, pool = serving_inputs(B, T, slots=9, seed=5)
    cases.append(("decode_pool", (sq, sk, sv, a, b, A_log, dt_bias, pool),
                  dict(state_indices=torch.tensor([7, -1, 2, 4, 0], device="cuda",
                                                  dtype=torch.int32),
                       output_state_indices=None, scale=None, use_qk_l2norm_in_kernel=True,
                       intermediate_states=None, disable_state_update=False,
                       ssm_state_indices=None, num_accepted_tokens=None, error_flag=None,
                       state_v_first=True, cu_seqlens=None)))
    for name, args, kwargs in cases:
        def run(name=name, args=args, kwargs=kwargs):
            report = torch.library.opcheck(getattr(ops, name).default, args, kwargs)
            bad = {t: r for t, r in report.items() if r != "SUCCESS"}
            check(f"opcheck deltac_gdn::{name}", not bad, str(bad or sorted(report))[:200])
        guarded(f"opcheck deltac_gdn::{name}", run)


def serving_inputs(B, T, slots, seed):
    """The pool decode's inputs: raw a and b, A_log, dt_bias and a v-first
    f32 pool [slots, HV, K, K]."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16, generator=gen)  # noqa: E731
    q, k, v = r(B, T, H_, K), r(B, T, H_, K), r(B, T, HV, K)
    a, b = r(B, T, HV), r(B, T, HV)
    A_log = torch.rand(HV, device="cuda", generator=gen) * 2
    dt_bias = torch.randn(HV, device="cuda", generator=gen) * 0.5
    pool = torch.randn(slots, HV, K, K, device="cuda", generator=gen) * 0.1
    return q, k, v, a, b, A_log, dt_bias, pool


def compiled_dynamic():
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(step, backend=counter, fullgraph=True, dynamic=True)
    # Decode T >= 2 (speculative steps): torch.compile specialises sizes 0
    # and 1, so a T of 1 would be a shape of its own (see decode_steps).
    for i, (lens, Td) in enumerate((([300, 212], 2), ([100, 400, 517], 3),
                                    ([64, 64, 900, 3], 4))):
        case = prefill_case(lens, Td, seed=20 + i)
        got = compiled(*case)
        want = step(*case)
        equal = all(same(x, y) for x, y in zip(got, want))
        q, k, v, g, beta, cu, h0 = case[:7]
        ro, rh = H.ref_fp64(q, k, v, g, beta, h0, K ** -0.5, cu.tolist())
        eo, eh = H.rel(got[0], ro), H.rel(got[1], rh)
        check(f"compiled fullgraph dynamic: T = {sum(lens)}, N = {len(lens)}, decode T = {Td}",
              equal and eo < 1e-2 and eh < 1e-2,
              f"same bits as eager: {equal}; vs fp64 o {eo:.2e}, state {eh:.2e}")
    check("compiled once for three shapes (T and N dynamic)", counter.frame_count == 1,
          f"{counter.frame_count} frame(s) compiled, {counter.op_count} ops")


def decode_steps():
    """Decode of one token a row for a changing batch: one compile."""
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    def decode(q, k, v, g, beta, h0):
        return gdn.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0,
                                                    output_final_state=True,
                                                    use_qk_l2norm_in_kernel=True)
    compiled = torch.compile(decode, backend=counter, fullgraph=True, dynamic=True)
    equal = True
    for B in (2, 3, 6):
        case = H.decode_inputs(B, H_, HV, T=1, seed=30 + B)
        equal &= all(same(x, y) for x, y in zip(compiled(*case), decode(*case)))
    check("compiled decode T = 1, B = 2, 3, 6: one compile, eager's bits",
          equal and counter.frame_count == 1, f"{counter.frame_count} frame(s), same: {equal}")


def compiled_graphs():
    from torch._dynamo.utils import counters
    skips = counters["inductor"].get("cudagraph_skips", 0)
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    case = prefill_case([200, 333], 4, seed=40)
    want = step(*case)
    for call in ("warm-up", "record", "replay", "replay"):
        got = [None if x is None else x.clone() for x in compiled(*case)]
        equal = all(same(x, y) for x, y in zip(got, want))
        check(f"reduce-overhead (CUDA graphs), {call}: the same bits as eager", equal)
    # Inductor counts the graphs it would not capture (a CPU op, a mutated
    # input, ...): the step must have been captured.
    now = counters["inductor"].get("cudagraph_skips", 0)
    check("reduce-overhead: the step captured (no cudagraph skip)", now == skips,
          f"cudagraph_skips {skips} -> {now}")


def compiled_pool():
    B, T = 5, 3
    q, k, v, a, b, A_log, dt_bias, pool = serving_inputs(B, T, slots=9, seed=50)
    idx = torch.tensor([7, -1, 2, 4, 0], device="cuda", dtype=torch.int32)
    out_idx = torch.tensor([8, 1, 3, 5, 6], device="cuda", dtype=torch.int32)

    def serve(q, k, v, a, b, A_log, dt_bias, pool, idx, out_idx):
        return gdn.gated_delta_rule_decode(q, k, v, a, b, A_log, dt_bias, pool,
                                           state_indices=idx, output_state_indices=out_idx)

    compiled = torch.compile(serve, fullgraph=True)
    p1, p2 = pool.clone(), pool.clone()
    o1 = compiled(q, k, v, a, b, A_log, dt_bias, p1, idx, out_idx)
    o2 = serve(q, k, v, a, b, A_log, dt_bias, p2, idx, out_idx)
    check("compiled pool decode: o and the updated pool as eager",
          torch.equal(o1, o2) and torch.equal(p1, p2) and not torch.equal(p1, pool))
    eager = sorted(kernels_launched(lambda: serve(q, k, v, a, b, A_log, dt_bias, p2, idx, out_idx)))
    comp = sorted(kernels_launched(lambda: compiled(q, k, v, a, b, A_log, dt_bias, p1, idx, out_idx)))
    check("compiled pool decode: the eager kernels only (no copy of the pool)", comp == eager,
          f"compiled {comp}, eager {eager}")


def refused():
    case = prefill_case([100, 60], 1, seed=60)
    q, k, v, g, beta, cu, h0 = case[:7]

    def with_output(q, k, v, g, beta, cu, out):
        return gdn.chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True,
                                          cu_seqlens=cu, output=out)
    out = torch.empty_like(v)
    try:
        torch.compile(with_output, fullgraph=True)(q, k, v, g, beta, cu, out)
        check("inside torch.compile, output= is refused by name", False, "no error")
    except Exception as e:  # noqa: BLE001 - dynamo may wrap the ValueError
        text = str(e)
        check("inside torch.compile, output= is refused by name",
              "output is not supported inside torch.compile" in text, text.splitlines()[0][:120])


print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {GDN_MODULE} from "
      f"{os.path.dirname(gdn.__file__)}")
for name, fn in (("schemas", schemas), ("opcheck", opchecks), ("dynamic", compiled_dynamic),
                 ("decode steps", decode_steps),
                 ("reduce-overhead", compiled_graphs), ("pool", compiled_pool),
                 ("refused", refused)):
    guarded(name, fn)

sys.exit(CHECKS.summary("torch.compile tests", os.path.join(OUT, "compile_test.txt")))
