"""Secret randomness: the coins every privacy guarantee of dpfair rests on.

A mechanism is differentially private only if its coins are unknown to the
attacker. Every draw a guarantee depends on — which people a Poisson batch
holds, every Gaussian and Laplace noise vector, randomized response, the
exponential mechanism — comes from a :class:`SecretRandom`:

- seeded with 128 bits of OS entropy (``secrets.randbits(128)``, :func:`stream_entropy`) into
  numpy's ``PCG64DXSM`` (128-bit state and increment): a seed search is out of reach;
- created fresh inside each ``fit`` (or each batched grid), so two models,
  even with the same ``random_state``, never share a noise draw;
- never stored, printed or saved: it refuses to be pickled or copied, its
  ``repr`` shows nothing, and estimators drop it when ``fit`` ends.

**On an accelerator** (noise shaped like a CUDA tensor), Gaussian and Laplace draws
come from two Philox generators on that device, made for this ``SecretRandom`` and
seeded by two secret 63-bit draws of the 128-bit generator above; a Gaussian is
``(Z₁ + Z₂)/√2`` and a Laplace ``E₁ − E₂`` (unit exponentials), one term from each, so
that predicting the noise takes both seeds (126 secret bits: a seed search stays out
of reach). The noise then never crosses the host bus and its draw runs beside the
step's kernels; the generators live and die with their ``SecretRandom``.

``random_state`` seeds only *public* randomness (model initialisation, the
order of public minibatches, data splits), which an attacker may know.

``secure=True`` (estimators' ``secure_mode``) draws from
:mod:`dpfair.privacy.samplers`: OS-keyed ChaCha20 coins, and Gaussian
releases as the sum rounded to a power-of-two grid plus exact discrete
Gaussian noise (Canonne, Kamath, Steinke 2020), which closes the
floating-point attacks on textbook samplers (Mironov 2012); randomized
response and the exponential mechanism are exact draws from the same coins.
Slower, never reproducible.

**Reproducible noise, for tests only.** Inside ``with reproducible_noise(seed):``
every ``SecretRandom`` is seeded from ``(seed, key)`` instead of the OS, so a
fit can be replayed exactly. The noise can then be recomputed by anyone who
knows the seed, which voids the guarantee: a :class:`PrivacyLeakWarning` is
raised, estimators mark themselves (``privacy_guarantee_ = "void: ..."``), the
CLI writes that into the result JSON, and the seed itself is never written
anywhere.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import secrets
import sys
import warnings
import zlib

import numpy as np

from dpfair.exceptions import PrivacyLeakWarning

def is_tensor(value) -> bool:
    """Whether ``value`` is a torch tensor, without importing torch: a process that has not imported it (a
    measurement of counts) holds none, so the privacy layer needs torch only where its caller brought it."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


#: The bits of OS entropy each secret generator is seeded with.
ENTROPY_BITS = 128

#: Set by :func:`reproducible_noise`; ``None`` (the default): secret OS entropy.
_TEST_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("dpfair_reproducible_noise", default=None)

VOID_GUARANTEE = "void: reproducible noise (dpfair.privacy.reproducible_noise), for tests only"


