"""Releases: the one mechanism under every private method of dpfair.

A release takes a sum over people of per-person contributions, each bounded
by construction (``bound``: the norm under add/remove-one, the radius of the
ball it lies in under replace-one; see :mod:`dpfair.privacy.units`), adds
noise of scale ``noise_multiplier × bound`` drawn from the caller's seeded
generator, and records one event on the caller's ledger. With
``sampling_probability < 1`` the sum runs over a Poisson sample and the event
is ``PoissonSampledDpEvent``: the privacy argument is that of the subsampled
Gaussian (or Laplace) mechanism, accounted under the ledger's relation.

The noise is added to the *sum*; an algorithm that needs a mean divides by
a public normaliser (the expected batch size ``q·n``), never by the realised
batch size, which depends on private membership.
"""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import torch

from dpfair.privacy.accounting import PrivacyLedger
from dpfair.validation import check_positive


def _event(mechanism, noise_multiplier: float, sampling_probability: float) -> dpa.DpEvent:
    event = mechanism(float(noise_multiplier))
    if sampling_probability < 1.0:
        event = dpa.PoissonSampledDpEvent(float(sampling_probability), event)
    return event


def gaussian_event(noise_multiplier: float, sampling_probability: float = 1.0) -> dpa.DpEvent:
    return _event(dpa.GaussianDpEvent, noise_multiplier, sampling_probability)


def laplace_event(noise_multiplier: float, sampling_probability: float = 1.0) -> dpa.DpEvent:
    return _event(dpa.LaplaceDpEvent, noise_multiplier, sampling_probability)


def _add_noise(total, scale: float, generator, draw_torch, draw_numpy):
    if isinstance(total, dict):
        return {k: _add_noise(v, scale, generator, draw_torch, draw_numpy) for k, v in total.items()}
    if isinstance(total, torch.Tensor):
        if scale == 0.0:
            return total.clone()
        return total + scale * draw_torch(total, generator)
    arr = np.asarray(total, dtype=np.float64)
    if scale == 0.0:
        return arr.copy()
    return arr + scale * draw_numpy(arr.shape, generator)


def _torch_gaussian(t, g):
    return torch.randn(t.shape, generator=g, device=t.device, dtype=t.dtype)


def _torch_laplace(t, g):
    # Laplace(0, 1) as the difference of two unit exponentials: exact and seeded by ``g``.
    e = torch.empty((2, *t.shape), device=t.device, dtype=t.dtype).exponential_(generator=g)
    return e[0] - e[1]


def _release(total, bound, noise_multiplier, generator, ledger, sampling_probability, label, event, draws):
    """Check the scale, record ``event(σ, q)`` on ``ledger``, add ``σ·bound`` times the unit noise of ``draws``."""
    check_positive(bound, "bound")
    check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    ledger.record(event(noise_multiplier, sampling_probability), label)
    return _add_noise(total, noise_multiplier * bound, generator, *draws)


_GAUSSIAN_DRAWS = (_torch_gaussian, lambda shape, g: g.standard_normal(shape))
_LAPLACE_DRAWS = (_torch_laplace, lambda shape, g: g.laplace(0.0, 1.0, shape))


def release_gaussian(total, *, bound: float, noise_multiplier: float, generator, ledger: PrivacyLedger,
                     sampling_probability: float = 1.0, label: str = ""):
    """Release ``total + N(0, (noise_multiplier·bound)² I)`` and record it on ``ledger``.

    ``total`` is a tensor, an array or a dict of tensors (one vector whose
    concatenation has L2-bounded per-person contributions); ``generator`` is a
    ``torch.Generator`` (on the tensors' device) or a ``numpy.random.Generator``.
    ``noise_multiplier = 0`` releases without noise and records ε = ∞.
    """
    return _release(total, bound, noise_multiplier, generator, ledger, sampling_probability, label,
                    gaussian_event, _GAUSSIAN_DRAWS)


def release_laplace(total, *, bound: float, noise_multiplier: float, generator, ledger: PrivacyLedger,
                    sampling_probability: float = 1.0, label: str = ""):
    """Release ``total + Laplace(noise_multiplier·bound)`` per coordinate; ``bound`` is an L1 bound."""
    return _release(total, bound, noise_multiplier, generator, ledger, sampling_probability, label,
                    laplace_event, _LAPLACE_DRAWS)
