"""Releases: the one mechanism path under every private method of dpfair.

Every private algorithm here releases, again and again, one of four things:

- a **noisy sum** (Gaussian or Laplace): a sum over people of per-person
  contributions, each bounded by construction (``bound``: the norm under
  add/remove-one, the radius of the ball it lies in under replace-one; see
  :mod:`dpfair.privacy.units`), plus noise of scale ``σ × bound``. With
  ``sampling_probability < 1`` the sum runs over a secret Poisson sample and
  the event is ``PoissonSampledDpEvent``;
- **randomized response** of a categorical value per person (k-ary, local ε);
- an **exponential-mechanism** choice among candidates scored by a sum over
  people whose change under a neighbour is at most ``sensitivity``;
- a **repeat-and-select** draw (private selection, :mod:`dpfair.selection`): the
  secret number of runs, each run's candidate and the runs' seeds, recorded as
  the given event (``RepeatAndSelectDpEvent``) that covers the runs and the
  choice of the best by released score.

A :class:`Release` is one part of an estimator's :class:`~dpfair.privacy.plan.PrivacyPlan`
made concrete: the part, its noise multiplier(s), the fit's
:class:`~dpfair.privacy.randomness.SecretRandom` and the ledger(s) that record
it. Each call draws the noise from the secret generator and records the
part's event once on every model's ledger (batched: ``noise_multiplier`` and
the ledgers are per model, the noise of every model is an independent draw;
a batched release writes its ledgers on :meth:`Release.flush`).
Nothing else in dpfair draws secret coins, so a spy on :class:`Release` sees every
release (``tests/privacy/test_attacks.py``, the release-path tests; the private
search's in ``tests/selection/test_private_search.py``).

The noise is added to the *sum*; an algorithm that needs a mean divides by a
public normaliser (the expected batch size ``q·n``), never by the realised
batch size, which depends on private membership.
"""

from __future__ import annotations

import math
import sys

import dp_accounting as dpa
import numpy as np

from dpfair.privacy.accounting import PrivacyLedger
from dpfair.privacy.randomness import SecretRandom, is_tensor
from dpfair.utils.validation import check_positive

# ---- events -----------------------------------------------------------------------------------


def _sampled(event: dpa.DpEvent, sampling_probability: float) -> dpa.DpEvent:
    if sampling_probability < 1.0:
        event = dpa.PoissonSampledDpEvent(float(sampling_probability), event)
    return event


def gaussian_event(noise_multiplier: float, sampling_probability: float = 1.0) -> dpa.DpEvent:
    """A Gaussian sum with multiplier σ, optionally on a Poisson sample of rate q."""
    return _sampled(dpa.GaussianDpEvent(float(noise_multiplier)), sampling_probability)


def laplace_event(noise_multiplier: float, sampling_probability: float = 1.0) -> dpa.DpEvent:
    """A Laplace sum with multiplier σ (scale / L1 bound), optionally Poisson-sampled."""
    return _sampled(dpa.LaplaceDpEvent(float(noise_multiplier)), sampling_probability)


def pure_dp_event(epsilon: float) -> dpa.DpEvent:
    """The event of an ε-DP mechanism: binary randomized response with ε (the worst ε-DP mechanism).

    Its noise parameter 2/(e^ε + 1) = 2·e^(−ε)/(1 + e^(−ε)), computed in that form (e^ε overflows above
    ε ≈ 709.8). Where it falls below the normal floats (ε ≳ 708; a subnormal has too few digits to say
    which mechanism it is) no randomized response holds the mechanism and the event is non-private:
    ε = ∞ bounds it (an ε-DP mechanism is ε'-DP for every ε' ≥ ε).
    """
    tail = _exp_minus(epsilon)
    return _rr_or_non_private(2.0 * tail / (1.0 + tail), 2)


def _exp_minus(epsilon: float) -> float:
    """e^(−ε), 0 for ε = ∞."""
    return 0.0 if math.isinf(epsilon) else math.exp(-epsilon)


