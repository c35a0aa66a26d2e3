"""Algorithm 1 of DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023), one step for one model, written to be read.

The objective is the min-max form of fair ERM with the ERMI regulariser (Theorem 3.2, eq. (4); ψ̂_i of
Theorem C.1)::

    min_θ max_W  (1/n) Σ_i ℓ(θ; x_i, y_i) + λ ψ̂_i(θ, W),
    ψ̂_i(θ, W) = −Tr(W diag(F_i) Wᵀ) + 2 Tr(W E[ŷ_i s_iᵀ | x_i, s_i] P_s^{-1/2}) − 1
              = F_i · (2 u_i − Σ_r W_r²) − 1,          u_i = W_{s_i} / √p_{s_i},

``F_i = softmax(model(x_i))`` and ``W`` a ``k × l`` matrix per reference cell of the fairness notion
(one cell for demographic parity, one per label for equalized odds: ``W`` has shape ``(m, k, l)`` and a
row uses block ``c_i``, or none). :func:`reference_step` is lines 4-6 of Algorithm 1 with the gradients of
Lemma D.1, the batch Poisson-sampled and the sums released through :class:`~dpfair.privacy.Release`:

* sensitive unit (neighbours differ in one person's s): only the parts of the gradients that carry s are
  summed over the secret batch B and released — ``∇_θ 2λ u_iᵀF_i`` clipped to C and ``2 P^{-1/2} s_i F_iᵀ``
  (norm ≤ ``2/√p_min``) — and the parts that depend on (x, y) alone are computed exactly on an
  independent public minibatch (adding them over B would reveal who is in B);
* record unit (neighbours add or remove a record): the whole ``∇_θ(ℓ_i + λψ̂_i)``, clipped, and the whole
  ``∇_W ψ̂_i`` are summed over B and released.

Plain PyTorch, one model, one row at a time: it is the definition the fast backends of
:mod:`dpfair.algorithms.dpfermi_engine` are tested equal to (``tests/algorithms/test_dpfermi_backends.py``),
not the path a fit takes. :class:`FermiHyperParameters` is the typed set of a model's step scalars that the
estimator builds once and every backend reads.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

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
    Gaussian event of multiplier σ, split by :func:`~dpfair.algorithms.dpfermi_engine.noise_scales`);
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


def psi_parts(logits: torch.Tensor, W_c: torch.Tensor, s: int, inv_sqrt_p_c: torch.Tensor):
    """The two parts of ``ψ̂_i + 1 = F_i·(2u_i) + F_i·(−Σ_r W_r²)`` (Theorem C.1) of one row: (s-part, x-part).

    ``W_c (k, l)``: the row's W block, ``inv_sqrt_p_c (k,)``: ``P_s^{-1/2}`` of that block.
    """
    proba = torch.softmax(logits, dim=-1)
    u = W_c[s] * inv_sqrt_p_c[s]
    return (proba * 2.0 * u).sum(), -(proba * (W_c * W_c).sum(0)).sum()


def _flat_grad(value: torch.Tensor, params) -> torch.Tensor:
    if not value.requires_grad:
        return torch.zeros(sum(p.numel() for p in params))
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, params, allow_unused=False)])


def clip(g: torch.Tensor, bound: float) -> torch.Tensor:
    """``g · min(1, C/‖g‖)``: the per-sample clipping of DP-SGD."""
    return g * min(1.0, bound / max(float(g.norm()), torch.finfo(g.dtype).tiny))


def reference_step(model: torch.nn.Module, W: torch.Tensor, data: FermiData, inv_sqrt_p: torch.Tensor,
                   hp: FermiHyperParameters, batch: torch.Tensor, public: torch.Tensor | None, release) -> torch.Tensor:
    """One iteration of Algorithm 1 for one model: updates ``model``'s parameters in place, returns the new W.

    ``batch``: the indices of the secret Poisson batch B (line 4); ``public``: the public minibatch (sensitive
    unit; ``None`` under the record unit); ``release``: the step's :class:`~dpfair.privacy.Release` (its
    ``noisy_sum`` adds the secret noise u_t and V_t of lines 5-6).
    """
    sched = hp.schedule
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    expected = sched.sampling_probability * len(data.y)  # q·n, the expected |B|: the released sums are divided by it
    theta_sum, w_sum = torch.zeros(n_params), torch.zeros_like(W)
    for i in batch.tolist():  # lines 5-6, the sums over B: per-sample gradients of Lemma D.1, clipped
        logits = model(data.X[i:i + 1])[0]
        c, s = int(data.cells[i]), int(data.s[i])
        s_part, x_part = psi_parts(logits, W[c], s, inv_sqrt_p[c]) if c >= 0 else (logits.sum() * 0, logits.sum() * 0)
        if sched.record:  # the whole objective: ∇_θ(ℓ_i + λψ̂_i) and ∇_W ψ̂_i = −2W diag(F_i) + 2P^{-1/2} s_i F_iᵀ
            objective = F.cross_entropy(logits, data.y[i]) + hp.lam * (s_part + x_part)
            theta_sum += clip(_flat_grad(objective, params), sched.max_grad_norm)
        else:  # the s-carrying parts only: ∇_θ 2λ u_iᵀF_i and 2P^{-1/2} s_i F_iᵀ
            theta_sum += clip(_flat_grad(hp.lam * s_part, params), sched.max_grad_norm)
        if c >= 0:
            proba = torch.softmax(logits.detach(), dim=-1)
            w_sum[c, s] += 2.0 * inv_sqrt_p[c, s] * proba
            if sched.record:
                w_sum[c] -= 2.0 * W[c] * proba
    grad_theta, grad_w = release.noisy_sum([theta_sum, w_sum], scale=[hp.noise_theta, hp.noise_w])  # + u_t, V_t
    if public is not None:  # sensitive unit: the (x, y)-parts, exact, on the public minibatch, scaled to |B| rows
        pub_theta, pub_w = torch.zeros(n_params), torch.zeros_like(W)
        for i in public.tolist():
            logits = model(data.X[i:i + 1])[0]
            c = int(data.cells[i])
            x_part = psi_parts(logits, W[c], 0, inv_sqrt_p[c])[1] if c >= 0 else logits.sum() * 0
            pub_theta += _flat_grad(F.cross_entropy(logits, data.y[i]) + hp.lam * x_part, params)
            if c >= 0:
                pub_w[c] -= 2.0 * W[c] * torch.softmax(logits.detach(), dim=-1)
        grad_theta = grad_theta + pub_theta * (expected / len(public))
        grad_w = grad_w + pub_w * (expected / len(public))
    with torch.no_grad():  # line 5: descent in θ
        for p, g in zip(params, (grad_theta / expected).split([p.numel() for p in params])):
            p -= hp.learning_rate * g.reshape(p.shape)
    W = W + (grad_w / expected) * hp.w_learning_rate  # line 6: ascent in W, then Π_W onto each block's ball
    norms = W.flatten(1).norm(dim=1).clamp_min(1e-12)
    return W * (hp.w_radius / norms).clamp(max=1.0)[:, None, None]


def public_minibatches(n: int, size: int, generator: torch.Generator):
    """The public minibatches: consecutive slices of ``size`` rows of shuffled epochs (a fresh order when fewer
    than ``size`` rows are left, the leftovers first)."""
    order = torch.empty(0, dtype=torch.long)
    while True:
        if len(order) < size:
            order = torch.cat([order, torch.randperm(n, generator=generator)])
        batch, order = order[:size], order[size:]
        yield batch


def training_error(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(-1) != y).float().mean())


def reference_train(model: torch.nn.Module, data: FermiData, inv_sqrt_p: torch.Tensor, hp: FermiHyperParameters,
                    sampler, release, public_generator: torch.Generator | None) -> tuple[torch.Tensor, float]:
    """Algorithm 1's loop around :func:`reference_step`: ``(W, λ)`` at the end; ``model`` holds the returned θ.

    W starts at 0 (line 1); ``sampler`` (a :class:`~dpfair.privacy.SecretRandom`) draws each step's Poisson
    batch; after each expected epoch λ follows ``target_error`` (dual ascent,
    :func:`~dpfair.algorithms.dpfermi_engine.adapt_lambda`); θ returned is the average of the iterates from
    ``average_from`` on (post-processing; Algorithm 1 returns an iterate).
    """
    sched = hp.schedule
    n = len(data.y)
    W = torch.zeros(data.n_cells, data.n_groups, data.n_classes)
    public = None if sched.record else public_minibatches(n, sched.public_batch, public_generator)
    params = [p for p in model.parameters() if p.requires_grad]
    average = None
    steps_per_epoch = max(1, round(1 / sched.sampling_probability))
    for step in range(sched.n_steps):
        batch = torch.from_numpy(sampler.poisson_sample(n, sched.sampling_probability))
        W = reference_step(model, W, data, inv_sqrt_p, hp, batch, None if public is None else next(public), release)
        if sched.average_from is not None and step >= sched.average_from:
            current = torch.cat([p.detach().reshape(-1) for p in params])
            count = step - sched.average_from + 1
            average = current if count == 1 else average + (current - average) / count
        if hp.target_error is not None and ((step + 1) % steps_per_epoch == 0 or step + 1 == sched.n_steps):
            gap = hp.lam_rate * (hp.target_error - training_error(model, data.X, data.y))
            hp = hp.with_lam(min(hp.lam * math.exp(min(max(gap, -1.0), 1.0)), LAM_MAX))
    if average is not None:
        with torch.no_grad():
            for p, v in zip(params, average.split([p.numel() for p in params])):
                p.copy_(v.reshape(p.shape))
    return W, hp.lam
