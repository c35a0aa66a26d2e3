"""Algorithm 1 of DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023) for many models in lockstep.

One loop serves the estimator (one model) and the sweeps (hundreds of models
at once). Models are laid out on a grid ``(S, G)``: the ``G`` models of a
*seed group* (one ``random_state``) share that group's secret Poisson batches
and its public minibatch order, and differ in λ, the step sizes, the W radius
and the noise scales. Every model draws its OWN noise (one draw of shape
``(S, G, ·)`` from the secret stream per step), so no two released models share
noise; the joint ε of a seed group follows from its shared batches (see
:mod:`dpfair.algorithms.dpfermi_sweep`).

Per step ``t`` (see :mod:`dpfair.algorithms.dpfermi` for the privacy argument):

1. a secret Poisson batch ``B_t`` (rate ``q``) per seed group, from that group's
   :class:`~dpfair.privacy.SecretRandom`;
2. on ``B_t``: the clipped per-sample θ-gradients of the s-carrying loss and
   the s-part ``2 P^{-1/2} s_i F_iᵀ`` of the W-gradient (under the record unit:
   the whole per-sample θ-gradient, clipped, and the whole W-gradient);
   their sums are released through one batched :class:`~dpfair.privacy.Release`
   with Gaussian noise of standard deviation ``noise_theta`` and ``noise_w``
   (one Gaussian event per model and step on that model's ledger);
3. (sensitive unit) on an independent public minibatch of ``b`` rows (epochs
   of a shuffled order): the exact gradients of the parts that depend on
   ``(x, y)`` only;
4. ``θ ← θ − η_θ (noisy_θ/(q n) + public_θ/b)``,
   ``W ← Π_{‖W‖_F ≤ R}(W + η_w (noisy_W/(q n) + public_W/b))``;
5. optionally, θ is averaged over the last steps (tail averaging, post-processing).

Two model families: :class:`LinearModels` (binary or softmax logistic
regression; per-sample gradients in closed form, ``x̃_i ⊗ ∂ℓ_i/∂z_i`` with norm
``‖x̃_i‖·‖∂ℓ_i/∂z_i‖``, so a step of ``S·G`` models is a few batched matrix
products) and :class:`ModuleModel` (any ``torch.nn.Module``, one model,
per-sample gradients through ``torch.func``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from dpfair.nn import clipped_gradient_sum
from dpfair.progress import SILENT, Progress


@dataclass
class FermiData:
    """Training data on the device: ``X (n, d)``, labels, groups, and each row's W (``cells``, −1: none)."""

    X: torch.Tensor
    y: torch.Tensor
    s: torch.Tensor
    cells: torch.Tensor
    n_cells: int
    n_groups: int
    n_classes: int


@dataclass
class FermiSchedule:
    """What every model of a run shares: sampling, steps, unit, clipping bound."""

    sampling_probability: float
    n_steps: int
    public_batch: int
    record: bool
    max_grad_norm: float
    average_from: int | None = None  #: average θ over the steps from this one on (None: the last iterate)


@dataclass
class FermiModels:
    """Per-model hyper-parameters, each a tensor of shape ``(S, G)`` (``inv_sqrt_p``: ``(S, G, m, k)``)."""

    lam: torch.Tensor
    learning_rate: torch.Tensor
    w_learning_rate: torch.Tensor
    w_radius: torch.Tensor
    noise_theta: torch.Tensor
    noise_w: torch.Tensor
    w_bound: torch.Tensor
    inv_sqrt_p: torch.Tensor


def fermi_loss(logits, target):
    """Per-sample ``a·CE + λ F·h`` summed; ``target = (y, h, a, lam)``, ``F = softmax(logits)``.

    With ``h = 2u − wsq`` (``u = W_{s}/√p_{s}``, ``wsq = Σ_r W_r²``) ``F·h = ψ̂ + 1``
    of Theorem C.1 (the constant has no gradient); the secret part of the
    sensitive unit uses ``h = 2u``, the public part ``h = −wsq``.
    """
    y, h, a, lam = target
    ce = F.cross_entropy(logits, y, reduction="none")
    return (a * ce + lam * (torch.softmax(logits, dim=1) * h).sum(1)).sum()


