"""deltac_torch - torch front end of generated deltac kernel libraries.

Copied verbatim into every generated library beside <lib>.py, which lists
the library's specs and binds the functions below to its shared library
(lib<lib>.so, through its extern "C" API with ctypes). Tensors stay on the
GPU; calls run on torch's current stream, allocate only their outputs, and
can be captured in CUDA graphs.

Argument problems raise ValueError naming the argument; a call no
specialization covers raises ValueError saying which option is missing.
"""
import ctypes
import os

import torch

_DTYPES = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
_NAMES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


class _DecodeArgs(ctypes.Structure):
    # Mirrors deltac_decode_args in deltac_api.h, field for field.
    _fields_ = [
        ("K", ctypes.c_int64), ("V", ctypes.c_int64),
        ("B", ctypes.c_int64), ("T", ctypes.c_int64),
        ("H", ctypes.c_int64), ("HV", ctypes.c_int64),
        ("io_dtype", ctypes.c_int32), ("state_dtype", ctypes.c_int32),
        ("q", ctypes.c_void_p), ("q_stride", ctypes.c_int64),
        ("k", ctypes.c_void_p), ("k_stride", ctypes.c_int64),
        ("v", ctypes.c_void_p), ("v_stride", ctypes.c_int64),
        ("o", ctypes.c_void_p), ("o_stride", ctypes.c_int64),
        ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p),
        ("A_log", ctypes.c_void_p), ("dt_bias", ctypes.c_void_p),
        ("state", ctypes.c_void_p), ("slots", ctypes.c_int64),
        ("initial_state_indices", ctypes.c_void_p),
        ("output_state_indices", ctypes.c_void_p),
        ("step_states", ctypes.c_void_p), ("keep_pool", ctypes.c_int32),
        ("error_flag", ctypes.c_void_p), ("scale", ctypes.c_float),
        ("debug_checks", ctypes.c_int32),
        ("state_indices_2d", ctypes.c_void_p),
        ("state_indices_2d_stride", ctypes.c_int64),
        ("num_accepted_tokens", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
    ]


class _PrefillArgs(ctypes.Structure):
    # Mirrors deltac_prefill_args in deltac_api.h, field for field.
    _fields_ = [
        ("K", ctypes.c_int64), ("V", ctypes.c_int64),
        ("T", ctypes.c_int64), ("N", ctypes.c_int64),
        ("H", ctypes.c_int64), ("HV", ctypes.c_int64),
        ("io_dtype", ctypes.c_int32), ("state_dtype", ctypes.c_int32),
        ("q", ctypes.c_void_p), ("q_stride", ctypes.c_int64),
        ("k", ctypes.c_void_p), ("k_stride", ctypes.c_int64),
        ("v", ctypes.c_void_p), ("v_stride", ctypes.c_int64),
        ("o", ctypes.c_void_p), ("o_stride", ctypes.c_int64),
        ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p),
        ("A_log", ctypes.c_void_p), ("dt_bias", ctypes.c_void_p),
        ("initial_state", ctypes.c_void_p), ("final_state", ctypes.c_void_p),
        ("slots", ctypes.c_int64),
        ("initial_state_indices", ctypes.c_void_p),
        ("output_state_indices", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p), ("cu_seqlens_i64", ctypes.c_int32),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64),
        ("error_flag", ctypes.c_void_p), ("scale", ctypes.c_float),
        ("debug_checks", ctypes.c_int32), ("max_seqlen", ctypes.c_int64),
    ]


def _ptr(t):
    return None if t is None else t.data_ptr()


def _check_cuda(name, t, device):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, expected {device} (the device of q)")


def _check_gpu_q(q):
    if not isinstance(q, torch.Tensor) or not q.is_cuda:
        raise ValueError(f"q must be a CUDA tensor, got {getattr(q, 'device', type(q).__name__)}")
    if q.dim() != 4:
        raise ValueError(f"q must be [B, T, H, K], got shape {tuple(q.shape)}")