def _rr_or_non_private(noise: float, k: int) -> dpa.DpEvent:
    """Randomized response with this noise parameter, or a non-private event where it is below the normal
    floats (its ε is then beyond what the accountants represent)."""
    if noise < sys.float_info.min:
        return dpa.NonPrivateDpEvent()
    return dpa.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=k)


def keep_probability(epsilon: float, k: int) -> float:
    """π = e^ε / (e^ε + k − 1): the probability that k-ary randomized response reports the true value."""
    return 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))


def randomized_response_event(epsilon: float, k: int) -> dpa.DpEvent:
    """dp_accounting's event of k-ary randomized response: uniform output with probability k·π̄.

    π̄ = (1 − π)/(k − 1) = e^(−ε)/(1 + (k − 1)·e^(−ε)), computed in that form: 1 − π loses its digits
    to cancellation as e^(−ε) nears the float precision (all of them for ε ≳ 37), which would record a
    mechanism other than the one that ran. Beyond the normal floats (ε ≳ 708) the event is non-private,
    as in :func:`pure_dp_event`.
    """
    tail = _exp_minus(epsilon)
    return _rr_or_non_private(k * tail / (1.0 + (k - 1) * tail), k)


# ---- the release object --------------------------------------------------------------------------


def _per_block(total, std, noisy):
    """``noisy(block, std)`` for every block of ``total`` (a tensor, an array, a dict or a list of them).

    ``std`` broadcasts, or gives one entry per block of a list.
    """
    if isinstance(total, dict):
        return {k: _per_block(v, std, noisy) for k, v in total.items()}
    if isinstance(total, (list, tuple)):
        stds = std if isinstance(std, (list, tuple)) else [std] * len(total)
        return [_per_block(v, s, noisy) for v, s in zip(total, stds)]
    return noisy(total, std)


