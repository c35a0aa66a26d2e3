"""IEEE float32 for the ghost path's exactness check: TF32 and bfloat16 passes off inside a block, restored after.

Contract: inside ``with ieee_float32():`` every float32 matmul and convolution of every ``torch.backends`` setting
this torch build has runs in IEEE float32; on exit, error or not, each setting is what it was. The check compares
two float32 computations of one gradient to ``1000 * eps``, which TF32's rounding alone can exceed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

__all__ = ["ieee_float32"]

#: the float32 precision settings :func:`ieee_float32` pins: (module, operation) of ``torch.backends``
_FP32_SETTINGS = (("cudnn", "conv"), ("cudnn", "rnn"), ("cuda", "matmul"), ("mkldnn", "conv"), ("mkldnn", "matmul"),
                  ("mkldnn", "rnn"))
_FP32_LOCK = threading.Lock()
_FP32_STATE: dict = {"depth": 0, "saved": None}


@contextlib.contextmanager
def ieee_float32() -> Iterator[None]:
    """Float32 matmuls and convolutions in IEEE float32 inside the block (no TF32 or bfloat16 passes on any
    backend), every ``torch.backends.*.fp32_precision`` setting it pins restored on exit, error or not.

    The ghost path's exactness check compares two float32 computations of one gradient to ``1000 * eps``;
    TF32 (cuDNN's convolutions by default on Ampere and later GPUs) keeps 10 mantissa bits, so its rounding
    through a deep network alone can exceed that bound.  The check runs in IEEE float32 rather than with a
    tolerance loosened to TF32's: a bound that loose would let a small structural difference pass.
    Process-wide settings: nested or concurrent blocks (threads) share one save, restored when the last one
    leaves; the per-operation settings are saved and set, so the legacy ``allow_tf32`` flags come back as they were.

    While it is active, torch refuses to read the legacy flags (``torch.backends.cudnn.allow_tf32``,
    ``torch.backends.cuda.matmul.allow_tf32``: "mix of the legacy and new APIs"); read the per-operation
    ``fp32_precision`` settings instead.
    """
    with _FP32_LOCK:
        if _FP32_STATE["depth"] == 0:
            settings = [getattr(getattr(torch.backends, mod, None), op, None) for mod, op in _FP32_SETTINGS]
            settings = [s for s in settings if hasattr(s, "fp32_precision")]  # those this torch build has
            _FP32_STATE["saved"] = [(s, s.fp32_precision) for s in settings]
            for s in settings:
                s.fp32_precision = "ieee"
        _FP32_STATE["depth"] += 1
    try:
        yield
    finally:
        with _FP32_LOCK:
            _FP32_STATE["depth"] -= 1
            if _FP32_STATE["depth"] == 0:
                for s, value in _FP32_STATE["saved"]:
                    s.fp32_precision = value
                _FP32_STATE["saved"] = None
