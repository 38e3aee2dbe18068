"""Checks of the generated Python module (deltac_torch.py) that need torch
but no GPU: FLA's signatures (the pinned release's parameters, order and
defaults, written out below), FLA's **kwargs keys (non-default unsupported
-> ValueError naming it, unknown -> TypeError), the ctypes argument structs
against deltac_api.h, the int64 index rule (never narrowed), and the error
flag's contract (allocation refused during graph capture, check_errors'
message and clearing, the status -> exception mapping).

tests/gpu/test_python.py runs them on the GPU machine (and compares the
table below with the live FLA there); without a GPU:
    python3 tests/gpu/python_api_checks.py [--fla-src FLA_CHECKOUT]
(prints a table, exits non-zero on a failure; --fla-src also compares the
table below with FLA's source, parsed, not imported).
"""
import inspect
import os
import re
import sys
import warnings

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REQUIRED = inspect.Parameter.empty

# flash-linear-attention 0.5.2 (commit bc3b101): each function's explicit
# parameters in order with their defaults, and the keys it reads from
# **kwargs with the default it assumes (None: "not given").
FLA_SIGNATURES = {
    "fused_recurrent_gated_delta_rule": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("g", None), ("gk", None),
         ("gv", None), ("beta", None), ("scale", None), ("initial_state", None),
         ("output_final_state", False), ("use_qk_l2norm_in_kernel", False),
         ("use_gate_in_kernel", False), ("A_log", None), ("dt_bias", None),
         ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
         ("state_v_first", False), ("cu_seqlens", None)],
        {"transpose_state_layout": None}),
    "chunk_gated_delta_rule": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("g", REQUIRED), ("beta", REQUIRED),
         ("scale", None), ("initial_state", None), ("output_final_state", False),
         ("use_qk_l2norm_in_kernel", False), ("use_beta_sigmoid_in_kernel", False),
         ("allow_neg_eigval", False), ("state_v_first", False), ("cu_seqlens", None),
         ("cu_seqlens_cpu", None), ("chunk_indices", None), ("cp_context", None)],
        {"transpose_state_layout": None, "head_first": False, "chunk_size": 64,
         "use_gate_in_kernel": False, "A_log": None, "dt_bias": None}),
    "chunk_kda": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("g", REQUIRED), ("beta", REQUIRED),
         ("scale", None), ("initial_state", None), ("output_final_state", False),
         ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
         ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
         ("safe_gate", False), ("lower_bound", None), ("disable_recompute", False),
         ("return_intermediate_states", False), ("state_v_first", False),
         ("cu_seqlens", None), ("cu_seqlens_cpu", None), ("cp_context", None)],
        {"transpose_state_layout": None, "A_log": None, "dt_bias": None, "chunk_size": 64}),
    "fused_recurrent_delta_rule": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("beta", None), ("scale", None),
         ("initial_state", None), ("output_final_state", False),
         ("use_qk_l2norm_in_kernel", False), ("cu_seqlens", None)],
        {}),
    "fused_recurrent_kda": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("g", REQUIRED), ("beta", REQUIRED),
         ("A_log", None), ("dt_bias", None), ("scale", None), ("initial_state", None),
         ("output_final_state", False), ("use_qk_l2norm_in_kernel", False),
         ("use_gate_in_kernel", False), ("use_beta_sigmoid_in_kernel", False),
         ("allow_neg_eigval", False), ("lower_bound", None), ("state_v_first", False),
         ("cu_seqlens", None)],
        {"transpose_state_layout": None}),
    # fla.ops.kda.fused_recurrent's internal entry, vLLM's KDA call (its
    # **kwargs are read by nothing).
    "fused_recurrent_kda_fwd": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("g", REQUIRED), ("beta", REQUIRED),
         ("A_log", None), ("dt_bias", None), ("initial_state", None), ("scale", None),
         ("output_final_state", False), ("inplace_final_state", True),
         ("state_v_first", False), ("cu_seqlens", None), ("ssm_state_indices", None),
         ("num_accepted_tokens", None), ("use_qk_l2norm_in_kernel", False),
         ("use_gate_in_kernel", False), ("use_beta_sigmoid_in_kernel", False),
         ("allow_neg_eigval", False), ("lower_bound", None), ("out", None)],
        {}),
    "chunk_delta_rule": (
        [("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("beta", REQUIRED), ("scale", None),
         ("initial_state", None), ("output_final_state", False),
         ("use_qk_l2norm_in_kernel", False), ("cu_seqlens", None), ("cu_seqlens_cpu", None)],
        {"head_first": False, "chunk_size": 64}),
}