def _psi_logit_gradient(proba, h):
    """∂/∂z of ``Σ_j F_j h_j`` with ``F = softmax(z)``: ``F ⊙ (h − ⟨F, h⟩)``."""
    return proba * (h - (proba * h).sum(-1, keepdim=True))


class LinearModels:
    """``S × G`` logistic regressions: ``weight (S, G, L, d)``, ``bias (S, G, L)``.

    ``L = 1`` is the binary single-logit model (logits ``[0, z]``, as
    :class:`dpfair.nn.LogisticRegression`); otherwise ``L = l`` softmax logits.
    Parameters flatten as ``[weight (L·d, row-major), bias (L)]``, the order of
    ``LogisticRegression.named_parameters()``. Per-row tensors are laid out
    ``(S, B, G, ·)`` so that the batched products need no copies.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        self.weight, self.bias = weight, bias
        self.S, self.G, self.L, self.d = weight.shape
        self.n_params = self.L * self.d + self.L

    def _logits(self, Xb):
        """``z (S, B, G, L)``."""
        S, B, _ = Xb.shape
        z = torch.baddbmm(self.bias.reshape(S, 1, self.G * self.L), Xb,
                          self.weight.reshape(S, self.G * self.L, self.d).transpose(1, 2))
        return z.view(S, B, self.G, self.L)

    def gradient_sum(self, Xb, x_norm, valid, y, onehot, h_cells, with_loss: bool, lam, clip):
        """Σ over valid rows of the per-sample gradients of :func:`fermi_loss` (each clipped to ``clip``).

        ``Xb (S, B, d)``, ``x_norm (S, B)`` = ``‖(x, 1)‖``, ``valid (S, B)``, ``y (S, B)``,
        ``onehot (S, B, c)`` the rows' cells, ``h_cells (S, c, G, l)`` the ``h`` of each
        cell, ``with_loss``: add the cross-entropy ``ℓ`` (``a = 1``), ``lam (S, G)``. Returns ``(sums (S, G, P), Σ_rows onehot ⊗ F (S, c, G, l))``.
        The loss's logit gradient is closed-form, ``a(F − e_y) + λ F ⊙ (h − ⟨F, h⟩)``;
        the per-sample gradient is ``(x, 1) ⊗ δ`` with norm ``‖(x, 1)‖·‖δ‖``, so
        clipping scales ``δ``. Binary (one logit): ``δ = a(σ − y) + λ σ(1 − σ)(h₁ − h₀)``
        and clipping is ``clamp(δ, ±C/‖(x, 1)‖)``.
        """
        z = self._logits(Xb)
        S, B, G, L = z.shape
        valid_f = valid.to(z.dtype)
        if L == 1:
            p = torch.sigmoid(z.view(S, B, G))
            h_diff = (h_cells[..., 1] - h_cells[..., 0]) * lam[:, None, :]
            curvature = torch.addcmul(p, p, p, value=-1.0)  # σ(1 − σ)
            if with_loss:
                delta = torch.addcmul(p - y[:, :, None].to(p.dtype), curvature, torch.bmm(onehot, h_diff))
            else:
                delta = curvature.mul_(torch.bmm(onehot, h_diff))
            if clip is not None:
                r = (clip * valid_f / x_norm)[:, :, None]
                delta = torch.clamp(delta, min=-r, max=r)
            else:
                delta = delta * valid_f[:, :, None]
            on1 = torch.bmm(onehot.transpose(1, 2), p)
            cell_F = torch.stack([onehot.sum(1)[:, :, None] - on1, on1], dim=-1)
            delta = delta[..., None]
        else:
            proba = torch.softmax(z, dim=-1)
            h = torch.bmm(onehot, h_cells.reshape(S, -1, G * L)).view(S, B, G, L)
            delta = lam[:, None, :, None] * _psi_logit_gradient(proba, h)
            if with_loss:
                delta = delta + (proba - F.one_hot(y, L).to(proba.dtype)[:, :, None])
            weight = valid_f[:, :, None]
            if clip is not None:
                norms = x_norm[:, :, None] * delta.norm(dim=-1)
                weight = weight * (clip / norms.clamp_min(torch.finfo(norms.dtype).tiny)).clamp(max=1.0)
            delta = delta * weight[..., None]
            cell_F = torch.bmm(onehot.transpose(1, 2), proba.view(S, B, G * L)).view(S, -1, G, L)
        gw = torch.bmm(delta.view(S, B, G * L).transpose(1, 2), Xb).view(S, G, L * self.d)
        return torch.cat([gw, delta.sum(1)], dim=-1), cell_F

    def step(self, update):
        """``θ ← θ − update`` for a flat ``update (S, G, P)``."""
        w, b = update.split([self.L * self.d, self.L], dim=-1)
        self.weight -= w.reshape(self.weight.shape)
        self.bias -= b

    def flat(self) -> torch.Tensor:
        return torch.cat([self.weight.flatten(2), self.bias], dim=-1)

    def load(self, flat: torch.Tensor) -> None:
        w, b = flat.split([self.L * self.d, self.L], dim=-1)
        self.weight.copy_(w.reshape(self.weight.shape))
        self.bias.copy_(b)


class ModuleModel:
    """One ``torch.nn.Module`` (``S = G = 1``); per-sample gradients through :func:`clipped_gradient_sum`."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.names = [n for n, p in module.named_parameters() if p.requires_grad]
        self.n_params = sum(p.numel() for p in self.params)

    def gradient_sum(self, Xb, x_norm, valid, y, onehot, h_cells, with_loss: bool, lam, clip):
        rows = valid[0]
        X1, y1, h1 = Xb[0][rows], y[0][rows], (onehot[0] @ h_cells[0, :, 0])[rows]
        a = torch.full((len(X1),), 1.0 if with_loss else 0.0, device=X1.device)
        target = (y1, h1, a, torch.full_like(a, float(lam[0, 0])))
        if clip is not None:
            sums, _ = clipped_gradient_sum(self.module, fermi_loss, X1, target, clip)
            flat = torch.cat([sums[n].reshape(-1) for n in self.names])
        else:
            loss = fermi_loss(self.module(X1), target)
            flat = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, self.params)])
        proba = torch.zeros(Xb.shape[1], h_cells.shape[-1], device=Xb.device)
        with torch.no_grad():
            if len(X1):
                proba[rows] = torch.softmax(self.module(X1), dim=-1)
        return flat[None, None].detach(), (onehot[0].T @ proba)[None, :, None]

    def step(self, update):
        with torch.no_grad():
            for p, g in zip(self.params, update[0, 0].split([p.numel() for p in self.params])):
                p -= g.reshape(p.shape)

    def flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])[None, None]

    def load(self, flat: torch.Tensor) -> None:
        with torch.no_grad():
            for p, v in zip(self.params, flat[0, 0].split([p.numel() for p in self.params])):
                p.copy_(v.reshape(p.shape))