def _token_major(name, t, B, T, heads, dim):
    """A [B, T, heads, dim] tensor whose tokens are evenly spaced rows of
    contiguous heads (a view of a fused projection qualifies): returns
    (tensor, token stride in elements), copying only when no token stride
    describes the layout or it breaks 16-byte alignment."""
    if tuple(t.shape) != (B, T, heads, dim):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {(B, T, heads, dim)}")
    s = t.stride()
    if T > 1:
        stride, even = s[1], B == 1 or s[0] == T * s[1]
    else:
        stride, even = (s[0] if B > 1 else heads * dim), True
    if (s[3] == 1 and s[2] == dim and even and stride >= heads * dim
            and stride * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0):
        return t, stride
    return t.contiguous(), heads * dim


class Library:
    """The specs of one generated library and its shared object."""

    def __init__(self, name, specs, module_file):
        self.name = name
        self.specs = specs
        self._dir = os.path.dirname(os.path.abspath(module_file))
        self._lib = None

    # ------------------------------------------------------------------ load
    def load(self, path=None):
        """Opens lib<name>.so: `path`, $DELTAC_<NAME>_LIB, or beside <name>.py."""
        if self._lib is not None and path is None:
            return self._lib
        path = path or os.environ.get(f"DELTAC_{self.name.upper()}_LIB") or \
            os.path.join(self._dir, f"lib{self.name}.so")
        if not os.path.exists(path):
            raise ValueError(f"cannot find the {self.name} library at {path}; build it "
                             f"(its CMakeLists.txt) and pass its path to load() or set "
                             f"DELTAC_{self.name.upper()}_LIB")
        lib = ctypes.CDLL(path)
        # lib[name] makes a new function object each time: keep this one.
        self._last_error = lib[f"{self.name}_last_error"]
        self._last_error.restype = ctypes.c_char_p
        self._lib = lib
        return lib

    # -------------------------------------------------------------- dispatch
    def _spec(self, want):
        """The first spec matching every key of `want`; else ValueError
        naming the closest spec's first mismatch."""
        best, best_score = None, -1
        for spec in self.specs:
            mismatch = [k for k, v in want.items() if k not in ("dims", "entry") and spec[k] != v]
            if want.get("entry", "decode") not in spec.get("entries", ["decode"]):
                mismatch.append("entries")
            dims_ok = want["dims"] in spec["dims"]
            if not mismatch and dims_ok:
                return spec
            score = len(want) - len(mismatch) - (0 if dims_ok else 1)
            if score > best_score:
                best, best_score = (spec, mismatch, dims_ok), score
        spec, mismatch, dims_ok = best
        what = ", ".join(f"entry {want.get('entry', 'decode')!r} (spec @{spec['name']} has "
                         f"{spec.get('entries')!r})" if k == "entries" else
                         f"{k}={want[k]!r} (spec @{spec['name']} has {spec[k]!r})" for k in mismatch)
        if not dims_ok:
            what = (what + ", " if what else "") + \
                f"K x V = {want['dims']} (available: {sorted({d for s in self.specs for d in s['dims']})})"
        raise ValueError(f"no specialization of {self.name} covers this call: {what}")

    def _call(self, spec, a, entry="decode"):
        lib = self.load()
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = lib[f"{self.name}_{spec['name']}_{entry}"](ctypes.byref(a), stream)
        if rc != 0:
            msg = self._last_error().decode()
            if rc in (1, 2):
                raise ValueError(msg)
            raise RuntimeError(msg)

    def _decode(self, spec, q, k, v, o, state, g, beta, scale, A_log=None, dt_bias=None,
                in_idx=None, out_idx=None, steps=None, keep_pool=False, idx2d=None,
                accepted=None, error_flag=None, cu=None):
        """cu: int32 cu_seqlens [N + 1] (q is then [1, tokens, H, K] and the
        call has N rows), or None."""
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        q, qs = _token_major("q", q, B, T, H, K)
        k, ks = _token_major("k", k, B, T, H, K)
        v, vs = _token_major("v", v, B, T, HV, V)
        a = _DecodeArgs()
        a.K, a.V, a.H, a.HV = K, V, H, HV
        a.B, a.T = (B, T) if cu is None else (cu.numel() - 1, T)
        a.cu_seqlens = _ptr(cu)
        a.debug_checks = int(_debug_checks())
        a.io_dtype, a.state_dtype = _DTYPES[q.dtype], _DTYPES[state.dtype]
        a.q, a.q_stride, a.k, a.k_stride = _ptr(q), qs, _ptr(k), ks
        a.v, a.v_stride, a.o, a.o_stride = _ptr(v), vs, _ptr(o), HV * V
        a.g, a.beta = _ptr(g), _ptr(beta)
        a.A_log, a.dt_bias = _ptr(A_log), _ptr(dt_bias)
        a.state, a.slots = _ptr(state), state.shape[0]
        a.initial_state_indices, a.output_state_indices = _ptr(in_idx), _ptr(out_idx)
        a.step_states, a.keep_pool = _ptr(steps), int(keep_pool)
        a.state_indices_2d = _ptr(idx2d)
        a.state_indices_2d_stride = 0 if idx2d is None else idx2d.stride(0)
        a.num_accepted_tokens = _ptr(accepted)
        a.error_flag = _ptr(error_flag)
        a.scale = float(K ** -0.5 if scale is None else scale)
        self._call(spec, a)

    # ------------------------------------------------------------- FLA API
    def fused_recurrent_gated_delta_rule(self, q, k, v, g=None, beta=None, scale=None,
                                         initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False, cu_seqlens=None,
                                         state_v_first=False, error_flag=None, **kwargs):
        """flash-linear-attention's fused_recurrent_gated_delta_rule. T <=
        max_t of the library's specs runs the decode kernel; a longer [B, T]
        batch runs the chunked prefill kernels when the library has a
        prefill spec for the same options (else ValueError). Returns
        (o, final_state or None); the state layout is [N, HV, K, V], or
        [N, HV, V, K] with state_v_first=True. With cu_seqlens (int32/int64
        [N + 1] on the GPU) q is [1, tokens, H, K] holding N sequences of
        0..max_t tokens each; the kernel checks cu_seqlens and skips a bad
        sequence (no o, no state), setting error_flag (int32 [1], optional)
        to 1; DELTAC_DEBUG_CHECKS=1 checks it on the host first (and
        synchronises). Arguments FLA accepts that carry no meaning here are
        ignored."""
        _check_gpu_q(q)
        for name, t in (("k", k), ("v", v), ("g", g)):
            _check_cuda(name, t, q.device)
        if q.dim() != 4 or v.dim() != 4:
            raise ValueError(f"q and v must be [B, T, heads, dim], got {tuple(q.shape)} and {tuple(v.shape)}")
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        cu = _cu_seqlens(cu_seqlens, B, q.device)
        N = B if cu is None else cu.numel() - 1
        if HV % H:
            raise ValueError(f"v has HV = {HV} heads, not a multiple of H = {H}")
        if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
            raise ValueError(f"q, k, v must share one dtype of bf16/f16/f32, got {q.dtype}, {k.dtype}, {v.dtype}")
        want = {"gate": "log", "beta": "given", "l2norm": bool(use_qk_l2norm_in_kernel),
                "io": _name(q.dtype), "state": "f32",
                "layout": "vk" if state_v_first else "kv", "dims": (K, V)}
        spec = self._spec(want)
        if beta is None:
            beta = torch.ones(B, T, HV, dtype=q.dtype, device=q.device)
        if T > spec["max_t"] and cu is None:
            # FLA's fused_recurrent takes any T: a library with a prefill
            # entry for these options computes it chunked (same result
            # within rounding, far faster than token by token).
            try:
                self._spec(dict(want, entry="prefill"))
            except ValueError:
                raise ValueError(f"T = {T} exceeds max_t = {spec['max_t']} of spec "
                                 f"@{spec['name']} and no prefill spec covers the call")
            return self.chunk_gated_delta_rule(
                q, k, v, g, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, state_v_first=state_v_first)
        if tuple(g.shape) != (B, T, HV):
            raise ValueError(f"g has shape {tuple(g.shape)}, expected {(B, T, HV)}")
        g = g.to(torch.float32).contiguous()
        _check_cuda("beta", beta, q.device)
        if tuple(beta.shape) != (B, T, HV):
            raise ValueError(f"beta has shape {tuple(beta.shape)}, expected {(B, T, HV)}")
        beta = beta.to(q.dtype).contiguous()  # read in the io dtype, never clamped
        shape = (N, HV, V, K) if state_v_first else (N, HV, K, V)
        if initial_state is None:
            state = torch.zeros(shape, dtype=torch.float32, device=q.device)
        else:
            _check_cuda("initial_state", initial_state, q.device)
            if tuple(initial_state.shape) != shape:
                raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}, expected {shape}")
            state = initial_state.to(torch.float32).clone()
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        if error_flag is not None:
            _check_flag(error_flag, q.device)
        self._decode(spec, q, k, v, o, state, g, beta, scale, error_flag=error_flag, cu=cu)
        return o, (state if output_final_state else None)

    # ------------------------------------------------------------- prefill
    def chunk_gated_delta_rule(self, q, k, v, g, beta, scale=None, initial_state=None,
                               output_final_state=False, use_qk_l2norm_in_kernel=False,
                               use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                               state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                               chunk_indices=None, use_gate_in_kernel=False, A_log=None,
                               dt_bias=None, initial_state_indices=None,
                               output_state_indices=None, error_flag=None, **kwargs):
        """flash-linear-attention's chunk_gated_delta_rule: q, k [1 or B, T, H, K],
        v [.., T, HV, V], g [.., T, HV] log decays (or the raw `a` with
        use_gate_in_kernel, A_log, dt_bias), beta [.., T, HV] (logits with
        use_beta_sigmoid_in_kernel; 2 * sigmoid with allow_neg_eigval).
        cu_seqlens [N + 1] (int32/int64, on the GPU) packs N sequences in
        B = 1; it is never copied to the host. cu_seqlens_cpu, its host
        copy where the caller has one, only tells the dispatch the longest
        sequence (chunk_indices is accepted and ignored). States are [N, HV, K, V],
        or [N, HV, V, K] with state_v_first. With initial_state_indices
        (int32 [N]), initial_state is a pool [slots, ...] read by index and,
        with output_final_state, updated in place at output_state_indices
        (default: the rows read); the call then returns (o, the pool).
        error_flag (int32 [1]) receives the kernels' device check. Returns
        (o, final_state or None)."""
        return self._prefill(
            "gated", q, k, v, g, beta, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
            cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
            use_gate_in_kernel=use_gate_in_kernel, A_log=A_log, dt_bias=dt_bias,
            initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices, error_flag=error_flag)

    def chunk_kda(self, q, k, v, g, beta, scale=None, initial_state=None,
                  output_final_state=False, use_qk_l2norm_in_kernel=False,
                  use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, safe_gate=False, lower_bound=None,
                  disable_recompute=False, return_intermediate_states=False,
                  state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, A_log=None,
                  dt_bias=None, initial_state_indices=None, output_state_indices=None,
                  error_flag=None, **kwargs):
        """flash-linear-attention's chunk_kda (Kimi Delta Attention): as
        chunk_gated_delta_rule, but with decays per key channel: g [.., T, HV,
        K] log decays, or with use_gate_in_kernel the raw `a` of
        -exp(A_log) * softplus(a + dt_bias), A_log [HV] and dt_bias [HV * K].
        Not supported (ValueError): safe_gate / lower_bound (FLA's clamped
        gate form), return_intermediate_states, a context-parallel cp_context.
        disable_recompute (a training option) is accepted and ignored."""
        if safe_gate or lower_bound is not None:
            raise ValueError("chunk_kda: safe_gate / lower_bound (the clamped gate form) are "
                             "not supported; pass the log decays (or the softplus raw form)")
        if return_intermediate_states:
            raise ValueError("chunk_kda: return_intermediate_states is not supported")
        if kwargs.get("cp_context") is not None:
            raise ValueError("chunk_kda: cp_context (context parallelism) is not supported")
        return self._prefill(
            "kda", q, k, v, g, beta, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
            cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
            use_gate_in_kernel=use_gate_in_kernel, A_log=A_log, dt_bias=dt_bias,
            initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices, error_flag=error_flag)

    def _prefill(self, rule, q, k, v, g, beta, *, scale, initial_state, output_final_state,
                 use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                 state_v_first, cu_seqlens, cu_seqlens_cpu, use_gate_in_kernel, A_log,
                 dt_bias, initial_state_indices, output_state_indices, error_flag):
        """The prefill call of chunk_gated_delta_rule (rule "gated": a decay
        per token and head) and chunk_kda (rule "kda": per key channel)."""
        _check_gpu_q(q)
        for name, t in (("k", k), ("v", v), ("g", g), ("beta", beta)):
            _check_cuda(name, t, q.device)
        if v.dim() != 4:
            raise ValueError(f"v must be [B, T, HV, V], got shape {tuple(v.shape)}")
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        if HV % H:
            raise ValueError(f"v has HV = {HV} heads, not a multiple of H = {H}")
        if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
            raise ValueError(f"q, k, v must share one dtype of bf16/f16/f32, got {q.dtype}, {k.dtype}, {v.dtype}")
        raw = bool(use_gate_in_kernel)
        kda = rule == "kda"
        sigmoid = bool(use_beta_sigmoid_in_kernel) or bool(allow_neg_eigval)
        gate = "raw" if raw else "log"
        want = {"entry": "prefill", "rule": rule, "gate": "channel_" + gate if kda else gate,
                "beta": ("sigmoid2" if allow_neg_eigval else "sigmoid") if sigmoid else "given",
                "l2norm": bool(use_qk_l2norm_in_kernel), "io": _name(q.dtype),
                "layout": "vk" if state_v_first else "kv", "dims": (K, V)}
        if (initial_state_indices is not None or output_state_indices is not None) \
                and isinstance(initial_state, torch.Tensor):
            want["state"] = _name(initial_state.dtype)  # a pool is used in place
        spec = self._spec(want)
        cu = _cu_seqlens(cu_seqlens, B, q.device, as_int32=False)  # int64 is read as is
        N = B if cu is None else cu.numel() - 1
        max_seqlen = T if cu is None else 0  # 0: unknown
        if cu is not None and cu_seqlens_cpu is not None:
            cpu = torch.as_tensor(cu_seqlens_cpu)
            if cpu.device.type != "cpu" or tuple(cpu.shape) != (N + 1,):
                raise ValueError(f"cu_seqlens_cpu must be cu_seqlens' host copy, [{N + 1}] on the "
                                 f"CPU, got {tuple(cpu.shape)} on {cpu.device}")
            max_seqlen = int((cpu[1:] - cpu[:-1]).max()) if N > 0 else 0
        q, qs = _token_major("q", q, B, T, H, K)
        k, ks = _token_major("k", k, B, T, H, K)
        v, vs = _token_major("v", v, B, T, HV, V)
        gdt = q.dtype if raw else torch.float32
        gshape = (B, T, HV, K) if kda else (B, T, HV)
        if tuple(g.shape) != gshape:
            raise ValueError(f"g has shape {tuple(g.shape)}, expected {gshape}")
        g = g.to(gdt).contiguous()
        if tuple(beta.shape) != (B, T, HV):
            raise ValueError(f"beta has shape {tuple(beta.shape)}, expected {(B, T, HV)}")
        beta = beta.to(q.dtype).contiguous()  # read in the io dtype, never clamped
        if raw:
            for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
                if t is None:
                    raise ValueError(f"{name} is needed with use_gate_in_kernel")
                _check_cuda(name, t, q.device)
                n = HV * K if kda and name == "dt_bias" else HV
                if t.numel() != n or (t.dim() != 1 and not (kda and tuple(t.shape) == (HV, K))):
                    raise ValueError(f"{name} must be [{n}], got {tuple(t.shape)}")
            A_log, dt_bias = A_log.to(torch.float32).contiguous(), dt_bias.to(torch.float32).contiguous()
        sdt = _NAMES[spec["state"]]
        per = (HV, V, K) if state_v_first else (HV, K, V)
        in_idx = None if initial_state_indices is None else \
            _index("initial_state_indices", initial_state_indices, (N,), q.device)
        out_idx = None if output_state_indices is None else \
            _index("output_state_indices", output_state_indices, (N,), q.device)
        pooled = in_idx is not None or out_idx is not None
        if initial_state is not None:
            _check_cuda("initial_state", initial_state, q.device)
            rows = initial_state.shape[0] if pooled else N
            if initial_state.dim() != 4 or tuple(initial_state.shape) != (rows,) + per:
                raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}, "
                                 f"expected {(rows,) + per}")
            if pooled and (initial_state.dtype != sdt or not initial_state.is_contiguous()):
                raise ValueError(f"a state pool must be contiguous {sdt}")
            if not pooled:
                initial_state = initial_state.to(sdt).contiguous()
        elif pooled:
            raise ValueError("initial_state_indices need initial_state (the pool)")
        if pooled:
            final = initial_state if output_final_state else None
        else:
            final = torch.empty((N,) + per, dtype=sdt, device=q.device) if output_final_state else None
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        lib = self.load()
        size = lib[f"{self.name}_{spec['name']}_prefill_workspace_bytes"]
        size.restype = ctypes.c_int64
        size.argtypes = [ctypes.c_int64] * 5
        work = torch.empty(max(size(K, V, B * T, N, HV), 16), dtype=torch.uint8, device=q.device)
        if error_flag is not None:
            _check_flag(error_flag, q.device)
        flag = error_flag if error_flag is not None else torch.zeros(1, dtype=torch.int32, device=q.device)
        a = _PrefillArgs()
        a.K, a.V, a.T, a.N, a.H, a.HV = K, V, B * T, N, H, HV
        a.io_dtype, a.state_dtype = _DTYPES[q.dtype], _DTYPES[sdt]
        a.q, a.q_stride, a.k, a.k_stride = _ptr(q), qs, _ptr(k), ks
        a.v, a.v_stride, a.o, a.o_stride = _ptr(v), vs, _ptr(o), HV * V
        a.g, a.beta = _ptr(g), _ptr(beta)
        a.A_log, a.dt_bias = _ptr(A_log if raw else None), _ptr(dt_bias if raw else None)
        a.initial_state, a.final_state = _ptr(initial_state), _ptr(final)
        a.slots = initial_state.shape[0] if pooled else N
        a.initial_state_indices, a.output_state_indices = _ptr(in_idx), _ptr(out_idx)
        a.cu_seqlens = _ptr(cu)
        a.cu_seqlens_i64 = int(cu is not None and cu.dtype == torch.int64)
        a.workspace, a.workspace_bytes = work.data_ptr(), work.numel()
        a.error_flag = flag.data_ptr()
        a.scale = float(K ** -0.5 if scale is None else scale)
        a.debug_checks = int(_debug_checks())
        a.max_seqlen = max_seqlen
        self._call(spec, a, entry="prefill")
        return o, final

    # ------------------------------------------------------- serving decode
    def gated_delta_rule_decode(self, q, k, v, a, b, A_log, dt_bias, state,
                                state_indices=None, output_state_indices=None, scale=None,
                                use_qk_l2norm_in_kernel=True, intermediate_states=None,
                                disable_state_update=False, ssm_state_indices=None,
                                num_accepted_tokens=None, error_flag=None, state_v_first=True,
                                cu_seqlens=None):
        """Pool-indexed decode as vLLM / SGLang / FlashInfer call it: raw `a`
        and `b` projections with A_log and dt_bias, a state pool
        [slots, HV, V, K] (state_v_first, the default) or [slots, HV, K, V].
        state_indices [B] picks each row's slot (negative: padding, o = 0),
        output_state_indices [B] a separate slot to write (split pool);
        intermediate_states [B, T, HV, ...] receives every step's state and
        disable_state_update leaves the pool unchanged (SGLang);
        ssm_state_indices [B, T] with num_accepted_tokens [B] is vLLM's
        speculative form. With cu_seqlens (int32/int64 [N + 1], vLLM's
        query_start_loc) q is [1, tokens, H, K] holding N rows of 0..max_t
        tokens, the indices are per row ([N], [N, S]) and intermediate_states
        is [1, tokens, HV, ...]. error_flag (int32 [1]) is set to 1 by the
        kernel on an index >= slots or a bad cu_seqlens row (skipped).
        Returns o [B, T, HV, V]."""
        _check_gpu_q(q)
        for name, t in (("k", k), ("v", v), ("a", a), ("b", b), ("A_log", A_log),
                        ("dt_bias", dt_bias), ("state", state)):
            _check_cuda(name, t, q.device)
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        spec = self._spec({"gate": "raw", "beta": "sigmoid", "l2norm": bool(use_qk_l2norm_in_kernel),
                           "io": _name(q.dtype), "state": _name(state.dtype),
                           "layout": "vk" if state_v_first else "kv", "dims": (K, V)})
        cu = _cu_seqlens(cu_seqlens, B, q.device)
        N = B if cu is None else cu.numel() - 1
        if T > spec["max_t"] and cu is None:
            raise ValueError(f"T = {T} exceeds max_t = {spec['max_t']} of spec @{spec['name']}")
        per = (HV, V, K) if state_v_first else (HV, K, V)
        if state.dim() != 4 or tuple(state.shape[1:]) != per or not state.is_contiguous():
            raise ValueError(f"state must be a contiguous pool [slots, {', '.join(map(str, per))}], "
                             f"got {tuple(state.shape)}")
        for name, t in (("a", a), ("b", b)):
            if tuple(t.shape) != (B, T, HV) or t.dtype != q.dtype:
                raise ValueError(f"{name} must be [{B}, {T}, {HV}] in {q.dtype}, got "
                                 f"{tuple(t.shape)} {t.dtype}")
        for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
            if tuple(t.shape) != (HV,):
                raise ValueError(f"{name} must be [{HV}], got {tuple(t.shape)}")
        idx = lambda name, t, shape: None if t is None else _index(name, t, shape, q.device)
        in_idx = idx("state_indices", state_indices, (N,))
        out_idx = idx("output_state_indices", output_state_indices, (N,))
        idx2d = idx("ssm_state_indices", ssm_state_indices, (N, None))
        accepted = idx("num_accepted_tokens", num_accepted_tokens, (N,))
        if intermediate_states is not None:
            _check_cuda("intermediate_states", intermediate_states, q.device)
            want = (B, T) + per
            if tuple(intermediate_states.shape) != want or intermediate_states.dtype != state.dtype \
                    or not intermediate_states.is_contiguous():
                raise ValueError(f"intermediate_states must be contiguous {want} in {state.dtype}")
        if disable_state_update and intermediate_states is None:
            raise ValueError("disable_state_update needs intermediate_states")
        if error_flag is not None:
            _check_flag(error_flag, q.device)
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        self._decode(spec, q, k, v, o, state, a.contiguous(), b.contiguous(), scale,
                     A_log.to(torch.float32).contiguous(), dt_bias.to(torch.float32).contiguous(),
                     in_idx, out_idx, intermediate_states, disable_state_update, idx2d, accepted,
                     error_flag, cu)
        return o