# Arguments FLA gives a meaning that deltac does not implement: each,
# set as here, must raise ValueError naming it before anything touches a
# tensor (so q may be None). (function, kwargs, name in the message)
UNSUPPORTED = [
    ("fused_recurrent_gated_delta_rule", {"gk": "x", "g": "x"}, "gk"),
    ("fused_recurrent_gated_delta_rule", {"gk": "x", "use_gate_in_kernel": True}, "gk"),
    ("fused_recurrent_gated_delta_rule", {"allow_neg_eigval": True}, "allow_neg_eigval"),
    ("fused_recurrent_gated_delta_rule", {"state_v_first": True, "transpose_state_layout": True},
     "transpose_state_layout"),
    ("chunk_gated_delta_rule", {"cp_context": object()}, "cp_context"),
    ("chunk_gated_delta_rule", {"head_first": True}, "head_first"),
    ("chunk_gated_delta_rule", {"chunk_size": 128}, "chunk_size"),
    ("chunk_gated_delta_rule", {"allow_neg_eigval": True}, "allow_neg_eigval"),
    ("chunk_gated_delta_rule", {"state_v_first": True, "transpose_state_layout": False},
     "transpose_state_layout"),
    ("chunk_kda", {"safe_gate": True, "use_gate_in_kernel": True}, "safe_gate"),
    ("chunk_kda", {"safe_gate": True, "use_gate_in_kernel": True, "lower_bound": -6.0},
     "lower_bound"),
    ("chunk_kda", {"use_gate_in_kernel": True, "lower_bound": float("inf")}, "lower_bound"),
    ("fused_recurrent_kda", {"use_gate_in_kernel": True, "lower_bound": float("nan")},
     "lower_bound"),
    ("chunk_kda", {"intermediate_states_dtype": "x"}, "intermediate_states_dtype"),
    ("chunk_gated_delta_rule", {"intermediate_states_dtype": "x"}, "intermediate_states_dtype"),
    ("chunk_kda", {"cp_context": object()}, "cp_context"),
    ("chunk_kda", {"chunk_size": 16}, "chunk_size"),
    ("chunk_kda", {"allow_neg_eigval": True}, "allow_neg_eigval"),
    ("chunk_kda", {"state_v_first": True, "transpose_state_layout": True},
     "transpose_state_layout"),
]

# Keywords FLA does not have (FLA's fused_recurrent would swallow the
# first silently): TypeError.
UNKNOWN = [("fused_recurrent_gated_delta_rule", "chunk_indices"),
           ("fused_recurrent_gated_delta_rule", "use_qk_l2norm"),
           ("chunk_gated_delta_rule", "disable_recompute"),
           ("chunk_gated_delta_rule", "output_final_states"),
           ("chunk_kda", "head_first"),
           ("chunk_kda", "chunk_indices")]


def _rest(fn):
    """The required arguments after q, k, v (None: never reached)."""
    return {} if fn.startswith("fused") and fn != "fused_recurrent_kda" \
        else {"g": None, "beta": None}


def signature_mismatches(ours, fla_params, fla_kwargs):
    """What differs between `ours` (a callable) and FLA's parameters: []
    when FLA's explicit parameters come first, in order, positional-or-
    keyword with FLA's defaults, and everything after them (FLA's **kwargs
    keys with FLA's defaults, deltac's extensions) is keyword-only with no
    **kwargs catch-all."""
    params = list(inspect.signature(ours).parameters.values())
    bad = []
    for i, (name, default) in enumerate(fla_params):
        if i >= len(params):
            bad.append(f"missing {name}")
            continue
        p = params[i]
        if p.name != name or p.kind != p.POSITIONAL_OR_KEYWORD or \
                not _same_default(p.default, default):
            bad.append(f"#{i}: {p.name}={p.default!r} ({p.kind.name}), FLA {name}={default!r}")
    for p in params[len(fla_params):]:
        if p.kind != p.KEYWORD_ONLY:
            bad.append(f"{p.name} is {p.kind.name}, not keyword-only")
    rest = {p.name: p.default for p in params[len(fla_params):]}
    for key, default in fla_kwargs.items():
        if key not in rest:
            bad.append(f"FLA's **kwargs key {key} is not a keyword-only parameter")
        elif not _same_default(rest[key], default):
            bad.append(f"{key} defaults to {rest[key]!r}, FLA to {default!r}")
    return bad


def _same_default(a, b):
    return a is b or (type(a) is type(b) and a == b)


