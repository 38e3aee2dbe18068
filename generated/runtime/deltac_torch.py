"""deltac_torch - torch front end of generated deltac kernel libraries.

Copied verbatim into every generated library beside <lib>.py, which lists
the library's specs and binds the functions below to its shared library
(lib<lib>.so, through its extern "C" API with ctypes). Tensors stay on the
GPU; calls run on torch's current stream, allocate only their outputs, and
can be captured in CUDA graphs.

FLA-named functions (fused_recurrent_gated_delta_rule,
chunk_gated_delta_rule, chunk_kda) take flash-linear-attention's parameters
(FLA_VERSION, below) in FLA's order with FLA's defaults; every keyword FLA
reads from **kwargs is a keyword-only parameter here, and so are deltac's
own extensions (state_v_first's pools, error_flag). An argument FLA gives a
meaning either works as in FLA or, set to anything but FLA's default,
raises ValueError naming it; an unknown keyword raises TypeError.

Errors. Argument problems raise ValueError naming the argument; a call no
specialization covers raises ValueError saying which option is missing.
Values that live on the device (cu_seqlens, state indices,
num_accepted_tokens) are checked by the kernels, never read by the host:
a bad one skips the rows it concerns (prefill: a bad cu_seqlens skips the
whole call) - their o is written as 0, no state is read or written for
them - and sets an int32 flag on the device to a nonzero value. Without
an error_flag argument the flag is this module's own, one per device
(error_flag(device) returns it), and check_errors(device) reads it when
you choose (it synchronises), raises RuntimeError listing the possible
causes for the kinds of call made since the last check, and clears it.
DELTAC_DEBUG_CHECKS=1 makes the library copy those values to the host and
check them before launching: ValueError naming the bad entry, nothing
launched (synchronises every call, so not inside CUDA graph capture).
What a skipped row leaves in the outputs: o = 0 (written by the kernel,
o itself is allocated uninitialised); chunk_gated_delta_rule / chunk_kda's
final state is allocated zeroed, so a skipped sequence's row is 0;
fused_recurrent_gated_delta_rule's final state is written by its one
kernel, a skipped row's as 0; a state pool keeps a skipped row's slots
bit-identical.
"""
import ctypes
import math
import os
import threading
import warnings

import torch

try:  # inside a package (a wheel's deltac_<lib>/), else beside this file
    from . import deltac_ops
except ImportError:
    import deltac_ops

# The flash-linear-attention release whose signatures the FLA-named
# functions copy (tests/gpu/test_python.py compares them with inspect).
FLA_VERSION = "0.5.2"
FLA_COMMIT = "bc3b101dcb713ddc5bd8924b66754eb68b5ccf89"

_DTYPES = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
_NAMES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
_INVALID_ARGUMENT, _UNSUPPORTED = 1, 2  # deltac_api.h's status codes
_BETA_FORMS = {"given": 0, "sigmoid": 1, "sigmoid2": 2}  # deltac_api.h's beta_form


def _by_call(key, has, wants):
    """Whether a spec's `has` for option `key` leaves `wants` to the call."""
    return (key in ("l2norm", "beta") and has == "call") or (key == "gate" and (
        (has == "call" and wants in ("log", "raw")) or
        (has == "channel_call" and wants in ("channel_log", "channel_raw"))))


def _gate_dtype(spec, g, q_dtype, raw):
    """The dtype the kernels read g in: f32 log decays; a raw a in q's
    dtype for a spec with a raw gate, and for a gate by call f32 or q's
    dtype as given (gate_io_dtype), anything else as f32 (exact). A spec
    whose gate is fixed raw reads a only in q's dtype: an a of another
    dtype raises ValueError rather than being rounded on the side (FLA
    reads it as given)."""
    if not raw:
        return torch.float32
    if spec["gate"] in ("call", "channel_call"):
        return g.dtype if g.dtype in (torch.float32, q_dtype) else torch.float32
    if g.dtype != q_dtype:
        raise ValueError(
            f"g (the raw a) is {str(g.dtype).replace('torch.', '')}: spec @{spec['name']} fixes a "
            f"raw gate read in the io dtype {str(q_dtype).replace('torch.', '')}; pass a in q's "
            f"dtype (a.to(q.dtype) rounds it), or use a spec with gate = call, which reads f32")
    return q_dtype


def _gate_io_dtype(spec, g):
    """deltac_api.h's gate_io_dtype: 1 where a gate by call runs raw with
    its a in the io dtype (as _gate_dtype left it), else 0."""
    return int(spec.get("raw_gate", 0) == 1 and g is not None and g.dtype != torch.float32)


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
        ("indices_i64", ctypes.c_int32),
        ("initial_state", ctypes.c_void_p),
        ("initial_state_dtype", ctypes.c_int32),
        ("zero_initial_state", ctypes.c_int32),
        ("slot_stride", ctypes.c_int64),
        ("beta_f32", ctypes.c_int32),
        ("bounded_gate", ctypes.c_int32), ("lower_bound", ctypes.c_float),
        ("gv", ctypes.c_void_p), ("beta_per_value", ctypes.c_int32),
        ("qk_l2norm", ctypes.c_int32), ("beta_form", ctypes.c_int32),
        ("raw_gate", ctypes.c_int32), ("gate_io_dtype", ctypes.c_int32),
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
        ("indices_i64", ctypes.c_int32),
        ("bounded_gate", ctypes.c_int32), ("lower_bound", ctypes.c_float),
        ("slot_stride", ctypes.c_int64),
        ("checkpoints", ctypes.c_void_p), ("checkpoint_rows", ctypes.c_int64),
        ("checkpoint_dtype", ctypes.c_int32), ("checkpoint_starts", ctypes.c_void_p),
        ("checkpoint_every_n_tokens", ctypes.c_int64),
        ("beta_f32", ctypes.c_int32),
        ("cp_phase", ctypes.c_int32), ("cp_transfer", ctypes.c_void_p),
        ("cp_segments", ctypes.c_int32),
        ("qk_l2norm", ctypes.c_int32), ("beta_form", ctypes.c_int32),
        ("raw_gate", ctypes.c_int32), ("gate_io_dtype", ctypes.c_int32),
    ]


# ------------------------------------------------------------ error flag
# The module's own device flags: one int32 per device, allocated on first
# need outside CUDA graph capture and never freed (a captured graph keeps
# its address). _KINDS: the kinds of call that used each since it was last
# checked, for check_errors' message.
_FLAGS = {}
_KINDS = {}
_FLAG_LOCK = threading.Lock()

# What can raise the flag, by kind of call (the flag is one int32: it says
# that something was skipped, not what).
_CAUSES = {
    "prefill": "prefill (chunk_gated_delta_rule, chunk_kda, or fused_recurrent_gated_delta_rule "
               "past max_t): cu_seqlens invalid - cu_seqlens[0] != 0, a decreasing step, or "
               "cu_seqlens[N] > T (the whole call skipped: o = 0 everywhere, no state read or "
               "written) - or an initial_state_indices / output_state_indices entry >= the "
               "pool's slots (that sequence skipped)",
    "decode": "fused_recurrent_gated_delta_rule (decode kernel): cu_seqlens invalid - "
              "cu_seqlens[0] != 0, a decreasing step or cu_seqlens[B] > T (the whole call "
              "skipped: o = 0 everywhere, no state read or written) - or a row longer than "
              "the spec's max_t (that row skipped: o = 0, its state left as it was)",
    "serving": "gated_delta_rule_decode: a state_indices / output_state_indices / "
               "ssm_state_indices entry >= the pool's slots, num_accepted_tokens outside "
               "[1, T] ([1, the 2-D slot stride] with cu_seqlens), a row longer than max_t "
               "(that row skipped: o = 0, no state read or written), or cu_seqlens invalid "
               "(the whole call skipped: o = 0 everywhere)",
}


def _device_index(device):
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise ValueError(f"the error flag lives on a CUDA device, got {device}")
    return torch.cuda.current_device() if d.index is None else d.index


def error_flag(device=None):
    """The module's error flag of `device` (default: the current CUDA
    device): int32 [1] on that device, nonzero once a kernel skipped
    something. Allocated (zeroed) on its first use, which must come outside
    CUDA graph capture: call this (or any deltac function) once before
    capturing, or pass error_flag= yourself. Never freed."""
    i = _device_index(device)
    flag = _FLAGS.get(i)
    if flag is not None:
        return flag
    with _FLAG_LOCK:
        flag = _FLAGS.get(i)
        if flag is None:
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    f"deltac: the error flag of cuda:{i} does not exist yet and cannot be "
                    f"allocated during CUDA graph capture; make one deltac call (or call "
                    f"deltac_torch.error_flag({i})) before capturing, or pass error_flag=")
            flag = torch.zeros(1, dtype=torch.int32, device=torch.device("cuda", i))
            torch.cuda.synchronize(i)  # zeroed before any stream uses it
            _FLAGS[i] = flag
    return flag


def check_errors(device=None):
    """Reads the module's error flag of `device` (synchronises with the
    current stream: call it where the calls to check have been issued on
    that stream or synchronised), clears it, and raises RuntimeError if a
    kernel skipped anything since the last check, listing what can have
    caused it for the kinds of call made since. Calls given their own
    error_flag= do not set this one. Not during CUDA graph capture."""
    i = _device_index(device)
    flag = _FLAGS.get(i)
    if flag is None:
        return  # no call has used it
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("deltac: check_errors reads the flag on the host (synchronises): "
                           "not during CUDA graph capture")
    value = int(flag.item())
    with _FLAG_LOCK:
        kinds = list(_KINDS.pop(i, {}))
    if value == 0:
        return
    flag.zero_()
    causes = "; ".join(_CAUSES[k] for k in kinds) or "; ".join(_CAUSES.values())
    raise RuntimeError(f"deltac: a kernel on cuda:{i} skipped rows it could not compute "
                       f"safely (error flag {value}). Possible causes: {causes}. Set "
                       f"DELTAC_DEBUG_CHECKS=1 to have each call checked on the host and the "
                       f"bad entry named")


def _resolve_flag(error_flag_arg, device, kind):
    """The caller's flag (checked), or the module's flag of `device` with
    `kind` recorded for check_errors."""
    if error_flag_arg is not None:
        _check_flag(error_flag_arg, device)
        return error_flag_arg
    flag = error_flag(device)
    with _FLAG_LOCK:
        _KINDS.setdefault(_device_index(device), {})[kind] = None
    return flag


def _ptr(t):
    return None if t is None else t.data_ptr()


def _check_cuda(name, t, device):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, expected {device} (the device of q)")


