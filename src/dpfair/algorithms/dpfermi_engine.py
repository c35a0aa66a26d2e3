"""Algorithm 1 of DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023) for many models in lockstep.

One loop serves the estimator (one model) and the sweeps (hundreds of models
at once). Models are laid out on a grid ``(S, G)``: the ``G`` models of a
*seed group* share that group's random streams (its Poisson batches, its
public minibatches, its standard-normal noise draws), so model ``(g, j)`` is
exactly the model :class:`~dpfair.algorithms.DPFERMIClassifier` would fit with
group ``g``'s seed and model ``j``'s hyper-parameters; they differ in λ, the
step sizes, the W radius and the noise scales.

Per step ``t`` (see :mod:`dpfair.algorithms.dpfermi` for the privacy argument):

1. a secret Poisson batch ``B_t`` (rate ``q``) per seed group;
2. on ``B_t``: the clipped per-sample θ-gradients of the s-carrying loss and
   the s-part ``2 P^{-1/2} s_i F_iᵀ`` of the W-gradient (under the record unit:
   the whole per-sample θ-gradient, clipped, and the whole W-gradient);
   their sums are released with Gaussian noise of standard deviation
   ``noise_theta`` and ``noise_w`` (one Gaussian event per model and step);
3. (sensitive unit) on an independent public minibatch of ``b`` rows (epochs
   of a shuffled order): the exact gradients of the parts that depend on
   ``(x, y)`` only;
4. ``θ ← θ − η_θ (noisy_θ/(q n) + public_θ/b)``,
   ``W ← Π_{‖W‖_F ≤ R}(W + η_w (noisy_W/(q n) + public_W/b))``.

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
    """Per-sample ``a·CE + λ(−F·wsq + 2 u·F)`` summed; ``target = (y, u, wsq, a, lam)``.

    ``F = softmax(logits)``; with ``u = W_{s}/√p_{s}`` and ``wsq = Σ_r W_r²`` this
    is ``a·ℓ + λ(ψ̂ + 1)`` of Theorem C.1 (the constant −1 has no gradient).
    """
    y, u, wsq, a, lam = target
    proba = torch.softmax(logits, dim=1)
    ce = F.cross_entropy(logits, y, reduction="none")
    psi = -(proba * wsq).sum(1) + 2.0 * (proba * u).sum(1)
    return (a * ce + lam * psi).sum()


def _psi_logit_gradient(proba, h):
    """∂/∂z of ``Σ_j F_j h_j`` with ``F = softmax(z)``: ``F ⊙ (h − ⟨F, h⟩)``."""
    return proba * (h - (proba * h).sum(-1, keepdim=True))


class LinearModels:
    """``S × G`` logistic regressions: ``weight (S, G, L, d)``, ``bias (S, G, L)``.

    ``L = 1`` is the binary single-logit model (logits ``[0, z]``, as
    :class:`dpfair.nn.LogisticRegression`); otherwise ``L = l`` softmax logits.
    Parameters flatten as ``[weight (L·d, row-major), bias (L)]``, the order of
    ``LogisticRegression.named_parameters()``.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        self.weight, self.bias = weight, bias
        self.S, self.G, self.L, self.d = weight.shape
        self.n_params = self.L * self.d + self.L

    def _logits(self, Xb):
        S, B, _ = Xb.shape
        z = torch.bmm(Xb, self.weight.reshape(S, self.G * self.L, self.d).transpose(1, 2))
        z = z.reshape(S, B, self.G, self.L).permute(0, 2, 1, 3) + self.bias[:, :, None, :]
        if self.L == 1:
            return torch.cat([torch.zeros_like(z), z], dim=-1)
        return z

    def probabilities(self, Xb):
        """``F (S, G, B, l)`` for a batch ``Xb (S, B, d)``."""
        return torch.softmax(self._logits(Xb), dim=-1)

    def gradient_sum(self, Xb, valid, y, u, wsq, ce_weight, lam, clip):
        """Σ over valid rows of the per-sample gradients of :func:`fermi_loss` (each clipped to ``clip``).

        ``Xb (S, B, d)``, ``valid (S, B)``, ``y (S, B)``, ``u, wsq (S, G, B, l)``,
        ``lam (S, G)``. Returns ``(sums (S, G, P), F (S, G, B, l))``.
        """
        proba = self.probabilities(Xb)
        h = 2.0 * u - wsq
        delta = lam[:, :, None, None] * _psi_logit_gradient(proba, h)
        if ce_weight:
            delta = delta + ce_weight * (proba - F.one_hot(y, proba.shape[-1]).to(proba.dtype)[:, None])
        if self.L == 1:
            delta = delta[..., 1:]
        weight = valid.to(delta.dtype)[:, None, :]
        if clip is not None:
            x_norm = torch.sqrt((Xb * Xb).sum(-1) + 1.0)[:, None, :]
            norms = x_norm * delta.norm(dim=-1)
            weight = weight * (clip / norms.clamp_min(torch.finfo(norms.dtype).tiny)).clamp(max=1.0)
        delta = delta * weight[..., None]
        S, G, B, L = delta.shape
        gw = torch.bmm(delta.permute(0, 1, 3, 2).reshape(S, G * L, B), Xb).reshape(S, G, L * self.d)
        return torch.cat([gw, delta.sum(2)], dim=-1), proba

    def step(self, update):
        """``θ ← θ − update`` for a flat ``update (S, G, P)``."""
        w, b = update.split([self.L * self.d, self.L], dim=-1)
        self.weight -= w.reshape(self.weight.shape)
        self.bias -= b


