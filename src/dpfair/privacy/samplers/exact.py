r"""Exact randomness from the OS: coins, exact uniforms, and the one primitive of every exact sampler here, a
Bernoulli(e^{−r}) decided exactly.

Contract: every call draws fresh coins from the OS, a 256-bit key from ``os.urandom`` driving a ChaCha20 keystream
(``cryptography``'s OpenSSL binding), or ``os.urandom`` itself when ``cryptography`` is missing or the request is
small (:data:`COIN_SOURCE`); nothing is seeded, stored or reused between calls, so no draw is reproducible.
:func:`secure_uniform` and :func:`secure_integers` are exact uniforms. :func:`bernoulli_exp_neg` returns exactly
``[U < e^{−r}]`` for a uniform real ``U ∈ [0, 1)`` and a rational ``r ≥ 0``: a float64 fast path decides when the
margin ``τ(r) = 2^{−40}(1 + r)`` allows it, and otherwise more random bits of ``U`` and a :mod:`decimal`
bracketing of ``e^{−r}`` do, so floats decide only how fast the exact answer is reached (the argument: the guide's
:ref:`exact-bernoulli`).
"""

from __future__ import annotations

import decimal
import functools
import math
import os
import secrets
from fractions import Fraction
from typing import Callable

import numpy as np

try:  # a fast CSPRNG stream (OpenSSL ChaCha20); os.urandom when unavailable
    from cryptography.hazmat.primitives.ciphers import Cipher as _Cipher
    from cryptography.hazmat.primitives.ciphers import algorithms as _algorithms
except ImportError:  # pragma: no cover - depends on the environment
    _Cipher = None

#: Where the exact samplers' coins come from: ``"ChaCha20"`` (an OpenSSL ChaCha20 keystream keyed by
#: ``os.urandom``, for requests of 4 KiB and more) where ``cryptography`` is installed, else ``"os.urandom"``.
COIN_SOURCE = "os.urandom" if _Cipher is None else "ChaCha20"

__all__ = ["COIN_SOURCE", "random_bytes", "secure_integers", "secure_uniform"]

# Fast-path margin: decisions closer than _TOL·(1 + r) go to the exact path.
_TOL = 2.0**-40


# ---- validation -----------------------------------------------------------------------------------------------


def check_shape(shape) -> tuple[int, ...]:
    """``shape`` (an int or a tuple of non-negative ints) as a tuple; ``ValueError`` otherwise."""
    if isinstance(shape, (bool, np.bool_)):
        raise ValueError(f"shape must be an int or a tuple of non-negative ints, got {shape!r}")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"shape must be an int or a tuple of non-negative ints, got {shape!r}") from None
    for n in dims:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"shape must be an int or a tuple of non-negative ints, got {shape!r}")
    return tuple(int(n) for n in dims)


# ---- coins ----------------------------------------------------------------------------------------------------


def random_bytes(nbytes: int) -> np.ndarray:
    """``nbytes`` uniformly random bytes (uint8) from a fresh OS-keyed ChaCha20 stream or ``os.urandom``."""
    if nbytes <= 0:
        return np.empty(0, dtype=np.uint8)
    if _Cipher is not None and nbytes >= 4096:
        key = os.urandom(32)  # 256 fresh bits of OS entropy per call; block counter starts at 0
        encryptor = _Cipher(_algorithms.ChaCha20(key, bytes(4) + os.urandom(12)), mode=None).encryptor()
        out = np.empty(nbytes + 64, dtype=np.uint8)
        written = encryptor.update_into(np.zeros(nbytes, dtype=np.uint8), out)
        if written != nbytes:  # pragma: no cover - a stream cipher writes what it reads
            raise RuntimeError("ChaCha20 keystream came back short")
        return out[:nbytes]
    return np.frombuffer(os.urandom(nbytes), dtype=np.uint8).copy()


def random_u64(n: int) -> np.ndarray:
    """``n`` uniformly random 64-bit words (uint64) from :func:`random_bytes`."""
    return random_bytes(8 * n).view(np.uint64)


def random_u32(n: int) -> np.ndarray:
    """``n`` uniformly random 32-bit words (uint32) from :func:`random_bytes`."""
    return random_bytes(4 * n).view(np.uint32)