def poisson_batch(n: int, samplers, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One secret Poisson sample per seed group (``samplers``: their ``(SecretRandom, q)``), padded.

    Returns ``idx (S, B_max)`` and ``valid (S, B_max)``.
    """
    samples = [secret.poisson_sample(n, q) for secret, q in samplers]
    width = max(max(len(x) for x in samples), 1)
    idx = torch.zeros(len(samples), width, dtype=torch.long)
    valid = torch.zeros(len(samples), width, dtype=torch.bool)
    for row, x in enumerate(samples):
        idx[row, :len(x)] = torch.from_numpy(x)
        valid[row, :len(x)] = True
    return idx.to(device), valid.to(device)


class PublicBatches:
    """Public minibatches of fixed size ``b`` from shuffled epochs, one order per seed group (public generators)."""

    def __init__(self, n: int, size: int, generators, device):
        self.n, self.size, self.generators, self.device = n, size, generators, device
        self.order = torch.empty(len(generators), 0, dtype=torch.long, device=device)

    def next(self) -> torch.Tensor:
        if self.order.shape[1] < self.size:
            fresh = torch.stack([torch.randperm(self.n, generator=g, device=self.device) for g in self.generators])
            self.order = torch.cat([self.order, fresh], dim=1)
        batch, self.order = self.order[:, :self.size], self.order[:, self.size:]
        return batch


def _cell_onehot(cells, s, k: int, m: int, weight=None):
    """One-hot ``(S, B, m·k)`` of each row's (W block, group) cell, zero for rows without a W (``c = −1``)."""
    active = (cells >= 0) if weight is None else (cells >= 0) & weight
    codes = cells.clamp(min=0) * k + s
    return F.one_hot(codes, m * k).to(torch.float32) * active[..., None]


def _h_cells(W, inv_sqrt_p, linear: bool, quadratic: bool):
    """``h`` of each (block, group) cell ``(S, m·k, G, l)``: ``2 W_{c,s}/√p_{c,s}`` and/or ``−Σ_r W_{c,r}²``."""
    S, G, m, k, l = W.shape
    h = torch.zeros(S, G, m, k, l, device=W.device)
    if linear:
        h = h + 2.0 * W * inv_sqrt_p[..., None]
    if quadratic:
        h = h - (W * W).sum(3, keepdim=True)
    return h.reshape(S, G, m * k, l).transpose(1, 2).contiguous()


def _w_gradient(W, cell_F, inv_sqrt_p, public: bool, sensitive: bool):
    """Σ over rows of the chosen parts of ∇_W ψ̂_i, from ``cell_F (S, m·k, G, l)`` = Σ_rows onehot ⊗ F.

    s-part ``2 P^{-1/2} s_i F_iᵀ`` (row ``s_i`` of block ``c_i``), x-part ``−2 W_{c_i} diag(F_i)``.
    """
    S, G, m, k, l = W.shape
    sums = cell_F.view(S, m, k, G, l).permute(0, 3, 1, 2, 4)
    out = torch.zeros_like(W)
    if sensitive:
        out += 2.0 * inv_sqrt_p[..., None] * sums
    if public:
        out += -2.0 * W * sums.sum(3, keepdim=True)
    return out


def _rows(X, idx):
    """``X[idx]`` for an index matrix ``(S, B)``, through one ``index_select``."""
    return X.index_select(0, idx.reshape(-1)).view(*idx.shape, *X.shape[1:])


def secret_sums(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, W, idx, valid, x_norm=None):
    """The two sums a step releases, before noise: ``(θ part (S, G, P), W part (S, G, m, k, l))``.

    Sensitive unit: the clipped per-sample θ-gradients of ``λ·2u·F`` and the
    s-part of ∇_W ψ̂; record unit: the clipped whole per-sample θ-gradient and
    the whole ∇_W ψ̂. Rows ``idx (S, B)`` where ``valid``.
    """
    if x_norm is None:
        x_norm = torch.sqrt((data.X.flatten(1) ** 2).sum(1) + 1.0)
    record = schedule.record
    onehot = _cell_onehot(data.cells[idx], data.s[idx], data.n_groups, data.n_cells, valid)
    h_secret = _h_cells(W, hp.inv_sqrt_p, linear=True, quadratic=record)
    theta_sum, cell_F = models.gradient_sum(_rows(data.X, idx), x_norm[idx], valid, data.y[idx], onehot, h_secret,
                                            record, hp.lam, schedule.max_grad_norm)
    return theta_sum, _w_gradient(W, cell_F, hp.inv_sqrt_p, public=record, sensitive=True)


def train(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, samplers, release,
          public_generators, on_epoch=None, bar: Progress = SILENT) -> torch.Tensor:
    """Run Algorithm 1 for every model; returns the last ``W (S, G, m, k, l)``.

    ``samplers``: one secret generator per seed group (its Poisson batches);
    ``release``: the batched :class:`~dpfair.privacy.Release` of the step (one
    ledger per model) that draws every model's noise; ``public_generators``: one
    public torch generator per seed group (its public minibatch order).
    ``on_epoch(step, W)`` is called after each (expected) epoch of steps; ``bar``
    (:mod:`dpfair.progress`) advances by one per step.
    """
    dev = data.X.device
    S, G = hp.lam.shape
    n, k, l, m = data.X.shape[0], data.n_groups, data.n_classes, data.n_cells
    q = schedule.sampling_probability
    expected = q * n
    record = schedule.record
    W = torch.zeros(S, G, m, k, l, device=dev)
    public = None if record else PublicBatches(n, schedule.public_batch, public_generators, dev)
    x_norm = torch.sqrt((data.X.flatten(1) ** 2).sum(1) + 1.0)
    steps_per_epoch = max(1, round(1 / q))
    scales = [hp.noise_theta[..., None], hp.noise_w[..., None, None, None]]
    lr, wlr = hp.learning_rate[..., None], hp.w_learning_rate[..., None, None, None]
    batch_sources = [(secret, q) for secret in samplers]

    for step in range(schedule.n_steps):
        idx, valid = poisson_batch(n, batch_sources, dev)
        theta_sum, w_sum = secret_sums(models, data, schedule, hp, W, idx, valid, x_norm)
        noisy_theta, noisy_w = release.noisy_sum([theta_sum, w_sum], scale=scales)
        grad_theta, grad_w = noisy_theta / expected, noisy_w / expected
        if not record:
            pub = public.next()
            ones = torch.ones(pub.shape, dtype=torch.bool, device=dev)
            onehot_p = _cell_onehot(data.cells[pub], data.s[pub], k, m)
            h_public = _h_cells(W, hp.inv_sqrt_p, linear=False, quadratic=True)
            theta_pub, cell_F_p = models.gradient_sum(_rows(data.X, pub), x_norm[pub], ones, data.y[pub], onehot_p,
                                                      h_public, True, hp.lam, None)
            grad_theta = grad_theta + theta_pub / pub.shape[1]
            grad_w = grad_w + _w_gradient(W, cell_F_p, hp.inv_sqrt_p, public=True, sensitive=False) / pub.shape[1]
        models.step(lr * grad_theta)
        if schedule.average_from is not None and step >= schedule.average_from:
            count = step - schedule.average_from + 1
            average = models.flat() if count == 1 else average + (models.flat() - average) / count
        W = W + wlr * grad_w
        norms = W.flatten(3).norm(dim=-1).clamp_min(1e-12)
        W = W * (hp.w_radius[..., None] / norms).clamp(max=1.0)[..., None, None]
        bar.update()
        if on_epoch is not None and ((step + 1) % steps_per_epoch == 0 or step + 1 == schedule.n_steps):
            release.flush()
            on_epoch(step + 1, W)
    release.flush()
    if schedule.average_from is not None and schedule.average_from < schedule.n_steps:
        models.load(average)
    return W


def noise_scales(noise_multiplier: float, max_grad_norm: float, w_bound: float) -> tuple[float, float]:
    """Noise std on the θ and W sums for one Gaussian event of multiplier σ (bound 1).

    Each part is scaled to norm ≤ 1/√2 (θ by ``√2·C``, W by ``√2·w_bound``) so a
    person's pair has norm ≤ 1: the noise stds are ``σ√2·C`` and ``σ√2·w_bound``.
    """
    return noise_multiplier * math.sqrt(2) * max_grad_norm, noise_multiplier * math.sqrt(2) * w_bound


def effective_noise_multiplier(noise_theta: float, noise_w: float, max_grad_norm: float, w_bound: float) -> float:
    """The multiplier of one Gaussian event (bound 1) that releasing θ and W sums with these stds is.

    Dividing each sum by its std gives unit noise and a per-person contribution of
    norm ``√((C/σ_θ)² + (B_W/σ_W)²)``; its inverse is the event's multiplier.
    """
    if noise_theta == 0 or noise_w == 0:
        return 0.0
    return 1.0 / math.sqrt((max_grad_norm / noise_theta) ** 2 + (w_bound / noise_w) ** 2)