@contextlib.contextmanager
def reproducible_noise(seed: int):
    """Make every :class:`SecretRandom` created inside the block deterministic. **Voids every guarantee.**

    For tests and debugging only: with the seed, the noise of every release can be
    recomputed and subtracted. Estimators fitted inside the block warn and set
    ``privacy_guarantee_`` to say so.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"reproducible_noise needs a non-negative integer seed, got {seed!r}")
    token = _TEST_SEED.set(int(seed))
    try:
        yield
    finally:
        _TEST_SEED.reset(token)


def noise_is_reproducible() -> bool:
    """Whether :func:`reproducible_noise` is active (the guarantee of what is fitted now is void)."""
    return _TEST_SEED.get() is not None


def _key_words(key) -> list[int]:
    """A stable list of 32-bit words naming a stream (only used under :func:`reproducible_noise`)."""
    return [zlib.crc32(repr(part).encode()) for part in (key if isinstance(key, tuple) else (key,))]


def stream_entropy(key) -> int | list[int]:
    """What the secret stream named ``key`` is seeded with: ``ENTROPY_BITS`` fresh bits of OS entropy and
    nothing else, or, under :func:`reproducible_noise`, the test seed and the key's words.

    The noise is unpredictable because this is: the key is public (a class name, ``random_state``), so it
    plays no part outside :func:`reproducible_noise`, and no two calls share their bits.
    """
    seed = _TEST_SEED.get()
    if seed is None:
        return secrets.randbits(ENTROPY_BITS)
    return [seed, *_key_words(key)]


class SecretRandom:
    """The secret generator of one fit: Poisson sampling and every noise draw.

    ``key`` names the stream; it matters only under :func:`reproducible_noise`
    (then the stream is a function of the test seed and the key; :func:`stream_entropy`).
    ``secure``: uniform coins come from :mod:`dpfair.privacy.samplers` and floating-point
    noise draws are refused (a :class:`~dpfair.privacy.Release` then draws exact
    discrete noise itself); Poisson samples stay on the 128-bit generator.
    """

    __slots__ = ("_gen", "_devices", "secure", "reproducible")

    def __init__(self, key=(), *, secure: bool = False):
        self.secure = bool(secure)
        self.reproducible = noise_is_reproducible()
        if self.reproducible:
            if self.secure:
                raise ValueError("secure_mode=True draws from the OS CSPRNG and cannot be made reproducible; "
                                 "use secure_mode=False inside reproducible_noise()")
            warnings.warn(f"reproducible_noise is active: the noise of this fit can be recomputed from the "
                          f"seed, so it carries no privacy guarantee ({VOID_GUARANTEE})",
                          PrivacyLeakWarning, stacklevel=3)
        self._gen = np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(stream_entropy(key))))
        self._devices: dict[torch.device, tuple[torch.Generator, torch.Generator]] = {}

    # ---- never revealed ---------------------------------------------------------------
    def __repr__(self) -> str:
        return "SecretRandom(<secret>)"

    def __reduce__(self):
        raise TypeError("SecretRandom holds the secret coins of a privacy guarantee and cannot be pickled or "
                        "copied; it lives only while fit runs")

    def __deepcopy__(self, memo):
        self.__reduce__()

    # ---- draws --------------------------------------------------------------------------
    @staticmethod
    def _as(arr: np.ndarray, like):
        if is_tensor(like):
            return sys.modules["torch"].from_numpy(arr).to(device=like.device, dtype=like.dtype)
        return arr

    def _dtype(self, like):
        return np.float32 if is_tensor(like) and like.dtype == sys.modules["torch"].float32 else np.float64

    def _on_device(self, like) -> tuple[torch.Generator, torch.Generator] | None:
        """The two device generators for noise shaped like ``like`` (a tensor on an accelerator), else ``None``;
        each seeded by a secret 63-bit draw of this generator (module docstring)."""
        if not is_tensor(like) or like.device.type == "cpu":
            return None
        import torch

        if like.device not in self._devices:
            pair = tuple(torch.Generator(device=like.device) for _ in range(2))
            for gen in pair:
                gen.manual_seed(int(self._gen.integers(0, 2**63)))
            self._devices[like.device] = pair
        return self._devices[like.device]

    def normal(self, shape, like=None):
        """Standard normal draws of ``shape`` (a torch tensor on ``like``'s device when ``like`` is one; drawn
        there on an accelerator).

        Under ``secure`` the noise of a release is drawn by :class:`~dpfair.privacy.Release`
        itself (rounded sum plus exact discrete noise), never by scaling these floats.
        """
        self._no_float_noise("Gaussian")
        pair = self._on_device(like)
        if pair is not None:
            torch = sys.modules["torch"]
            z = [torch.randn(tuple(shape), generator=gen, device=like.device, dtype=like.dtype) for gen in pair]
            return z[0].add_(z[1]).mul_(math.sqrt(0.5))
        return self._as(self._gen.standard_normal(tuple(shape), dtype=self._dtype(like)), like)

    def laplace(self, shape, like=None):
        """Laplace(0, 1) draws of ``shape`` (on an accelerator: the difference of two unit exponentials)."""
        self._no_float_noise("Laplace")
        pair = self._on_device(like)
        if pair is not None:
            torch = sys.modules["torch"]
            e = [torch.empty(tuple(shape), device=like.device, dtype=like.dtype).exponential_(generator=gen)
                 for gen in pair]
            return e[0].sub_(e[1])
        return self._as(self._gen.laplace(0.0, 1.0, tuple(shape)).astype(self._dtype(like)), like)

    def _no_float_noise(self, kind: str) -> None:
        if self.secure:
            raise RuntimeError(f"secure_mode draws {kind} noise through Release (exact discrete samplers); "
                               "scaled floating-point draws would undo that")

    def gumbel(self, shape) -> np.ndarray:
        """Standard Gumbel draws (the exponential mechanism's Gumbel-max), float64."""
        self._no_float_noise("Gumbel")
        return self._gen.gumbel(size=shape)

    def random(self, size) -> np.ndarray:
        """Uniform [0, 1) draws."""
        if self.secure:
            from dpfair.privacy.samplers import secure_uniform
            return secure_uniform(tuple(np.atleast_1d(size)))
        return self._gen.random(size)

    def integers(self, low: int, high: int, size) -> np.ndarray:
        """Uniform integers in ``[low, high)``."""
        if self.secure:
            from dpfair.privacy.samplers import secure_integers
            return secure_integers(low, high, tuple(np.atleast_1d(size)))
        return self._gen.integers(low, high, size=size)

    def public_seeds(self, k: int) -> list[int]:
        """``k`` distinct seeds in ``[0, 2^31 − 1)`` that will be *published* (a run's ``random_state``).

        Drawn from the OS CSPRNG (``secrets``), never from this generator: a published value must not be an
        output of the generator that draws the noise (with enough outputs a PCG state can be recovered), and a
        secret choice among runs must not be readable from seeds that a known stream would repeat. Under
        :func:`reproducible_noise` they come from this generator, so that a test replays the whole fit.
        """
        seeds: list[int] = []
        while len(seeds) < k:
            need = k - len(seeds)
            fresh = (self._gen.integers(0, 2**31 - 1, size=need).tolist() if self.reproducible
                     else [secrets.randbelow(2**31 - 1) for _ in range(need)])
            seeds = list(dict.fromkeys([*seeds, *fresh]))
        return seeds

    def poisson_sample(self, n: int, q: float) -> np.ndarray:
        """Sorted indices of a Poisson sample of ``range(n)``: each kept independently with probability ``q``.

        Drawn as the gaps between kept indices, i.i.d. geometric with success
        probability ``q`` (exact, numpy's sampler), so a sample costs about ``q·n``
        draws; ``q ≥ 1`` keeps everyone.
        """
        if q >= 1.0:
            return np.arange(n, dtype=np.int64)
        chunk = int(q * n + 6.0 * (q * n) ** 0.5 + 16)
        parts, last = [], -1
        while last < n:
            pos = last + np.cumsum(self._gen.geometric(q, size=chunk))
            parts.append(pos)
            last = int(pos[-1])
        pos = np.concatenate(parts)
        return pos[pos < n]
