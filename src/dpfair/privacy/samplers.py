r"""Secure noise: exact discrete samplers on a power-of-two grid, from OS-seeded cryptographic randomness.

What ``secure_mode=True`` is for
--------------------------------
The textbook samplers release ``x + Z`` where ``Z`` is a float made from a
uniform double: Laplace as ``b·log(U)`` (Mironov 2012), Gaussian by
Box–Muller, the polar method or a ziggurat (Jin, McMurtry, Rubinstein, Ohrimenko
2022, "Are we there yet? Timing and floating-point attacks on differential
privacy systems"). The set of floats such a ``Z`` can take has holes, and the
rounding of ``x + Z`` to the nearest float depends on ``x``, so the set of
possible outputs depends on ``x``: from the low bits of one output an attacker
can often tell ``x`` from a neighbouring ``x'`` with certainty, whatever ε the
accountant recorded. Knowing the generator's seed is worse still; and a
non-cryptographic generator (PCG64, Mersenne Twister) can in principle be
recovered from its outputs.

Two remedies are in use:

- **Opacus** (``secure_mode``): torchcsprng (AES-CTR) coins, and a Gaussian
  draw replaced by ``(Z₁ + Z₂ + Z₃ + Z₄)/2`` (Holohan & Braghin 2021, "Secure
  random sampling in differential privacy", §5.1; Opacus'
  ``optimizers/optimizer.py::_generate_noise``). The argument is
  computational: to exploit the holes the attacker must invert the output to
  the uniforms behind it, and with 2n summands that search costs about
  ``2^{53(2n−1)}``. The released float is still not exactly Gaussian and no DP
  statement is proven about it; the defence is heuristic.
- **OpenDP** (``make_gaussian`` / ``make_laplace`` on floats,
  ``sample_discrete_gaussian_Z2k``): round the input to the grid ``2^k·ℤ``,
  add *exact* discrete Gaussian or discrete Laplace noise on that grid
  (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential
  privacy", exact rejection samplers with no floating point), and charge the
  rounding to the sensitivity (OpenDP's ``get_discretization_consts``: each
  coordinate of a rounded neighbour moves by less than ``2^k``).

This module takes the **OpenDP route**: its outputs are exact multiples of a
power-of-two granularity ``g``, drawn from exactly the discrete law the proofs
are about, so the released float is a *function of the exact mechanism
output* and the guarantee is a theorem, not a work factor. Cost: measured in
``benchmarks/secure_noise.py`` (results under ``results/secure_noise/``).

Randomness
----------
Every call draws fresh coins from the OS: a 256-bit key from ``os.urandom``
drives a ChaCha20 keystream (``cryptography``'s OpenSSL binding — the
construction of the kernel's own ``getrandom`` and of OpenBSD's
``arc4random``), or ``os.urandom`` itself when ``cryptography`` is missing or
the request is small. Nothing is seeded, stored or reused between calls: no
global state, never reproducible.

Exact Bernoulli(e^{−r}) — the one primitive
-------------------------------------------
Every sampler below reduces to comparing a uniform real ``U ∈ [0, 1)`` with
``e^{−r}`` for an exact rational ``r ≥ 0`` (floats are rationals; ``P(U < e^{−r}) = e^{−r}``).
``U`` is known first through a 32- or 53-bit prefix, i.e. an interval
``[u_lo, u_hi)``. *Fast path* (vectorised): ``U < e^{−r}`` ⇔ ``−ln U > r``;
with ``x_lo = −ln u_hi`` computed in float64 and ``x_hi = x_lo + 1/p ≥ −ln u_lo``
(``p`` the prefix, ``ln(1 + 1/p) ≤ 1/p``), the answer is *yes* when
``x_lo − r > τ(r)`` and *no* when ``x_hi − r < −τ(r)``, ``τ(r) = 2^{−40}(1 + r)``.
The float errors of ``log`` (a few ulp) and of
computing ``r`` (≤ 2^{−49}(1 + r) for every ``r`` formed here) are below
``τ`` by a factor of at least 2^8 (``tests/privacy/test_samplers.py`` checks
numpy's ``log`` against correctly rounded values). *Exact path* (the ambiguous
cases, a few per million draws): the prefix of ``U`` is extended with fresh random bits and
``e^{−r}`` is bracketed with :mod:`decimal` (division with directed rounding,
``exp`` correctly rounded), both refined until the interval of ``U`` lies on one
side — this ends with probability 1 since ``e^{−r}`` is irrational for rational
``r > 0`` (``r = 0`` is answered directly). The decision is therefore exactly
``[U < e^{−r}]``; floats only decide how fast it is reached.

Discrete Laplace, ``P(Y = y) ∝ e^{−|y|/s}`` on ℤ (any real ``s > 0``)
---------------------------------------------------------------------
``Y = ±M`` with a fair sign, ``(−, 0)`` rejected, and ``P(M = m) ∝ e^{−m/s}``.
With a block length ``L = 2^{max(0, ⌊log₂ s⌋ − 12)}`` write ``M = L·H + W``,
``0 ≤ W < L``; since ``e^{−M/s} = e^{−H·L/s}·e^{−W/s}`` the two parts are
*independent*: ``H`` geometric with ``P(H ≥ h) = e^{−hL/s}``, sampled by
inversion (``H = max{h : U < e^{−hL/s}}``, each boundary decided by the
primitive), and ``W`` uniform on ``[0, L)`` accepted with probability
``e^{−W/s} ≥ e^{−2^{−12}}`` (CKS20 Algorithm 2 uses the same split with
``L = s`` integer). About 2 × 64 random bits per draw.

Discrete Gaussian, ``P(Y = y) ∝ e^{−y²/(2σ²)}`` on ℤ (CKS20 Algorithm 3)
------------------------------------------------------------------------
``t = ⌊σ⌋ + 1``; draw ``Y`` discrete Laplace with scale ``t`` and accept with
probability ``exp(−(|Y| − σ²/t)²/(2σ²))``; the product of the two is
``∝ e^{−y²/(2σ²)}``. Acceptance ≈ 0.76 for large σ. ``σ²`` is the exact square of
the float ``σ``. About 26 random bytes per output.

Real-valued noise
-----------------
:func:`secure_gaussian` / :func:`secure_laplace` return ``g·Y`` with
``Y`` discrete Gaussian with parameter ``std/g`` (discrete Laplace with scale
``scale/g``); ``g`` is a power of two (default :func:`default_granularity`:
``2^{⌊log₂ std⌋ − 30}``, so ``std/g ∈ [2^30, 2^31)``), hence ``g·Y`` is an exact
float64. Its variance is ``std²`` up to a relative ``O(e^{−2π²(std/g)²})``
(Gaussian) and ``2·scale² − g²/6`` up to ``O(g⁴/scale²)`` (Laplace).

How to release with it — what the caller must do
------------------------------------------------
1. **Round the sum to the grid and add in float64** — :func:`add_secure_gaussian`
   / :func:`add_secure_laplace` do it: ``round(x/g)·g + g·Y``. Both terms are
   exact float64 grid values; IEEE addition returns the correctly rounded exact
   sum, so the output is a deterministic function of the exact mechanism
   output ``round(x/g) + Y`` (post-processing). Anything after that is free:
   cast to float32, divide by a *public* normaliser, an optimizer step.
   **Not** allowed: drawing unit noise and multiplying it by ``std``, casting
   the noise to float32 before the addition, adding it to an unrounded float32
   sum — each rounds the noise by an amount that depends on ``x``, which is
   exactly Mironov's attack surface.
2. **Charge the rounding to the sensitivity.** Nearest rounding moves each
   coordinate of *each* neighbour by at most ``g/2``, so per coordinate
   ``|r(a) − r(b)| ≤ |a − b| + g`` and, by Minkowski's inequality, with ``k``
   the number of coordinates in which neighbouring sums can differ (``k ≤ d``;
   ``d`` for a gradient)::

       Δ₂' = Δ₂ + g·√k,        Δ₁' = Δ₁ + g·k.

   (``g·√k/2`` is not enough: both neighbours move.) With the default grid
   ``g ≤ std·2^{−30}``, so for ``k = 10⁷`` and noise multiplier ``z = std/Δ₂ ≤ 100``,
   ``Δ₂'/Δ₂ − 1 ≤ 3·10^{−4}``. :func:`grid_sensitivity` computes ``Δ'``.
3. **Account.**

   - *Laplace*: for grid-valued inputs with ``‖a − a'‖₁ ≤ Δ₁'`` the discrete
     Laplace with scale ``b`` on ``gℤ`` has privacy loss at most ``Δ₁'/b``
     everywhere (the normalisers cancel on the lattice): **exactly
     ``ε = Δ₁'/b`` pure DP**. Record it as a pure-ε event (``pure_dp_event(ε)``,
     Poisson-sampled where the sum is); the *continuous* Laplace privacy-loss
     distribution (``LaplaceDpEvent``) is **not** a proven bound for the
     discrete one: for a shift of ``k`` grid steps the discrete privacy loss
     sits at its maximum ``Δ₁'/b`` with probability ``1/(1 + e^{−g/b}) > 1/2``,
     the continuous one with probability ``1/2``, so near ``ε = Δ₁'/b`` its δ(ε)
     is larger.
   - *Gaussian, zCDP / RDP*: CKS20 §2 (Rényi divergence of shifted discrete
     Gaussians, for integer shifts) and additivity over independent coordinates:
     ``D_α(N_ℤ(μ, σ²)^d ‖ N_ℤ(μ', σ²)^d) ≤ α‖μ − μ'‖²/(2σ²)``, i.e.
     **``ρ = Δ₂'²/(2σ²)``-zCDP exactly**, the continuous Gaussian's curve.
   - *Gaussian, any continuous-Gaussian accountant* (PLD, Poisson-subsampled
     RDP/PLD, composition — what ``GaussianDpEvent`` is used for): use
     ``σ' = √(σ² − τ²g²)`` with ``τ = 8`` and ``Δ₂'``, i.e. record
     ``noise_multiplier = σ'/Δ₂'`` (:func:`secure_gaussian_accounting`, or
     :func:`calibrate_secure_gaussian` to pick ``std`` so that the recorded
     multiplier is the planned one), and add ``ε_slack = 2Tη`` to ε (and multiply
     δ by ``e^{Tη}``) over ``T`` releases, ``η = 3k·ε_τ``,
     ``ε_τ = 2Σ_{m≥1} e^{−2π²τ²m²} < 10^{−548}`` — so ``ε_slack`` underflows to
     0.0 for any feasible ``T·k``. *Proof.* Work in grid units, ``a = round(x/g)``.
     Let ``G`` be the continuous Gaussian mechanism ``a + N(0, σ'²/g²·I)`` and
     ``K`` the randomised rounding that maps ``y`` to ``z ∈ ℤ`` with probability
     ``φ_τ(z − y)/S_τ(y)``, ``S_τ(y) = Σ_k φ_τ(k − y)``. By Poisson summation
     ``|S_s(y) − 1| ≤ ε_s ≤ ε_τ`` for ``s ≥ τ``; since ``φ_{σ'}*φ_τ = φ_{σ}``
     (variances add), ``P[K∘G = z] ∈ φ_σ(z − a)·[1/(1 + ε_τ), 1/(1 − ε_τ)]``,
     while the discrete Gaussian has ``P[z] = φ_σ(z − a)/S_σ(a)``,
     ``S_σ(a) = S_σ(0) ∈ [1, 1 + ε_τ]`` for integer ``a``. So every output's
     probability under our mechanism is within a factor ``e^{±3ε_τ}`` per
     coordinate of that under ``K∘G``, for every input; the factor survives
     Poisson subsampling (mixtures) and multiplies over ``k`` coordinates and ``T``
     adaptive steps; and ``K∘G`` is post-processing of the continuous Gaussian
     mechanism with noise ``σ'`` on the grid-rounded sums (sensitivity ``Δ₂'``).
     ∎ With the default grid ``σ'/σ > 1 − 2^{−55}``. (The helpers need
     ``std/g ≥ 4`` and then use ``τ = min(8, std/(2g))``.)
4. **Timing.** The noise is drawn independently of the data, but the number of
   rejections (and the rare exact-path refinements) correlates with the noise
   values drawn, so wall time carries a little information about the noise
   vector as a whole (Jin et al. 2022 exploit this per draw); batching 10⁶
   coordinates in one vectorised call washes it out in practice, but the
   samplers are not constant-time.

Also here: :func:`secure_uniform` and :func:`secure_integers` (exact uniforms),
:func:`secure_randomized_response` (exact k-ary randomized response, data-independent
running time), :func:`secure_exponential_mechanism` (exact sampling of
``i ∝ exp(w_i)`` for float log-weights, by rejection; its running time depends on
``Σ e^{w_i − max w}``).
"""

