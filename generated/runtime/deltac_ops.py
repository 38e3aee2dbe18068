"""deltac_ops - the torch custom ops of a generated deltac library.

torch.compile cannot trace the ctypes calls of deltac_torch.py: a compiled
function calling them would break its graph there, and CUDA graphs
(mode="reduce-overhead") could not capture the region. register(library)
defines the library's entry points as torch.library custom ops (torch >=
2.4) in the namespace deltac_<library>, so two libraries never clash:

  prefill(fn, ...) -> (o, final_state)     chunk_gated_delta_rule, chunk_kda,
                                           chunk_delta_rule
  prefill_pool(fn, ..., initial_state!) -> o
                                           the same with state indices: the
                                           pool is updated in place
  recurrent(fn, ...) -> (o, final_state)   fused_recurrent_gated_delta_rule
                                           (and so fused_recurrent_delta_rule),
                                           fused_recurrent_kda
  decode_pool(..., state!, intermediate_states!) -> o
                                           gated_delta_rule_decode

(`!`: declared mutated, as is error_flag everywhere). Each has a fake
implementation that gives its outputs' shapes and dtypes from the inputs'
ones, so T and the number of cu_seqlens rows stay symbolic (one compile
for every step), and a final state not asked for is an empty tensor the
wrapper turns back into None. `fn` names the public function the op's
real implementation calls: the eager path, with all its checks.

The Library's public functions are wrapped by `traced`: while torch.compile
traces them they call the op; otherwise they run as before, with no
dispatcher in between. Inside a compiled region the arguments no op
carries raise ValueError naming themselves: cp_context, the state
checkpoints (return_intermediate_states, state_checkpoints, ...), output=
/ output_state= (the compiler owns the buffers) and the deprecated
transpose_state_layout. Everything else is checked when the op runs.
"""
import functools
import inspect
from typing import Optional, Tuple

import torch

Tensor = torch.Tensor

# Public function -> the op that carries it under torch.compile, and the
# arguments (default None / False / 0) no op carries.
_CHECKPOINTS = ("return_intermediate_states", "intermediate_states_dtype",
                "state_checkpoints", "checkpoint_cu_starts", "checkpoint_every_n_tokens")
_ROUTES = {
    "chunk_gated_delta_rule": ("prefill", ("cp_context", "output", "output_state",
                                           "transpose_state_layout") + _CHECKPOINTS),
    "chunk_delta_rule": ("prefill", ("cp_context", "output", "output_state") + _CHECKPOINTS),
    "chunk_kda": ("prefill", ("cp_context", "output", "output_state",
                              "transpose_state_layout") + _CHECKPOINTS),
    "fused_recurrent_gated_delta_rule": ("recurrent", ("output", "output_state",
                                                       "transpose_state_layout")),
    "fused_recurrent_kda": ("recurrent", ("output", "output_state", "transpose_state_layout")),
    "gated_delta_rule_decode": ("decode_pool", ()),
}
_RULES = {"chunk_gated_delta_rule": "gated", "chunk_delta_rule": "delta", "chunk_kda": "kda"}
# Arguments a public function takes that cannot change its result.
_IGNORED = ("chunk_indices", "disable_recompute")


def available():
    """torch.library.custom_op (torch >= 2.4) and torch.compiler exist."""
    return hasattr(torch.library, "custom_op") and hasattr(torch, "compiler")


def traced(method):
    """Wraps a Library method: under torch.compile it calls the method's
    custom op (registered by register()), otherwise the method itself."""
    if not available():
        return method
    fn = method.__name__
    params = inspect.signature(method).parameters
    names = list(params)[1:]  # without self
    defaults = {n: p.default for n, p in params.items()
                if p.default is not inspect.Parameter.empty}
    required = [n for n in names if n not in defaults]
    op, refused = _ROUTES[fn]

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if not torch.compiler.is_compiling():
            return method(self, *args, **kwargs)
        if len(args) > len(names):
            raise TypeError(f"{fn}() takes {len(names)} arguments, {len(args)} given")
        kw = dict(defaults)
        for name, value in zip(names, args):
            kw[name] = value
        for name, value in kwargs.items():
            if name not in defaults and name not in required:
                raise TypeError(f"{fn}() got an unexpected keyword argument {name!r}")
            kw[name] = value
        for name in required:
            if name not in kw:
                raise TypeError(f"{fn}() missing required argument {name!r}")
        for name in refused:
            value = kw[name]
            if not (value is None or value is False or (type(value) is int and value == 0)):
                raise ValueError(f"{fn}: {name} is not supported inside torch.compile (call "
                                 f"{fn} outside the compiled region to use it)")
        return getattr(self, "_traced_" + op)(fn, kw)
    return call


