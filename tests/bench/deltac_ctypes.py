"""ctypes view of a generated deltac library's extern "C" decode API.

Mirrors templates/runtime/deltac_api.h; used by the benchmarks (and later
the Python module). Tensors are torch tensors on the current device.
"""
import ctypes

import torch

BF16, F16, F32 = 0, 1, 2
_DTYPES = {torch.bfloat16: BF16, torch.float16: F16, torch.float32: F32}


class DecodeArgs(ctypes.Structure):
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
        ("step_states", ctypes.c_void_p),
        ("keep_pool", ctypes.c_int32),
        ("error_flag", ctypes.c_void_p),
        ("scale", ctypes.c_float),
        ("debug_checks", ctypes.c_int32),
        ("state_indices_2d", ctypes.c_void_p),
        ("state_indices_2d_stride", ctypes.c_int64),
        ("num_accepted_tokens", ctypes.c_void_p),
    ]


def _ptr(t):
    return None if t is None else t.data_ptr()


class Library:
    def __init__(self, path, name):
        self.lib = ctypes.CDLL(path)
        self.name = name
        self.lib[f"{name}_last_error"].restype = ctypes.c_char_p

    def decode(self, spec, q, k, v, o, state, g=None, beta=None, scale=None,
               A_log=None, dt_bias=None, in_idx=None, out_idx=None,
               step_states=None, keep_pool=False, error_flag=None):
        """q, k [B, T, H, K]; v, o [B, T, HV, V]; state pool [slots, HV, ...]."""
        B, T, H, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        a = DecodeArgs()
        a.K, a.V, a.B, a.T, a.H, a.HV = K, V, B, T, H, HV
        a.io_dtype, a.state_dtype = _DTYPES[q.dtype], _DTYPES[state.dtype]
        a.q, a.k, a.v, a.o = _ptr(q), _ptr(k), _ptr(v), _ptr(o)
        a.g, a.beta = _ptr(g), _ptr(beta)
        a.A_log, a.dt_bias = _ptr(A_log), _ptr(dt_bias)
        a.state, a.slots = _ptr(state), state.shape[0]
        a.initial_state_indices, a.output_state_indices = _ptr(in_idx), _ptr(out_idx)
        a.step_states, a.keep_pool = _ptr(step_states), int(keep_pool)
        a.error_flag = _ptr(error_flag)
        a.scale = K ** -0.5 if scale is None else scale
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = self.lib[f"{self.name}_{spec}_decode"](ctypes.byref(a), stream)
        if rc != 0:
            raise RuntimeError(self.lib[f"{self.name}_last_error"]().decode())