from __future__ import annotations

import decimal
import functools
import math
import os
import secrets
from dataclasses import dataclass
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

__all__ = [
    "COIN_SOURCE",
    "random_bytes",
    "GRID_BITS",
    "SecureGaussianAccounting",
    "SecureLaplaceAccounting",
    "add_secure_gaussian",
    "add_secure_laplace",
    "calibrate_secure_gaussian",
    "calibrate_secure_laplace",
    "default_granularity",
    "grid_sensitivity",
    "round_to_grid",
    "secure_discrete_gaussian",
    "secure_discrete_laplace",
    "secure_exponential_mechanism",
    "secure_gaussian",
    "secure_gaussian_accounting",
    "secure_integers",
    "secure_laplace",
    "secure_laplace_accounting",
    "secure_randomized_response",
    "secure_uniform",
]

#: Default grid: ``g = 2^(⌊log₂ scale⌋ − GRID_BITS)``, i.e. the noise scale is 2^30 to 2^31 grid steps.
GRID_BITS = 30

#: Smoothing width (grid steps) in the continuous-Gaussian accounting argument (module docstring, 3).
ACCOUNTING_TAU = 8.0

# Fast-path margin: decisions closer than _TOL·(1 + r) go to the exact path.
_TOL = 2.0**-40
# Block bits of the discrete Laplace split M = L·H + W: L = 2^(⌊log₂ s⌋ − _BLOCK_BITS).
_BLOCK_BITS = 12
# Largest scale (grid steps) of the integer samplers: keeps every integer below 2^53 and L ≤ 2^31.
_MAX_SCALE = 2.0**42
_MIN_SCALE = 2.0**-30
_MAX_DIM = 2**62
# Draws are made in chunks of this many values: numpy's passes then stay in cache (measured: docs/guide/benchmarks.md).
_CHUNK = 1 << 16