class Release:
    """One planned part, ready to release: its event, noise multiplier(s), the secret coins and the ledgers.

    ``part`` is a :class:`~dpfair.privacy.plan.Part`; ``noise_multiplier`` is a float
    (one model) or a sequence / tensor with one entry per model, each recorded on
    the matching ledger of ``ledgers``. For randomized response the "noise
    multiplier" is ``1/ε_local`` and for the exponential mechanism ``2/ε₀`` (the
    plan's parametrisations, see :mod:`dpfair.privacy.plan`).
    """

    def __init__(self, part, noise_multiplier, secret: SecretRandom, ledgers):
        if not isinstance(secret, SecretRandom):
            raise TypeError("a Release draws only from a SecretRandom (dpfair.privacy.randomness)")
        if secret.secure and not isinstance(ledgers, PrivacyLedger) and len(ledgers) > 1:
            raise ValueError("secure_mode=True fits one model at a time; fit the grid's points separately")
        self.part = part
        self.secret = secret
        self.ledgers = [ledgers] if isinstance(ledgers, PrivacyLedger) else list(ledgers)
        sigmas = noise_multiplier.detach().cpu().reshape(-1).tolist() if is_tensor(noise_multiplier) \
            else np.atleast_1d(np.asarray(noise_multiplier, dtype=np.float64)).tolist()
        if len(sigmas) != len(self.ledgers):
            raise ValueError(f"{len(sigmas)} noise multipliers for {len(self.ledgers)} ledgers")
        for sigma in sigmas:
            check_positive(sigma, "noise_multiplier", allow_zero=True)
        self.noise_multipliers = sigmas
        self.events = [part.event(s) for s in sigmas]
        self.pending = 0

    @property
    def noise_multiplier(self) -> float:
        """The multiplier of a single-model release."""
        if len(self.noise_multipliers) != 1:
            raise ValueError("a batched release has one noise multiplier per model")
        return self.noise_multipliers[0]

    def _record(self) -> None:
        self.pending += 1
        if len(self.ledgers) == 1:
            self.flush()

    def flush(self) -> None:
        """Write the releases made since the last flush on every ledger (run-length encoded)."""
        if self.pending:
            for ledger, event in zip(self.ledgers, self.events):
                ledger.record(event, self.part.name, count=self.pending)
            self.pending = 0

    def _kind(self, *kinds) -> None:
        if self.part.mechanism not in kinds:
            raise ValueError(f"part {self.part.name!r} is a {self.part.mechanism} release, not {' or '.join(kinds)}")

    # ---- noisy sums ----------------------------------------------------------------------------
    def sample(self, n: int) -> np.ndarray:
        """The secret Poisson sample of ``range(n)`` this (sampled) part releases a sum over."""
        return self.secret.poisson_sample(n, self.part.sampling_probability)

    def noise_scale(self, bound=1.0, scale=None, *, dim=None):
        """The scale of the noise :meth:`noisy_sum` adds (Gaussian: its standard deviation; Laplace: b):
        ``σ·bound``, one per block when ``bound`` is a list, or ``scale`` itself when given (batched releases
        pass ``σ·bound`` per model). With ``dim`` (the entries of a single block) under ``secure_mode``: the
        raised scale the secure release draws on that block (:meth:`_secure_block`).

        The part's event (``GaussianDpEvent(σ)``, or the Laplace one) accounts for a sum whose per-person
        contribution has norm at most ``bound``, released with noise of exactly this scale: less voids it.
        """
        if scale is not None:
            return scale
        sigma = self.noise_multiplier
        bounds = bound if isinstance(bound, (list, tuple)) else [bound]
        scales = [sigma * check_positive(float(b), "bound") for b in bounds]
        if dim is not None and self.secret.secure and not isinstance(bound, (list, tuple)):
            return self._secure_scale(scales[0], int(dim))[0]
        return scales if isinstance(bound, (list, tuple)) else scales[0]

    def noisy_sum(self, total, bound=1.0, *, scale=None):
        """``total + σ·bound·Z`` (Z Gaussian or Laplace per the part), recorded as one release.

        ``total``: tensor, array, dict or list of blocks (one vector whose per-person
        contribution is bounded: for a list, each block's contribution norm divided by
        its ``bound`` entry, squared and summed, is at most 1). ``scale``: the noise
        standard deviation (or Laplace scale) directly, per block or per model,
        instead of ``σ·bound`` (batched releases, where σ differs by model); see :meth:`noise_scale`.
        """
        self._kind("gaussian", "laplace")
        scale = self.noise_scale(bound, scale)
        if self.secret.secure and self.part.mechanism == "laplace" and self.part.pure is None:
            raise ValueError(f"secure_mode=True needs the Laplace release {self.part.name!r} planned as pure DP "
                             "(Part(pure=...)); use secure_mode=False")
        self._record()
        if self.secret.secure:
            return _per_block(total, scale, self._secure_block)
        draw = self.secret.normal if self.part.mechanism == "gaussian" else self.secret.laplace

        def noisy(block, std):
            if is_tensor(block):
                return block + std * draw(block.shape, block)
            block = np.asarray(block, dtype=np.float64)
            return block + np.asarray(std) * draw(block.shape, None)

        return _per_block(total, scale, noisy)

    def _secure_block(self, block, std):
        """``secure_mode``: the block rounded to a grid plus exact discrete noise (:mod:`.samplers`).

        Gaussian: the std is raised so that the rounding's extra sensitivity (``g·√k``) and
        the discrete noise are still covered by the planned ``GaussianDpEvent(σ)``
        (``calibrate_secure_gaussian``). Laplace: the part must be planned ``pure``; the scale
        is raised so that the release, rounding included (``Δ₁ + g·k``), is pure
        ``pure/σ``-DP, the event its ledger records (``calibrate_secure_laplace``).
        """
        from dpfair.privacy import samplers

        std = std if isinstance(std, float) else float(np.asarray(std.detach().cpu() if is_tensor(std) else std)
                                                         .reshape(-1)[0])
        dim = max(int(block.numel() if is_tensor(block) else np.size(block)), 1)
        raised, mechanism = self._secure_scale(std, dim)
        if mechanism is None:
            return block
        add = samplers.add_secure_gaussian if mechanism == "gaussian" else samplers.add_secure_laplace
        return add(block, raised)

    def _secure_scale(self, std: float, dim: int) -> tuple[float, str | None]:
        """The secure release's scale for a block of ``dim`` entries whose planned scale is ``std``, and the
        mechanism (None: no noise, σ or ``std`` zero)."""
        from dpfair.privacy import samplers

        sigma = self.noise_multiplier
        if sigma == 0.0 or std == 0.0:
            return std, None
        dim = max(dim, 1)
        if self.part.mechanism == "gaussian":
            return samplers.calibrate_secure_gaussian(sigma, std / sigma, dim).std, "gaussian"
        pure = self.part.pure
        return samplers.calibrate_secure_laplace(sigma / pure, pure * std / sigma, dim).scale, "laplace"

    # ---- randomized response -------------------------------------------------------------------
    def randomize(self, values, k: int) -> np.ndarray:
        """k-ary randomized response: each value kept with probability π, else one of the other k − 1 uniformly."""
        self._kind("randomized_response")
        sigma = self.noise_multiplier
        epsilon = math.inf if sigma == 0 else 1.0 / sigma
        self._record()
        values = np.asarray(values, dtype=np.int64)
        if self.secret.secure:
            from dpfair.privacy.samplers import secure_randomized_response
            return secure_randomized_response(values, epsilon, k) if math.isfinite(epsilon) else values.copy()
        keep = self.secret.random(len(values)) < keep_probability(epsilon, k)
        other = (values + self.secret.integers(1, k, size=len(values))) % k
        return np.where(keep, values, other)

    # ---- repeat and select --------------------------------------------------------------------------
    def repeat(self, law, choices: int) -> tuple[np.ndarray, list[int]]:
        """The secret draws of a repeat-and-select mechanism (Papernot & Steinke 2022), recorded as the part's event.

        ``law.draw(secret)`` gives the number of runs K (``law``: :class:`dpfair.selection.Repetitions`, whose
        ``RepeatAndSelectDpEvent`` the part carries as its ``fixed`` event); each run's candidate is uniform on
        ``range(choices)`` and each run gets a distinct public seed (:meth:`SecretRandom.public_seeds`). Returns
        ``(picks, seeds)``, of length K. The event bounds the runs and the choice of the best by released score
        only while K and the other runs stay secret: the caller publishes the winner alone.
        """
        self._kind("fixed")
        check_positive(choices, "choices", integer=True)
        self._record()
        k = int(law.draw(self.secret))
        return self.secret.integers(0, choices, k), self.secret.public_seeds(k)

    # ---- exponential mechanism -------------------------------------------------------------------
    def select(self, scores: np.ndarray, sensitivity: float) -> tuple[int, np.ndarray]:
        """McSherry–Talwar over a product set with ε₀ = 2/σ: ``(j, g_1..g_m)`` with prob. ∝ ``exp(ε₀ Σ_a scores[j, a, g_a] / 2Δ)``.

        ``scores`` has shape ``(J, m, G)``: J families, each the product of m
        independent choices among G options (m = 1 for a single choice). The joint
        draw is exact: ``j`` from its marginal (a log-sum-exp per factor), then each
        ``g_a`` given ``j``, by Gumbel-max on the secret generator. ``Δ`` bounds the
        change of a total score when one person changes; ``σ = 0`` (ε₀ = ∞) or ``Δ = 0``
        returns an arg-max.
        """
        self._kind("exponential")
        sigma = self.noise_multiplier
        self._record()
        if sigma == 0 or sensitivity <= 0.0:
            j = int(np.argmax(scores.max(axis=2).sum(axis=1)))
            return j, np.argmax(scores[j], axis=1)
        logits = scores * ((2.0 / sigma) / (2.0 * sensitivity))
        top = logits.max(axis=2, keepdims=True)
        marginal = (top[..., 0] + np.log(np.exp(logits - top).sum(axis=2))).sum(axis=1)
        if self.secret.secure:  # exact draws from the CSPRNG instead of floating-point Gumbel-max
            from dpfair.privacy.samplers import secure_exponential_mechanism
            j = int(secure_exponential_mechanism(marginal))
            return j, np.array([secure_exponential_mechanism(row) for row in logits[j]], dtype=np.int64)
        j = int(np.argmax(marginal + self.secret.gumbel(marginal.shape)))
        return j, np.argmax(logits[j] + self.secret.gumbel(logits[j].shape), axis=1)
