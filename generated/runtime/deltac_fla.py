"""deltac_fla - a generated deltac library as a backend of flash-linear-attention.

FLA (the release deltac_torch.FLA_VERSION names, 0.5.2, whose dispatch
lives in fla.ops.backends) runs chunk_gated_delta_rule through the registry
"gated_delta_rule" and chunk_kda and fused_recurrent_kda_fwd (the kernel
call of its fused_recurrent_kda) through "kda": for each call the first
backend by priority (lower first) whose <function>_verifier accepts it
runs it, else FLA's own Triton kernels. register(library) adds a backend
for one deltac library to both, at priority 1: ahead of FlashQLA (3) and
FLA's Triton. Its verifiers accept exactly the calls the library's specs
cover, for inference only (no input needs a gradient); every other call
goes on to the next backend with the reason in FLA's log. The backend
counts what it ran (`served`, per function) and keeps the last reason it
gave per function (`rejected`). FLA's fused_recurrent_gated_delta_rule
and its DeltaNet functions are not dispatched by FLA: swap the import
for those (docs/host-api.md).

    import gdn, deltac_fla
    backend = deltac_fla.register(gdn._library)   # FLA's layers now run deltac
    ...
    deltac_fla.unregister(backend)
"""
import inspect

import torch

PRIORITY = 1  # lower runs first: FlashQLA has 3, FLA's Triton is the fallback


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _backend_class():
    from fla.ops.backends import BaseBackend

    class DeltacBackend(BaseBackend):
        """deltac's kernels for the calls one generated library covers."""
        backend_type = "deltac"
        package_name = None
        env_var = "FLA_DELTAC"  # FLA_DELTAC=0 turns it off, like FLA's others
        default_enable = True
        priority = PRIORITY

        def __init__(self, library):
            self.library = library
            self.backend_type = f"deltac_{library.name}"
            self.served = {}
            self.rejected = {}

        # --------------------------------------------------------- helpers
        def _takes(self, fn, kwargs):
            params = inspect.signature(inspect.unwrap(getattr(self.library, fn))).parameters
            unknown = sorted(set(kwargs) - set(params))
            return f"keywords deltac's {fn} does not take: {unknown}" if unknown else None

        def _refuse(self, fn, why):
            self.rejected[fn] = why
            return False, f"deltac ({self.library.name}): {why}"

        def _common(self, fn, q, k, v, tensors):
            if _needs_grad(q, k, v, *tensors):
                return "inference only: an input requires grad"
            if not q.is_cuda:
                return "q is not on a CUDA device"
            if q.dtype not in (torch.bfloat16, torch.float16) or not (
                    q.dtype == k.dtype == v.dtype):
                return f"q, k, v must share bf16 or f16, got {q.dtype}, {k.dtype}, {v.dtype}"
            if q.dim() != 4 or v.dim() != 4:
                return "q and v must be [B, T, heads, dim]"
            return None

        def _prefill_verifier(self, fn, rule, q, k, v, g, beta, initial_state, kw):
            why = self._common(fn, q, k, v, (g, beta, initial_state,
                                             kw.get("A_log"), kw.get("dt_bias")))
            why = why or self._takes(fn, kw)
            if why is None and kw.get("cp_context") is not None:
                why = "FLA's cp_context (deltac's context parallelism has its own)"
            if why is None and kw.get("head_first"):
                why = "head_first=True"
            chunk = kw.get("chunk_size", 64)
            if why is None:
                try:
                    self.library._spec(self.library._prefill_want(
                        rule, q.dtype, q.shape[-1], v.shape[-1],
                        use_gate_in_kernel=bool(kw.get("use_gate_in_kernel")),
                        use_beta_sigmoid_in_kernel=bool(kw.get("use_beta_sigmoid_in_kernel")),
                        allow_neg_eigval=bool(kw.get("allow_neg_eigval")),
                        use_qk_l2norm_in_kernel=bool(kw.get("use_qk_l2norm_in_kernel")),
                        state_v_first=bool(kw.get("state_v_first") or
                                           kw.get("transpose_state_layout")),
                        chunk=None if chunk == 64 else chunk,
                        intermediate=bool(kw.get("return_intermediate_states")), fn=fn))
                except ValueError as e:
                    why = str(e)
            return self._refuse(fn, why) if why else (True, None)

        def _run(self, fn, *args, **kwargs):
            result = getattr(self.library, fn)(*args, **kwargs)
            self.served[fn] = self.served.get(fn, 0) + 1
            return result

        # ---------------------------------------- chunk_gated_delta_rule
        def chunk_gated_delta_rule_verifier(self, q, k, v, g, beta, scale=None,
                                            initial_state=None, output_final_state=False,
                                            use_qk_l2norm_in_kernel=False,
                                            use_beta_sigmoid_in_kernel=False,
                                            allow_neg_eigval=False, state_v_first=False,
                                            cu_seqlens=None, cu_seqlens_cpu=None,
                                            chunk_indices=None, cp_context=None, **kwargs):
            kw = dict(kwargs, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                      use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                      allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
                      cp_context=cp_context)
            return self._prefill_verifier("chunk_gated_delta_rule", "gated", q, k, v, g, beta,
                                          initial_state, kw)

        def chunk_gated_delta_rule(self, *args, **kwargs):
            return self._run("chunk_gated_delta_rule", *args, **kwargs)

        # ----------------------------------------------------- chunk_kda
        def chunk_kda_verifier(self, q, k, v, g, beta, scale=None, initial_state=None,
                               output_final_state=False, use_qk_l2norm_in_kernel=False,
                               use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                               allow_neg_eigval=False, safe_gate=False, lower_bound=None,
                               disable_recompute=False, return_intermediate_states=False,
                               state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                               cp_context=None, **kwargs):
            kw = dict(kwargs, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                      use_gate_in_kernel=use_gate_in_kernel,
                      use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                      allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
                      return_intermediate_states=return_intermediate_states,
                      cp_context=cp_context)
            return self._prefill_verifier("chunk_kda", "kda", q, k, v, g, beta, initial_state,
                                          kw)

        def chunk_kda(self, *args, **kwargs):
            return self._run("chunk_kda", *args, **kwargs)

        # ------------------------------------- fused_recurrent_kda_fwd
        def fused_recurrent_kda_fwd_verifier(
                self, q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None,
                scale=None, output_final_state=False, inplace_final_state=True,
                state_v_first=False, cu_seqlens=None, ssm_state_indices=None,
                num_accepted_tokens=None, use_qk_l2norm_in_kernel=False,
                use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                allow_neg_eigval=False, lower_bound=None, out=None, **kwargs):
            fn = "fused_recurrent_kda_fwd"
            why = self._common(fn, q, k, v, (g, beta, initial_state, A_log, dt_bias))
            if why is None and kwargs:
                why = f"keywords: {sorted(kwargs)}"
            if why is None and (ssm_state_indices is not None or num_accepted_tokens is not None):
                why = "vLLM's ssm_state_indices / num_accepted_tokens pool form"
            if why is None and inplace_final_state and (
                    initial_state is None or initial_state.dtype != torch.float32
                    or not initial_state.is_contiguous()):
                why = "inplace_final_state needs a contiguous f32 initial_state"
            if why is None:
                try:
                    spec = self.library._spec(self.library._decode_want(
                        "kda", q.dtype, q.shape[-1], v.shape[-1],
                        use_gate_in_kernel=use_gate_in_kernel,
                        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                        allow_neg_eigval=allow_neg_eigval,
                        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                        state_v_first=state_v_first, per_value=beta.dim() == 4))
                    # With cu_seqlens the rows' lengths live on the GPU: only
                    # a call whose tokens all fit max_t is sure to fit.
                    if q.shape[1] > spec["max_t"]:
                        why = (f"{q.shape[1]} tokens a {'call' if cu_seqlens is not None else 'row'}"
                               f" exceed max_t = {spec['max_t']}")
                except ValueError as e:
                    why = str(e)
            return self._refuse(fn, why) if why else (True, None)

        def fused_recurrent_kda_fwd(self, q, k, v, g, beta, A_log=None, dt_bias=None,
                                    initial_state=None, scale=None, output_final_state=False,
                                    inplace_final_state=True, state_v_first=False,
                                    cu_seqlens=None, ssm_state_indices=None,
                                    num_accepted_tokens=None, use_qk_l2norm_in_kernel=False,
                                    use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                                    allow_neg_eigval=False, lower_bound=None, out=None,
                                    **kwargs):
            # In place: the final state overwrites initial_state (FLA returns it).
            return self._run(
                "fused_recurrent_kda", q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state or inplace_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                use_gate_in_kernel=use_gate_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                state_v_first=state_v_first, cu_seqlens=cu_seqlens, output=out,
                output_state=initial_state if inplace_final_state else None)

    return DeltacBackend


def register(library):
    """Registers a backend serving `library` (a deltac_torch.Library) on
    FLA's gated_delta_rule and kda registries; returns it."""
    from fla.ops.backends import BackendRegistry
    backend = _backend_class()(library)
    for operation in ("gated_delta_rule", "kda"):
        BackendRegistry.ensure_initialized(operation)
        BackendRegistry._registries[operation].register(backend)
    return backend


def unregister(backend):
    """Takes `backend` off FLA's registries again."""
    from fla.ops.backends import BackendRegistry
    for operation in ("gated_delta_rule", "kda"):
        registry = BackendRegistry._registries.get(operation)
        if registry is not None and registry._backends.get(backend.backend_type) is backend:
            with registry._lock:
                del registry._backends[backend.backend_type]
                registry._update_active_backend()