# ---- validation -------------------------------------------------------------------------------


def _shape(shape) -> tuple[int, ...]:
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


def _positive(value, name: str, lo: float = 0.0, hi: float = math.inf) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must lie in [{lo:g}, {hi:g}], got {v!r}")
    return v


def _granularity(granularity, scale: float, name: str) -> float:
    if granularity is None:
        return default_granularity(scale)
    g = _check_pow2(granularity)
    steps = scale / g
    if not _MIN_SCALE <= steps <= _MAX_SCALE:
        raise ValueError(f"{name}/granularity = {steps:g} grid steps; it must lie in [2^-30, 2^42] "
                         f"(use the default granularity)")
    return g


def default_granularity(scale: float) -> float:
    """The default grid for noise of standard deviation (or Laplace scale) ``scale``: ``2^(⌊log₂ scale⌋ − 30)``.

    So ``scale/g ∈ [2^30, 2^31)``.
    """
    s = _positive(scale, "scale", 2.0**-900, 2.0**900)
    _, exponent = math.frexp(s)  # s = m·2^e, m ∈ [0.5, 1): ⌊log₂ s⌋ = e − 1
    return math.ldexp(1.0, exponent - 1 - GRID_BITS)


# ---- coins ------------------------------------------------------------------------------------


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


def _u64(n: int) -> np.ndarray:
    return random_bytes(8 * n).view(np.uint64)


