"""The model families of DP-FERMI's batched steps, and the row layouts their products run on.

:class:`LinearModels`: ``S × G`` binary or softmax logistic regressions, per-sample gradients in closed form
(``x̃_i ⊗ ∂ℓ_i/∂z_i``, norm ``‖x̃_i‖·‖∂ℓ_i/∂z_i‖``), so a step of ``S·G`` models is a few batched matrix products;
:class:`ModuleModel`: any ``torch.nn.Module``, one model, per-sample gradients through ``torch.func``. Both
offer what the loop (:mod:`.loop`) needs of a model: ``features`` (the rows a step gathers), ``gradient_sum``
(the clipped per-sample gradient sums of :func:`fermi_loss`), ``errors``, ``step``, ``flat`` and ``load``.
A batch's rows are :class:`DenseRows` (batched GEMMs) or :class:`SparseRows` (their non-zeros only; binary
models sum them in the fused kernel, :mod:`.kernel`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse
import torch
import torch.nn.functional as F

from dpfair.nn import clipped_gradient_sum


def fermi_loss(logits, target):
    """Per-sample ``a·CE + λ F·h`` summed; ``target = (y, h, a, lam)``, ``F = softmax(logits)``.

    With ``h = 2u − wsq`` (``u = W_{s}/√p_{s}``, ``wsq = Σ_r W_r²``) ``F·h = ψ̂ + 1``
    of Theorem C.1 (the constant has no gradient); the secret part of the
    sensitive unit uses ``h = 2u``, the public part ``h = −wsq``.
    """
    y, h, a, lam = target
    ce = F.cross_entropy(logits, y, reduction="none")
    return (a * ce + lam * (torch.softmax(logits, dim=1) * h).sum(1)).sum()


def _psi_logit_gradient(proba, h, dim: int):
    """∂/∂z of ``Σ_j F_j h_j`` with ``F = softmax(z)`` over ``dim``: ``F ⊙ (h − ⟨F, h⟩)``."""
    return proba * (h - (proba * h).sum(dim, keepdim=True))


class LinearModels:
    """``S × G`` logistic regressions: ``weight (S, G, L, d)``, ``bias (S, G, L)``.

    ``L = 1`` is the binary single-logit model (logits ``[0, z]``, as
    :class:`dpfair.nn.LogisticRegression`); otherwise ``L = l`` softmax logits.
    Parameters flatten as ``[weight (L·d, row-major), bias (L)]``, the order of
    ``LogisticRegression.named_parameters()``. They are held as one tensor
    ``θ̃ = [weight | bias] (S, G, L, d + 1)`` (``weight`` and ``bias`` are views of it) acting on
    the rows ``(x, 1)`` of :meth:`features`: a logit is one product ``θ̃·(x, 1)`` and the
    per-sample gradients' sum, bias included, one product ``Σ_i δ_i ⊗ (x_i, 1)``. Per-row
    tensors are laid out ``(S, G, ·, B)``, the layout in which the batched products run fastest.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        self.S, self.G, self.L, self.d = weight.shape
        self.n_params = self.L * self.d + self.L
        self.theta = torch.cat([weight, bias[..., None]], dim=-1)
        self.weight, self.bias = self.theta[..., :self.d], self.theta[..., self.d]

    @staticmethod
    def features(X: torch.Tensor) -> torch.Tensor:
        """The rows a step gathers: ``(x, 1)`` for every row of ``X``."""
        X = X.flatten(1)
        return torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype, device=X.device)], dim=1)

    def gradient_sum(self, Xb, x_norm, valid, y, onehot, h_cells, with_loss: bool, lam, clip):
        """Σ over valid rows of the per-sample gradients of :func:`fermi_loss` (each clipped to ``clip``).

        ``Xb``: the rows, :class:`DenseRows` / :class:`SparseRows` or a tensor ``(S, B, d)`` (or ``(S, B, d + 1)``,
        rows of :meth:`features`); ``x_norm (S, B)`` = ``‖(x, 1)‖``, ``valid (S, B)`` (``None``: every row),
        ``y (S, B)`` the label codes (any dtype), ``onehot (S, B, c)`` the rows' cells, ``h_cells (S, c, G, l)``
        the ``h`` of each cell, ``with_loss``: add the cross-entropy ``ℓ`` (``a = 1``), ``lam (S, G)``. Returns
        ``(sums (S, G, P), Σ_rows onehot ⊗ F (S, c, G, l))``.
        The loss's logit gradient is closed-form, ``a(F − e_y) + λ F ⊙ (h − ⟨F, h⟩)``;
        the per-sample gradient is ``(x, 1) ⊗ δ`` with norm ``‖(x, 1)‖·‖δ‖``, so
        clipping scales ``δ``. Binary (one logit): ``δ = a(σ − y) + λ σ(1 − σ)(h₁ − h₀)``
        and clipping is ``clamp(δ, ±C/‖(x, 1)‖)``. Per-row tensors are laid out ``(S, B, G, L)``.
        """
        if isinstance(Xb, torch.Tensor):
            if Xb.shape[-1] == self.d:
                Xb = torch.cat([Xb, torch.ones(*Xb.shape[:-1], 1, dtype=Xb.dtype, device=Xb.device)], dim=-1)
            Xb = DenseRows(Xb)
        S, B, G, L = onehot.shape[0], onehot.shape[1], self.G, self.L
        z = Xb.logits(self.theta.view(S, G * L, self.d + 1))  # (S, B, G·L)
        if L == 1:
            p = z.sigmoid_()
            h_diff = (h_cells[..., 1] - h_cells[..., 0]).mul_(lam[:, None, :])  # (S, c, G)
            r = _radii(x_norm, valid, clip)
            if isinstance(Xb, SparseRows) and Xb.fused:  # the same, fused into one pass (the kernel module)
                import dpfair.algorithms.dpfermi.kernel as kernel

                radii = torch.full_like(x_norm, math.inf) if r is None else r
                sums, on1 = kernel.binary_sums(p, onehot, h_diff, y, radii, with_loss, Xb.cols, Xb.vals,
                                                       Xb.width, Xb.threads)
                return sums.transpose(1, 2).contiguous(), _binary_cell_F(onehot, on1)
            delta = torch.bmm(onehot, h_diff).mul_(p)
            delta.addcmul_(delta, p, value=-1.0)  # λ σ(1 − σ)(h₁ − h₀)
            if with_loss:  # + σ − y
                delta += p
                delta -= y[:, :, None]
            if r is not None:
                r = r[:, :, None].expand(S, B, G).contiguous()
                delta.clamp_(min=-r, max=r)
            cell_F = _binary_cell_F(onehot, torch.bmm(onehot.transpose(1, 2), p))  # (S, c, G, 2)
        else:
            proba = torch.softmax(z.view(S, B, G, L), dim=3)
            h = torch.bmm(onehot, h_cells.reshape(S, -1, G * L)).view(S, B, G, L)
            delta = lam[:, None, :, None] * _psi_logit_gradient(proba, h, dim=3)
            if with_loss:
                delta = delta + (proba - F.one_hot(y.long(), L).to(proba.dtype)[:, :, None])
            weight = None if valid is None else valid[:, :, None].to(z.dtype)
            if clip is not None:
                norms = x_norm[:, :, None] * delta.norm(dim=3)
                scale = (clip / norms.clamp_min(torch.finfo(norms.dtype).tiny)).clamp(max=1.0)
                weight = scale if weight is None else weight * scale
            if weight is not None:
                delta = delta * weight[..., None]
            cell_F = torch.bmm(onehot.transpose(1, 2), proba.view(S, B, G * L)).view(S, -1, G, L)
        sums = Xb.sums(delta.view(S, B, G * L)).view(S, self.d + 1, G, L)  # [weight | bias] rows
        if L == 1:
            return sums.view(S, self.d + 1, G).transpose(1, 2).contiguous(), cell_F
        sums = sums.permute(0, 2, 3, 1)
        return torch.cat([sums[..., :self.d].flatten(2), sums[..., self.d]], dim=-1), cell_F

    def errors(self, X1: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each model's share of misclassified rows ``(S, G)``; ``X1``: rows of :meth:`features`, ``y``: labels."""
        w = self.theta.reshape(-1, self.d + 1)  # (S·G·L, d + 1)
        wrong = torch.zeros(self.S * self.G, device=w.device)
        for rows, labels in zip(X1.split(8192), y.split(8192)):  # chunks bound the (rows × models) logits
            z = rows @ w.T
            pred = (z > 0).long() if self.L == 1 else z.view(len(rows), -1, self.L).argmax(-1)
            wrong += (pred != labels[:, None]).sum(0)
        return (wrong / len(y)).view(self.S, self.G)

    def step(self, update):
        """``θ ← θ − update`` for a flat ``update (S, G, P)``."""
        if self.L == 1:
            self.theta.view(self.S, self.G, self.n_params).sub_(update)
            return
        w, b = update.split([self.L * self.d, self.L], dim=-1)
        self.weight -= w.reshape(self.weight.shape)
        self.bias -= b

    def flat(self) -> torch.Tensor:
        if self.L == 1:
            return self.theta.view(self.S, self.G, self.n_params).clone()
        return torch.cat([self.weight.flatten(2), self.bias], dim=-1)

    def load(self, flat: torch.Tensor) -> None:
        w, b = flat.split([self.L * self.d, self.L], dim=-1)
        self.weight.copy_(w.reshape(self.weight.shape))
        self.bias.copy_(b)


def _radii(x_norm, valid, clip):
    """The clamp radius of each row's binary ``δ`` ``(S, B)``: ``C/‖(x, 1)‖`` (``∞`` unclipped), 0 on padding rows;
    ``None`` when nothing is clamped (unclipped, every row valid)."""
    if clip is None and valid is None:
        return None
    r = torch.full_like(x_norm, math.inf) if clip is None else clip / x_norm
    return r if valid is None else r.where(valid, 0.0)


def _binary_cell_F(onehot, on1):
    """``Σ_rows onehot ⊗ (1 − σ, σ)`` ``(S, c, G, 2)`` from ``on1 = Σ_rows onehot ⊗ σ``."""
    return torch.stack([onehot.sum(1)[:, :, None] - on1, on1], dim=-1)


class ModuleModel:
    """One ``torch.nn.Module`` (``S = G = 1``); per-sample gradients through :func:`clipped_gradient_sum`."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.names = [n for n, p in module.named_parameters() if p.requires_grad]
        self.n_params = sum(p.numel() for p in self.params)

    @staticmethod
    def features(X: torch.Tensor) -> torch.Tensor:
        """The rows a step gathers: the module's inputs as they are."""
        return X

    def gradient_sum(self, Xb, x_norm, valid, y, onehot, h_cells, with_loss: bool, lam, clip):
        """Padding rows (``valid`` False) are zeros (nobody's data: they point at row 0) and weigh 0 in the loss, so
        their gradients are exactly 0, and their one-hot cell rows are 0 (:func:`.batched.secret_sums`): every row
        keeps its place, with no gather by a mask (on an accelerator a mask's count waits for the device, and each
        new count is a new shape)."""
        X1, y1, h1 = Xb[0], y[0], onehot[0] @ h_cells[0, :, 0]
        lam0 = float(lam[0, 0])
        a = torch.full((len(X1),), 1.0 if with_loss else 0.0, device=X1.device)
        lam_rows = torch.full_like(a, lam0)
        if valid is not None:
            a, lam_rows = a * valid[0], lam_rows * valid[0]
            X1 = X1 * valid[0].view(-1, *[1] * (X1.dim() - 1)).to(X1.dtype)
        target = (y1, h1, a, lam_rows)
        if not with_loss and lam0 == 0.0:
            # the sensitive unit's secret part at λ = 0 is λ·2u·F: identically zero (λ is public)
            flat = torch.zeros(self.n_params, device=X1.device)
        elif clip is not None:
            sums, _ = clipped_gradient_sum(self.module, fermi_loss, X1, target, clip)
            flat = torch.cat([sums[n].reshape(-1) for n in self.names])
        else:
            loss = fermi_loss(self.module(X1), target)
            flat = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, self.params)])
        with torch.no_grad():
            proba = torch.softmax(self.module(X1), dim=-1)
        return flat[None, None].detach(), (onehot[0].T @ proba)[None, :, None]

    def errors(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The module's share of misclassified rows ``(1, 1)``."""
        with torch.no_grad():
            wrong = sum(int((self.module(rows).argmax(-1) != labels).sum())
                        for rows, labels in zip(X.split(8192), y.split(8192)))
        return torch.full((1, 1), wrong / len(y), device=X.device)

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


class DenseRows:
    """Rows ``(x, 1)`` of a batch as a dense tensor ``(S, B, D)``: the two products of a step are batched GEMMs."""

    def __init__(self, X: torch.Tensor):
        self.X = X

    def logits(self, theta: torch.Tensor) -> torch.Tensor:
        """``θ̃·(x, 1)`` of every row and model: ``(S, B, G·L)`` from ``theta (S, G·L, D)``."""
        return torch.bmm(self.X, theta.transpose(1, 2))

    def sums(self, delta: torch.Tensor) -> torch.Tensor:
        """``Σ_i (x_i, 1) ⊗ δ_i``: ``(S, D, G·L)`` from ``delta (S, B, G·L)``."""
        return torch.bmm(self.X.transpose(1, 2), delta)


class SparseRows:
    """Rows ``(x, 1)`` of a batch with at most ``K`` non-zeros each: ``cols (S, B, K)`` (int32) and ``vals (S, B, K)``
    (padding entries have value 0), of width ``D``.

    The products cost ``K/D`` of the dense ones (one-hot encoded tables): the logits are one ``embedding_bag`` (the
    weighted sum of each row's ``K`` columns of θ̃), the gradient sums one sparse-transposed × dense product
    (scipy's, on the CPU; binary models sum in :mod:`.kernel`, fused with the rest of the step's per-row
    work). The seed groups' columns are offset by ``s·D`` so that every group's θ̃ is one table.
    """

    def __init__(self, cols: torch.Tensor, vals: torch.Tensor, width: int, threads: int | None = None,
                 fused: bool = True):
        S, B, K = cols.shape
        self.shape, self.width, self.threads, self.fused = (S, B, K), width, threads, fused
        offsets = torch.arange(0, S * width, width, dtype=cols.dtype, device=cols.device)
        self.cols = (cols + offsets[:, None, None]).view(S * B, K)
        self.vals = vals.reshape(S * B, K)

    def logits(self, theta: torch.Tensor) -> torch.Tensor:
        S, B, _ = self.shape
        table = theta.transpose(1, 2).reshape(S * self.width, -1)
        return F.embedding_bag(self.cols, table, per_sample_weights=self.vals, mode="sum").view(S, B, -1)

    def sums(self, delta: torch.Tensor) -> torch.Tensor:
        S, B, K = self.shape
        rows = scipy.sparse.csr_matrix((self.vals.numpy().ravel(), self.cols.numpy().ravel(),
                                        np.arange(0, S * B * K + 1, K)), shape=(S * B, S * self.width))
        return torch.from_numpy(rows.T @ delta.reshape(S * B, -1).numpy()).view(S, self.width, -1)