def fla_live_params(fn):
    """(explicit parameters as (name, default), has **kwargs) of a live FLA
    function (inspect follows its dispatch wrappers)."""
    ps = list(inspect.signature(fn).parameters.values())
    return ([(p.name, p.default) for p in ps if p.kind != p.VAR_KEYWORD],
            any(p.kind == p.VAR_KEYWORD for p in ps))


FLA_FILES = {"fused_recurrent_gated_delta_rule": "fla/ops/gated_delta_rule/fused_recurrent.py",
             "chunk_gated_delta_rule": "fla/ops/gated_delta_rule/chunk.py",
             "chunk_kda": "fla/ops/kda/chunk.py",
             "fused_recurrent_delta_rule": "fla/ops/delta_rule/fused_recurrent.py",
             "chunk_delta_rule": "fla/ops/delta_rule/chunk.py",
             "fused_recurrent_kda": "fla/ops/kda/fused_recurrent.py",
             "fused_recurrent_kda_fwd": "fla/ops/kda/fused_recurrent.py"}


def fla_source_params(fla_dir, fn):
    """(explicit parameters as (name, default), **kwargs keys read) of FLA's
    function `fn` parsed from its source under fla_dir (no import: FLA's
    import needs a matching triton): the keys are those of kwargs.get(...),
    kwargs.pop(...), kwargs[...] and '...' in kwargs in its body."""
    import ast
    tree = ast.parse(open(os.path.join(fla_dir, FLA_FILES[fn])).read())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn)
    args = node.args.args
    defaults = [REQUIRED] * (len(args) - len(node.args.defaults)) + \
        [ast.literal_eval(d) for d in node.args.defaults]
    keys = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.value.id == "kwargs" and n.args:
            keys.add(ast.literal_eval(n.args[0]))
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == "kwargs":
            keys.add(ast.literal_eval(n.slice))
        elif isinstance(n, ast.Compare) and isinstance(n.comparators[0], ast.Name) and \
                n.comparators[0].id == "kwargs" and isinstance(n.left, ast.Constant):
            keys.add(n.left.value)
    return [(a.arg, d) for a, d in zip(args, defaults)], keys


def compare_with_fla_source(fla_dir, check):
    """The table above against FLA's source at fla_dir (its fla/__init__.py
    version must be the pinned one)."""
    version = re.search(r'__version__ = "(.*?)"',
                        open(os.path.join(fla_dir, "fla", "__init__.py")).read()).group(1)
    check("FLA source is the pinned 0.5.2", version == "0.5.2", f"found {version}")
    for fn, (params, kwargs) in FLA_SIGNATURES.items():
        src, keys = fla_source_params(fla_dir, fn)
        check(f"table of {fn} = FLA source's parameters and **kwargs keys",
              src == params and keys == set(kwargs),
              f"params {'same' if src == params else src}; kwargs keys {sorted(keys)}")


def header_fields(struct):
    """deltac_api.h's fields of `struct` in order as (name, ctypes type)."""
    text = open(os.path.join(ROOT, "templates", "runtime", "deltac_api.h")).read()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    import ctypes
    fields = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.match(r"(const )?(\w+) (.*)", decl)
        ctype, names = m.group(2), m.group(3)
        for n in names.split(","):
            n = n.strip()
            if n.startswith("*"):
                fields.append((n.lstrip("*").strip(), ctypes.c_void_p))
            else:
                fields.append((n, {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32,
                                   "deltac_dtype": ctypes.c_int32, "float": ctypes.c_float}[ctype]))
    return fields