def _u32(n: int) -> np.ndarray:
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


def _bernoulli_exp_neg(prefix: np.ndarray, bits: int, r: np.ndarray,
                       exact_r: Callable[[int], Fraction]) -> np.ndarray:
    """Vectorised ``[U_i < e^{−r_i}]`` for uniforms with ``bits``-bit prefixes; ``exact_r(i)`` is r_i as a Fraction.

    ``U < e^{−r}`` ⇔ ``−ln U > r``: *yes* when ``x_lo − r > τ``, *no* when ``x_hi − r < −τ``,
    ``τ = 2^−40·(1 + r)``; otherwise the exact path (module docstring).
    """
    x_lo, x_hi = _neglog_upper_end(prefix, bits)
    tol = _TOL * (1.0 + r)
    yes = (x_lo - r) > tol
    no = (x_hi - r) < -tol
    for i in np.flatnonzero(~(yes | no)):
        yes[i] = _exact_less_exp_neg(int(prefix[i]), bits, exact_r(int(i)))
    return yes


def _geometric(prefix53: np.ndarray, step: Fraction) -> np.ndarray:
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


# ---- integer samplers -----------------------------------------------------------------------------


def _uniform_below(n: int, high: int) -> np.ndarray:
    """``n`` exact uniform integers on ``[0, high)`` as uint64, ``1 ≤ high ≤ 2^64`` (rejection on the top bits)."""
    if high == 1:
        return np.zeros(n, dtype=np.uint64)
    bits = (high - 1).bit_length()
    if bits == 64 and high == 2**64:
        return _u64(n)
    out = np.empty(n, dtype=np.uint64)
    filled = 0
    while filled < n:
        k = n - filled
        draw = _u64(k + k // 2 + 16) >> np.uint64(64 - bits)
        draw = draw[draw < np.uint64(high)][:k]
        out[filled:filled + len(draw)] = draw
        filled += len(draw)
    return out


def _integers_below(n: int, high: int) -> np.ndarray:
    """``n`` exact uniform integers on ``[0, high)`` as int64, ``1 ≤ high ≤ 2^63``."""
    return _uniform_below(n, high).astype(np.int64)


def _dlap_magnitudes(n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws of ``M`` with ``P(M = m) ∝ e^{−m/s}`` on ``m ≥ 0``, and ``n`` independent fair bits.

    ``M = L·H + W`` with independent parts (module docstring).
    """
    s_exact = Fraction(s)
    _, exponent = math.frexp(s)
    block = 1 << max(0, exponent - 1 - _BLOCK_BITS)
    words = _u64(n)
    high = _geometric(words >> np.uint64(11), Fraction(block) / s_exact)  # top 53 bits
    negative = (words & np.uint64(1)).astype(bool)  # bit 0: independent of the top 53
    if block == 1:
        return high, negative
    low = np.empty(n, dtype=np.int64)
    # W uniform on [0, L) from the low 32 bits, accepted with probability e^{−W/s} ≥ e^{−L/s} ≥ e^{−2^−12}
    # using the top 32 bits U: certainly accepted when u_hi = (u+1)·2^−32 ≤ e^{−L/s} − 2^−30.
    sure = np.uint64(math.floor((math.exp(-block / s) - 2.0**-30) * 2.0**32) - 1)
    filled = 0
    while filled < n:
        k = n - filled
        words = _u64(k + k // 512 + 8)
        w = (words & np.uint64(block - 1)).astype(np.int64)
        u = words >> np.uint64(32)
        accept = u <= sure
        rest = np.flatnonzero(~accept)
        if len(rest):
            wr = w[rest]
            accept[rest] = _bernoulli_exp_neg(u[rest], 32, wr / s, lambda i: Fraction(int(wr[i])) / s_exact)
        w = w[accept][:k]
        low[filled:filled + len(w)] = w
        filled += len(w)
    return high * block + low, negative


def _dlap(n: int, s: float) -> np.ndarray:
    """``n`` exact draws of the discrete Laplace ``P(Y = y) ∝ e^{−|y|/s}`` on ℤ: ``±M``, ``(−, 0)`` rejected."""
    out = np.empty(n, dtype=np.int64)
    zero_rate = -math.expm1(-1.0 / s) / 2.0  # P(rejected) = P(M = 0)/2
    filled = 0
    while filled < n:
        k = n - filled
        m = k + int(k * zero_rate * 1.1 + 6 * math.sqrt(k * zero_rate)) + 16
        mag, negative = _dlap_magnitudes(m, s)
        keep = ~(negative & (mag == 0))
        y = np.where(negative, -mag, mag)[keep][:k]
        out[filled:filled + len(y)] = y
        filled += len(y)
    return out


def _dgauss(n: int, sigma: float) -> np.ndarray:
    """``n`` exact draws of the discrete Gaussian ``P(Y = y) ∝ e^{−y²/(2σ²)}`` on ℤ (CKS20 Algorithm 3).

    ``Y`` discrete Laplace with scale ``t = ⌊σ⌋ + 1``, accepted with probability
    ``exp(−(|Y| − σ²/t)²/(2σ²))``. Float ``γ`` is within ``(4γ + 2)·2^−52`` of the exact value.
    """
    t = math.floor(sigma) + 1
    s2 = sigma * sigma
    s2_exact = Fraction(sigma) ** 2
    s2t_exact = s2_exact / t
    x = sigma / t  # acceptance → √(π/2)·x·e^{−x²/2} (≈ 0.76 for large σ); smaller σ: a first guess
    rate = max(0.3, math.sqrt(math.pi / 2) * x * math.exp(-x * x / 2) - 0.01) if sigma > 4 else 0.3
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        k = n - filled
        m = int(k / rate + 6 * math.sqrt(k)) + 32
        y = _dlap(m, float(t))
        ay = np.abs(y)
        a = ay.astype(np.float64) - s2 / t
        gamma = a * a / (2.0 * s2)

        def exact_gamma(i: int) -> Fraction:
            return (Fraction(int(ay[i])) - s2t_exact) ** 2 / (2 * s2_exact)

        accept = _bernoulli_exp_neg(_u32(m), 32, gamma, exact_gamma)
        y = y[accept][:k]
        out[filled:filled + len(y)] = y
        filled += len(y)
    return out


def _chunked(draw: Callable[[int, float], np.ndarray], n: int, param: float) -> np.ndarray:
    """``draw(n, param)`` made in chunks of ``_CHUNK`` values (independent draws, so the law is unchanged)."""
    if n <= _CHUNK:
        return draw(n, param)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        out[start:stop] = draw(stop - start, param)
    return out


# ---- public samplers ------------------------------------------------------------------------------


def secure_uniform(shape) -> np.ndarray:
    """Uniform draws on ``[0, 1)``: ``k·2^−53`` with ``k`` uniform on ``[0, 2^53)``, float64, OS CSPRNG."""
    dims = _shape(shape)
    n = math.prod(dims)
    return ((_u64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(dims)


def secure_integers(low: int, high: int, shape) -> np.ndarray:
    """Exact uniform integers on ``[low, high)`` (int64), OS CSPRNG; ``−2^63 ≤ low < high ≤ 2^63``."""
    dims = _shape(shape)
    if isinstance(low, (bool, np.bool_)) or isinstance(high, (bool, np.bool_)) \
            or not isinstance(low, (int, np.integer)) or not isinstance(high, (int, np.integer)):
        raise ValueError(f"low and high must be integers, got {low!r}, {high!r}")
    low, high = int(low), int(high)
    if not -2**63 <= low < high <= 2**63:
        raise ValueError(f"need int64 bounds -2^63 <= low < high <= 2^63, got [{low}, {high})")
    draws = _uniform_below(math.prod(dims), high - low)
    # low + draw lies in [low, high) ⊂ int64: the sum modulo 2^64, read as int64, is exact
    return (draws + np.uint64(low % 2**64)).view(np.int64).reshape(dims)


def secure_discrete_gaussian(shape, sigma: float) -> np.ndarray:
    """Exact draws of the discrete Gaussian ``P(y) ∝ exp(−y²/(2σ²))`` on the integers (int64).

    ``σ`` is the float given (``σ²`` its exact square), ``2^−30 ≤ σ ≤ 2^42``. The variance is ``σ²``
    up to a relative ``O(e^{−2π²σ²})`` (and smaller than ``σ²``).
    """
    dims = _shape(shape)
    sigma = _positive(sigma, "sigma", _MIN_SCALE, _MAX_SCALE)
    return _chunked(_dgauss, math.prod(dims), sigma).reshape(dims)


def secure_discrete_laplace(shape, scale: float) -> np.ndarray:
    """Exact draws of the discrete Laplace ``P(y) ∝ exp(−|y|/scale)`` on the integers (int64).

    ``2^−30 ≤ scale ≤ 2^42``; variance ``2q/(1 − q)²``, ``q = e^{−1/scale}``.
    """
    dims = _shape(shape)
    scale = _positive(scale, "scale", _MIN_SCALE, _MAX_SCALE)
    return _chunked(_dlap, math.prod(dims), scale).reshape(dims)


def secure_gaussian(shape, std: float, *, granularity: float | None = None) -> np.ndarray:
    """Gaussian noise of standard deviation ``std`` on the grid ``g·ℤ`` (float64): ``g·Y``, ``Y ~ N_ℤ(0, (std/g)²)``.

    Every value is an exact multiple of ``g`` (default :func:`default_granularity`). Add it to a
    sum rounded to the same grid, in float64 — :func:`add_secure_gaussian` — and charge
    :func:`grid_sensitivity`; see the module docstring.
    """
    dims = _shape(shape)
    std = _positive(std, "std")
    g = _granularity(granularity, std, "std")
    return (_chunked(_dgauss, math.prod(dims), std / g).astype(np.float64) * g).reshape(dims)


def secure_laplace(shape, scale: float, *, granularity: float | None = None) -> np.ndarray:
    """Laplace noise of scale ``scale`` on the grid ``g·ℤ`` (float64): ``g·Y``, ``P(Y = y) ∝ e^{−|y|·g/scale}``.

    Variance ``2·scale² − g²/6`` (to ``O(g⁴/scale²)``). Use with :func:`add_secure_laplace`;
    the release is exactly ``ε = Δ₁'/scale`` pure DP with ``Δ₁' = Δ₁ + g·k`` (module docstring).
    """
    dims = _shape(shape)
    scale = _positive(scale, "scale")
    g = _granularity(granularity, scale, "scale")
    return (_chunked(_dlap, math.prod(dims), scale / g).astype(np.float64) * g).reshape(dims)


# ---- releases -------------------------------------------------------------------------------------


def round_to_grid(values, granularity: float) -> np.ndarray:
    """``values`` rounded to the nearest multiple of the power of two ``granularity`` (float64, exact; ties to even)."""
    g = _check_pow2(granularity)
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("values to release must be finite")
    return np.rint(x / g) * g


def _check_pow2(granularity) -> float:
    g = _positive(granularity, "granularity")
    mantissa, exponent = math.frexp(g)
    if mantissa != 0.5 or not -1000 <= exponent <= 1000:
        raise ValueError(f"granularity must be a power of two in [2^-1000, 2^1000], got {granularity!r}")
    return g


def _to_numpy(values):
    """``(float64 array, restore)``: torch tensors go to CPU float64 and come back with their dtype and device."""
    if type(values).__module__.split(".")[0] == "torch":
        import torch

        if not values.dtype.is_floating_point:
            raise ValueError(f"values to release must be a floating tensor, got {values.dtype}")
        dtype, device = values.dtype, values.device
        arr = values.detach().to(device="cpu", dtype=torch.float64).numpy()
        return arr, lambda out: torch.from_numpy(out).to(device=device, dtype=dtype)
    return np.asarray(values, dtype=np.float64), lambda out: out


def add_secure_gaussian(values, std: float, *, granularity: float | None = None):
    """``round(values/g)·g + g·Y`` in float64 (``Y`` discrete Gaussian, ``std/g``): the secure Gaussian release.

    ``values``: array-like or torch tensor (the result comes back as the same kind, dtype and
    device; a float32 cast happens only after the exact float64 addition, as post-processing).
    Privacy: L2 sensitivity ``Δ₂ + g·√k`` (:func:`grid_sensitivity`, :func:`secure_gaussian_accounting`).
    """
    std = _positive(std, "std")
    g = _granularity(granularity, std, "std")
    x, restore = _to_numpy(values)
    out = round_to_grid(x, g) + secure_gaussian(x.shape, std, granularity=g)
    return restore(out)


def add_secure_laplace(values, scale: float, *, granularity: float | None = None):
    """``round(values/g)·g + g·Y`` in float64 (``Y`` discrete Laplace, ``scale/g``): the secure Laplace release.

    Exactly ``ε = (Δ₁ + g·k)/scale`` pure DP (:func:`secure_laplace_accounting`).
    """
    scale = _positive(scale, "scale")
    g = _granularity(granularity, scale, "scale")
    x, restore = _to_numpy(values)
    out = round_to_grid(x, g) + secure_laplace(x.shape, scale, granularity=g)
    return restore(out)


# ---- accounting ------------------------------------------------------------------------------------


def _up(x: float, steps: int = 2) -> float:
    for _ in range(steps):
        x = math.nextafter(x, math.inf)
    return x


def _down(x: float, steps: int = 2) -> float:
    for _ in range(steps):
        x = math.nextafter(x, -math.inf)
    return x


def _check_dim(dim) -> int:
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or not 1 <= dim <= _MAX_DIM:
        raise ValueError(f"dim (the number of coordinates that can differ) must be a positive int, got {dim!r}")
    return int(dim)


def grid_sensitivity(sensitivity: float, granularity: float, dim: int, norm: int = 2) -> float:
    """Sensitivity after rounding to the grid: ``Δ₂ + g·√dim`` (``norm=2``) or ``Δ₁ + g·dim`` (``norm=1``).

    Rounded up. ``dim``: the number of coordinates in which the sums of two neighbouring data sets can differ.
    Each neighbour moves by up to ``g/2`` per coordinate, so a coordinate difference grows by
    less than ``g``; Minkowski's inequality gives the bound.
    """
    delta = float(sensitivity)
    if not math.isfinite(delta) or delta < 0:
        raise ValueError(f"sensitivity must be a non-negative finite number, got {sensitivity!r}")
    g = _check_pow2(granularity)
    k = _check_dim(dim)
    if norm == 2:
        return _up(delta + _up(g * _up(math.sqrt(k))))
    if norm == 1:
        return _up(delta + _up(g * float(k)))
    raise ValueError(f"norm must be 1 or 2, got {norm!r}")


@dataclass(frozen=True)
class SecureGaussianAccounting:
    """What a secure Gaussian release with ``std`` on grid ``granularity`` costs (module docstring, 3).

    ``sensitivity``: ``Δ₂' = Δ₂ + g√k``. ``zcdp_rho``: ``Δ₂'²/(2·std²)``, exact (CKS20).
    ``accounting_std``: ``σ' = √(std² − τ²g²)`` and ``noise_multiplier = σ'/Δ₂'``: record this
    multiplier with any continuous-Gaussian accountant (``GaussianDpEvent``, Poisson-sampled or not).
    ``log_ratio_slack``: ``η = 3k·ε_τ`` per release; over ``T`` releases add ``2Tη`` to ε and
    multiply δ by ``e^{Tη}`` (it underflows to 0.0 for τ = 8).
    """

    std: float
    granularity: float
    sensitivity: float
    accounting_std: float
    noise_multiplier: float
    zcdp_rho: float
    log_ratio_slack: float


@dataclass(frozen=True)
class SecureLaplaceAccounting:
    """What a secure Laplace release with ``scale`` on grid ``g`` costs: exactly ``ε = Δ₁'/scale`` pure DP.

    ``sensitivity``: ``Δ₁' = Δ₁ + g·k``; ``noise_multiplier = scale/Δ₁' = 1/ε``. Record it as a
    pure-ε event (``pure_dp_event(epsilon)``), not as a continuous ``LaplaceDpEvent``.
    """

    scale: float
    granularity: float
    sensitivity: float
    epsilon: float
    noise_multiplier: float


def _smoothing_error(tau: float) -> float:
    """``ε_τ = 2 Σ_{m≥1} exp(−2π²τ²m²)`` (float; underflows to 0.0 for τ ≳ 6)."""
    return 2.0 * sum(math.exp(-2.0 * math.pi**2 * tau * tau * m * m) for m in range(1, 4))


def secure_gaussian_accounting(std: float, sensitivity: float, dim: int, *,
                               granularity: float | None = None) -> SecureGaussianAccounting:
    """The accounting parameters of :func:`add_secure_gaussian` with ``std`` (module docstring, 3)."""
    std = _positive(std, "std")
    g = _granularity(granularity, std, "std")
    k = _check_dim(dim)
    delta = grid_sensitivity(sensitivity, g, k, norm=2)
    if delta <= 0:
        raise ValueError("sensitivity and dim give a zero sensitivity")
    steps = std / g
    if steps < 4.0:
        raise ValueError(f"std/granularity = {steps:g} < 4 grid steps: too coarse for the continuous-Gaussian "
                         f"accounting argument (use the default granularity)")
    tau = min(ACCOUNTING_TAU, steps / 2.0)
    acc_std = _down(g * math.sqrt(max(steps * steps - tau * tau, 0.0)))
    eta = 3.0 * k * _smoothing_error(tau)
    return SecureGaussianAccounting(
        std=std, granularity=g, sensitivity=delta, accounting_std=acc_std,
        noise_multiplier=_down(acc_std / delta), zcdp_rho=_up(delta * delta / (2.0 * std * std)),
        log_ratio_slack=_up(eta) if eta > 0 else 0.0)


def secure_laplace_accounting(scale: float, sensitivity: float, dim: int, *,
                              granularity: float | None = None) -> SecureLaplaceAccounting:
    """The accounting parameters of :func:`add_secure_laplace` with ``scale``: ``ε = (Δ₁ + g·k)/scale`` exactly."""
    scale = _positive(scale, "scale")
    g = _granularity(granularity, scale, "scale")
    delta = grid_sensitivity(sensitivity, g, dim, norm=1)
    if delta <= 0:
        raise ValueError("sensitivity and dim give a zero sensitivity")
    return SecureLaplaceAccounting(scale=scale, granularity=g, sensitivity=delta,
                                   epsilon=_up(delta / scale), noise_multiplier=_down(scale / delta))


def _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess, account):
    """The smallest convenient scale on a settled grid whose ``account(scale, g)`` reaches ``noise_multiplier``.

    ``first_guess(z, Δ, k, g)`` starts the search on grid ``g``; the scale is raised by ulps until the
    accounted multiplier is at least ``z``; without a given ``granularity`` the grid follows the scale
    (:func:`default_granularity`) until it no longer moves.
    """
    z = _positive(noise_multiplier, "noise_multiplier")
    base = _positive(sensitivity, "sensitivity")
    k = _check_dim(dim)
    g = _check_pow2(granularity) if granularity is not None else default_granularity(z * base)
    for _ in range(8):
        scale = first_guess(z, base, k, g)
        result = account(scale, base, k, granularity=g)
        while result.noise_multiplier < z:
            scale = _up(scale, 4)
            result = account(scale, base, k, granularity=g)
        if granularity is not None or default_granularity(scale) == g:
            return result
        g = default_granularity(scale)
    return result  # pragma: no cover - the grid settles after one doubling


def calibrate_secure_gaussian(noise_multiplier: float, sensitivity: float, dim: int, *,
                              granularity: float | None = None) -> SecureGaussianAccounting:
    """The smallest convenient ``std`` whose secure release is accounted with at least ``noise_multiplier``.

    Use ``result.std`` (and ``result.granularity``) for :func:`add_secure_gaussian` and keep recording
    the planned ``noise_multiplier`` (``result.noise_multiplier ≥`` it): ``std ≈ z·(Δ₂ + g√k)``.
    """
    def first_guess(z, base, k, g):
        return _up(math.sqrt((z * grid_sensitivity(base, g, k, norm=2)) ** 2 + (ACCOUNTING_TAU * g) ** 2), 4)

    return _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess,
                              secure_gaussian_accounting)


def calibrate_secure_laplace(noise_multiplier: float, sensitivity: float, dim: int, *,
                             granularity: float | None = None) -> SecureLaplaceAccounting:
    """The ``scale`` whose secure Laplace release is ``ε = 1/noise_multiplier`` pure DP or better.

    ``scale ≈ z·(Δ₁ + g·k)``; use ``result.scale`` and ``result.granularity`` with :func:`add_secure_laplace`.
    """
    def first_guess(z, base, k, g):
        return _up(z * grid_sensitivity(base, g, k, norm=1), 4)

    return _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess,
                              secure_laplace_accounting)


# ---- randomized response and the exponential mechanism ---------------------------------------------------


def secure_randomized_response(values, epsilon: float, k: int) -> np.ndarray:
    """Exact k-ary randomized response: keep each value with probability ``e^ε/(e^ε + k − 1)``, else a uniform other one.

    Drawn as the exponential mechanism with weight ``e^ε`` on the true value: propose a uniform
    category, accept the true one always and another with probability ``e^{−ε}`` (exact). The number
    of proposals does not depend on the values (acceptance ``(1 + (k−1)e^{−ε})/k`` for everyone).
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    k = int(k)
    eps = float(epsilon)
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"epsilon must be non-negative, got {epsilon!r}")
    v = np.asarray(values)
    if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= k):
        raise ValueError(f"values must be integers in [0, {k})")
    v = v.astype(np.int64)
    if math.isinf(eps):
        return v.copy()
    flat = v.reshape(-1)
    out = np.empty_like(flat)
    todo = np.arange(len(flat))
    r_exact = Fraction(eps)
    while len(todo):
        proposal = _integers_below(len(todo), k)
        same = proposal == flat[todo]
        accept = same.copy()
        other = np.flatnonzero(~same)
        if len(other):
            accept[other] = _bernoulli_exp_neg(_u32(len(other)), 32, np.full(len(other), eps), lambda i: r_exact)
        out[todo[accept]] = proposal[accept]
        todo = todo[~accept]
    return out.reshape(v.shape)


