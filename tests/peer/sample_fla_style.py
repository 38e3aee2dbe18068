# A test file in the style of flash-linear-attention's tests/ops (written
# for this repository, not FLA's code): the patterns tests/gpu/fla_port.py
# must port. fla_port_test.py ports it and runs it with stand-ins for FLA's
# functions, deltac's and assert_close; nothing here needs torch.
import pytest


def test_chunk(x):
    # The kernel under test (tri), a naive reference (ref), gradients.
    tri, tri_ht = chunk_gated_delta_rule(q=x, k=x)
    (tri + tri_ht).backward(retain_graph=True)
    tri_dq, tri_dk = q.grad, k.grad
    q.grad = k.grad = None
    ref, ref_ht = naive_recurrent_gated_delta_rule(q=x, k=x)
    ref_dq = q.grad
    ref_dq = ref_dq.to(tri_dq.dtype)
    assert_close('o', ref, tri, 0.005)
    assert_close('ht', ref_ht, tri_ht, 0.005)
    assert_close('dq', ref_dq, tri_dq, 0.008)


def test_state_v_first(x):
    # The reference is the function under test with another option: FLA
    # checks it against itself, so the port sends both calls to deltac.
    ref, ref_ht = fused_recurrent_gated_delta_rule(q=x, state_v_first=False)
    tri, tri_ht = fused_recurrent_gated_delta_rule(q=x, state_v_first=True)
    assert_close('o', ref, tri, 1e-4)


def test_chunk_size(x):
    # Nested run_ref / run_tri functions returning gradients.
    def run_ref():
        o = naive_recurrent_gated_delta_rule(q=x)
        o.backward()
        return o, q.grad

    def run_tri():
        o = chunk_delta_rule(q=x)
        o.backward()
        return o, q.grad

    ref_o, ref_dq = run_ref()
    tri_o, tri_dq = run_tri()
    assert_close('o', ref_o, tri_o, 0.005)
    assert_close('dq', ref_dq, tri_dq, 0.005)


def test_shapes(x):
    # No tri names: every call outside pytest.raises is under test, and
    # the plain asserts are the checks.
    assert x > 0
    o, final, h = chunk_kda(q=x, return_intermediate_states=True)
    assert o == x, "output"
    with pytest.raises(ValueError):
        bad = chunk_kda(q=x, chunk_size=16)


def test_gate(x):
    # FLA's gate kernel: nothing deltac provides is under test.
    tri = fused_gdn_gate(x)
    ref = naive_gdn_gate(x)
    assert_close('g', ref, tri, 1e-4)
