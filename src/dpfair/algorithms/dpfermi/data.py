"""What DP-FERMI's loop and its step backends read: the training data, the shared schedule, each model's step.

:class:`FermiHyperParameters` is the typed set of one model's step scalars that the estimator builds once;
:class:`FermiModels` stacks those of a grid of models, laid out ``(S, G)`` (``S`` seed groups of ``G`` models), as
the loop (:mod:`.loop`) and every backend read them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

#: The names of a DP-FERMI fit's releases: the parts of its privacy plan and the labels of its ledger's entries
#: (read by the estimator's plan and by a grid's joint event).
COUNTS, STEP = "group counts", "dp-fermi step"
#: The largest λ the target-error rule moves to (a target no λ reaches would otherwise overflow it).
LAM_MAX = 1e4


@dataclass
class FermiData:
    """Training data on the device: ``X (n, d)``, labels, groups, and each row's W block (``cells``, −1: none)."""

    X: torch.Tensor
    y: torch.Tensor
    s: torch.Tensor
    cells: torch.Tensor
    n_cells: int
    n_groups: int
    n_classes: int


@dataclass(frozen=True)
class FermiSchedule:
    """What every model of a batched run shares: sampling, steps, unit, clipping bound, tail averaging."""

    sampling_probability: float  #: q, the Poisson rate of the secret batches
    n_steps: int  #: T
    public_batch: int  #: b, the size of the public minibatch (sensitive unit)
    record: bool  #: the record unit (else the sensitive unit)
    max_grad_norm: float  #: C, the clipping bound of the per-sample θ-gradients
    average_from: int | None = None  #: average θ over the steps from this one on (None: the last iterate)


@dataclass(frozen=True)
class FermiHyperParameters:
    """One model's step of Algorithm 1, as numbers: built once by the estimator from its validated parameters.

    ``noise_theta``, ``noise_w``: the standard deviations of the noise on the released θ- and W-sums (one
    Gaussian event of multiplier σ, split by :func:`~dpfair.algorithms.dpfermi.estimator.noise_scales`);
    ``w_bound``: the norm bound of one person's released W-part; ``target_error`` (``None``: λ fixed) and
    ``lam_rate``: λ follows the training error after each epoch (sensitive unit only).
    """

    schedule: FermiSchedule
    lam: float  #: λ, the weight of the ERMI regulariser
    learning_rate: float  #: η_θ
    w_learning_rate: float  #: η_W
    w_radius: float  #: the radius of the Frobenius ball each W block is projected on
    noise_theta: float
    noise_w: float
    w_bound: float
    target_error: float | None = None
    lam_rate: float = 20.0

    def with_lam(self, lam: float) -> FermiHyperParameters:
        return dataclasses.replace(self, lam=float(lam))


@dataclass
class FermiModels:
    """Per-model hyper-parameters, each a tensor of shape ``(S, G)`` (``inv_sqrt_p``: ``(S, G, m, k)``).

    ``target_error`` (NaN: a fixed λ) and ``lam_rate``: λ follows the training error
    (:func:`~dpfair.algorithms.dpfermi.loop.adapt_lambda`); ``None``: every λ is fixed.
    """

    lam: torch.Tensor
    learning_rate: torch.Tensor
    w_learning_rate: torch.Tensor
    w_radius: torch.Tensor
    noise_theta: torch.Tensor
    noise_w: torch.Tensor
    w_bound: torch.Tensor
    inv_sqrt_p: torch.Tensor
    target_error: torch.Tensor | None = None
    lam_rate: torch.Tensor | None = None

    @classmethod
    def stack(cls, grid: list[list[FermiHyperParameters]], inv_sqrt_p: torch.Tensor, device) -> FermiModels:
        """The tensors ``(S, G)`` of a grid of models' :class:`FermiHyperParameters` (``grid[g][j]``: model ``j`` of
        seed group ``g``); ``inv_sqrt_p (S, G, m, k)``. ``target_error`` stays ``None`` when every λ is fixed."""
        t = torch.tensor([[[h.lam, h.learning_rate, h.w_learning_rate, h.w_radius, h.noise_theta, h.noise_w,
                            h.w_bound, math.nan if h.target_error is None else h.target_error, h.lam_rate]
                           for h in row] for row in grid], dtype=torch.float32, device=device)
        fields = t.unbind(-1)
        adaptive = not bool(torch.isnan(fields[7]).all())
        return cls(*fields[:7], inv_sqrt_p=inv_sqrt_p.to(device),
                   **(dict(target_error=fields[7], lam_rate=fields[8]) if adaptive else {}))