def _caller_buffer(name, t, shape, dtype, device, dtype_name=None):
    """A caller-owned output (output= / output_state=): on q's device,
    contiguous, of exactly this shape and dtype."""
    _check_cuda(name, t, device)
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype or not t.is_contiguous():
        raise ValueError(f"{name} must be a contiguous {dtype_name or dtype} tensor of shape "
                         f"{tuple(shape)}, got {tuple(t.shape)} {t.dtype}")


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
        # torch custom ops for torch.compile (deltac_ops.py; torch >= 2.4).
        deltac_ops.register(self, lambda spec: _NAMES[spec["state"]])

    # The module's error flag (see error_flag, check_errors above).
    error_flag = staticmethod(error_flag)
    check_errors = staticmethod(check_errors)

    # ------------------------------------------------------ FLA's dispatch
    def register_fla_backend(self):
        """Serves flash-linear-attention's dispatched calls (chunk_gated_delta_rule,
        chunk_kda, fused_recurrent_kda's kernel) that this library covers,
        ahead of FLA's kernels (deltac_fla.py); returns the backend, whose
        `served` counts what it ran."""
        return _fla().register(self)

    @staticmethod
    def unregister_fla_backend(backend):
        """Hands those calls back to FLA."""
        _fla().unregister(backend)

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
        naming the closest spec's first mismatch. per_value (FLA's gv and
        per-value beta) is False unless `want` asks for it. A spec whose
        l2norm or beta is "call", or whose gate is "call" (log or raw) or
        "channel_call" (channel_log or channel_raw), matches each of those
        values; the spec returned then carries the call's choice
        (qk_l2norm, beta_form, raw_gate), which _call passes."""
        want = {"per_value": False, **want}
        best, best_score = None, -1
        for spec in self.specs:
            mismatch = [k for k, v in want.items() if k not in ("dims", "entry") and spec[k] != v
                        and not _by_call(k, spec[k], v)]
            if want.get("entry", "decode") not in spec.get("entries", ["decode"]):
                mismatch.append("entries")
            dims_ok = want["dims"] in spec["dims"]
            if not mismatch and dims_ok:
                chosen = dict(spec)
                if spec["l2norm"] == "call":
                    chosen["qk_l2norm"] = int(bool(want.get("l2norm", False)))
                if spec["beta"] == "call":
                    chosen["beta_form"] = _BETA_FORMS[want.get("beta", "given")]
                if spec["gate"] in ("call", "channel_call"):
                    chosen["raw_gate"] = int(want.get("gate") in ("raw", "channel_raw"))
                return chosen
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
        if a.debug_checks and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("DELTAC_DEBUG_CHECKS=1 copies device values to the host (it "
                               "synchronises): unset it while capturing a CUDA graph")
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        # What an `= call` spec leaves to the call (_spec chose it).
        a.qk_l2norm = spec.get("qk_l2norm", 0)
        a.beta_form = spec.get("beta_form", 0)
        a.raw_gate = spec.get("raw_gate", 0)
        rc = lib[f"{self.name}_{spec['name']}_{entry}"](ctypes.byref(a), stream)
        if rc != 0:
            msg = self._last_error().decode()
            if rc in (_INVALID_ARGUMENT, _UNSUPPORTED):  # nothing was launched
                raise ValueError(msg)
            raise RuntimeError(msg)

    def _decode(self, spec, q, k, v, o, state, g, beta, scale, A_log=None, dt_bias=None,
                in_idx=None, out_idx=None, steps=None, keep_pool=False, idx2d=None,
                accepted=None, error_flag=None, cu=None, kind="decode", state_in=None,
                zero_state=False, slots=None, slot_stride=0, lower_bound=None, gv=None):
        """cu: cu_seqlens [N + 1] (q is then [1, tokens, H, K] and the call
        has N rows), or None. Index arrays and cu are int32 or int64: if any
        is int64 all are passed as int64 (the int32 ones widened, exactly)
        with indices_i64 set; nothing is narrowed. error_flag None: the
        module's flag of q's device. state: the pool, written (None: no
        state written); state_in: entering states read instead of the pool
        (out of place), or zero_state; slots: the rows of state / state_in;
        slot_stride: elements between slots (0: one state); lower_bound:
        the bounded raw gate's bound (None: softplus).
        beta may be f32 whatever q's dtype (read as f32 by the kernel);
        per_value specs: beta may be [B, T, HV, V] and gv (f32 [B, T, HV,
        V], contiguous) given."""
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        q, qs = _token_major("q", q, B, T, H, K)
        k, ks = _token_major("k", k, B, T, H, K)
        v, vs = _token_major("v", v, B, T, HV, V)
        flag = _resolve_flag(error_flag, q.device, kind)
        (in_idx, out_idx, idx2d, accepted, cu), i64 = _same_width(
            (in_idx, out_idx, idx2d, accepted, cu))
        a = _DecodeArgs()
        a.K, a.V, a.H, a.HV = K, V, H, HV
        a.B, a.T = (B, T) if cu is None else (cu.numel() - 1, T)
        a.cu_seqlens = _ptr(cu)
        a.indices_i64 = int(i64)
        a.debug_checks = int(_debug_checks())
        a.io_dtype, a.state_dtype = _DTYPES[q.dtype], _DTYPES[_NAMES[spec["state"]]]
        a.q, a.q_stride, a.k, a.k_stride = _ptr(q), qs, _ptr(k), ks
        a.v, a.v_stride, a.o, a.o_stride = _ptr(v), vs, _ptr(o), HV * V
        a.g, a.beta = _ptr(g), _ptr(beta)
        a.gate_io_dtype = _gate_io_dtype(spec, g)
        a.beta_f32 = int(beta.dtype == torch.float32)
        a.beta_per_value = int(beta.dim() == 4)
        a.gv = _ptr(gv)
        a.A_log, a.dt_bias = _ptr(A_log), _ptr(dt_bias)
        a.bounded_gate = int(lower_bound is not None)
        a.lower_bound = 0.0 if lower_bound is None else lower_bound
        a.state = _ptr(state)
        a.slots = slots if slots is not None else state.shape[0]
        a.initial_state = _ptr(state_in)
        a.initial_state_dtype = 0 if state_in is None else _DTYPES[state_in.dtype]
        a.zero_initial_state = int(zero_state)
        a.slot_stride = slot_stride
        a.initial_state_indices, a.output_state_indices = _ptr(in_idx), _ptr(out_idx)
        a.step_states, a.keep_pool = _ptr(steps), int(keep_pool)
        a.state_indices_2d = _ptr(idx2d)
        a.state_indices_2d_stride = 0 if idx2d is None else idx2d.stride(0)
        a.num_accepted_tokens = _ptr(accepted)
        a.error_flag = _ptr(flag)
        a.scale = float(K ** -0.5 if scale is None else scale)
        self._call(spec, a)

    # ------------------------------------------------------------- FLA API
    @deltac_ops.traced
    def fused_recurrent_gated_delta_rule(self, q, k, v, g=None, gk=None, gv=None, beta=None,
                                         scale=None, initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                         A_log=None, dt_bias=None,
                                         use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                         state_v_first=False, cu_seqlens=None, *,
                                         transpose_state_layout=None, error_flag=None,
                                         output=None, output_state=None):
        """flash-linear-attention's fused_recurrent_gated_delta_rule (FLA_VERSION's
        parameters, order and defaults). T <= max_t of the library's specs
        runs one decode kernel, out of place: it reads initial_state (f32,
        bf16 or f16, as FLA) and writes the final state as a new f32 tensor
        (none without output_final_state), with no copy, fill or dtype
        conversion around it; beta may be f32 or q's dtype. A longer
        [B, T] batch runs the chunked prefill kernels when the library has
        a prefill spec for the same options (else ValueError). g: log
        decays [B, T, HV] (None: no decay - the library's plain DeltaNet
        spec of the same options where it has one, else a zero g), or with
        use_gate_in_kernel the raw `a` of -exp(A_log) * softplus(a +
        dt_bias) (A_log [HV], dt_bias [HV] or None: 0) for a library with a
        raw-gate spec; beta [B, T, HV] (None: 1), logits with
        use_beta_sigmoid_in_kernel (2 * sigmoid with allow_neg_eigval).
        gk [B, T, HV, K] (per-key log decays) alone, without g, is Kimi
        Delta Attention's recurrence: it runs the library's `kda` decode
        spec of the same options (one kernel, as fused_recurrent_kda);
        gk with g or with use_gate_in_kernel raises ValueError. gv
        [B, T, HV, V] (log decays per value column, applied after g or gk)
        and a per-value beta [B, T, HV, V] run a decode spec of the same
        options with per_value (computed in its kernel; T <= max_t, no
        chunked form). Returns
        (o, final_state or None); the state layout is [N, HV, K, V], or
        [N, HV, V, K] with state_v_first (FLA's deprecated
        transpose_state_layout is the same). With cu_seqlens (int32/int64
        [N + 1] on the GPU) q is [1, tokens, H, K] holding N sequences of
        0..max_t tokens each; the kernel checks cu_seqlens and skips a bad
        row (o = 0, final state 0) and raises the error flag (error_flag=,
        an int32 [1] tensor, or the module's: check_errors).
        Caller-owned buffers (keyword-only, FlashInfer's names): output
        receives o ([B, T, HV, V], q's dtype, contiguous); output_state the
        final state (f32, contiguous, the state shape; needs
        output_final_state=True) and may be initial_state itself (in place)
        but must not overlap it otherwise."""
        fn = "fused_recurrent_gated_delta_rule"
        state_v_first = _state_layout(fn, state_v_first, transpose_state_layout)
        # FLA's per-value terms: the per_value specs' kernels compute them.
        per_value = gv is not None or (beta is not None and beta.dim() == 4)
        if gk is not None and (g is not None or use_gate_in_kernel):
            raise ValueError(f"{fn}: gk (decays per key channel) together with "
                             f"{'g' if g is not None else 'use_gate_in_kernel'} is not "
                             f"supported; pass gk alone (log decays per key)")
        if gk is not None:
            # Per-key decays alone: KDA's recurrence (S = Diag(e^gk) S, then
            # the delta rule), computed by the library's kda decode spec.
            if beta is None:
                beta = torch.ones(*v.shape[:3], dtype=q.dtype, device=q.device)  # as FLA
            return self.fused_recurrent_kda(
                q, k, v, gk, beta, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
                cu_seqlens=cu_seqlens, error_flag=error_flag, output=output,
                output_state=output_state, gv=gv)
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            raise ValueError(f"{fn}: allow_neg_eigval=True requires "
                             f"use_beta_sigmoid_in_kernel=True (as in FLA)")
        B, T, H, K, HV, V = _recurrent_shapes(q, k, v)
        raw = bool(use_gate_in_kernel)
        if raw:
            if A_log is None:
                raise ValueError(f"{fn}: A_log must be provided when use_gate_in_kernel=True")
            if g is None:
                raise ValueError(f"{fn}: g (the raw pre-activation) must be provided when "
                                 f"use_gate_in_kernel=True")
            A_log, dt_bias = _raw_gate_params(A_log, dt_bias, HV, q.device, per_key=None)
        else:
            A_log = dt_bias = None  # FLA reads them only with use_gate_in_kernel
        sigmoid = bool(use_beta_sigmoid_in_kernel)
        cu = _cu_seqlens(cu_seqlens, B, q.device)
        N = B if cu is None else cu.numel() - 1
        want = self._decode_want("gated", q.dtype, K, V, use_gate_in_kernel=raw,
                                 use_beta_sigmoid_in_kernel=sigmoid,
                                 allow_neg_eigval=allow_neg_eigval,
                                 use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                 state_v_first=state_v_first, per_value=per_value)
        nodecay = None
        if g is None:
            # No decay: plain DeltaNet's kernel where the library has one
            # for the same options, else the log-gate kernel reads a null g
            # as 0 (one launch either way, no fill).
            try:
                nodecay = self._spec(dict(want, rule="delta", gate="none"))
            except ValueError:
                pass
            if nodecay is not None and T > nodecay["max_t"] and cu is None:
                nodecay = None
        spec = nodecay if nodecay is not None else self._spec(want)
        if g is not None:
            _check_cuda("g", g, q.device)
        if beta is None:
            beta = torch.ones(B, T, HV, dtype=q.dtype, device=q.device)  # as FLA
        _check_cuda("beta", beta, q.device)
        if T > spec["max_t"] and cu is None:
            # FLA's fused_recurrent takes any T: a library with a prefill
            # entry for these options computes it chunked (same result
            # within rounding, far faster than token by token).
            try:
                self._spec(dict(want, entry="prefill"))
            except ValueError:
                raise ValueError(f"T = {T} exceeds max_t = {spec['max_t']} of spec "
                                 f"@{spec['name']} and no prefill spec covers the call")
            if output is not None or output_state is not None:
                raise ValueError(f"{fn}: output= / output_state= are supported where the call "
                                 f"runs the decode kernel (T <= max_t = {spec['max_t']})")
            if g is None:  # the prefill kernels read a g (only decode's take a null one)
                g = torch.zeros(B, T, HV, dtype=torch.float32, device=q.device)
            o, final = self._prefill(
                "gated", q, k, v, g, beta, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                use_beta_sigmoid_in_kernel=sigmoid, allow_neg_eigval=allow_neg_eigval,
                state_v_first=state_v_first, cu_seqlens=None, cu_seqlens_cpu=None,
                use_gate_in_kernel=raw, A_log=A_log, dt_bias=dt_bias, chunk=None,
                initial_state_indices=None, output_state_indices=None, error_flag=error_flag)
            # FLA's recurrent final state is f32 whatever the spec keeps.
            return o, None if final is None else final.float()
        return self._out_of_place(fn, spec, q, k, v, g, beta, (B, T, HV), raw, A_log, dt_bias,
                                  scale, initial_state, output_final_state, cu, N,
                                  state_v_first, error_flag, output, output_state, gv=gv)

    def _out_of_place(self, fn, spec, q, k, v, g, beta, gshape, raw, A_log, dt_bias, scale,
                      initial_state, output_final_state, cu, N, state_v_first, error_flag,
                      output, output_state, lower_bound=None, gv=None):
        """The decode tail of the FLA-named recurrent functions: checks g
        (shape gshape: [B, T, HV] or KDA's [B, T, HV, K]), beta ([B, T, HV],
        or [B, T, HV, V] for a per_value spec), gv (per_value), the states
        and caller-owned buffers, and launches one out-of-place decode
        kernel (initial_state read in its dtype, the final state written
        as a new f32 tensor or into output_state)."""
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        g, beta, o = _token_inputs(spec, q, v, g, beta, gshape, raw, output, "output")
        if gv is not None:
            _check_cuda("gv", gv, q.device)
            if tuple(gv.shape) != (B, T, HV, V):
                raise ValueError(f"gv has shape {tuple(gv.shape)}, expected {(B, T, HV, V)}")
            gv = gv.to(torch.float32).contiguous()  # log decays, read as f32
        shape = (N, HV, V, K) if state_v_first else (N, HV, K, V)
        if initial_state is not None:
            _check_cuda("initial_state", initial_state, q.device)
            if tuple(initial_state.shape) != shape:
                raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}, expected {shape}")
            if initial_state.dtype not in _DTYPES:
                raise ValueError(f"initial_state must be f32, bf16 or f16, got {initial_state.dtype}")
            initial_state = initial_state.contiguous()
        if output_state is not None:
            if not output_final_state:
                raise ValueError(f"{fn}: output_state needs output_final_state=True")
            _caller_buffer("output_state", output_state, shape, torch.float32, q.device, "f32")
            final = output_state
        elif output_final_state:
            # Written whole by the kernel (a skipped row's as 0).
            final = torch.empty(shape, dtype=torch.float32, device=q.device)
        else:
            final = None
        self._decode(spec, q, k, v, o, final, g, beta, scale, A_log, dt_bias,
                     error_flag=error_flag, cu=cu, kind="decode", state_in=initial_state,
                     zero_state=initial_state is None, slots=N, lower_bound=lower_bound,
                     gv=gv)
        return o, (final if output_final_state else None)

    @deltac_ops.traced
    def fused_recurrent_kda(self, q, k, v, g, beta, A_log=None, dt_bias=None, scale=None,
                            initial_state=None, output_final_state=False,
                            use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                            use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                            lower_bound=None, state_v_first=False, cu_seqlens=None, *,
                            transpose_state_layout=None, error_flag=None, output=None,
                            output_state=None, gv=None):
        """flash-linear-attention's fused_recurrent_kda (FLA_VERSION's
        parameters, order and defaults): Kimi Delta Attention decode, g
        [B, T, HV, K] log decays per key channel (or with
        use_gate_in_kernel the raw a of -exp(A_log) * softplus(a +
        dt_bias), A_log [HV], dt_bias [HV * K] / [HV, K] or None: 0), for a
        library with a `kda` decode spec; one out-of-place kernel as
        fused_recurrent_gated_delta_rule (T <= max_t; cu_seqlens rows of
        0..max_t tokens; error_flag, output, output_state as there).
        lower_bound with use_gate_in_kernel: FLA's bounded gate
        lower_bound * sigmoid(exp(A_log) * (g + dt_bias)) (A_log None: a
        factor 1), computed in the kernel; like FLA, lower_bound has no
        effect without use_gate_in_kernel. A per-value beta [B, T, HV, V]
        and gv (keyword-only, f32 [B, T, HV, V] log decays per value
        column: fused_recurrent_gated_delta_rule's gv with gk) run a kda
        spec with per_value."""
        fn = "fused_recurrent_kda"
        state_v_first = _state_layout(fn, state_v_first, transpose_state_layout)
        (B, T, H, K, HV, V), raw, bound, A_log, dt_bias = _kda_gate(
            fn, q, k, v, g, beta, A_log, dt_bias, use_gate_in_kernel, lower_bound,
            allow_neg_eigval, use_beta_sigmoid_in_kernel)
        sigmoid = bool(use_beta_sigmoid_in_kernel)
        cu = _cu_seqlens(cu_seqlens, B, q.device)
        N = B if cu is None else cu.numel() - 1
        spec = self._spec(self._decode_want(
            "kda", q.dtype, K, V, use_gate_in_kernel=raw, use_beta_sigmoid_in_kernel=sigmoid,
            allow_neg_eigval=allow_neg_eigval, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            state_v_first=state_v_first, per_value=gv is not None or beta.dim() == 4))
        if T > spec["max_t"] and cu is None:
            # As fused_recurrent_gated_delta_rule: a library with a KDA
            # prefill entry for these options computes it chunked (the same
            # result within rounding); per-value terms have no chunked form.
            try:
                if gv is not None or beta.dim() == 4:
                    raise ValueError("per-value terms")
                self._spec(self._prefill_want(
                    "kda", q.dtype, K, V, use_gate_in_kernel=raw,
                    use_beta_sigmoid_in_kernel=sigmoid, allow_neg_eigval=allow_neg_eigval,
                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                    state_v_first=state_v_first))
            except ValueError:
                raise ValueError(f"T = {T} exceeds max_t = {spec['max_t']} of spec "
                                 f"@{spec['name']} and no KDA prefill spec covers the call")
            if output is not None or output_state is not None:
                raise ValueError(f"{fn}: output= / output_state= are supported where the call "
                                 f"runs the decode kernel (T <= max_t = {spec['max_t']})")
            return self.chunk_kda(
                q, k, v, g, beta, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                use_gate_in_kernel=use_gate_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                state_v_first=state_v_first, A_log=A_log, dt_bias=dt_bias,
                error_flag=error_flag)
        return self._out_of_place(fn, spec, q, k, v, g, beta, (B, T, HV, K), raw, A_log, dt_bias,
                                  scale, initial_state, output_final_state, cu, N,
                                  state_v_first, error_flag, output, output_state,
                                  lower_bound=bound, gv=gv)

    def fused_recurrent_kda_fwd(self, q, k, v, g, beta, A_log=None, dt_bias=None,
                                initial_state=None, scale=None, output_final_state=False,
                                inplace_final_state=True, state_v_first=False, cu_seqlens=None,
                                ssm_state_indices=None, num_accepted_tokens=None,
                                use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                lower_bound=None, out=None, *, error_flag=None):
        """flash-linear-attention's internal fused_recurrent_kda_fwd
        (fla.ops.kda.fused_recurrent, FLA_VERSION's parameters and order),
        the call vLLM's KDA layers make; returns (o, final_state).

        With ssm_state_indices (vLLM's continuous batching) initial_state is
        the state pool [slots, HV, K, V] ([.., V, K] with state_v_first),
        slots initial_state.stride(0) elements apart, updated in place
        (inplace_final_state=True, as vLLM calls it): row n reads slot
        ssm_state_indices[n, num_accepted_tokens[n] - 1] (column 0 without
        num_accepted_tokens) and writes the state after its token t to
        slot ssm_state_indices[n, t]. A 1-D [N] ssm_state_indices is one
        column: each row's slot is read and written, for rows of one token
        (a longer row is skipped with o = 0 and raises the error flag,
        where FLA would read its neighbours' indices). Indices are int32 or
        int64 on the GPU; a slot >= slots is skipped the same way, a
        negative one is padding. The pool's dtype must be its spec's
        state dtype. inplace_final_state=False with indices (FLA's
        per-token states in a new tensor) is refused.

        Without ssm_state_indices it is fused_recurrent_kda; with
        inplace_final_state=True (FLA's default) the final state is written
        into initial_state (f32) and returned. out: caller-owned o."""
        fn = "fused_recurrent_kda_fwd"
        if ssm_state_indices is None:
            if inplace_final_state and initial_state is None:
                raise ValueError(f"{fn}: inplace_final_state=True needs initial_state (as in FLA)")
            if inplace_final_state and initial_state.dtype != torch.float32:
                raise ValueError(f"{fn}: inplace_final_state=True writes the f32 final state into "
                                 f"initial_state, which is {initial_state.dtype}")
            o, final = self.fused_recurrent_kda(
                q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, scale=scale,
                initial_state=initial_state,
                output_final_state=bool(output_final_state or inplace_final_state),
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                use_gate_in_kernel=use_gate_in_kernel,
                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                state_v_first=state_v_first, cu_seqlens=cu_seqlens, error_flag=error_flag,
                output=out, output_state=initial_state if inplace_final_state else None)
            return o, final
        if not inplace_final_state:
            raise ValueError(f"{fn}: with ssm_state_indices deltac updates the pool in place "
                             f"(inplace_final_state=True, vLLM's call); FLA's per-token states "
                             f"in a new tensor are not supported")
        if initial_state is None:
            raise ValueError(f"{fn}: ssm_state_indices needs initial_state, the state pool")
        (B, T, H, K, HV, V), raw, bound, A_log, dt_bias = _kda_gate(
            fn, q, k, v, g, beta, A_log, dt_bias, use_gate_in_kernel, lower_bound,
            allow_neg_eigval, use_beta_sigmoid_in_kernel)
        _check_cuda("initial_state", initial_state, q.device)
        if initial_state.dtype not in _DTYPES:
            raise ValueError(f"initial_state must be f32, bf16 or f16, got {initial_state.dtype}")
        cu = _cu_seqlens(cu_seqlens, B, q.device)
        N = B if cu is None else cu.numel() - 1
        spec = self._spec(self._want(
            "kda", q.dtype, K, V, state=_name(initial_state.dtype), use_gate_in_kernel=raw,
            use_beta_sigmoid_in_kernel=bool(use_beta_sigmoid_in_kernel),
            allow_neg_eigval=allow_neg_eigval, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            state_v_first=state_v_first))
        if T > spec["max_t"] and cu is None:
            raise ValueError(f"T = {T} exceeds max_t = {spec['max_t']} of spec @{spec['name']}")
        per = (HV, V, K) if state_v_first else (HV, K, V)
        slot_stride = _slot_stride("initial_state", initial_state, per)
        idx2d = _index("ssm_state_indices", ssm_state_indices,
                       (N,) if ssm_state_indices.dim() == 1 else (N, None), q.device)
        if idx2d.dim() == 1:
            idx2d = idx2d.view(N, 1)  # one column: stride 1, a row's one token
        accepted = None if num_accepted_tokens is None else \
            _index("num_accepted_tokens", num_accepted_tokens, (N,), q.device)
        g, beta, o = _token_inputs(spec, q, v, g, beta, (B, T, HV, K), raw, out, "out")
        self._decode(spec, q, k, v, o, initial_state, g, beta, scale, A_log,
                     dt_bias, idx2d=idx2d, accepted=accepted, error_flag=error_flag, cu=cu,
                     kind="serving", slot_stride=slot_stride, lower_bound=bound)
        return o, initial_state

    def fused_recurrent_delta_rule(self, q, k, v, beta=None, scale=None, initial_state=None,
                                   output_final_state=False, use_qk_l2norm_in_kernel=False,
                                   cu_seqlens=None, *, error_flag=None, output=None,
                                   output_state=None):
        """flash-linear-attention's fused_recurrent_delta_rule (FLA_VERSION's
        parameters, order and defaults): plain DeltaNet, no decay. The same
        call as fused_recurrent_gated_delta_rule with g=None (one kernel of
        the library's DeltaNet spec, out of place; error_flag, output and
        output_state as there); a per-value beta [B, T, H, V] runs a spec
        with per_value."""
        return self.fused_recurrent_gated_delta_rule(
            q, k, v, None, None, None, beta, scale, initial_state, output_final_state,
            use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens, error_flag=error_flag,
            output=output, output_state=output_state)

    # ------------------------------------------------------------- prefill
    @deltac_ops.traced
    def chunk_gated_delta_rule(self, q, k, v, g, beta, scale=None, initial_state=None,
                               output_final_state=False, use_qk_l2norm_in_kernel=False,
                               use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                               state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                               chunk_indices=None, cp_context=None, *, use_gate_in_kernel=False,
                               A_log=None, dt_bias=None, chunk_size=64, head_first=False,
                               transpose_state_layout=None, initial_state_indices=None,
                               output_state_indices=None, error_flag=None, output=None,
                               output_state=None, return_intermediate_states=False,
                               intermediate_states_dtype=None, state_checkpoints=None,
                               checkpoint_cu_starts=None, checkpoint_every_n_tokens=0):
        """flash-linear-attention's chunk_gated_delta_rule (FLA_VERSION's
        parameters, order and defaults; FLA's **kwargs keys use_gate_in_kernel,
        A_log, dt_bias, chunk_size, head_first, transpose_state_layout are
        keyword-only here): q, k [1 or B, T, H, K], v [.., T, HV, V], g
        [.., T, HV] log decays (or the raw `a` with use_gate_in_kernel,
        A_log [HV] and dt_bias [HV] or None), beta [.., T, HV] (logits with
        use_beta_sigmoid_in_kernel; 2 * sigmoid with allow_neg_eigval, which
        needs use_beta_sigmoid_in_kernel as in FLA). cu_seqlens [N + 1]
        (int32/int64, on the GPU) packs N sequences in B = 1; it is never
        copied to the host. cu_seqlens_cpu, its host copy where the caller
        has one, only tells the dispatch the longest sequence; chunk_indices
        cannot change the result and is ignored. chunk_size: FLA's default
        64 lets the library's spec choose its chunk (the result differs
        only by rounding), 16 / 32 select a spec with that chunk. cp_context
        (context parallelism across ranks: see _prefill_cp) runs this
        rank's slice; head_first=True raises ValueError.
        States are [N, HV, K, V], or [N, HV, V, K] with state_v_first.

        deltac's extensions: with initial_state_indices (int32/int64 [N]),
        initial_state is a pool [slots, ...] (each slot's state contiguous,
        slots stride(0) apart: a hybrid cache may keep other data in a
        slot) read by index and, with
        output_final_state, updated in place at output_state_indices
        (default: the rows read); the call then returns (o, the pool).
        error_flag (int32 [1]) receives the kernels' device checks (None:
        the module's flag, see check_errors). Returns (o, final_state or
        None); a skipped sequence's o and final-state rows are 0.
        output= / output_state= (FlashInfer's names): caller-owned o ([B,
        T, HV, V], q's dtype) and final state ([N, ...], the state dtype),
        contiguous, filled in place and returned (the final state is zeroed
        first, as a new one is: a skipped sequence's row must not keep old
        values); the call still takes its workspace from torch's allocator.

        State checkpoints (vLLM's prefix caching), in both published forms:
        return_intermediate_states=True (FLA's, as chunk_kda's) returns (o,
        final_state, h) with h [B, NT, HV, K, V] ([1, total chunks, ...]
        with cu_seqlens) the state entering each chunk of 64, in k's dtype
        or intermediate_states_dtype (f32); state_checkpoints [rows, HV,
        K, V] (f32 or q's dtype), checkpoint_cu_starts (int64 [N + 1]) and
        checkpoint_every_n_tokens (a multiple of 64; FlashInfer's) receive
        the state after every n tokens of sequence i at rows
        checkpoint_cu_starts[i] + j, j < len_i // n. The kernels store
        them as they pass each chunk boundary."""
        fn = "chunk_gated_delta_rule"
        state_v_first = _state_layout(fn, state_v_first, transpose_state_layout)
        chunk = _chunk_size(fn, chunk_size, (16, 32, 64))
        if head_first:
            raise ValueError(f"{fn}: head_first=True is not supported (FLA removed it): pass "
                             f"q, k, v as [B, T, H, ...]")
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            raise ValueError(f"{fn}: allow_neg_eigval=True requires "
                             f"use_beta_sigmoid_in_kernel=True (as in FLA)")
        del chunk_indices  # FLA's precomputed chunk map: cannot change the result
        return self._prefill_or_cp(
            cp_context, "gated", q, k, v, g, beta, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
            cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
            use_gate_in_kernel=use_gate_in_kernel, A_log=A_log, dt_bias=dt_bias, chunk=chunk,
            initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices, error_flag=error_flag,
            output=output, output_state=output_state, fn=fn,
            intermediate_dtype=_intermediate_dtype(return_intermediate_states,
                                                   intermediate_states_dtype, k),
            state_checkpoints=state_checkpoints, checkpoint_cu_starts=checkpoint_cu_starts,
            checkpoint_every_n_tokens=checkpoint_every_n_tokens)

    @deltac_ops.traced
    def chunk_delta_rule(self, q, k, v, beta, scale=None, initial_state=None,
                         output_final_state=False, use_qk_l2norm_in_kernel=False,
                         cu_seqlens=None, cu_seqlens_cpu=None, *, chunk_size=64,
                         head_first=False, initial_state_indices=None,
                         output_state_indices=None, error_flag=None, output=None,
                         output_state=None, return_intermediate_states=False,
                         intermediate_states_dtype=None, state_checkpoints=None,
                         checkpoint_cu_starts=None, checkpoint_every_n_tokens=0,
                         cp_context=None):
        """flash-linear-attention's chunk_delta_rule (FLA_VERSION's
        parameters, order and defaults; FLA's **kwargs keys chunk_size and
        head_first keyword-only): plain DeltaNet (no decay) on the library's
        rule-delta prefill spec, otherwise as chunk_gated_delta_rule (its
        keyword-only extensions too: output=, output_state=, the state
        checkpoints, and cp_context, which FLA's chunk_delta_rule lacks)."""
        fn = "chunk_delta_rule"
        chunk = _chunk_size(fn, chunk_size, (16, 32, 64))
        if head_first:
            raise ValueError(f"{fn}: head_first=True is not supported (FLA removed it): pass "
                             f"q, k, v as [B, T, H, ...]")
        return self._prefill_or_cp(
            cp_context, "delta", q, k, v, None, beta, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel=False,
            allow_neg_eigval=False, state_v_first=False, cu_seqlens=cu_seqlens,
            cu_seqlens_cpu=cu_seqlens_cpu, use_gate_in_kernel=False, A_log=None, dt_bias=None,
            chunk=chunk, initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices, error_flag=error_flag,
            output=output, output_state=output_state, fn=fn,
            intermediate_dtype=_intermediate_dtype(return_intermediate_states,
                                                   intermediate_states_dtype, k),
            state_checkpoints=state_checkpoints, checkpoint_cu_starts=checkpoint_cu_starts,
            checkpoint_every_n_tokens=checkpoint_every_n_tokens)

    @deltac_ops.traced
    def chunk_kda(self, q, k, v, g, beta, scale=None, initial_state=None,
                  output_final_state=False, use_qk_l2norm_in_kernel=False,
                  use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, safe_gate=False, lower_bound=None,
                  disable_recompute=False, return_intermediate_states=False,
                  state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, cp_context=None, *,
                  A_log=None, dt_bias=None, chunk_size=64, transpose_state_layout=None,
                  initial_state_indices=None, output_state_indices=None, error_flag=None,
                  output=None, output_state=None, intermediate_states_dtype=None,
                  state_checkpoints=None, checkpoint_cu_starts=None,
                  checkpoint_every_n_tokens=0):
        """flash-linear-attention's chunk_kda (Kimi Delta Attention; FLA_VERSION's
        parameters, order and defaults; FLA's **kwargs keys A_log, dt_bias,
        chunk_size, transpose_state_layout are keyword-only here): as
        chunk_gated_delta_rule, but with decays per key channel: g [.., T,
        HV, K] log decays, or with use_gate_in_kernel the raw `a` of
        -exp(A_log) * softplus(a + dt_bias), A_log [HV] and dt_bias [HV * K]
        (or [HV, K], or None: 0). chunk_size 32 selects a spec with chunks
        of 32 (64, FLA's default, lets the library choose). lower_bound
        with use_gate_in_kernel: FLA's bounded gate lower_bound *
        sigmoid(exp(A_log) * (g + dt_bias)) (A_log may then be None: a
        factor 1), computed in the kernels; safe_gate=True with
        use_gate_in_kernel requires -5 <= lower_bound < 0 as in FLA (its
        M = 16 tensor-core form is FLA's speed choice: here it cannot
        change the result); like FLA, lower_bound has no effect without
        use_gate_in_kernel. return_intermediate_states=True returns (o,
        final_state, h) as FLA (h: the state entering each chunk of 64,
        [B, NT, HV, K, V] or [1, total chunks, ...] with cu_seqlens, in k's
        dtype or intermediate_states_dtype). The keyword-only extensions
        are chunk_gated_delta_rule's (output=, output_state=, FlashInfer's
        state checkpoints) and cp_context, as chunk_gated_delta_rule's
        (context parallelism across ranks; chunk 64). disable_recompute (a
        training option) cannot change the result and is ignored."""
        fn = "chunk_kda"
        state_v_first = _state_layout(fn, state_v_first, transpose_state_layout)
        chunk = _chunk_size(fn, chunk_size, (32, 64))
        bound = _lower_bound(fn, lower_bound) if use_gate_in_kernel else None
        if safe_gate and use_gate_in_kernel and (bound is None or not -5 <= bound < 0):
            raise ValueError(f"{fn}: safe_gate=True with use_gate_in_kernel=True needs "
                             f"lower_bound in the safe range [-5, 0), got {lower_bound}")
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            raise ValueError(f"{fn}: allow_neg_eigval=True requires "
                             f"use_beta_sigmoid_in_kernel=True (as in FLA)")
        del disable_recompute  # a training option: cannot change the result
        return self._prefill_or_cp(
            cp_context, "kda", q, k, v, g, beta, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
            cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu,
            use_gate_in_kernel=use_gate_in_kernel, A_log=A_log, dt_bias=dt_bias, chunk=chunk,
            initial_state_indices=initial_state_indices,
            output_state_indices=output_state_indices, error_flag=error_flag, lower_bound=bound,
            output=output, output_state=output_state, fn=fn,
            intermediate_dtype=_intermediate_dtype(return_intermediate_states,
                                                   intermediate_states_dtype, k),
            state_checkpoints=state_checkpoints, checkpoint_cu_starts=checkpoint_cu_starts,
            checkpoint_every_n_tokens=checkpoint_every_n_tokens)

    # ------------------------------------------------ context parallelism
    def _prefill_or_cp(self, cp_context, rule, q, k, v, g, beta, **kw):
        if cp_context is None:
            return self._prefill(rule, q, k, v, g, beta, **kw)
        fn = kw["fn"]
        given = [name for name in ("cu_seqlens", "initial_state_indices",
                                   "output_state_indices", "output", "output_state",
                                   "intermediate_dtype", "state_checkpoints",
                                   "checkpoint_cu_starts") if kw.get(name) is not None]
        if kw.get("cu_seqlens_cpu") is not None:
            given.append("cu_seqlens_cpu")
        if given:
            raise ValueError(f"{fn}: with cp_context, {', '.join(given)} cannot be given (the "
                             f"rank-local cu_seqlens come from cp_context; pools, caller-owned "
                             f"outputs and checkpoints are not supported across ranks)")
        return self._prefill_cp(cp_context, rule, q, k, v, g, beta, **kw)

    def _prefill_cp(self, ctx, rule, q, k, v, g, beta, **kw):
        """A rank's slice of a context-parallel prefill (docs/
        context-parallelism.md, "Across GPUs"). ctx: FLA's FLACPContext or
        build_cp_context's (rank-local cu_seqlens and cu_seqlens_cpu,
        is_first_rank / is_last_rank of the local first / last sequence,
        pre_num_ranks, group). The local first sequence, where it started on
        an earlier rank, runs in the library's two phases (cp_phase 1: its
        transfer [b | M]; 2: from the entering state); every other local
        sequence is an ordinary call from its initial state. Each rank
        all-gathers the transfers of its last sequence (HV * K * (V + K) f32:
        its (M, b), or (0, final state) where it started here) and folds its
        pre_num_ranks predecessors' in f32: E = M_j E + b_j. initial_state:
        rows for the local sequences (a continued one's row is not read);
        the final state's rows are those of the sequences that end here
        (zeros for one that goes on). With group None, returns a CPPending:
        gather every rank's .transfer yourself and call cp_finish."""
        fn = kw["fn"]
        missing = [a for a in ("cu_seqlens", "cu_seqlens_cpu", "is_first_rank", "is_last_rank",
                               "pre_num_ranks", "group") if not hasattr(ctx, a)]
        if missing:
            raise ValueError(f"{fn}: cp_context must be FLA's FLACPContext or "
                             f"build_cp_context's; it has no {', '.join(missing)}")
        if q.dim() != 4 or q.shape[0] != 1:
            raise ValueError(f"{fn}: cp_context needs B = 1 (a rank's packed tokens), got q "
                             f"of shape {tuple(q.shape)}")
        if ctx.cu_seqlens is None:
            raise ValueError(f"{fn}: cp_context.cu_seqlens is None")
        cpu = ctx.cu_seqlens_cpu if ctx.cu_seqlens_cpu is not None else ctx.cu_seqlens.cpu()
        cpu = torch.as_tensor(cpu).to(torch.int64)
        T = q.shape[1]
        if cpu.numel() < 2 or int(cpu[0]) != 0 or int(cpu[-1]) != T:
            raise ValueError(f"{fn}: cp_context.cu_seqlens_cpu {cpu.tolist()[:8]} must run "
                             f"from 0 to this rank's T = {T}")
        N = cpu.numel() - 1
        cont_in, cont_out = not ctx.is_first_rank, not ctx.is_last_rank
        HV, V, K = v.shape[2], v.shape[3], q.shape[3]
        init = kw.pop("initial_state")
        want_final = kw.pop("output_final_state")
        for name in ("output", "output_state"):  # None: checked by _prefill_or_cp
            kw.pop(name)
        o = torch.empty(1, T, HV, V, dtype=q.dtype, device=q.device)
        def cut(t, a, b_):
            # A slice at token a; g and beta ([T, HV] rows of a few bytes)
            # are copied where the slice would break their 16-byte alignment
            # (q, k, v and o rows are multiples of 16 bytes).
            if t is None:
                return None
            x = t[:, a:b_]
            return x if x.data_ptr() % 16 == 0 else x.clone()
        p = CPPending(ctx, rule, kw, N, cont_in, cont_out, HV, K, V, o, want_final)
        p.t_head = int(cpu[1]) if cont_in else 0
        p.head = (cut(q, 0, p.t_head), cut(k, 0, p.t_head), cut(v, 0, p.t_head),
                  cut(g, 0, p.t_head), cut(beta, 0, p.t_head))
        if cont_in:  # phase 1: the continued sequence's transfer
            p.head_transfer = torch.empty(HV, K * (V + K), dtype=torch.float32,
                                          device=q.device)
            self._prefill(rule, *p.head, initial_state=None, output_final_state=False,
                          output=o[:, :p.t_head], cp_phase=1, cp_transfer=p.head_transfer,
                          cp_work=p.work, **kw)
        first = 1 if cont_in else 0
        if N > first:  # the sequences that start here: an ordinary call
            t0 = p.t_head
            rows = None if init is None else init[first:]
            _, p.rest_final = self._prefill(
                rule, *(cut(t, t0, T) for t in (q, k, v, g, beta)), initial_state=rows,
                output_final_state=bool(want_final or cont_out), output=o[:, t0:],
                **{**kw, "cu_seqlens": ctx.cu_seqlens[first:] - t0,
                   "cu_seqlens_cpu": cpu[first:] - t0})
        # The library's layout per value head: b [K][V], then M [K][K].
        p.transfer = torch.zeros(HV, K * (V + K), dtype=torch.float32, device=q.device)
        if cont_out:
            if N == 1 and cont_in:
                p.transfer.copy_(p.head_transfer)
            else:  # started here: M = 0, b = its final state in [K][V]
                last = p.rest_final[-1].to(torch.float32)
                last = last.transpose(-1, -2) if kw["state_v_first"] else last
                p.transfer[:, :K * V] = last.reshape(HV, K * V)
        if getattr(ctx, "group", None) is None:
            return p
        import torch.distributed as dist
        world = dist.get_world_size(ctx.group)
        gathered = torch.empty((world,) + tuple(p.transfer.shape), dtype=torch.float32,
                               device=q.device)
        dist.all_gather_into_tensor(gathered, p.transfer, group=ctx.group)
        return self.cp_finish(p, gathered, rank=dist.get_rank(ctx.group))

    def cp_finish(self, pending, transfers, rank=None):
        """Phase 2 of a rank's context-parallel prefill: `transfers` holds
        every rank's pending.transfer ([world, HV, K * (V + K)] f32, rank
        order; per value head b [K][V] then M [K][K]). Returns (o,
        final_state or None)."""
        p, ctx = pending, pending.ctx
        rank = getattr(ctx, "rank", None) if rank is None else rank
        final = None
        if p.cont_in:
            pre = int(ctx.pre_num_ranks)
            if rank is None or pre < 1 or rank - pre < 0 or rank >= transfers.shape[0]:
                raise ValueError(f"cp_finish: rank {rank} with pre_num_ranks {pre} does not "
                                 f"fit {transfers.shape[0]} transfers")
            HV, K, V = p.HV, p.K, p.V
            E = torch.zeros(HV, K, V, dtype=torch.float32, device=transfers.device)
            for j in range(rank - pre, rank):  # E = M_j E + b_j, in f32
                b = transfers[j, :, :K * V].view(HV, K, V)
                M = transfers[j, :, K * V:].view(HV, K, K)
                E = torch.baddbmm(b, M, E)
            if p.kw["state_v_first"]:
                E = E.transpose(-1, -2)
            # (A final state it writes for a sequence that goes on is
            # zeroed below: it is the next rank's to write.)
            _, final = self._prefill(p.rule, *p.head, initial_state=E.contiguous()[None],
                                     output_final_state=p.want_final,
                                     output=p.o[:, :p.t_head], cp_phase=2, cp_work=p.work,
                                     **p.kw)
        if not p.want_final:
            return p.o, None
        like = final if final is not None else p.rest_final
        out = torch.zeros((p.N,) + tuple(like.shape[1:]), dtype=like.dtype, device=like.device)
        if final is not None:
            out[0] = final[0]
        if p.rest_final is not None:
            out[p.N - p.rest_final.shape[0]:] = p.rest_final
        if p.cont_out:
            out[-1] = 0  # the rank holding its last token writes it
        return p.o, out

    def _prefill(self, rule, q, k, v, g, beta, *, scale, initial_state, output_final_state,
                 use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                 state_v_first, cu_seqlens, cu_seqlens_cpu, use_gate_in_kernel, A_log,
                 dt_bias, chunk, initial_state_indices, output_state_indices, error_flag,
                 lower_bound=None, output=None, output_state=None, intermediate_dtype=None,
                 state_checkpoints=None, checkpoint_cu_starts=None,
                 checkpoint_every_n_tokens=0, fn="prefill", cp_phase=0, cp_transfer=None,
                 cp_work=None):
        """The prefill call of chunk_gated_delta_rule (rule "gated": a decay
        per token and head), chunk_kda (rule "kda": per key channel) and
        chunk_delta_rule (rule "delta": no decay, g None).
        chunk: the spec's chunk length, or None for any; lower_bound: the
        bounded raw gate's bound (None: softplus). output / output_state:
        caller-owned o and final state; intermediate_dtype: FLA's
        return_intermediate_states in that dtype (None: not asked), the
        third result; state_checkpoints / checkpoint_cu_starts /
        checkpoint_every_n_tokens: FlashInfer's checkpoints. cp_phase,
        cp_transfer: a rank's phase call (_prefill_cp); cp_work: a dict
        that keeps the workspace from phase 1 for phase 2."""
        _check_gpu_q(q)
        delta = rule == "delta"
        for name, t in (("k", k), ("v", v), ("g", g), ("beta", beta)):
            if not (delta and name == "g"):
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
        pool = (initial_state_indices is not None or output_state_indices is not None) \
            and isinstance(initial_state, torch.Tensor)
        want = self._prefill_want(
            rule, q.dtype, K, V, use_gate_in_kernel=raw,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            state_v_first=state_v_first, chunk=chunk,
            intermediate=intermediate_dtype is not None,
            pool_dtype=initial_state.dtype if pool else None, fn=fn)
        try:
            spec = self._spec(want)
        except ValueError:
            # Plain DeltaNet without a DeltaNet spec for these options: a
            # gated spec whose gate the call chooses reads a null g as no
            # decay (the same kernels, no fill).
            spec = self._nodecay_spec(want) if delta else None
            if spec is None:
                raise
        cu = _cu_seqlens(cu_seqlens, B, q.device)  # int64 is read as is
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
        if not delta:
            gdt = _gate_dtype(spec, g, q.dtype, raw)
            gshape = (B, T, HV, K) if kda else (B, T, HV)
            if tuple(g.shape) != gshape:
                raise ValueError(f"g has shape {tuple(g.shape)}, expected {gshape}")
            g = g.to(gdt).contiguous()
        if tuple(beta.shape) != (B, T, HV):
            raise ValueError(f"beta has shape {tuple(beta.shape)}, expected {(B, T, HV)}")
        if beta.dtype not in (torch.float32, q.dtype):
            beta = beta.to(torch.float32)  # read in f32 or q's dtype, never rounded
        beta = beta.contiguous()
        if raw:
            A_log, dt_bias = _raw_gate_params(A_log, dt_bias, HV, q.device,
                                              per_key=K if kda else None,
                                              bounded=lower_bound is not None)
        sdt = _NAMES[spec["state"]]
        per = (HV, V, K) if state_v_first else (HV, K, V)
        in_idx = None if initial_state_indices is None else \
            _index("initial_state_indices", initial_state_indices, (N,), q.device)
        out_idx = None if output_state_indices is None else \
            _index("output_state_indices", output_state_indices, (N,), q.device)
        (in_idx, out_idx), i64 = _same_width((in_idx, out_idx))
        pooled = in_idx is not None or out_idx is not None
        slot_stride = 0  # one state (new tensors here are contiguous)
        if initial_state is not None:
            _check_cuda("initial_state", initial_state, q.device)
            rows = initial_state.shape[0] if pooled else N
            if initial_state.dim() != 4 or tuple(initial_state.shape) != (rows,) + per:
                raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}, "
                                 f"expected {(rows,) + per}")
            if pooled:
                if initial_state.dtype != sdt:
                    raise ValueError(f"a state pool must be {sdt}, got {initial_state.dtype}")
                slot_stride = _slot_stride("initial_state", initial_state, per)
            if not pooled:
                initial_state = initial_state.to(sdt).contiguous()
        elif pooled:
            raise ValueError("initial_state_indices need initial_state (the pool)")
        if output_state is not None:
            if pooled:
                raise ValueError(f"{fn}: output_state= cannot be combined with state indices "
                                 f"(the pool is updated in place)")
            if not output_final_state:
                raise ValueError(f"{fn}: output_state needs output_final_state=True")
            _caller_buffer("output_state", output_state, (N,) + per, sdt, q.device)
        if pooled:
            final = initial_state if output_final_state else None
        elif output_state is not None:
            # Zeroed as below (one fill: no allocation, graph-safe).
            final = output_state.zero_()
        else:
            # Zeroed: the kernels write no state for a skipped sequence (a bad
            # cu_seqlens skips them all), so its row must not be garbage.
            final = torch.zeros((N,) + per, dtype=sdt, device=q.device) if output_final_state else None
        if output is not None:
            _caller_buffer("output", output, (B, T, HV, V), q.dtype, q.device)
            o = output
        else:
            # Every token of o is written by the kernels (skipped ones as 0).
            o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        ck, ck_rows, ck_dtype, ck_starts, ck_every = self._checkpoints(
            fn, spec, B, T, N, per, cu, cu_seqlens_cpu, q, intermediate_dtype,
            state_checkpoints, checkpoint_cu_starts, checkpoint_every_n_tokens)
        lib = self.load()
        size = lib[f"{self.name}_{spec['name']}_prefill_workspace_bytes"]
        size.restype = ctypes.c_int64
        size.argtypes = [ctypes.c_int64] * 5
        if cp_work is not None and "work" in cp_work:
            work = cp_work["work"]  # phase 2 reads what phase 1 left there
        else:
            work = torch.empty(max(size(K, V, B * T, N, HV), 16), dtype=torch.uint8,
                               device=q.device)
            if cp_work is not None:
                cp_work["work"] = work
        flag = _resolve_flag(error_flag, q.device, "prefill")
        a = _PrefillArgs()
        a.K, a.V, a.T, a.N, a.H, a.HV = K, V, B * T, N, H, HV
        a.io_dtype, a.state_dtype = _DTYPES[q.dtype], _DTYPES[sdt]
        a.q, a.q_stride, a.k, a.k_stride = _ptr(q), qs, _ptr(k), ks
        a.v, a.v_stride, a.o, a.o_stride = _ptr(v), vs, _ptr(o), HV * V
        a.g, a.beta = _ptr(g), _ptr(beta)
        a.gate_io_dtype = _gate_io_dtype(spec, g)
        a.beta_f32 = int(beta.dtype == torch.float32)
        a.A_log, a.dt_bias = _ptr(A_log if raw else None), _ptr(dt_bias if raw else None)
        a.bounded_gate = int(lower_bound is not None)
        a.lower_bound = 0.0 if lower_bound is None else lower_bound
        a.slot_stride = slot_stride
        a.initial_state, a.final_state = _ptr(initial_state), _ptr(final)
        a.slots = initial_state.shape[0] if pooled else N
        a.initial_state_indices, a.output_state_indices = _ptr(in_idx), _ptr(out_idx)
        a.indices_i64 = int(i64)
        a.cu_seqlens = _ptr(cu)
        a.cu_seqlens_i64 = int(cu is not None and cu.dtype == torch.int64)
        a.workspace, a.workspace_bytes = work.data_ptr(), work.numel()
        a.error_flag = flag.data_ptr()
        a.scale = float(K ** -0.5 if scale is None else scale)
        a.debug_checks = int(_debug_checks())
        a.max_seqlen = max_seqlen
        a.checkpoints, a.checkpoint_rows = _ptr(ck), ck_rows
        a.checkpoint_dtype = _DTYPES[ck_dtype] if ck_dtype is not None else 0
        a.checkpoint_starts, a.checkpoint_every_n_tokens = _ptr(ck_starts), ck_every
        a.cp_phase, a.cp_transfer = cp_phase, _ptr(cp_transfer)
        self._call(spec, a, entry="prefill")
        if intermediate_dtype is not None:
            if ck is None:  # no chunk (T = 0): FLA's empty h
                ck = torch.empty(((B, 0) if cu is None else (1, 0)) + per,
                                 dtype=intermediate_dtype, device=q.device)
            return o, final, ck
        return o, final

    @staticmethod
    def _want(rule, dtype, K, V, *, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
              allow_neg_eigval, use_qk_l2norm_in_kernel, state_v_first, state=None):
        """What a call of `rule` (gated, kda, delta) with FLA's options asks
        of a spec (Library._spec's `want`); state: the spec's state dtype
        name, or None for any."""
        gate = "raw" if use_gate_in_kernel else "log"
        want = {"rule": rule,
                "gate": {"delta": "none", "kda": "channel_" + gate}.get(rule, gate),
                "beta": ("sigmoid2" if allow_neg_eigval else "sigmoid")
                if use_beta_sigmoid_in_kernel else "given",
                "l2norm": bool(use_qk_l2norm_in_kernel), "io": _name(dtype)}
        if state is not None:
            want["state"] = state
        want.update(layout="vk" if state_v_first else "kv", dims=(K, V))
        return want

    @staticmethod
    def _decode_want(rule, dtype, K, V, *, per_value, **options):
        """What an FLA-named recurrent call (one out-of-place decode kernel,
        an f32 state) asks of a spec; options as _want's."""
        return dict(Library._want(rule, dtype, K, V, state="f32", **options),
                    per_value=per_value)

    def _nodecay_spec(self, want):
        """A gated spec with gate = call for a DeltaNet call `want` (its
        kernels read a null g as 0), or None."""
        try:
            spec = self._spec(dict(want, rule="gated", gate="log"))
        except ValueError:
            return None
        return spec if spec["gate"] == "call" else None

    @staticmethod
    def _prefill_want(rule, dtype, K, V, *, chunk=None, intermediate=False, pool_dtype=None,
                      fn="prefill", **options):
        """What a prefill call asks of a spec: options as _want's; chunk
        None lets the specs choose; intermediate (FLA's
        return_intermediate_states) needs chunks of 64; pool_dtype, a state
        pool's dtype (used in place, so the spec's state must match)."""
        want = {"entry": "prefill", **Library._want(rule, dtype, K, V, **options)}
        if chunk is not None:
            want["chunk"] = chunk
        if intermediate:  # FLA's h: one state per chunk of 64
            if chunk not in (None, 64):
                raise ValueError(f"{fn}: return_intermediate_states keeps the state entering "
                                 f"each chunk of 64 (FLA's), not chunk_size={chunk}")
            want["chunk"] = 64
        if pool_dtype is not None:
            want["state"] = _name(pool_dtype)
        return want

    def _checkpoints(self, fn, spec, B, T, N, per, cu, cu_seqlens_cpu, q, intermediate_dtype,
                     state_checkpoints, checkpoint_cu_starts, every_n_tokens):
        """The checkpoint arguments of a prefill call (deltac_api.h):
        (tensor, rows, dtype, starts, every_n_tokens), tensor None for none.
        FLA's return_intermediate_states (intermediate_dtype set): a new
        [B, NT, *per] tensor (varlen: [1, total chunks, *per]), the state
        entering each chunk of 64. FlashInfer's state_checkpoints: the
        caller's [rows, *per] tensor, f32 or q's dtype, the state after
        every every_n_tokens tokens of sequence n at rows
        checkpoint_cu_starts[n] + j (int64 [N + 1] on the GPU)."""
        every_n_tokens = int(every_n_tokens)
        wants_fi = state_checkpoints is not None or checkpoint_cu_starts is not None \
            or every_n_tokens != 0
        if intermediate_dtype is not None and wants_fi:
            raise ValueError(f"{fn}: return_intermediate_states and state_checkpoints are "
                             f"two forms of one output: pass one")
        if intermediate_dtype is not None:
            if spec["chunk"] != 64:
                raise ValueError(f"{fn}: return_intermediate_states keeps the state entering "
                                 f"each chunk of 64 (FLA's); this library's spec "
                                 f"{spec['name']} has chunks of {spec['chunk']}")
            if intermediate_dtype not in (torch.float32, q.dtype):
                raise ValueError(f"{fn}: intermediate states are f32 or q's dtype "
                                 f"{q.dtype}, got {intermediate_dtype}")
            if cu is None:
                nt = (T + 63) // 64
                h = torch.empty((B, nt) + per, dtype=intermediate_dtype, device=q.device)
            else:
                # The tensor's size needs the chunk count on the host (FLA
                # computes it from cu_seqlens too): from cu_seqlens_cpu, else
                # one copy of cu_seqlens.
                host = torch.as_tensor(cu_seqlens_cpu if cu_seqlens_cpu is not None
                                       else cu.cpu()).to(torch.int64)
                nt = int(((host[1:] - host[:-1] + 63) // 64).sum())
                h = torch.empty((1, nt) + per, dtype=intermediate_dtype, device=q.device)
            # No chunk (T = 0): nothing to keep (the C API needs a row).
            if h.numel() == 0:
                return None, 0, None, None, 0
            return h, h.shape[0] * h.shape[1], intermediate_dtype, None, 0
        if not wants_fi:
            return None, 0, None, None, 0
        if state_checkpoints is None or checkpoint_cu_starts is None or every_n_tokens <= 0:
            raise ValueError(f"{fn}: state_checkpoints, checkpoint_cu_starts and a positive "
                             f"checkpoint_every_n_tokens go together (as in FlashInfer)")
        if every_n_tokens % spec["chunk"]:
            raise ValueError(f"{fn}: checkpoint_every_n_tokens = {every_n_tokens} must be a "
                             f"multiple of the spec's chunk {spec['chunk']}")
        _check_cuda("state_checkpoints", state_checkpoints, q.device)
        _check_cuda("checkpoint_cu_starts", checkpoint_cu_starts, q.device)
        if state_checkpoints.dim() != 4 or tuple(state_checkpoints.shape[1:]) != per \
                or state_checkpoints.dtype not in (torch.float32, q.dtype) \
                or not state_checkpoints.is_contiguous():
            raise ValueError(f"state_checkpoints must be a contiguous f32 or {q.dtype} tensor "
                             f"of shape [rows, {', '.join(map(str, per))}], got "
                             f"{tuple(state_checkpoints.shape)} {state_checkpoints.dtype}")
        if checkpoint_cu_starts.dtype != torch.int64 or \
                tuple(checkpoint_cu_starts.shape) != (N + 1,):
            raise ValueError(f"checkpoint_cu_starts must be int64 [{N + 1}], got "
                             f"{tuple(checkpoint_cu_starts.shape)} {checkpoint_cu_starts.dtype}")
        return (state_checkpoints, state_checkpoints.shape[0], state_checkpoints.dtype,
                checkpoint_cu_starts.contiguous(), every_n_tokens)

    # ------------------------------------------------------- serving decode
    @deltac_ops.traced
    def gated_delta_rule_decode(self, q, k, v, a, b, A_log, dt_bias, state,
                                state_indices=None, output_state_indices=None, scale=None,
                                use_qk_l2norm_in_kernel=True, intermediate_states=None,
                                disable_state_update=False, ssm_state_indices=None,
                                num_accepted_tokens=None, error_flag=None, state_v_first=True,
                                cu_seqlens=None):
        """Pool-indexed decode as vLLM / SGLang / FlashInfer call it: raw `a`
        and `b` projections with A_log and dt_bias, a state pool
        [slots, HV, V, K] (state_v_first, the default) or [slots, HV, K, V];
        a slot may hold more than the state (vLLM's hybrid cache): slots
        state.stride(0) elements apart, each state contiguous.
        state_indices [B] picks each row's slot (negative: padding, o = 0),
        output_state_indices [B] a separate slot to write (split pool);
        intermediate_states [B, T, HV, ...] receives every step's state and
        disable_state_update leaves the pool unchanged (SGLang);
        ssm_state_indices [B, T] with num_accepted_tokens [B] is vLLM's
        speculative form. With cu_seqlens (vLLM's query_start_loc, [N + 1])
        q is [1, tokens, H, K] holding N rows of 0..max_t tokens, the
        indices are per row ([N], [N, S]) and intermediate_states is [1,
        tokens, HV, ...]. Indices and cu_seqlens are int32 or int64 on the
        GPU, never copied to the host nor narrowed (any int64 one makes the
        call read all as int64). The kernel skips a row with an index >=
        slots, a num_accepted_tokens out of range or a bad cu_seqlens row
        (o = 0, no state read or written) and raises error_flag (int32 [1];
        None: the module's flag, see check_errors). Returns o [B, T, HV, V]."""
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
        slot_stride = _slot_stride("state", state, per)
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
        # Every row of o is written by the kernel (a skipped row's as 0).
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
        self._decode(spec, q, k, v, o, state, a.contiguous(), b.contiguous(), scale,
                     A_log.to(torch.float32).contiguous(), dt_bias.to(torch.float32).contiguous(),
                     in_idx, out_idx, intermediate_states, disable_state_update, idx2d, accepted,
                     error_flag, cu, kind="serving", slot_stride=slot_stride)
        return o


class CPPending:
    """A rank's context-parallel prefill between its phases (Library.
    _prefill_cp): .transfer [HV, K * (V + K)] f32 (per value head b [K][V],
    then M [K][K], the library's cp_transfer layout) is what the rank
    publishes."""

    def __init__(self, ctx, rule, kw, N, cont_in, cont_out, HV, K, V, o, want_final):
        self.ctx, self.rule, self.kw, self.N = ctx, rule, kw, N
        self.cont_in, self.cont_out = cont_in, cont_out
        self.HV, self.K, self.V, self.o, self.want_final = HV, K, V, o, want_final
        self.work = {}  # phase 1's workspace, read again by phase 2
        self.head, self.t_head, self.head_transfer = None, 0, None
        self.rest_final, self.transfer = None, None


class CPContext:
    """FLA's FLACPContext (fla.ops.cp) fields that deltac reads, plus
    `rank` (for the two-phase use without a process group)."""

    def __init__(self, group=None, cu_seqlens=None, cu_seqlens_cpu=None, is_last_rank=None,
                 pre_num_ranks=None, is_first_rank=None, post_num_ranks=None, rank=None):
        self.group, self.cu_seqlens, self.cu_seqlens_cpu = group, cu_seqlens, cu_seqlens_cpu
        self.is_last_rank, self.pre_num_ranks = is_last_rank, pre_num_ranks
        self.is_first_rank, self.post_num_ranks, self.rank = is_first_rank, post_num_ranks, rank


def build_cp_context(cu_seqlens, group=None, cu_seqlens_cpu=None, *, rank=None,
                     world_size=None):
    """FLA's build_cp_context (fla.ops.cp.get_cp_cu_seqlens, the same
    partition): the global cu_seqlens' T tokens split into world_size equal
    slices (T must be a multiple of it); this rank's local cu_seqlens and
    where its first / last sequence started / ends. group None: pass rank
    and world_size (the two-phase use, Library.cp_finish)."""
    if group is not None:
        import torch.distributed as dist
        world_size, rank = dist.get_world_size(group), dist.get_rank(group)
    if rank is None or world_size is None:
        raise ValueError("build_cp_context: give a process group, or rank and world_size")
    cpu = torch.as_tensor(cu_seqlens if cu_seqlens_cpu is None else cu_seqlens_cpu)
    cpu = cpu.cpu().to(torch.int64)
    total = int(cpu[-1])
    if total < world_size or total % world_size:
        raise ValueError(f"build_cp_context: {total} tokens must be a positive multiple of "
                         f"world_size = {world_size}")
    part = total // world_size
    lo, hi = part * rank, part * (rank + 1)
    first = int(torch.searchsorted(cpu[1:], lo, right=True))
    last = int(torch.searchsorted(cpu[:-1], hi, right=False))
    local = (cpu[first:last + 1].clamp(lo, hi) - lo).unique_consecutive()
    start, end = int(cpu[first]), int(cpu[last])
    first_rank, last_rank = start // part, (end - 1) // part
    device = cu_seqlens.device if isinstance(cu_seqlens, torch.Tensor) else "cpu"
    return CPContext(group=group, cu_seqlens=local.to(torch.int32).to(device),
                     cu_seqlens_cpu=local.to(torch.int32), is_last_rank=rank == last_rank,
                     pre_num_ranks=rank - first_rank, is_first_rank=rank == first_rank,
                     post_num_ranks=last_rank - rank, rank=rank)


def _fla():
    """deltac_fla.py, beside this file (imported when first asked for: it
    needs flash-linear-attention)."""
    try:
        from . import deltac_fla
    except ImportError:
        import deltac_fla
    return deltac_fla


def _recurrent_shapes(q, k, v, *others):
    """(B, T, H, K, HV, V) of an FLA-named recurrent call, after checking
    q, k, v (and the (name, tensor) pairs in others) are on q's GPU, q and
    v are [B, T, heads, dim] with HV a multiple of H, and q, k, v share a
    dtype."""
    _check_gpu_q(q)
    for name, t in (("k", k), ("v", v)) + others:
        _check_cuda(name, t, q.device)
    if v.dim() != 4:
        raise ValueError(f"q and v must be [B, T, heads, dim], got {tuple(q.shape)} and {tuple(v.shape)}")
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if HV % H:
        raise ValueError(f"v has HV = {HV} heads, not a multiple of H = {H}")
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one dtype of bf16/f16/f32, got {q.dtype}, {k.dtype}, {v.dtype}")
    return B, T, H, K, HV, V


def _kda_gate(fn, q, k, v, g, beta, A_log, dt_bias, use_gate_in_kernel, lower_bound,
              allow_neg_eigval, use_beta_sigmoid_in_kernel):
    """The checks and gate parameters a KDA decode call shares: ((B, T, H,
    K, HV, V), raw, the bounded gate's bound or None, A_log, dt_bias - the
    last two as the kernel reads them, None without the raw gate)."""
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError(f"{fn}: allow_neg_eigval=True requires "
                         f"use_beta_sigmoid_in_kernel=True (as in FLA)")
    raw = bool(use_gate_in_kernel)
    bound = _lower_bound(fn, lower_bound) if raw else None
    shapes = _recurrent_shapes(q, k, v, ("g", g), ("beta", beta))
    if raw:
        A_log, dt_bias = _raw_gate_params(A_log, dt_bias, shapes[4], q.device, per_key=shapes[3],
                                          bounded=bound is not None, fn=fn)
    else:
        A_log = dt_bias = None
    return shapes, raw, bound, A_log, dt_bias


def _token_inputs(spec, q, v, g, beta, gshape, raw, output, output_name):
    """A decode call's g (shape gshape, or None), beta ([B, T, HV], or
    [B, T, HV, V] for a per_value spec) as the kernel reads them, and its
    o: the caller's `output` (checked) or a new tensor."""
    B, T = q.shape[:2]
    HV, V = v.shape[2], v.shape[3]
    if g is not None:
        if tuple(g.shape) != gshape:
            raise ValueError(f"g has shape {tuple(g.shape)}, expected {gshape}")
        # The kernel reads f32 log g, or a raw a in q's dtype: other
        # dtypes are converted here (FLA's callers pass these).
        g = g.to(_gate_dtype(spec, g, q.dtype, raw)).contiguous()
    betas = [(B, T, HV)] + ([(B, T, HV, V)] if spec["per_value"] else [])
    if tuple(beta.shape) not in betas:
        raise ValueError(f"beta has shape {tuple(beta.shape)}, expected "
                         f"{' or '.join(str(x) for x in betas)}")
    if beta.dtype not in (torch.float32, q.dtype):
        beta = beta.to(torch.float32)  # read in f32 or q's dtype, never rounded
    if output is not None:
        _caller_buffer(output_name, output, (B, T, HV, V), q.dtype, q.device)
        o = output
    else:
        # Every row of o is written by the kernel (a skipped row's as 0).
        o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
    return g, beta.contiguous(), o


def _name(dtype):
    for n, d in _NAMES.items():
        if d == dtype:
            return n
    raise ValueError(f"unsupported dtype {dtype}; use bf16, f16 or f32")


def _debug_checks():
    """DELTAC_DEBUG_CHECKS=1: the library copies device-resident indices and
    cu_seqlens to the host and checks them before launching (synchronises,
    so not inside CUDA graph capture); a bad value raises ValueError."""
    return os.environ.get("DELTAC_DEBUG_CHECKS", "0") not in ("", "0")


def _check_flag(t, device):
    _check_cuda("error_flag", t, device)
    if t.dtype != torch.int32 or t.numel() < 1 or not t.is_contiguous():
        raise ValueError(f"error_flag must be a contiguous int32 tensor, got "
                         f"{tuple(t.shape)} {t.dtype}")


def _state_layout(fn, state_v_first, transpose_state_layout):
    """FLA's deprecated transpose_state_layout (None: not given) is
    state_v_first; both at once raise ValueError, as in FLA."""
    if transpose_state_layout is None:
        return bool(state_v_first)
    if state_v_first:
        raise ValueError(f"{fn}: cannot pass both state_v_first and the deprecated "
                         f"transpose_state_layout")
    warnings.warn("transpose_state_layout is deprecated and renamed to state_v_first",
                  DeprecationWarning, stacklevel=3)
    return bool(transpose_state_layout)


def _chunk_size(fn, chunk_size, allowed):
    """FLA's chunk_size: must be one FLA allows; its default (64) leaves the
    chunk to the library's specs (the result differs only by rounding),
    another value is the spec's chunk to select."""
    if chunk_size not in allowed:
        raise ValueError(f"{fn}: chunk_size must be one of {allowed} (as in FLA), got {chunk_size!r}")
    return None if chunk_size == 64 else int(chunk_size)


def _raw_gate_params(A_log, dt_bias, HV, device, per_key, bounded=False,
                     fn="use_gate_in_kernel"):
    """A_log [HV] and dt_bias ([HV], or [HV * K] / [HV, K] with per_key = K)
    as contiguous f32 (already so: as passed). None stays None: the kernels
    read a null dt_bias as 0 (FLA's optional dt_bias) and a null A_log as
    a factor 1, which only the bounded gate allows (as FLA)."""
    if A_log is None:
        if not bounded:
            raise ValueError(f"{fn}: A_log must be provided when use_gate_in_kernel=True "
                             f"and lower_bound is not set (FLA's chunk functions require "
                             f"it too)")
    else:
        _check_cuda("A_log", A_log, device)
        # [HV], or one value per head in a broadcastable shape such as
        # FLA's KDA tests' [1, 1, HV, 1].
        if A_log.numel() != HV or sum(d != 1 for d in A_log.shape) > 1:
            raise ValueError(f"A_log must be [{HV}] (one value per value head), got "
                             f"{tuple(A_log.shape)}")
        A_log = A_log.reshape(HV).to(torch.float32).contiguous()
    if dt_bias is not None:
        n = HV * per_key if per_key else HV
        _check_cuda("dt_bias", dt_bias, device)
        if dt_bias.numel() != n or (dt_bias.dim() != 1 and
                                    not (per_key and tuple(dt_bias.shape) == (HV, per_key))):
            raise ValueError(f"dt_bias must be [{n}], got {tuple(dt_bias.shape)}")
        dt_bias = dt_bias.to(torch.float32).contiguous()
    return A_log, dt_bias


def _intermediate_dtype(return_intermediate_states, dtype, k):
    """The dtype of FLA's intermediate states h (None: not asked): k's,
    as FLA, or the one asked for."""
    if not return_intermediate_states:
        if dtype is not None:
            raise ValueError("intermediate_states_dtype needs return_intermediate_states=True")
        return None
    return k.dtype if dtype is None else dtype


def _slot_stride(name, pool, per):
    """The elements between slots of a state pool [slots, *per]: a slot may
    hold more than one state (vLLM's hybrid cache packs other data per
    slot), so slots may lie stride(0) apart, but each slot's state must be
    contiguous (the stride a multiple of 16 bytes: checked by the
    library)."""
    one = per[0] * per[1] * per[2]
    if pool.dim() != 4 or tuple(pool.shape[1:]) != per or \
            tuple(pool.stride()[1:]) != (per[1] * per[2], per[2], 1) or \
            (pool.shape[0] > 1 and pool.stride(0) < one):
        raise ValueError(f"{name} must be a pool [slots, {', '.join(map(str, per))}] with each "
                         f"slot's state contiguous, got {tuple(pool.shape)} strides "
                         f"{tuple(pool.stride())}")
    return pool.stride(0) if pool.shape[0] > 1 else one


def _lower_bound(fn, lower_bound):
    """FLA's KDA lower_bound as a finite float, or None."""
    if lower_bound is None:
        return None
    try:
        bound = float(lower_bound)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: lower_bound must be a number, got {lower_bound!r}") from None
    if not math.isfinite(bound):
        raise ValueError(f"{fn}: lower_bound must be finite, got {lower_bound!r}")
    return bound


def _cu_seqlens(cu_seqlens, B, device):
    """Validates cu_seqlens [N + 1] (int32/int64, on q's device) and returns
    it contiguous in its own dtype (never cast, never copied to the host),
    or None."""
    if cu_seqlens is None:
        return None
    if B != 1:
        raise ValueError(f"cu_seqlens needs B = 1 (sequences packed along T), got B = {B}")
    _check_cuda("cu_seqlens", cu_seqlens, device)
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2 or \
            cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cu_seqlens must be a 1-D int32/int64 tensor of N + 1 >= 2 offsets, "
                         f"got {tuple(cu_seqlens.shape)} {cu_seqlens.dtype}")
    return cu_seqlens.contiguous()


def _index(name, t, shape, device):
    """An index tensor checked for device, shape and dtype (int32 or int64),
    contiguous, in its own dtype."""
    _check_cuda(name, t, device)
    if t.dim() != len(shape) or any(w is not None and s != w for s, w in zip(t.shape, shape)):
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be int32 or int64, got {t.dtype}")
    return t.contiguous()


def _same_width(tensors):
    """(tensors, i64): all int64 when any is (the int32 ones widened on the
    device, which is exact), else as given (int32); None stays None. Never
    narrows."""
    i64 = any(t is not None and t.dtype == torch.int64 for t in tensors)
    if i64:
        tensors = tuple(None if t is None else t.to(torch.int64).contiguous() for t in tensors)
    return tensors, i64