def run(dt, lib, check):
    """All checks on module `dt` (deltac_torch) and a Library `lib` of it;
    check(name, ok, detail) records each."""
    # FLA's signatures.
    for fn, (params, kwargs) in FLA_SIGNATURES.items():
        bad = signature_mismatches(getattr(lib, fn), params, kwargs)
        check(f"signature of {fn} = FLA 0.5.2's", not bad, "; ".join(bad)[:200])
    # Non-default values of what deltac does not implement: ValueError naming it.
    for fn, kwargs, name in UNSUPPORTED:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                getattr(lib, fn)(None, None, None, **_rest(fn), **kwargs)
            check(f"{fn}({', '.join(kwargs)}) -> ValueError", False, "no error")
        except ValueError as e:
            check(f"{fn}({', '.join(kwargs)}) -> ValueError", name in str(e), str(e)[:100])
        except Exception as e:  # noqa: BLE001
            check(f"{fn}({', '.join(kwargs)}) -> ValueError", False, f"{type(e).__name__}: {e}")
    for fn, key in UNKNOWN:
        try:
            getattr(lib, fn)(None, None, None, **_rest(fn), **{key: 1})
            check(f"{fn}({key}=...) unknown -> TypeError", False, "no error")
        except TypeError as e:
            check(f"{fn}({key}=...) unknown -> TypeError", key in str(e), str(e)[:100])
        except Exception as e:  # noqa: BLE001
            check(f"{fn}({key}=...) unknown -> TypeError", False, f"{type(e).__name__}: {e}")

    # The ctypes structs mirror deltac_api.h field for field (indices_i64 last).
    for struct, cls in (("deltac_decode_args", dt._DecodeArgs),
                        ("deltac_prefill_args", dt._PrefillArgs)):
        want = header_fields(struct)
        ok = [(n, t) for n, t in cls._fields_] == want
        check(f"ctypes {cls.__name__} = deltac_api.h's {struct}", ok,
              f"{len(cls._fields_)} fields, header {len(want)}; last {cls._fields_[-1][0]}")

    # int64 indices: never narrowed; a mix is widened to int64.
    big = torch.tensor([2 ** 32 + 1, 3], dtype=torch.int64)
    small = torch.tensor([1, 2], dtype=torch.int32)
    (a, b, c), i64 = dt._same_width((big, small, None))
    check("int64 index kept (2^32 + 1 stays 2^32 + 1), int32 widened, flag set",
          i64 and a.dtype == b.dtype == torch.int64 and int(a[0]) == 2 ** 32 + 1
          and b.tolist() == [1, 2] and c is None, f"i64={i64}, {a.tolist()} {b.tolist()}")
    (a, b), i64 = dt._same_width((small, None))
    check("all-int32 indices stay int32", not i64 and a.dtype == torch.int32)
    x = dt._index("state_indices", big, (2,), big.device)
    check("_index keeps int64", x.dtype == torch.int64 and int(x[0]) == 2 ** 32 + 1)
    cu = dt._cu_seqlens(torch.tensor([0, 3, 5], dtype=torch.int64), 1, torch.device("cpu"))
    check("cu_seqlens keeps int64 (no cast)", cu.dtype == torch.int64)

    # The error flag: no allocation during capture; check_errors' message,
    # clearing; nothing when no call used it.
    saved = dict(dt._FLAGS), {k: dict(v) for k, v in dt._KINDS.items()}
    capturing = torch.cuda.is_current_stream_capturing
    dev = 1000  # a device index no machine has: the tables only
    try:
        dt._FLAGS.pop(dev, None)
        torch.cuda.is_current_stream_capturing = lambda: True
        try:
            dt.error_flag(dev)
            check("error flag first needed during capture -> RuntimeError", False, "no error")
        except RuntimeError as e:
            check("error flag first needed during capture -> RuntimeError",
                  "before capturing" in str(e) and "error_flag=" in str(e), str(e)[:100])
        torch.cuda.is_current_stream_capturing = lambda: False  # no CUDA here
        check("check_errors before any call: no error", dt.check_errors(dev) is None)
        dt._FLAGS[dev] = torch.tensor([1], dtype=torch.int32)  # as a kernel leaves it
        dt._KINDS[dev] = {"serving": None}
        try:
            dt.check_errors(dev)
            check("check_errors on a raised flag -> RuntimeError", False, "no error")
        except RuntimeError as e:
            msg = str(e)
            check("check_errors on a raised flag -> RuntimeError naming the causes",
                  "num_accepted_tokens" in msg and ">= the pool's slots" in msg
                  and "cu_seqlens" in msg and "prefill" not in msg, msg[:120])
        check("check_errors clears the flag", int(dt._FLAGS[dev][0]) == 0 and dt.check_errors(dev) is None)
    finally:
        torch.cuda.is_current_stream_capturing = capturing
        dt._FLAGS.clear()
        dt._FLAGS.update(saved[0])
        dt._KINDS.clear()
        dt._KINDS.update(saved[1])

    # Status -> exception: INVALID_ARGUMENT (what debug checks return) and
    # UNSUPPORTED -> ValueError with the library's message; CUDA errors ->
    # RuntimeError. (A stand-in for the shared library and the stream.)
    class FakeLib:
        def __init__(self, rc):
            self.rc = rc

        def __getitem__(self, name):
            return lambda args, stream: self.rc

    current_stream = torch.cuda.current_stream
    torch.cuda.current_stream = lambda: type("S", (), {"cuda_stream": 0})()
    try:
        for rc, exc in ((1, ValueError), (2, ValueError), (3, RuntimeError)):
            lib._lib = FakeLib(rc)
            lib._last_error = lambda: b"cu_seqlens: entry 1 = -64 is negative"
            try:
                lib._call({"name": "x"}, dt._DecodeArgs())
                check(f"status {rc} -> {exc.__name__}", False, "no error")
            except Exception as e:  # noqa: BLE001
                check(f"status {rc} -> {exc.__name__} with the message",
                      type(e) is exc and "entry 1 = -64" in str(e), f"{type(e).__name__}: {e}")
        a = dt._DecodeArgs()
        a.debug_checks = 1
        torch.cuda.is_current_stream_capturing = lambda: True
        try:
            lib._call({"name": "x"}, a)
            check("DELTAC_DEBUG_CHECKS during capture -> RuntimeError", False, "no error")
        except RuntimeError as e:
            check("DELTAC_DEBUG_CHECKS during capture -> RuntimeError", "capturing" in str(e),
                  str(e)[:100])
    finally:
        torch.cuda.current_stream = current_stream
        torch.cuda.is_current_stream_capturing = capturing
        lib._lib = None


