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
   ``(x, y)`` only (computed without reading s at all);
4. ``θ ← θ − η_θ (noisy_θ/(q n) + public_θ/b)``,
   ``W ← Π_{‖W‖_F ≤ R}(W + η_w (noisy_W/(q n) + public_W/b))``;
5. optionally, θ is averaged over the last steps (tail averaging, post-processing).

Two model families: :class:`LinearModels` (binary or softmax logistic
regression; per-sample gradients in closed form, ``x̃_i ⊗ ∂ℓ_i/∂z_i`` with norm
``‖x̃_i‖·‖∂ℓ_i/∂z_i‖``, so a step of ``S·G`` models is a few batched matrix
products) and :class:`ModuleModel` (any ``torch.nn.Module``, one model,
per-sample gradients through ``torch.func``).

Speed: what a step reads of a row is laid out once per fit (:class:`RowTables`), so
that a batch costs one gather for logistic models; per-row tensors are laid out
``(S, G, ·, B)``; the parameters and W are updated in place. Binary models on
one-hot rows sum in one fused CPU kernel (:mod:`.dpfermi_kernel`), and while it
serves the steps, a second thread draws the next step's batches and the step's
noise beside the main one (:func:`_beside`). None of it changes what is computed
or who draws which randomness, nor the order of any secret generator's draws.

Backends: the loop is :meth:`BatchedTorch.train`; :class:`FusedKernel` and :class:`Prefetching` change how
rows are stored and summed and where side jobs run (:func:`default_backend` picks; :data:`BACKENDS` names
them). Each is tested equal, on the same batches and noise, to
:func:`~dpfair.algorithms.dpfermi_reference.reference_step`, the step written as the paper states it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import torch
import torch.nn.functional as F

from dpfair.algorithms.dpfermi_reference import LAM_MAX, FermiData, FermiHyperParameters, FermiSchedule
from dpfair.nn import clipped_gradient_sum, padded_size, pads
from dpfair.utils.progress import SILENT, Progress


@dataclass
class FermiModels:
    """Per-model hyper-parameters, each a tensor of shape ``(S, G)`` (``inv_sqrt_p``: ``(S, G, m, k)``).

    ``target_error`` (NaN: a fixed λ) and ``lam_rate``: λ follows the training error (:func:`adapt_lambda`);
    ``None``: every λ is fixed.
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
            if isinstance(Xb, SparseRows) and Xb.fused:  # the same, fused into one pass (dpfermi_kernel)
                from dpfair.algorithms import dpfermi_kernel

                radii = torch.full_like(x_norm, math.inf) if r is None else r
                sums, on1 = dpfermi_kernel.binary_sums(p, onehot, h_diff, y, radii, with_loss, Xb.cols, Xb.vals,
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
        their gradients are exactly 0, and their one-hot cell rows are 0 (:func:`secret_sums`): every row keeps its
        place, with no gather by a mask (on an accelerator a mask's count waits for the device, and each new count
        is a new shape)."""
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