# ---- exact comparison of a uniform with e^{-r} -----------------------------------------------------

_LN2 = math.log(2.0)


@functools.lru_cache(maxsize=32)
def _decimal_contexts(digits: int) -> tuple[decimal.Context, decimal.Context, decimal.Context]:
    """(round-half-even, floor, ceiling) contexts with ``digits`` digits and an unbounded exponent range."""
    def make(rounding):
        return decimal.Context(prec=digits, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX, rounding=rounding)
    return make(decimal.ROUND_HALF_EVEN), make(decimal.ROUND_FLOOR), make(decimal.ROUND_CEILING)


def _exp_neg_bounds(r: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """``lo ≤ e^{−r} ≤ hi`` as exact fractions, relative width about ``2^{−bits}``."""
    digits = int(bits * 0.30103) + 12
    ctx, down, up = _decimal_contexts(digits)
    num, den = decimal.Decimal(r.numerator), decimal.Decimal(r.denominator)
    r_lo, r_hi = down.divide(num, den), up.divide(num, den)  # directed rounding: r_lo ≤ r ≤ r_hi
    rel = Fraction(1, 10 ** (digits - 1))  # exp is correctly rounded: relative error ≤ ½·10^(1−digits)
    lo = Fraction(ctx.exp(-r_hi)) * (1 - rel)
    hi = Fraction(ctx.exp(-r_lo)) * (1 + rel)
    return lo, hi


class _LazyUniform:
    """A uniform real in [0, 1) known through a binary prefix, extended with fresh OS bits on demand."""

    __slots__ = ("prefix", "bits")

    def __init__(self, prefix: int, bits: int):
        self.prefix, self.bits = int(prefix), int(bits)

    def _refine(self) -> None:
        self.prefix = (self.prefix << 64) | secrets.randbits(64)
        self.bits += 64

    def less_than_exp_neg(self, r: Fraction) -> bool:
        """Exactly ``[U < e^{−r}]`` for rational ``r ≥ 0``."""
        if r < 0:
            raise ValueError("r must be non-negative")
        if r == 0:
            return True
        while True:
            # far tail: e^{−r} < 2^{−(bits+1)}, so U ≥ 2^−bits > e^{−r} as soon as the prefix is non-zero
            # (and with a zero prefix only more bits can tell); no decimal exp of a huge argument
            if r > (self.bits + 1) * _LN2 + 1:
                if self.prefix > 0:
                    return False
                self._refine()
                continue
            lo, hi = _exp_neg_bounds(r, self.bits + 16)
            scale = 1 << self.bits
            if Fraction(self.prefix + 1, scale) <= lo:
                return True
            if Fraction(self.prefix, scale) >= hi:
                return False
            self._refine()


def _exact_less_exp_neg(prefix: int, bits: int, r: Fraction) -> bool:
    return _LazyUniform(prefix, bits).less_than_exp_neg(r)


def _neglog_upper_end(prefix: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x_lo, x_hi)`` with ``−ln U ∈ (x_lo, x_hi]`` for ``U ∈ [p·2^−bits, (p+1)·2^−bits)``.

    ``x_lo = −ln((p+1)·2^−bits)`` in float64 and ``x_hi = x_lo + 1/p ≥ −ln(p·2^−bits)``
    (``ln((p+1)/p) ≤ 1/p``; ``+inf`` when ``p = 0``).
    """
    # exact: p < 2^53 (a uint64 array is read as int64, which numpy converts faster)
    p = (prefix.view(np.int64) if prefix.dtype == np.uint64 else prefix).astype(np.float64)
    x_lo = -np.log((p + 1.0) * 2.0**-bits)
    with np.errstate(divide="ignore"):
        x_hi = x_lo + 1.0 / p
    return x_lo, x_hi


def bernoulli_exp_neg(prefix: np.ndarray, bits: int, r: np.ndarray,
                      exact_r: Callable[[int], Fraction]) -> np.ndarray:
    """Vectorised ``[U_i < e^{−r_i}]`` for uniforms with ``bits``-bit prefixes; ``exact_r(i)`` is r_i as a Fraction.

    ``U < e^{−r}`` ⇔ ``−ln U > r``: *yes* when ``x_lo − r > τ``, *no* when ``x_hi − r < −τ``,
    ``τ = 2^−40·(1 + r)``; otherwise the exact path (the guide's :ref:`exact-bernoulli`).
    """
    x_lo, x_hi = _neglog_upper_end(prefix, bits)
    tol = _TOL * (1.0 + r)
    yes = (x_lo - r) > tol
    no = (x_hi - r) < -tol
    for i in np.flatnonzero(~(yes | no)):
        yes[i] = _exact_less_exp_neg(int(prefix[i]), bits, exact_r(int(i)))
    return yes


def geometric(prefix53: np.ndarray, step: Fraction) -> np.ndarray:
    """``H = max{h ≥ 0 : U < e^{−h·step}}`` (so ``P(H ≥ h) = e^{−h·step}``), exactly, from 53-bit prefixes.

    Inversion: ``h = ⌊x_lo/step⌋`` is the answer when ``h·step < −ln U ≤ (h+1)·step`` holds with
    margin for the whole interval of ``U``; otherwise the exact path searches from ``h``.
    """
    fstep = float(step)
    x_lo, x_hi = _neglog_upper_end(prefix53, 53)
    h = np.floor(x_lo * (1.0 / fstep))  # a guess; the checks below use h·step as computed
    lower = h * fstep
    # x_lo ≤ 53·ln 2 < 37 and upper ≤ x_lo + step, so c ≥ _TOL·(1 + lower) and ≥ _TOL·(1 + upper)
    c = _TOL * (38.0 + fstep)
    ok = ((x_lo - lower) > c) & ((x_hi - lower) < fstep - c)
    out = h.astype(np.int64)
    for i in np.flatnonzero(~ok):
        u = _LazyUniform(int(prefix53[i]), 53)
        m = max(int(out[i]), 0)
        while m > 0 and not u.less_than_exp_neg(m * step):
            m -= 1
        while u.less_than_exp_neg((m + 1) * step):
            m += 1
        out[i] = m
    return out


# ---- exact uniform integers -----------------------------------------------------------------------------------


def _uniform_below(n: int, high: int) -> np.ndarray:
    """``n`` exact uniform integers on ``[0, high)`` as uint64, ``1 ≤ high ≤ 2^64`` (rejection on the top bits)."""
    if high == 1:
        return np.zeros(n, dtype=np.uint64)
    bits = (high - 1).bit_length()
    if bits == 64 and high == 2**64:
        return random_u64(n)
    out = np.empty(n, dtype=np.uint64)
    filled = 0
    while filled < n:
        k = n - filled
        draw = random_u64(k + k // 2 + 16) >> np.uint64(64 - bits)
        draw = draw[draw < np.uint64(high)][:k]
        out[filled:filled + len(draw)] = draw
        filled += len(draw)
    return out


def integers_below(n: int, high: int) -> np.ndarray:
    """``n`` exact uniform integers on ``[0, high)`` as int64, ``1 ≤ high ≤ 2^63``."""
    return _uniform_below(n, high).astype(np.int64)


def secure_uniform(shape) -> np.ndarray:
    """Uniform draws on ``[0, 1)``: ``k·2^−53`` with ``k`` uniform on ``[0, 2^53)``, float64, OS CSPRNG."""
    dims = check_shape(shape)
    n = math.prod(dims)
    return ((random_u64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(dims)


def secure_integers(low: int, high: int, shape) -> np.ndarray:
    """Exact uniform integers on ``[low, high)`` (int64), OS CSPRNG; ``−2^63 ≤ low < high ≤ 2^63``."""
    dims = check_shape(shape)
    if isinstance(low, (bool, np.bool_)) or isinstance(high, (bool, np.bool_)) \
            or not isinstance(low, (int, np.integer)) or not isinstance(high, (int, np.integer)):
        raise ValueError(f"low and high must be integers, got {low!r}, {high!r}")
    low, high = int(low), int(high)
    if not -2**63 <= low < high <= 2**63:
        raise ValueError(f"need int64 bounds -2^63 <= low < high <= 2^63, got [{low}, {high})")
    draws = _uniform_below(math.prod(dims), high - low)
    # low + draw lies in [low, high) ⊂ int64: the sum modulo 2^64, read as int64, is exact
    return (draws + np.uint64(low % 2**64)).view(np.int64).reshape(dims)