# A library like generated/gdn's (decode and prefill, kv and vk, the
# serving form) for dry_runs.
DRY_SPECS = [
    dict(name="fla_kv", rule="gated", gate="log", beta="given", l2norm=False, io="bf16",
         state="f32", layout="kv", dims=[(64, 64)], entries=["decode", "prefill"], max_t=8, per_value=False,
         chunk=64),
    dict(name="fla_vk", rule="gated", gate="log", beta="given", l2norm=False, io="bf16",
         state="f32", layout="vk", dims=[(64, 64)], entries=["decode", "prefill"], max_t=8, per_value=False,
         chunk=64),
    dict(name="serving", rule="gated", gate="raw", beta="sigmoid", l2norm=True, io="bf16",
         state="f32", layout="vk", dims=[(64, 64)], entries=["decode", "prefill"], max_t=8, per_value=False,
         chunk=64),
    dict(name="kda", rule="kda", gate="channel_log", beta="given", l2norm=False, io="bf16",
         state="f32", layout="kv", dims=[(64, 64)], entries=["prefill"], max_t=0, chunk=32, per_value=False),
    dict(name="kda_dec", rule="kda", gate="channel_log", beta="given", l2norm=True, io="bf16",
         state="f32", layout="kv", dims=[(64, 64)], entries=["decode"], max_t=8, per_value=False,
         chunk=64),
    # `l2norm = call beta = call` (as every spec of generated/gdn): f16, so
    # only f16 calls reach it.
    dict(name="by_call", rule="gated", gate="call", beta="call", l2norm="call", io="f16",
         state="f32", layout="kv", dims=[(64, 64)], entries=["decode", "prefill"], max_t=8,
         per_value=False, chunk=64),
]


