"""Algorithm 1 of DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023), one step for one model, written to be read.

The objective is the min-max form of fair ERM with the ERMI regulariser (Theorem 3.2, eq. (4); ψ̂_i of
Theorem C.1)::

    min_θ max_W  (1/n) Σ_i ℓ(θ; x_i, y_i) + λ ψ̂_i(θ, W),
    ψ̂_i(θ, W) = −Tr(W diag(F_i) Wᵀ) + 2 Tr(W E[ŷ_i s_iᵀ | x_i, s_i] P_s^{-1/2}) − 1
              = F_i · (2 u_i − Σ_r W_r²) − 1,          u_i = W_{s_i} / √p_{s_i},

``F_i = softmax(model(x_i))`` and ``W`` a ``k × l`` matrix per reference cell of the fairness notion
(one cell for demographic parity, one per label for equalized odds: ``W`` has shape ``(m, k, l)`` and a
row uses block ``c_i``, or none). A step is lines 4-6 of Algorithm 1 with the gradients of Lemma D.1; the loop
(:func:`dpfair.algorithms.dpfermi.loop.train`) draws the Poisson batch B, releases the sums below through the
step's :class:`~dpfair.privacy.Release` (the noise u_t, V_t of lines 5-6) and updates θ and W:

* sensitive unit (neighbours differ in one person's s): only the parts of the gradients that carry s are
  summed over the secret batch B and released — ``∇_θ 2λ u_iᵀF_i`` clipped to C and ``2 P^{-1/2} s_i F_iᵀ``
  (norm ≤ ``2/√p_min``) — and the parts that depend on (x, y) alone are computed exactly on an
  independent public minibatch (adding them over B would reveal who is in B): :func:`reference_secret_sums`,
  :func:`reference_public_sums`;
* record unit (neighbours add or remove a record): the whole ``∇_θ(ℓ_i + λψ̂_i)``, clipped, and the whole
  ``∇_W ψ̂_i`` are summed over B and released.

Plain PyTorch, one model, one row at a time, with autograd: :class:`Reference` is the step backend that a small
single fit can run through the one loop (``backend="reference"``), and the definition the fast backends of
:mod:`.batched` are tested equal to, step by step (``tests/algorithms/test_dpfermi_backends.py``).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from dpfair.algorithms.dpfermi.data import FermiData, FermiModels, FermiSchedule
from dpfair.algorithms.dpfermi.models import ModuleModel


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


def reference_secret_sums(model: torch.nn.Module, W: torch.Tensor, data: FermiData, inv_sqrt_p: torch.Tensor,
                          lam: float, schedule: FermiSchedule, batch: torch.Tensor):
    """The two sums over the secret batch B (``batch``: row indices) that line 5-6 release, before noise:
    ``(θ part (P,), W part (m, k, l))``, per-sample gradients of Lemma D.1, clipped."""
    params = [p for p in model.parameters() if p.requires_grad]
    theta_sum = torch.zeros(sum(p.numel() for p in params), device=W.device)
    w_sum = torch.zeros_like(W)
    for i in batch.tolist():
        logits = model(data.X[i:i + 1])[0]
        c, s = int(data.cells[i]), int(data.s[i])
        s_part, x_part = psi_parts(logits, W[c], s, inv_sqrt_p[c]) if c >= 0 else (logits.sum() * 0, logits.sum() * 0)
        if schedule.record:  # the whole objective: ∇_θ(ℓ_i + λψ̂_i) and ∇_W ψ̂_i = −2W diag(F_i) + 2P^{-1/2} s_i F_iᵀ
            objective = F.cross_entropy(logits, data.y[i]) + lam * (s_part + x_part)
            theta_sum += clip(_flat_grad(objective, params), schedule.max_grad_norm)
        else:  # the s-carrying parts only: ∇_θ 2λ u_iᵀF_i and 2P^{-1/2} s_i F_iᵀ
            theta_sum += clip(_flat_grad(lam * s_part, params), schedule.max_grad_norm)
        if c >= 0:
            proba = torch.softmax(logits.detach(), dim=-1)
            w_sum[c, s] += 2.0 * inv_sqrt_p[c, s] * proba
            if schedule.record:
                w_sum[c] -= 2.0 * W[c] * proba
    return theta_sum, w_sum


def reference_public_sums(model: torch.nn.Module, W: torch.Tensor, data: FermiData, inv_sqrt_p: torch.Tensor,
                          lam: float, public: torch.Tensor):
    """The exact sums over the public minibatch (``public``: row indices) of the (x, y)-parts (sensitive unit):
    ``∇_θ(ℓ_i − λ F_i·Σ_r W_r²)`` unclipped and ``−2 W_{c_i} diag(F_i)``; s is not read."""
    params = [p for p in model.parameters() if p.requires_grad]
    pub_theta = torch.zeros(sum(p.numel() for p in params), device=W.device)
    pub_w = torch.zeros_like(W)
    for i in public.tolist():
        logits = model(data.X[i:i + 1])[0]
        c = int(data.cells[i])
        x_part = psi_parts(logits, W[c], 0, inv_sqrt_p[c])[1] if c >= 0 else logits.sum() * 0
        pub_theta += _flat_grad(F.cross_entropy(logits, data.y[i]) + lam * x_part, params)
        if c >= 0:
            pub_w[c] -= 2.0 * W[c] * torch.softmax(logits.detach(), dim=-1)
    return pub_theta, pub_w


class Reference:
    """The step backend of one model (``S = G = 1``, a :class:`~dpfair.algorithms.dpfermi.models.ModuleModel`, any
    module, logistic included): :func:`reference_secret_sums` and :func:`reference_public_sums`, one row at a time
    with autograd. The rows stay as they are (no layout), the steps run serially; slow, meant for small fits and as
    the definition the batched backends are tested against."""

    name = "reference"
    fused = False

    def layout(self, data: FermiData, models, public: bool, threads: int = 1) -> FermiData:
        """The rows as they are: the data themselves."""
        if not isinstance(models, ModuleModel):
            raise TypeError(f"the reference backend trains one module (a ModuleModel), got {type(models).__name__}")
        return data

    def running(self, models, rows):
        return contextlib.nullcontext()

    def beside(self, rows, fn, *args, **kwargs):
        result = fn(*args, **kwargs)
        return lambda: result

    def take(self, rows, idx: torch.Tensor, public: bool):
        return None

    def secret_sums(self, models: ModuleModel, data: FermiData, schedule: FermiSchedule, hp: FermiModels, W, idx,
                    valid, rows, taken):
        batch = idx[0] if valid is None else idx[0][valid[0]]
        theta, w = reference_secret_sums(models.module, W[0, 0], data, hp.inv_sqrt_p[0, 0], float(hp.lam[0, 0]),
                                         schedule, batch)
        return theta[None, None], w[None, None]

    def public_sums(self, models: ModuleModel, hp: FermiModels, W, pub, rows: FermiData, taken):
        theta, w = reference_public_sums(models.module, W[0, 0], rows, hp.inv_sqrt_p[0, 0], float(hp.lam[0, 0]),
                                         pub[0])
        return theta[None, None], w[None, None]