class ModuleModel:
    """One ``torch.nn.Module`` (``S = G = 1``); per-sample gradients through :func:`clipped_gradient_sum`."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.names = [n for n, p in module.named_parameters() if p.requires_grad]
        self.n_params = sum(p.numel() for p in self.params)

    def probabilities(self, Xb):
        with torch.no_grad():
            return torch.softmax(self.module(Xb[0]), dim=-1)[None, None]

    def gradient_sum(self, Xb, valid, y, u, wsq, ce_weight, lam, clip):
        rows = valid[0]
        X1, y1, u1, w1 = Xb[0][rows], y[0][rows], u[0, 0][rows], wsq[0, 0][rows]
        a = torch.full((len(rows.nonzero()),), float(ce_weight), device=X1.device)
        target = (y1, u1, w1, a, torch.full_like(a, float(lam[0, 0])))
        if clip is not None:
            sums, _ = clipped_gradient_sum(self.module, fermi_loss, X1, target, clip)
            flat = torch.cat([sums[n].reshape(-1) for n in self.names])
        else:
            loss = fermi_loss(self.module(X1), target)
            flat = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, self.params)])
        proba = torch.zeros(Xb.shape[1], u.shape[-1], device=Xb.device)
        with torch.no_grad():
            if len(X1):
                proba[rows] = torch.softmax(self.module(X1), dim=-1)
        return flat[None, None].detach(), proba[None, None]

    def step(self, update):
        with torch.no_grad():
            for p, g in zip(self.params, update[0, 0].split([p.numel() for p in self.params])):
                p -= g.reshape(p.shape)


def poisson_batch(n: int, q: float, generators, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One Poisson sample per seed group, padded: ``idx (S, B_max)`` and ``valid (S, B_max)``."""
    masks = torch.stack([torch.rand(n, generator=g, device=device) < q for g in generators])
    rows, cols = masks.nonzero(as_tuple=True)
    counts = masks.sum(1)
    width = max(int(counts.max()), 1)
    starts = torch.cumsum(counts, 0) - counts
    pos = torch.arange(len(rows), device=device) - starts[rows]
    idx = torch.zeros(len(generators), width, dtype=torch.long, device=device)
    valid = torch.zeros(len(generators), width, dtype=torch.bool, device=device)
    idx[rows, pos] = cols
    valid[rows, pos] = True
    return idx, valid


class PublicBatches:
    """Minibatches of fixed size ``b`` from shuffled epochs, one independent order per seed group."""

    def __init__(self, n: int, size: int, generators, device):
        self.n, self.size, self.generators, self.device = n, size, generators, device
        self.order = torch.empty(len(generators), 0, dtype=torch.long, device=device)

    def next(self) -> torch.Tensor:
        if self.order.shape[1] < self.size:
            fresh = torch.stack([torch.randperm(self.n, generator=g, device=self.device) for g in self.generators])
            self.order = torch.cat([self.order, fresh], dim=1)
        batch, self.order = self.order[:, :self.size], self.order[:, self.size:]
        return batch


def _w_terms(W, inv_sqrt_p, cells, s, k):
    """Per row: ``u = W_{c, s}/√p_{c, s}`` and ``wsq = Σ_r W_{c, r}²`` (zero where ``c = −1``): ``(S, G, B, l)``."""
    S, G, m = W.shape[:3]
    c = cells.clamp(min=0)
    active = (cells >= 0).to(W.dtype)[:, None, :, None]
    flat = (c * k + s)[:, None, :, None].expand(S, G, -1, W.shape[-1])
    u = torch.gather(W.reshape(S, G, m * k, -1), 2, flat)
    scale = torch.gather(inv_sqrt_p.reshape(S, G, m * k), 2, (c * k + s)[:, None, :].expand(S, G, -1))
    wsq = torch.gather((W * W).sum(3), 2, c[:, None, :, None].expand(S, G, -1, W.shape[-1]))
    return u * scale[..., None] * active, wsq * active