def dry_runs(dt, check):
    """The FLA-named and serving functions on CPU tensors with the C API
    replaced by a recorder (no GPU, no shared library): which spec and
    arguments each call hands the C API - int64 indices and cu_seqlens as
    int64 with indices_i64 set (int32 ones widened), the module's error
    flag when none is given, a zeroed prefill final state, FLA's keywords
    mapped as documented."""
    import ctypes
    calls = []
    flag = torch.zeros(1, dtype=torch.int32)

    class Recorder:
        def __getitem__(self, name):
            if name.endswith("workspace_bytes"):
                f = lambda *a: 64  # noqa: E731
            else:
                def f(args, stream):
                    a = type(args._obj).from_buffer_copy(args._obj)
                    # The index arrays as the call sees them (temporaries die after it).
                    a.seen = {n: ctypes.string_at(getattr(a, n), 48) for n in
                              ("initial_state_indices", "output_state_indices", "state_indices_2d")
                              if getattr(a, n, None)}
                    calls.append((name, a))
                    return 0
            return type("Fn", (), {"__call__": staticmethod(f), "restype": None,
                                   "argtypes": None})()
    lib = dt.Library("dry", DRY_SPECS, __file__)
    lib._lib, lib._last_error = Recorder(), lambda: b""
    patched = {"_check_gpu_q": lambda q: None, "error_flag": lambda device=None: flag,
               "_device_index": lambda device: 0}
    saved = {n: getattr(dt, n) for n in patched}
    cuda_saved = torch.cuda.current_stream, torch.cuda.is_current_stream_capturing
    ptr = ctypes.c_void_p
    try:
        for n, f in patched.items():
            setattr(dt, n, f)
        torch.cuda.current_stream = lambda: type("S", (), {"cuda_stream": 0})()
        torch.cuda.is_current_stream_capturing = lambda: False
        B, T, H, HV, K = 2, 3, 2, 4, 64
        q, k = torch.randn(B, T, H, K).bfloat16(), torch.randn(B, T, H, K).bfloat16()
        v = torch.randn(B, T, HV, K).bfloat16()
        g, beta = torch.randn(B, T, HV), torch.rand(B, T, HV).bfloat16()
        h0 = torch.randn(B, HV, K, K)

        calls.clear()
        o, h = lib.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=h0,
                                                    output_final_state=True)
        name, a = calls[-1]
        check("dry: fused_recurrent -> fla_kv decode, the module's flag, no indices",
              name == "dry_fla_kv_decode" and a.error_flag == flag.data_ptr()
              and a.indices_i64 == 0 and a.cu_seqlens is None and tuple(h.shape) == (B, HV, K, K),
              f"{name}")
        calls.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            lib.fused_recurrent_gated_delta_rule(q, k, v, g, None, None, beta, None, h0, True,
                                                 transpose_state_layout=True)
        check("dry: FLA's positional order (q, k, v, g, gk, gv, beta, scale, h0, out) and "
              "transpose_state_layout -> the vk spec", calls[-1][0] == "dry_fla_vk_decode",
              calls[-1][0])
        calls.clear()
        lib.fused_recurrent_gated_delta_rule(q, k, v, g.bfloat16(), beta=beta, initial_state=h0,
                                             use_gate_in_kernel=True, A_log=torch.zeros(HV),
                                             use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                             use_qk_l2norm_in_kernel=True)
        name, a = calls[-1]
        check("dry: fused_recurrent use_gate_in_kernel -> the raw-gate spec, dt_bias None -> "
              "a null pointer (the kernel reads 0; nothing allocated)",
              name == "dry_serving_decode" and not a.dt_bias, name)
        # That spec fixes a raw gate read in bf16: an f32 a is refused by name,
        # not rounded on the side (nothing handed to the C API).
        calls.clear()
        name = "dry: fixed raw gate, f32 a -> ValueError naming g, the spec and its dtype"
        try:
            lib.fused_recurrent_gated_delta_rule(
                q, k, v, g, beta=beta, initial_state=h0, use_gate_in_kernel=True,
                A_log=torch.zeros(HV), use_beta_sigmoid_in_kernel=True, state_v_first=True,
                use_qk_l2norm_in_kernel=True)
            check(name, False, "no error")
        except ValueError as e:
            check(name, all(t in str(e) for t in ("g (the raw a) is float32", "@serving",
                                                  "bfloat16")) and not calls, str(e)[:100])
        # Options left to the call: the spec's kernels get them in the
        # args (qk_l2norm, beta_form), for decode and prefill alike; the
        # fixed specs' calls pass zeros.
        check("dry: a fixed spec's call passes qk_l2norm = beta_form = 0",
              a.qk_l2norm == 0 and a.beta_form == 0, f"{a.qk_l2norm} {a.beta_form}")
        h16 = dict(q=q.half(), k=k.half(), v=v.half(), g=g, initial_state=h0)
        for l2, sig, neg, form in ((True, True, True, 2), (False, True, False, 1),
                                   (True, False, False, 0), (False, False, False, 0)):
            calls.clear()
            lib.fused_recurrent_gated_delta_rule(beta=beta.half(), use_qk_l2norm_in_kernel=l2,
                                                 use_beta_sigmoid_in_kernel=sig,
                                                 allow_neg_eigval=neg, **h16)
            name, a = calls[-1]
            check(f"dry: l2norm={l2} sigmoid={sig} neg={neg} -> the call-option spec with "
                  f"qk_l2norm={int(l2)} beta_form={form}",
                  name == "dry_by_call_decode" and a.qk_l2norm == int(l2) and a.beta_form == form,
                  f"{name} {a.qk_l2norm} {a.beta_form}")
        # The gate by call: FLA's use_gate_in_kernel -> raw_gate; a raw g
        # in f32 or q's dtype read as given (gate_io_dtype for q's), any
        # other dtype as f32.
        for gdt, io_flag in ((torch.float32, 0), (torch.float16, 1), (torch.bfloat16, 0)):
            calls.clear()
            lib.fused_recurrent_gated_delta_rule(
                h16["q"], h16["k"], h16["v"], g.to(gdt), beta=beta.half(), initial_state=h0,
                use_gate_in_kernel=True, A_log=torch.zeros(HV))
            name, a = calls[-1]
            check(f"dry: use_gate_in_kernel with a {gdt} g -> the call-option spec with "
                  f"raw_gate=1 gate_io_dtype={io_flag}",
                  name == "dry_by_call_decode" and a.raw_gate == 1 and a.gate_io_dtype == io_flag,
                  f"{name} {a.raw_gate} {a.gate_io_dtype}")
        check("dry: ... and a log g there passes raw_gate=0",
              lib.fused_recurrent_gated_delta_rule(beta=beta.half(), **h16) is not None
              and calls[-1][1].raw_gate == 0 and calls[-1][1].gate_io_dtype == 0,
              f"{calls[-1][1].raw_gate}")
        calls.clear()
        lib.chunk_gated_delta_rule(h16["q"], h16["k"], h16["v"], g, beta.half(), initial_state=h0,
                                   use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        name, a = calls[-1]
        check("dry: chunk_gated_delta_rule on the call-option spec: qk_l2norm=1 beta_form=1",
              name == "dry_by_call_prefill" and a.qk_l2norm == 1 and a.beta_form == 1,
              f"{name} {a.qk_l2norm} {a.beta_form}")
        cu = torch.tensor([0, 2, 5], dtype=torch.int64)
        flat = lambda x: x.reshape(1, B * T, *x.shape[2:])  # noqa: E731
        calls.clear()
        lib.fused_recurrent_gated_delta_rule(flat(q)[:, :5], flat(k)[:, :5], flat(v)[:, :5],
                                             flat(g)[:, :5], beta=flat(beta)[:, :5],
                                             cu_seqlens=cu)
        name, a = calls[-1]
        check("dry: varlen decode with int64 cu_seqlens -> read as int64 (indices_i64)",
              a.indices_i64 == 1 and a.B == 2 and a.cu_seqlens == cu.data_ptr(), f"B={a.B}")

        # Prefill: final state zeroed, int64 cu_seqlens as is, chunk_size.
        calls.clear()
        o, ht = lib.chunk_gated_delta_rule(flat(q), flat(k), flat(v), flat(g), flat(beta),
                                           output_final_state=True, cu_seqlens=cu[:2].clone() * 0 +
                                           torch.tensor([0, 6]))
        name, a = calls[-1]
        check("dry: chunk_gated_delta_rule -> prefill, int64 cu_seqlens kept, final state zeroed",
              name == "dry_fla_kv_prefill" and a.cu_seqlens_i64 == 1 and bool((ht == 0).all())
              and a.final_state == ht.data_ptr() and a.error_flag == flag.data_ptr(), name)
        # FLA reads A_log and dt_bias only with use_gate_in_kernel: a log-gate
        # call that passes them hands the C API null pointers (which refuses
        # them with a log gate, never ignoring them).
        calls.clear()
        lib.chunk_gated_delta_rule(flat(q), flat(k), flat(v), flat(g), flat(beta),
                                   A_log=torch.zeros(HV), dt_bias=torch.zeros(HV))
        lib.chunk_kda(flat(q), flat(k), flat(v), flat(g)[..., None].expand(-1, -1, -1, K),
                      flat(beta), chunk_size=32, A_log=torch.zeros(HV),
                      dt_bias=torch.zeros(HV * K))
        check("dry: log-gate prefill with A_log and dt_bias (no use_gate_in_kernel) -> null "
              "pointers, as FLA ignores them",
              len(calls) == 2 and all(not a.A_log and not a.dt_bias for _, a in calls),
              str([(n, a.A_log, a.dt_bias) for n, a in calls]))
        pool = torch.randn(5, HV, K, K)
        i32 = torch.tensor([4, 1], dtype=torch.int32)
        i64 = torch.tensor([2 ** 32 + 1, 0], dtype=torch.int64)
        calls.clear()
        lib.chunk_gated_delta_rule(q, k, v, g.bfloat16(), beta, initial_state=pool,
                                   output_final_state=True, use_gate_in_kernel=True,
                                   A_log=torch.zeros(HV), use_beta_sigmoid_in_kernel=True,
                                   use_qk_l2norm_in_kernel=True,
                                   state_v_first=True, initial_state_indices=i32,
                                   output_state_indices=i64)
        name, a = calls[-1]
        got_in = torch.frombuffer(bytearray(a.seen["initial_state_indices"][:16]),
                                  dtype=torch.int64).tolist()
        got_out = torch.frombuffer(bytearray(a.seen["output_state_indices"][:16]),
                                   dtype=torch.int64).tolist()
        check("dry: pool prefill, int32 + int64 indices -> both int64, 2^32 + 1 kept",
              name == "dry_serving_prefill" and a.indices_i64 == 1 and got_in == [4, 1]
              and got_out == [2 ** 32 + 1, 0] and a.slots == 5, f"{got_in} {got_out}")
        calls.clear()
        lib.chunk_kda(flat(q), flat(k), flat(v), flat(g)[..., None].expand(-1, -1, -1, K),
                      flat(beta), chunk_size=32, disable_recompute=True)
        check("dry: chunk_kda chunk_size=32 -> the chunk-32 kda spec", calls[-1][0] == "dry_kda_prefill",
              calls[-1][0])
        try:
            lib.chunk_gated_delta_rule(flat(q), flat(k), flat(v), flat(g), flat(beta), chunk_size=32)
            check("dry: chunk_size=32 with no chunk-32 gated spec -> ValueError", False, "no error")
        except ValueError as e:
            check("dry: chunk_size=32 with no chunk-32 gated spec -> ValueError", "chunk=32" in str(e),
                  str(e)[:100])

        # Serving decode: idx2d and num_accepted_tokens widened with an int64 state_indices.
        state = torch.randn(6, HV, K, K)
        idx2d = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32)
        calls.clear()
        lib.gated_delta_rule_decode(q, k, v, g.bfloat16(), beta, torch.zeros(HV), torch.zeros(HV),
                                    state, ssm_state_indices=idx2d,
                                    num_accepted_tokens=torch.tensor([1, 3], dtype=torch.int64))
        name, a = calls[-1]
        got = torch.frombuffer(bytearray(a.seen["state_indices_2d"]), dtype=torch.int64).tolist()
        check("dry: serving decode, int32 ssm_state_indices widened beside int64 counts",
              a.indices_i64 == 1 and got == [0, 1, 2, 3, 4, 5] and a.state_indices_2d_stride == 3,
              f"{got}, stride {a.state_indices_2d_stride}")
        # vLLM's KDA call (FLA's fused_recurrent_kda_fwd): the pool updated
        # in place at ssm_state_indices, a 1-D index array as one column.
        kq, kk = flat(q)[:, :4], flat(k)[:, :4]
        kv, kg = flat(v)[:, :4], flat(g)[:, :4][..., None].expand(-1, -1, -1, K)
        kpool = torch.randn(6, HV, K, K)
        calls.clear()
        o, fin = lib.fused_recurrent_kda_fwd(
            kq, kk, kv, kg, flat(beta)[:, :4], initial_state=kpool,
            cu_seqlens=torch.arange(5, dtype=torch.int32),
            ssm_state_indices=torch.tensor([5, 0, 3, 1], dtype=torch.int32),
            use_qk_l2norm_in_kernel=True)
        name, a = calls[-1]
        got = torch.frombuffer(bytearray(a.seen["state_indices_2d"][:16]), dtype=torch.int32).tolist()
        check("dry: fused_recurrent_kda_fwd with 1-D ssm_state_indices -> the kda decode, the pool "
              "in place, one index column",
              name == "dry_kda_dec_decode" and fin is kpool and a.state == kpool.data_ptr()
              and a.slots == 6 and got == [5, 0, 3, 1] and a.state_indices_2d_stride == 1
              and not a.initial_state and a.B == 4, f"{name} {got} stride {a.state_indices_2d_stride}")
        try:
            lib.fused_recurrent_kda_fwd(kq, kk, kv, kg, flat(beta)[:, :4], initial_state=kpool,
                                        inplace_final_state=False,
                                        ssm_state_indices=torch.tensor([5, 0, 3, 1]))
            check("dry: fused_recurrent_kda_fwd indices without inplace -> ValueError", False,
                  "no error")
        except ValueError as e:
            check("dry: fused_recurrent_kda_fwd indices without inplace -> ValueError",
                  "inplace_final_state" in str(e), str(e)[:100])
        err = torch.zeros(1, dtype=torch.int32)
        calls.clear()
        lib.gated_delta_rule_decode(q, k, v, g.bfloat16(), beta, torch.zeros(HV), torch.zeros(HV),
                                    state, error_flag=err)
        check("dry: a given error_flag is passed, not the module's",
              calls[-1][1].error_flag == err.data_ptr())
        del ptr
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check("dry runs: ran to the end", False, f"{type(e).__name__}: {e}"[:200])
    finally:
        for n, f in saved.items():
            setattr(dt, n, f)
        torch.cuda.current_stream, torch.cuda.is_current_stream_capturing = cuda_saved


def main():
    sys.path.insert(0, os.path.join(ROOT, "templates", "runtime"))
    import deltac_torch as dt
    lib = dt.Library("cpu_checks", [], __file__)
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name:70s} {detail}", flush=True)
    run(dt, lib, check)
    dry_runs(dt, check)
    if "--fla-src" in sys.argv:
        compare_with_fla_source(sys.argv[sys.argv.index("--fla-src") + 1], check)
    failed = results.count(False)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