def register(library, state_dtype):
    """Defines the custom ops of `library` (a deltac_torch.Library) and
    gives it the _traced_<op> methods `traced` calls. state_dtype(spec)
    is the torch dtype of a spec's state."""
    if not available():
        return
    ns = f"deltac_{library.name}"
    if getattr(library, "_ops_namespace", None) == ns:
        return
    lib = library

    def shape(q, v, cu_seqlens, state_v_first):
        B, T, _, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
        per = (HV, V, K) if state_v_first else (HV, K, V)
        return B, T, HV, K, V, N, per

    takes = {}

    def call_public(fn, args):
        """The public function `fn` (not compiling: its eager path) with
        the op's arguments it takes."""
        method = getattr(lib, fn)
        if fn not in takes:
            takes[fn] = set(inspect.signature(inspect.unwrap(method)).parameters)
        return method(**{n: a for n, a in args.items() if n in takes[fn]})

    # ---------------------------------------------------------- prefill
    @torch.library.custom_op(f"{ns}::prefill", mutates_args=("error_flag",))
    def prefill(fn: str, q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor], beta: Tensor,
                scale: Optional[float], initial_state: Optional[Tensor],
                output_final_state: bool, use_qk_l2norm_in_kernel: bool,
                use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool, state_v_first: bool,
                cu_seqlens: Optional[Tensor], cu_seqlens_cpu: Optional[Tensor],
                use_gate_in_kernel: bool, A_log: Optional[Tensor], dt_bias: Optional[Tensor],
                lower_bound: Optional[float], safe_gate: bool, chunk_size: int,
                head_first: bool, error_flag: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        o, final = call_public(fn, dict(locals()))
        return o, final if final is not None else q.new_empty(0, dtype=torch.float32)

    @prefill.register_fake
    def _(fn, q, k, v, g, beta, scale, initial_state, output_final_state,
          use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
          state_v_first, cu_seqlens, cu_seqlens_cpu, use_gate_in_kernel, A_log, dt_bias,
          lower_bound, safe_gate, chunk_size, head_first, error_flag):
        B, T, HV, K, V, N, per = shape(q, v, cu_seqlens, state_v_first)
        o = q.new_empty((B, T, HV, V))
        if not output_final_state:
            return o, q.new_empty(0, dtype=torch.float32)
        spec = lib._spec(lib._prefill_want(
            _RULES[fn], q.dtype, K, V, use_gate_in_kernel=use_gate_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            state_v_first=state_v_first, chunk=None if chunk_size == 64 else chunk_size, fn=fn))
        return o, q.new_empty((N,) + per, dtype=state_dtype(spec))

    @torch.library.custom_op(f"{ns}::prefill_pool",
                             mutates_args=("initial_state", "error_flag"))
    def prefill_pool(fn: str, q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor],
                     beta: Tensor, scale: Optional[float], initial_state: Tensor,
                     output_final_state: bool, use_qk_l2norm_in_kernel: bool,
                     use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool,
                     state_v_first: bool, cu_seqlens: Optional[Tensor],
                     cu_seqlens_cpu: Optional[Tensor], use_gate_in_kernel: bool,
                     A_log: Optional[Tensor], dt_bias: Optional[Tensor],
                     lower_bound: Optional[float], safe_gate: bool, chunk_size: int,
                     head_first: bool, initial_state_indices: Optional[Tensor],
                     output_state_indices: Optional[Tensor],
                     error_flag: Optional[Tensor]) -> Tensor:
        return call_public(fn, dict(locals()))[0]

    @prefill_pool.register_fake
    def _(fn, q, k, v, g, beta, scale, initial_state, *rest):
        return q.new_empty(tuple(q.shape[:2]) + tuple(v.shape[2:]))

    # ------------------------------------------------------------ decode
    @torch.library.custom_op(f"{ns}::recurrent", mutates_args=("error_flag",))
    def recurrent(fn: str, q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor],
                  gk: Optional[Tensor], gv: Optional[Tensor], beta: Optional[Tensor],
                  scale: Optional[float], initial_state: Optional[Tensor],
                  output_final_state: bool, use_qk_l2norm_in_kernel: bool,
                  use_gate_in_kernel: bool, A_log: Optional[Tensor], dt_bias: Optional[Tensor],
                  use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool,
                  lower_bound: Optional[float], state_v_first: bool,
                  cu_seqlens: Optional[Tensor],
                  error_flag: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        o, final = call_public(fn, dict(locals()))
        return o, final if final is not None else q.new_empty(0, dtype=torch.float32)

    @recurrent.register_fake
    def _(fn, q, k, v, g, gk, gv, beta, scale, initial_state, output_final_state,
          use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias,
          use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first,
          cu_seqlens, error_flag):
        B, T, HV, K, V, N, per = shape(q, v, cu_seqlens, state_v_first)
        # The FLA-named recurrent functions return an f32 final state (as
        # FLA), also where a long call runs the prefill kernels.
        final = (N,) + per if output_final_state else (0,)
        return q.new_empty((B, T, HV, V)), q.new_empty(final, dtype=torch.float32)

    @torch.library.custom_op(f"{ns}::decode_pool",
                             mutates_args=("state", "intermediate_states", "error_flag"))
    def decode_pool(q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, A_log: Tensor,
                    dt_bias: Tensor, state: Tensor, state_indices: Optional[Tensor],
                    output_state_indices: Optional[Tensor], scale: Optional[float],
                    use_qk_l2norm_in_kernel: bool, intermediate_states: Optional[Tensor],
                    disable_state_update: bool, ssm_state_indices: Optional[Tensor],
                    num_accepted_tokens: Optional[Tensor], error_flag: Optional[Tensor],
                    state_v_first: bool, cu_seqlens: Optional[Tensor]) -> Tensor:
        return call_public("gated_delta_rule_decode", dict(locals()))

    @decode_pool.register_fake
    def _(q, k, v, *rest):
        return q.new_empty(tuple(q.shape[:2]) + tuple(v.shape[2:]))

    ops = getattr(torch.ops, ns)

    def traced_prefill(fn, kw):
        pooled = kw.get("initial_state_indices") is not None or \
            kw.get("output_state_indices") is not None
        args = dict(q=kw["q"], k=kw["k"], v=kw["v"], g=kw.get("g"), beta=kw["beta"],
                    scale=kw["scale"], initial_state=kw["initial_state"],
                    output_final_state=bool(kw["output_final_state"]),
                    use_qk_l2norm_in_kernel=bool(kw["use_qk_l2norm_in_kernel"]),
                    use_beta_sigmoid_in_kernel=bool(kw.get("use_beta_sigmoid_in_kernel", False)),
                    allow_neg_eigval=bool(kw.get("allow_neg_eigval", False)),
                    state_v_first=bool(kw.get("state_v_first", False)),
                    cu_seqlens=kw["cu_seqlens"], cu_seqlens_cpu=kw["cu_seqlens_cpu"],
                    use_gate_in_kernel=bool(kw.get("use_gate_in_kernel", False)),
                    A_log=kw.get("A_log"), dt_bias=kw.get("dt_bias"),
                    lower_bound=kw.get("lower_bound"),
                    safe_gate=bool(kw.get("safe_gate", False)),
                    chunk_size=int(kw["chunk_size"]),
                    head_first=bool(kw.get("head_first", False)),
                    error_flag=kw["error_flag"])
        if not pooled:
            o, final = ops.prefill(fn, **args)
            return o, final if args["output_final_state"] else None
        if args["initial_state"] is None:
            raise ValueError("initial_state_indices need initial_state (the pool)")
        o = ops.prefill_pool(fn, initial_state_indices=kw["initial_state_indices"],
                             output_state_indices=kw["output_state_indices"], **args)
        return o, args["initial_state"] if args["output_final_state"] else None

    def traced_recurrent(fn, kw):
        kda = fn == "fused_recurrent_kda"
        o, final = ops.recurrent(
            fn, q=kw["q"], k=kw["k"], v=kw["v"], g=kw["g"], gk=None if kda else kw["gk"],
            gv=kw["gv"], beta=kw["beta"], scale=kw["scale"],
            initial_state=kw["initial_state"],
            output_final_state=bool(kw["output_final_state"]),
            use_qk_l2norm_in_kernel=bool(kw["use_qk_l2norm_in_kernel"]),
            use_gate_in_kernel=bool(kw["use_gate_in_kernel"]), A_log=kw["A_log"],
            dt_bias=kw["dt_bias"],
            use_beta_sigmoid_in_kernel=bool(kw["use_beta_sigmoid_in_kernel"]),
            allow_neg_eigval=bool(kw["allow_neg_eigval"]),
            lower_bound=kw["lower_bound"] if kda else None,
            state_v_first=bool(kw["state_v_first"]), cu_seqlens=kw["cu_seqlens"],
            error_flag=kw["error_flag"])
        return o, final if kw["output_final_state"] else None

    def traced_decode_pool(fn, kw):
        return ops.decode_pool(
            kw["q"], kw["k"], kw["v"], kw["a"], kw["b"], kw["A_log"], kw["dt_bias"],
            kw["state"], kw["state_indices"], kw["output_state_indices"], kw["scale"],
            bool(kw["use_qk_l2norm_in_kernel"]), kw["intermediate_states"],
            bool(kw["disable_state_update"]), kw["ssm_state_indices"],
            kw["num_accepted_tokens"], kw["error_flag"], bool(kw["state_v_first"]),
            kw["cu_seqlens"])

    library._traced_prefill = traced_prefill
    library._traced_recurrent = traced_recurrent
    library._traced_decode_pool = traced_decode_pool
    library._ops_namespace = ns