def poisson_batch(n: int, samplers, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One secret Poisson sample per seed group (``samplers``: their ``(SecretRandom, q)``), padded.

    Returns ``idx (S, B)`` and ``valid (S, B)`` (padding rows point at row 0); ``valid`` is ``None`` when
    every row is valid. ``B`` is the largest sample's size, at least 1, and on an accelerator rounded up to
    :func:`~dpfair.nn.padded_size` of the expected one (a handful of shapes rather than one per step).
    """
    samples = [secret.poisson_sample(n, q) for secret, q in samplers]
    lengths = [len(x) for x in samples]
    width = max(max(lengths), 1)
    if pads(device):
        width = padded_size(width, samplers[0][1] * n)
    if len(samples) == 1 and lengths[0] == width:
        return torch.from_numpy(samples[0])[None].to(device), None
    idx = np.zeros((len(samples), width), dtype=np.int64)
    for row, x in enumerate(samples):
        idx[row, :len(x)] = x
    valid = torch.arange(width, device=device) < torch.tensor(lengths, device=device)[:, None]
    return torch.from_numpy(idx).to(device), valid


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
    (scipy's, on the CPU; binary models sum in :mod:`.dpfermi_kernel`, fused with the rest of the step's per-row
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


#: a row table is multiplied sparse (on the CPU) when its rows have at most this share of non-zeros
SPARSE_SHARE = 1 / 3


@dataclass
class RowTables:
    """What a step reads of the training rows, laid out once per fit so that a batch costs one or three gathers.

    Per row: the model's input (:meth:`LinearModels.features`: ``(x, 1)``), ``‖(x, 1)‖``, ``y``, the one-hot of
    the row's (W block, group) cell (the secret part's) and the one-hot of its W block alone (the public
    part's, whose ``h = −Σ_s W_{c,s}²`` is the same in every group of a block, so it never reads s); rows
    without a W (``c = −1``) are zero in both one-hots. For :class:`LinearModels`, whose input rows are a
    copy already, all of it is one ``table`` (one gather a batch: a row's cache lines bring everything); on the
    CPU, public rows (``public``: the sensitive unit's) with few non-zeros (at most :data:`SPARSE_SHARE` of
    them, one-hot encoded tables) are stored as their non-zero values, and their columns (int32, bit-cast to
    float32) last, in ``table`` (:class:`SparseRows`; still one gather a batch). Private rows (the record unit's)
    are always dense: the layout would branch on their sparsity, and the released sums' rounding with it.
    Otherwise the
    inputs stay as they are and the rest is ``aux (1 + m·k + m, n)``, one row per quantity (a gather of columns
    is fast, of narrow rows slow), with ``y`` apart.
    """

    table: torch.Tensor  #: the input rows (or their non-zero values), with the per-row columns appended
    width: int  #: the input rows' width in ``table``
    aux: torch.Tensor | None
    y: torch.Tensor
    n_cells: int
    n_cols: int = 0  #: sparse rows: how many columns (bit-cast int32) end each row of ``table``
    dim: int = 0  #: sparse rows: their full width
    threads: int | None = None  #: the threads of the fused kernel (None: PyTorch's count; see :func:`_kernel_threads`)
    fused: bool = True  #: binary models on sparse rows sum in the fused kernel (False: in PyTorch and scipy)

    @classmethod
    def of(cls, data: FermiData, models, public: bool) -> RowTables:
        active = (data.cells >= 0)[:, None]
        block = data.cells.clamp(min=0)
        mk = data.n_cells * data.n_groups
        x_norm = torch.sqrt((data.X.flatten(1) ** 2).sum(1) + 1.0)[:, None]
        onehots = [F.one_hot(block * data.n_groups + data.s, mk).to(torch.float32) * active,
                   F.one_hot(block, data.n_cells).to(torch.float32) * active]
        features = models.features(data.X)
        if not isinstance(models, LinearModels):
            return cls(features, features.shape[1], torch.cat([x_norm, *onehots], dim=1).T.contiguous(), data.y, mk)
        rest = [x_norm, data.y[:, None].to(features.dtype), *onehots]
        nonzero = features != 0 if public and features.device.type == "cpu" else None
        K = None if nonzero is None else int(nonzero.sum(1).max())
        if K is None or K > SPARSE_SHARE * features.shape[1]:
            return cls(torch.cat([features, *rest], dim=1), features.shape[1], None, data.y, mk)
        # each row's non-zero columns first (a stable sort keeps their order), padded with zeros of column 0
        order = torch.sort(nonzero.to(torch.int8), dim=1, descending=True, stable=True).indices[:, :K]
        vals = features.gather(1, order)
        cols = torch.where(vals != 0, order, 0).to(torch.int32).view(torch.float32)
        return cls(torch.cat([vals, *rest, cols], dim=1), K, None, data.y, mk, K, features.shape[1])

    def take(self, idx: torch.Tensor, public: bool):
        """``(rows, x_norm, y, one-hot)`` of the rows ``idx (S, B)``: cells (secret) or blocks (``public``).

        ``rows``: :class:`DenseRows` or :class:`SparseRows` for logistic models, the input tensor otherwise.
        """
        if self.aux is None:
            rows = _rows(self.table, idx)
            end = rows.shape[-1] - self.n_cols
            Xb, x_norm, y, onehot = (rows[..., :self.width], rows[..., self.width], rows[..., self.width + 1],
                                     rows[..., self.width + 2:end])
            Xb = (SparseRows(rows[..., end:].view(torch.int32), Xb, self.dim, self.threads, self.fused) if self.n_cols
                  else DenseRows(Xb))
        else:
            aux = self.aux.index_select(1, idx.reshape(-1)).view(-1, *idx.shape)
            Xb, x_norm, y, onehot = _rows(self.table, idx), aux[0], _rows(self.y, idx), aux[1:].permute(1, 2, 0)
        return Xb, x_norm, y, onehot[..., self.n_cells:] if public else onehot[..., :self.n_cells]


def _h_cells(W, inv_sqrt_p, quadratic: bool):
    """``h`` of each (block, group) cell ``(S, m·k, G, l)``: ``2 W_{c,s}/√p_{c,s}``, with ``quadratic`` also
    ``−Σ_s W_{c,s}²``."""
    S, G, m, k, l = W.shape
    h = 2.0 * W * inv_sqrt_p[..., None]
    if quadratic:
        h -= (W * W).sum(3, keepdim=True)
    return h.view(S, G, m * k, l).transpose(1, 2).contiguous()


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


def secret_sums(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, W, idx, valid,
                rows: RowTables | None = None, taken=None):
    """The two sums a step releases, before noise: ``(θ part (S, G, P), W part (S, G, m, k, l))``.

    Sensitive unit: the clipped per-sample θ-gradients of ``λ·2u·F`` and the
    s-part of ∇_W ψ̂; record unit: the clipped whole per-sample θ-gradient and
    the whole ∇_W ψ̂. Rows ``idx (S, B)`` where ``valid`` (``None``: all).
    """
    rows = RowTables.of(data, models, public=not schedule.record) if rows is None else rows
    record = schedule.record
    Xb, x_norm, y, onehot = rows.take(idx, public=False) if taken is None else taken
    if valid is not None:
        onehot *= valid[..., None]
    theta_sum, cell_F = models.gradient_sum(Xb, x_norm, valid, y, onehot, _h_cells(W, hp.inv_sqrt_p, record),
                                            record, hp.lam, schedule.max_grad_norm)
    return theta_sum, _w_gradient(W, cell_F, hp.inv_sqrt_p, public=record, sensitive=True)


def public_sums(models, hp: FermiModels, W, pub, rows: RowTables, taken=None):
    """The exact sums of the parts that depend on ``(x, y)`` only, over the public rows ``pub (S, b)``.

    θ: the per-sample gradients of ``ℓ − λ wsq·F`` (unclipped); W: the x-part ``−2 W_c diag(F)``,
    from the per-block sums of ``F`` (s is not read).
    """
    Xb, x_norm, y, blocks = rows.take(pub, public=True) if taken is None else taken
    wsq = (W * W).sum(3)  # (S, G, m, l): the same in every group of a block
    theta, block_F = models.gradient_sum(Xb, x_norm, None, y, blocks, wsq.neg_().transpose(1, 2), True, hp.lam,
                                         None)
    return theta, (-2.0 * W).mul_(block_F.permute(0, 2, 1, 3)[:, :, :, None])




def adapt_lambda(models, X1: torch.Tensor, y: torch.Tensor, hp: FermiModels) -> None:
    """``λ ← min(λ·exp(clamp(rate·(target − error), ±1)), LAM_MAX)`` for the models with a target error, in place
    (``hp.lam``).

    The error is the current iterate's on the training rows ``X1`` (:meth:`LinearModels.features` of ``X``)
    with labels ``y``: a dual step on the constraint "training error ≤ target" of the Lagrangian whose
    multiplier λ weighs the fairness term, multiplicative so that λ stays positive, at most a factor e an
    epoch and at most :data:`LAM_MAX` (a target no λ reaches would otherwise overflow it). It reads the
    released iterate and ``(x, y)`` only, never s: under the sensitive unit (x and y public) it is
    post-processing, and the steps after it, whose sensitivity does not depend on λ, are accounted as before.
    """
    adaptive = ~torch.isnan(hp.target_error)
    step = torch.exp((hp.lam_rate * (hp.target_error - models.errors(X1, y))).clamp(-1.0, 1.0))
    hp.lam.copy_(torch.where(adaptive, (hp.lam * step).clamp(max=LAM_MAX), hp.lam))


def _beside(rows: RowTables, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` started in a second thread when the fused kernel has threads to spare, else run here;
    the returned callable gives its result. The next Poisson batch and the release's noise are drawn there while
    this thread computes: each secret generator is used by one thread at a time and in the same order, so the
    draws are those of a serial run. It runs in a copy of this thread's context (the context variables of budgets
    and planning apply there too)."""
    if not rows.threads or rows.threads < 2:
        result = fn(*args, **kwargs)
        return lambda: result
    return _side_pool().submit(contextvars.copy_context().run, fn, *args, **kwargs).result


@functools.cache
def _side_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="dpfair-side")


#: :func:`_kernel_threads`' state across the fits running at once.
_THREADS = {"lock": threading.Lock(), "fits": 0, "saved": 1}


@contextlib.contextmanager
def _kernel_threads(models, rows: RowTables):
    """While the fused kernel serves the steps (binary models on sparse rows): PyTorch's ops on one thread and the
    kernel on the threads PyTorch had (restored after).

    PyTorch's idle OpenMP threads spin for a while after each parallel op and take cores from the kernel, while
    the step's PyTorch ops are small (measured: docs/guide/benchmarks.md, Speed).
    """
    if not (isinstance(models, LinearModels) and models.L == 1 and rows.n_cols):
        yield
        return
    with _THREADS["lock"]:  # fits in several Python threads: the first saves PyTorch's count, the last restores it
        if not _THREADS["fits"]:
            _THREADS["saved"] = torch.get_num_threads()
            torch.set_num_threads(1)
        _THREADS["fits"] += 1
        rows.threads = _THREADS["saved"]
    try:
        yield
    finally:
        rows.threads = None
        with _THREADS["lock"]:
            _THREADS["fits"] -= 1
            if not _THREADS["fits"]:
                torch.set_num_threads(_THREADS["saved"])


class BatchedTorch:
    """The backend that computes every step in PyTorch (and scipy for sparse multi-class rows), serially.

    A backend runs Algorithm 1's loop (:meth:`train`) for a grid of models; each computes, on the same batches
    and the same noise, what :func:`~dpfair.algorithms.dpfermi_reference.reference_step` does for each model
    (``tests/algorithms/test_dpfermi_backends.py``). Every secret draw goes through the given samplers and the
    release, in the same order whatever the backend. Subclasses change three hooks: :meth:`layout` (how the rows
    are stored), :meth:`running` (what holds while the steps run) and :meth:`beside` (where a side job runs).
    """

    name = "torch"
    fused = False  #: binary models on sparse rows sum in the fused kernel (:mod:`.dpfermi_kernel`)

    def layout(self, data: FermiData, models, public: bool) -> RowTables:
        rows = RowTables.of(data, models, public=public)
        rows.fused = self.fused
        return rows

    def running(self, models, rows: RowTables):
        return contextlib.nullcontext()

    def beside(self, rows: RowTables, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, run now; the returned callable gives its result."""
        result = fn(*args, **kwargs)
        return lambda: result

    def train(self, models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, samplers, release,
              public_generators, on_epoch=None, bar: Progress = SILENT) -> torch.Tensor:
        """Run Algorithm 1 for every model; returns the last ``W (S, G, m, k, l)``.

        ``samplers``: one secret generator per seed group (its Poisson batches);
        ``release``: the batched :class:`~dpfair.privacy.Release` of the step (one
        ledger per model) that draws every model's noise; ``public_generators``: one
        public torch generator per seed group (its public minibatch order).
        After each (expected) epoch of steps the models with a target error adapt their λ (:func:`adapt_lambda`,
        in ``hp.lam``), then ``on_epoch(step, W)`` is called; ``bar``
        (:mod:`dpfair.utils.progress`) advances by one per step.
        """
        dev = data.X.device
        S, G = hp.lam.shape
        n, k, l, m = data.X.shape[0], data.n_groups, data.n_classes, data.n_cells
        q = schedule.sampling_probability
        expected = q * n
        record = schedule.record
        W = torch.zeros(S, G, m, k, l, device=dev)
        public = None if record else PublicBatches(n, schedule.public_batch, public_generators, dev)
        rows = self.layout(data, models, public=not record)
        steps_per_epoch = max(1, round(1 / q))
        scales = [hp.noise_theta[..., None], hp.noise_w[..., None, None, None]]
        lr, wlr = hp.learning_rate[..., None], hp.w_learning_rate[..., None, None, None]
        radius = hp.w_radius[..., None]
        batch_sources = [(secret, q) for secret in samplers]
        average_from, average = schedule.average_from, None
        X1 = None if hp.target_error is None else models.features(data.X)
        if X1 is not None and record:
            raise ValueError("a target error reads the training error, which is private under the record unit; adapt λ "
                             "only under the sensitive unit")

        def fetch():
            """A step's rows: its Poisson batch and public minibatch, drawn in step order, and gathered."""
            idx, valid = poisson_batch(n, batch_sources, dev)
            pub = None if record else public.next()
            return (idx, valid, rows.take(idx, public=False), pub,
                    None if record else rows.take(pub, public=True))

        with self.running(models, rows):
            batch = self.beside(rows, fetch)
            for step in range(schedule.n_steps):
                idx, valid, taken, pub, taken_pub = batch()
                if step + 1 < schedule.n_steps:  # the next step's rows, fetched beside this step (the same draws)
                    batch = self.beside(rows, fetch)
                theta_sum, w_sum = secret_sums(models, data, schedule, hp, W, idx, valid, rows, taken)
                if record:
                    grad_theta, grad_w = release.noisy_sum([theta_sum, w_sum], scale=scales)
                else:  # the release (its noise draw) beside the public part, in a second thread when the kernel has one
                    noisy = self.beside(rows, release.noisy_sum, [theta_sum, w_sum], scale=scales)
                    theta_pub, w_pub = public_sums(models, hp, W, pub, rows, taken_pub)
                    grad_theta, grad_w = noisy()
                    grad_theta += theta_pub.mul_(expected / pub.shape[1])
                    grad_w += w_pub.mul_(expected / pub.shape[1])
                grad_theta /= expected
                grad_w /= expected
                models.step(grad_theta.mul_(lr))
                if average_from is not None and step >= average_from:
                    count = step - average_from + 1
                    current = models.flat()
                    average = current if count == 1 else average.add_(current.sub_(average).div_(count))
                W += grad_w.mul_(wlr)
                W *= (radius / W.flatten(3).norm(dim=-1).clamp_min_(1e-12)).clamp_(max=1.0)[..., None, None]
                bar.update()
                if (step + 1) % steps_per_epoch == 0 or step + 1 == schedule.n_steps:
                    if X1 is not None:
                        adapt_lambda(models, X1, data.y, hp)
                    if on_epoch is not None:
                        release.flush()
                        on_epoch(step + 1, W)
        release.flush()
        if average is not None:
            models.load(average)
        return W


class FusedKernel(BatchedTorch):
    """Binary logistic models on one-hot (sparse) CPU rows: a step's per-row work in one numba pass
    (:mod:`.dpfermi_kernel`), on the threads PyTorch had, with PyTorch's own ops on one thread meanwhile
    (:func:`_kernel_threads`). Elsewhere (dense rows, softmax models) it computes as :class:`BatchedTorch`."""

    name = "fused kernel"
    fused = True

    def running(self, models, rows: RowTables):
        return _kernel_threads(models, rows)


class Prefetching(FusedKernel):
    """:class:`FusedKernel`, and while the kernel works, a second thread draws the next step's Poisson batch and
    this step's noise (:func:`_beside`): each secret generator is used by one thread at a time and in the same
    order, so the draws are those of a serial run. The default for binary models on sparse rows."""

    name = "fused kernel, prefetching"

    def beside(self, rows: RowTables, fn, *args, **kwargs):
        return _beside(rows, fn, *args, **kwargs)


#: The backends by name (tests and benchmarks pick one; a fit takes :func:`default_backend`'s).
BACKENDS = {backend.name: backend for backend in (BatchedTorch(), FusedKernel(), Prefetching())}


def default_backend(models, data: FermiData, schedule: FermiSchedule):
    """The fastest backend that applies: :class:`Prefetching` for binary logistic models on public sparse rows
    (the sensitive unit on a CPU, one-hot encoded tables), else :class:`BatchedTorch`."""
    binary = isinstance(models, LinearModels) and models.L == 1
    if binary and not schedule.record and data.X.device.type == "cpu":
        return BACKENDS[Prefetching.name]  # whether the rows are sparse is decided by their layout
    return BACKENDS[BatchedTorch.name]


def train(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, samplers, release,
          public_generators, on_epoch=None, bar: Progress = SILENT, backend: BatchedTorch | None = None) -> torch.Tensor:
    """Run Algorithm 1 for every model on ``backend`` (``None``: :func:`default_backend`); see
    :meth:`BatchedTorch.train`."""
    backend = default_backend(models, data, schedule) if backend is None else backend
    return backend.train(models, data, schedule, hp, samplers, release, public_generators, on_epoch, bar)


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
