"""ERMI as a min–max problem: the per-sample objective ψ̂ of DP-FERMI and its gradients.

Lowy, Gupta, Razaviyayn, *Stochastic Differentially Private and Fair
Learning* (ICLR 2023), Theorem C.1: for predicted class probabilities
``F_i = F(x_i; θ) ∈ Δ^l``, one-hot groups ``s_i ∈ {0,1}^k``, group
proportions ``p`` and ``W ∈ R^{k×l}``,

    ψ̂_i(θ, W) = −Tr(W diag(F_i) Wᵀ) + 2 Tr(W F_i s_iᵀ P^{-1/2}) − 1
              = −Σ_{r,j} W_rj² F_ij + (2/√p_{s_i}) Σ_j W_{s_i j} F_ij − 1,

and ``max_W (1/n) Σ_i ψ̂_i = ERMI(ŷ; s)`` for the soft predictions, reached at
``W*_rj = P(ŷ=j, s=r) / (√p_r P(ŷ=j))``.

Its W-gradient (computed in :mod:`dpfair.algorithms.dpfermi.batched`) splits
into a part that depends on ``x_i`` only and a part that carries ``s_i`` (the
only thing DP of the sensitive attribute protects):

    ∇_W ψ̂_i = −2 W diag(F_i)  +  2 P^{-1/2} s_i F_iᵀ,

the second a matrix whose only non-zero row is ``s_i`` with norm
``2‖F_i‖₂/√p_{s_i} ≤ 2/√p_min`` (``‖F_i‖₂ ≤ ‖F_i‖₁ = 1``). For the θ-gradient,
the s-part is the gradient of ``2 u_iᵀ F_i(θ)`` with ``u_i = W_{s_i}/√p_{s_i}``
held fixed; it is clipped per sample by the trainer.

The equalized-odds form (the paper's Appendix D) uses one ``W^{(y)}`` and one
``p_{s|y}`` per label value: sample ``i`` enters with ``W^{(y_i)}`` and
``p_{·|y_i}``; the maximum of ``(1/n) Σ_i ψ̂_i`` is then the conditional ERMI
``Σ_y P(y) ERMI(ŷ; s | y)``. Equal opportunity keeps the positive label only
(samples of other labels contribute nothing).
"""

from __future__ import annotations

import torch


def psi_hat(F: torch.Tensor, s: torch.Tensor, W: torch.Tensor, inv_sqrt_p: torch.Tensor) -> torch.Tensor:
    """ψ̂_i for a batch: ``F (B, l)``, ``s (B,)`` codes, ``W (B, k, l)`` or ``(k, l)``, ``inv_sqrt_p (B, k)`` or ``(k,)``."""
    W = W.expand(F.shape[0], *W.shape[-2:]) if W.dim() == 2 else W
    inv_sqrt_p = inv_sqrt_p.expand(F.shape[0], -1) if inv_sqrt_p.dim() == 1 else inv_sqrt_p
    rows = torch.arange(F.shape[0], device=F.device)
    quad = (F * (W**2).sum(1)).sum(1)
    lin = 2.0 * inv_sqrt_p[rows, s] * (W[rows, s] * F).sum(1)
    return -quad + lin - 1.0


def optimal_w(F: torch.Tensor, s: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The maximiser ``W*_rj = P(ŷ=j, s=r) / (√p_r P(ŷ=j))`` for soft predictions ``F`` (Theorem C.1)."""
    k = p.shape[0]
    onehot = torch.nn.functional.one_hot(s, k).to(F.dtype)
    joint = onehot.T @ F / F.shape[0]
    return joint / (p.sqrt()[:, None] * F.mean(0)[None, :])
