"""DP-FERMI's batched step: what one step of Algorithm 1 computes for a grid of models, before its noise.

Models are laid out on a grid ``(S, G)``: the ``G`` models of a *seed group* (one ``random_state``) share that
group's secret Poisson batches and its public minibatch order, and differ in λ, the step sizes, the W radius and
the noise scales (:mod:`.loop` draws both; every model draws its own noise). A step's sums (see
:mod:`dpfair.algorithms.dpfermi.estimator` for the privacy argument):

* :func:`secret_sums`, on the secret batch ``B_t``: the clipped per-sample θ-gradients of the s-carrying loss and
  the s-part ``2 P^{-1/2} s_i F_iᵀ`` of the W-gradient (under the record unit: the whole per-sample θ-gradient,
  clipped, and the whole W-gradient) — the two sums the step releases;
* :func:`public_sums` (sensitive unit), on an independent public minibatch of ``b`` rows: the exact gradients of
  the parts that depend on ``(x, y)`` only (computed without reading s at all).

Speed: what a step reads of a row is laid out once per fit (:class:`RowTables`), so that a batch costs one gather
for logistic models; per-row tensors are laid out ``(S, G, ·, B)``. Binary models on one-hot rows sum in one
fused CPU kernel (:mod:`.kernel`) on the fit's threads, and while it serves the steps, a second thread draws the
next step's batches and the step's noise beside the main one (:meth:`Prefetching.beside`). None of it changes
what is computed or who draws which randomness, nor the order of any secret generator's draws.

Backends: :class:`BatchedTorch`, :class:`FusedKernel` and :class:`Prefetching` provide only the step's sums and
three hooks — :meth:`~BatchedTorch.layout` (how the rows are stored, and the kernel's threads),
:meth:`~BatchedTorch.running` (what holds while the steps run) and :meth:`~BatchedTorch.beside` (where a side
job runs); the loop around them is :func:`dpfair.algorithms.dpfermi.loop.train`'s, and each backend's step is
tested equal to :class:`~dpfair.algorithms.dpfermi.reference.Reference`'s, the step written as the paper states it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from dpfair.algorithms.dpfermi.data import FermiData, FermiModels, FermiSchedule
from dpfair.algorithms.dpfermi.models import DenseRows, LinearModels, SparseRows
from dpfair.utils.threads import one_openmp_thread


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
    are always dense: the layout would branch on their sparsity, and the released sums' rounding with it. A
    dense table of more than :data:`COPY_LIMIT_BYTES` (a feature store of millions of rows) is not copied: a
    batch gathers ``X``'s own rows and appends ``1`` to them. Otherwise (and for other models) the
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
    threads: int | None = None  #: the fused kernel's threads (set by the backend's layout; None: PyTorch's count)
    fused: bool = True  #: binary models on sparse rows sum in the fused kernel (False: in PyTorch and scipy)

    @classmethod
    def of(cls, data: FermiData, models, public: bool) -> RowTables:
        mk = data.n_cells * data.n_groups
        aux = _aux(data)
        if not isinstance(models, LinearModels):
            features = models.features(data.X)
            return cls(features, features.shape[1], aux, data.y, mk)
        K = _most_nonzeros(data.X) + 1 if public and data.X.device.type == "cpu" else None  # +1: the bias column
        if (K is None or K > SPARSE_SHARE * (data.X.shape[1] + 1)) and data.X.numel() * 4 > COPY_LIMIT_BYTES:
            return cls(data.X, data.X.shape[1], aux, data.y, mk)  # X's own rows: (x, 1) made per batch
        rest = [aux[:1].T, data.y[:, None].to(torch.float32), aux[1:].T]  # ‖(x, 1)‖, y, the cells' one-hots
        width = data.X.shape[1] + 1
        if K is None or K > SPARSE_SHARE * width:
            return cls(torch.cat([models.features(data.X), *rest], dim=1), width, None, data.y, mk)
        # each row's non-zero columns first (a stable sort keeps their order), padded with zeros of column 0; a
        # block of rows at a time, so that the sort's int64 indices never span the table
        table = torch.empty(len(data.X), 2 * K + sum(r.shape[1] for r in rest), dtype=torch.float32,
                            device=data.X.device)
        start = 0
        for rows in _row_blocks(data.X):
            stop = start + len(rows)
            features = models.features(rows)
            order = torch.sort((features != 0).to(torch.int8), dim=1, descending=True, stable=True).indices[:, :K]
            vals = features.gather(1, order)
            cols = torch.where(vals != 0, order, 0).to(torch.int32).view(torch.float32)
            torch.cat([vals, *(r[start:stop] for r in rest), cols], dim=1, out=table[start:stop])
            start = stop
        return cls(table, K, None, data.y, mk, K, width)

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


#: Rows of the training table read at a time by the per-row passes of :meth:`RowTables.of` (a few MiB of
#: temporaries however large the table).
ROW_BLOCK_CELLS = 1 << 22
#: A dense table of more bytes than this is not copied into a step's layout: a batch gathers ``X``'s own rows
#: (a feature store's, :mod:`dpfair.datasets.store`, perhaps memory-mapped) and the per-row columns apart, so that a
#: fit holds no second table.
COPY_LIMIT_BYTES = 1 << 28


def _row_blocks(X):
    step = max(1, ROW_BLOCK_CELLS // max(1, X[0].numel()))
    return (X[i:i + step].flatten(1) for i in range(0, X.shape[0], step))


def _aux(data: FermiData) -> torch.Tensor:
    """``aux (1 + m·k + m, n)``: each row's ``‖(x, 1)‖``, the one-hot of its (W block, group) cell and of its W
    block (zero for rows without a W), one row per quantity, written in place (no per-row table first)."""
    n, mk = len(data.X), data.n_cells * data.n_groups
    aux = torch.zeros(1 + mk + data.n_cells, n, dtype=torch.float32, device=data.X.device)
    aux[0] = _row_norms(data.X)
    active = (data.cells >= 0).to(torch.float32)[None]
    block = data.cells.clamp(min=0)[None]
    aux[1:1 + mk].scatter_(0, block * data.n_groups + data.s[None], active)
    aux[1 + mk:].scatter_(0, block, active)
    return aux


def _row_norms(X) -> torch.Tensor:
    """``‖(x, 1)‖`` of every row, a block of rows at a time."""
    return torch.cat([torch.sqrt((block.to(torch.float32) ** 2).sum(1) + 1.0) for block in _row_blocks(X)])


def _most_nonzeros(X) -> int:
    """The largest number of non-zero inputs of a row, a block of rows at a time."""
    return max(int((block != 0).sum(1).max()) for block in _row_blocks(X))


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


@functools.cache
def _side_pool() -> ThreadPoolExecutor:
    """The second thread of :meth:`Prefetching.beside`: its small PyTorch ops (a batch's gather, the noise) run on
    one OpenMP thread, as the fit's own thread's do while the kernel serves the steps."""
    return ThreadPoolExecutor(1, thread_name_prefix="dpfair-side", initializer=one_openmp_thread)


class BatchedTorch:
    """The backend that computes every step's sums in PyTorch (and scipy for sparse multi-class rows), serially.

    A backend computes, for a grid of models on the same batches, what
    :class:`~dpfair.algorithms.dpfermi.reference.Reference` computes for each model
    (``tests/algorithms/test_dpfermi_backends.py``); the loop (:func:`dpfair.algorithms.dpfermi.loop.train`) owns
    the sampling, the noise, the updates, λ and the averaging. Subclasses change three hooks: :meth:`layout` (how
    the rows are stored), :meth:`running` (what holds while the steps run) and :meth:`beside` (where a side job
    runs).
    """

    name = "torch"
    fused = False  #: binary models on sparse rows sum in the fused kernel (:mod:`.kernel`)

    def layout(self, data: FermiData, models, public: bool, threads: int = 1) -> RowTables:
        """The rows as the steps read them (:class:`RowTables`); ``threads``: the fused kernel's, where it serves
        the steps (binary logistic models on sparse rows), passed in by the caller (none otherwise)."""
        rows = RowTables.of(data, models, public=public)
        rows.fused = self.fused
        if self.fused and isinstance(models, LinearModels) and models.L == 1 and rows.n_cols:
            rows.threads = threads
        return rows

    def running(self, models, rows: RowTables):
        """What holds while the steps run: nothing here."""
        return contextlib.nullcontext()

    def beside(self, rows: RowTables, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, run now; the returned callable gives its result."""
        result = fn(*args, **kwargs)
        return lambda: result

    def take(self, rows: RowTables, idx: torch.Tensor, public: bool):
        """The gathered rows ``idx (S, B)`` (:meth:`RowTables.take`), fetched with the batch (beside the step)."""
        return rows.take(idx, public=public)

    def secret_sums(self, models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, W, idx, valid,
                    rows: RowTables, taken):
        return secret_sums(models, data, schedule, hp, W, idx, valid, rows, taken)

    def public_sums(self, models, hp: FermiModels, W, pub, rows: RowTables, taken):
        return public_sums(models, hp, W, pub, rows, taken)


class FusedKernel(BatchedTorch):
    """Binary logistic models on one-hot (sparse) CPU rows: a step's per-row work in one numba pass
    (:mod:`.kernel`), on the threads the caller passes to :meth:`layout`, with PyTorch's own ops of the fit's
    thread on one thread meanwhile (:meth:`running`). Elsewhere (dense rows, softmax models) it computes as
    :class:`BatchedTorch`."""

    name = "fused kernel"
    fused = True

    def running(self, models, rows: RowTables):
        """While the kernel serves the steps: this thread's OpenMP team (PyTorch's intra-op threads as this thread
        sees them) limited to one thread, restored after; other threads, and PyTorch's global count, untouched.

        PyTorch's idle OpenMP threads spin for a while after each parallel op and take cores from the kernel,
        while the step's PyTorch ops are small (measured: docs/guide/benchmarks.md, Speed). OpenMP's thread count
        is a per-thread setting, so fits in several Python threads each limit only their own.
        """
        if not rows.threads:
            return contextlib.nullcontext()
        return one_openmp_thread()


class Prefetching(FusedKernel):
    """:class:`FusedKernel`, and while the kernel works, a second thread draws the next step's Poisson batch and
    this step's noise (:meth:`beside`). The default for binary models on sparse rows."""

    name = "fused kernel, prefetching"

    def beside(self, rows: RowTables, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` started in a second thread when the fused kernel has threads to spare, else run
        here; the returned callable gives its result. The next Poisson batch and the release's noise are drawn
        there while this thread computes: each secret generator is used by one thread at a time and in the same
        order, so the draws are those of a serial run. It runs in a copy of this thread's context (the context
        variables of budgets and planning apply there too)."""
        if not rows.threads or rows.threads < 2:
            return super().beside(rows, fn, *args, **kwargs)
        return _side_pool().submit(contextvars.copy_context().run, fn, *args, **kwargs).result