def _w_gradient(W, proba, weight, cells, s, inv_sqrt_p, k, public: bool, sensitive: bool):
    """Σ over rows (weighted by ``weight (S, B)``) of the chosen parts of ∇_W ψ̂_i: ``(S, G, m, k, l)``.

    s-part ``2 P^{-1/2} s_i F_iᵀ`` (row ``s_i`` of block ``c_i``), x-part ``−2 W_{c_i} diag(F_i)``.
    """
    S, G, m, _, l = W.shape
    c = cells.clamp(min=0)
    w = (weight * (cells >= 0)).to(W.dtype)[:, None, :, None]
    out = torch.zeros_like(W)
    if sensitive:
        scale = torch.gather(inv_sqrt_p.reshape(S, G, m * k), 2, (c * k + s)[:, None, :].expand(S, G, -1))
        vals = 2.0 * proba * w * scale[..., None]
        idx = (c * k + s)[:, None, :, None].expand(S, G, -1, l)
        out += torch.zeros(S, G, m * k, l, dtype=W.dtype, device=W.device).scatter_add_(2, idx, vals).reshape(W.shape)
    if public:
        per_cell = torch.zeros(S, G, m, l, dtype=W.dtype, device=W.device).scatter_add_(
            2, c[:, None, :, None].expand(S, G, -1, l), proba * w)
        out += -2.0 * W * per_cell[:, :, :, None, :]
    return out


def train(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, batch_generators,
          noise_generators, on_step=None, on_epoch=None) -> torch.Tensor:
    """Run Algorithm 1 for every model; returns the last ``W (S, G, m, k, l)``.

    ``on_step()`` is called once per step after the release (the caller records
    the step's event on each model's ledger); ``on_epoch(step, W)`` after each
    (expected) epoch of steps.
    """
    dev = data.X.device
    S, G = hp.lam.shape
    n, k, l, m = data.X.shape[0], data.n_groups, data.n_classes, data.n_cells
    q = schedule.sampling_probability
    expected = q * n
    record = schedule.record
    W = torch.zeros(S, G, m, k, l, device=dev)
    n_w = m * k * l
    public = None if record else PublicBatches(n, schedule.public_batch, batch_generators, dev)
    steps_per_epoch = max(1, round(1 / q))
    noise_theta = (hp.noise_theta / expected)[..., None]
    noise_w = (hp.noise_w / expected)[..., None]
    lr, wlr = hp.learning_rate[..., None], hp.w_learning_rate[..., None, None, None]
    zero_wsq = None

    for step in range(schedule.n_steps):
        idx, valid = poisson_batch(n, q, batch_generators, dev)
        Xb, yb, sb, cb = data.X[idx], data.y[idx], data.s[idx], data.cells[idx]
        u, wsq = _w_terms(W, hp.inv_sqrt_p, cb, sb, k)
        if not record:
            zero_wsq = torch.zeros_like(wsq)
        theta_sum, proba = models.gradient_sum(Xb, valid, yb, u, wsq if record else zero_wsq,
                                               1.0 if record else 0.0, hp.lam, schedule.max_grad_norm)
        w_sum = _w_gradient(W, proba, valid, cb, sb, hp.inv_sqrt_p, k, public=record, sensitive=True)
        z = torch.stack([torch.randn(models.n_params + n_w, generator=g, device=dev) for g in noise_generators])
        z_theta, z_w = z[:, None].split([models.n_params, n_w], dim=-1)
        grad_theta = theta_sum / expected + noise_theta * z_theta
        grad_w = w_sum / expected + (noise_w * z_w).reshape(W.shape)
        if on_step is not None:
            on_step()
        if not record:
            pub = public.next()
            Xp, yp, sp, cp = data.X[pub], data.y[pub], data.s[pub], data.cells[pub]
            _, wsq_p = _w_terms(W, hp.inv_sqrt_p, cp, sp, k)
            ones = torch.ones(pub.shape, dtype=torch.bool, device=dev)
            theta_pub, proba_p = models.gradient_sum(Xp, ones, yp, torch.zeros_like(wsq_p), wsq_p, 1.0, hp.lam, None)
            grad_theta = grad_theta + theta_pub / pub.shape[1]
            grad_w = grad_w + _w_gradient(W, proba_p, ones, cp, sp, hp.inv_sqrt_p, k, public=True,
                                          sensitive=False) / pub.shape[1]
        models.step(lr * grad_theta)
        W = W + wlr * grad_w
        norms = W.flatten(3).norm(dim=-1).clamp_min(1e-12)
        W = W * (hp.w_radius[..., None] / norms).clamp(max=1.0)[..., None, None]
        if on_epoch is not None and ((step + 1) % steps_per_epoch == 0 or step + 1 == schedule.n_steps):
            on_epoch(step + 1, W)
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