def secure_exponential_mechanism(log_weights, size=None):
    """Exact draws of an index ``i`` with probability ``∝ exp(log_weights[i])`` (``−inf``: weight 0).

    For the exponential mechanism pass ``log_weights = ε·score/(2Δ)`` (or ``ε·score/Δ`` for monotone
    scores). The draw is exact for the float log-weights given; their float rounding error adds to the
    sensitivity (``|w_i(D) − w_i(D')| ≤ ε/2 + err``). Rejection from uniform proposals: the running
    time grows with ``n / Σ_i e^{w_i − max w}``, which depends on the data (a timing channel).
    Returns an int (``size=None``) or an int64 array of ``size``.
    """
    w = np.asarray(log_weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0:
        raise ValueError("log_weights must be a non-empty 1-d array")
    if np.any(np.isnan(w)) or np.any(w == np.inf):
        raise ValueError("log_weights must not contain NaN or +inf")
    top = float(w.max())
    if top == -np.inf:
        raise ValueError("at least one log-weight must be finite")
    dims = (1,) if size is None else _shape(size)
    n = math.prod(dims)
    finite = np.isfinite(w)
    r = np.where(finite, top - np.where(finite, w, top), np.inf)
    top_exact = Fraction(top)
    rate = float(np.mean(np.exp(-r)))  # acceptance per proposal (approximate, only to size batches)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        m = min(int(need / rate * 1.2) + 32, 1 << 24)
        idx = _integers_below(m, len(w))
        keep = np.isfinite(r[idx])
        idx = idx[keep]
        rr = r[idx]
        accept = _bernoulli_exp_neg(_u32(len(idx)), 32, rr,
                                    lambda i: top_exact - Fraction(float(w[idx[i]])))
        got = idx[accept][:need]
        out[filled:filled + len(got)] = got
        filled += len(got)
    return int(out[0]) if size is None else out.reshape(dims)