def _name(dtype):
    for n, d in _NAMES.items():
        if d == dtype:
            return n
    raise ValueError(f"unsupported dtype {dtype}; use bf16, f16 or f32")


def _debug_checks():
    """DELTAC_DEBUG_CHECKS=1: the library copies device-resident indices and
    cu_seqlens to the host and checks them before launching (synchronises,
    so not inside CUDA graph capture)."""
    return os.environ.get("DELTAC_DEBUG_CHECKS", "0") not in ("", "0")


def _check_flag(t, device):
    _check_cuda("error_flag", t, device)
    if t.dtype != torch.int32 or t.numel() < 1 or not t.is_contiguous():
        raise ValueError(f"error_flag must be a contiguous int32 tensor, got "
                         f"{tuple(t.shape)} {t.dtype}")


def _cu_seqlens(cu_seqlens, B, device, as_int32=True):
    """Validates cu_seqlens [N + 1] (int32/int64, on q's device) and returns
    it contiguous, as int32 with `as_int32` (a device-side cast, never a
    host copy), or None."""
    if cu_seqlens is None:
        return None
    if B != 1:
        raise ValueError(f"cu_seqlens needs B = 1 (sequences packed along T), got B = {B}")
    _check_cuda("cu_seqlens", cu_seqlens, device)
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2 or \
            cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cu_seqlens must be a 1-D int32/int64 tensor of N + 1 >= 2 offsets, "
                         f"got {tuple(cu_seqlens.shape)} {cu_seqlens.dtype}")
    return (cu_seqlens.to(torch.int32) if as_int32 else cu_seqlens).contiguous()


def _index(name, t, shape, device):
    _check_cuda(name, t, device)
    if t.dim() != len(shape) or any(w is not None and s != w for s, w in zip(t.shape, shape)):
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be int32 or int64, got {t.dtype}")
    return t.to(torch.int32).contiguous()
