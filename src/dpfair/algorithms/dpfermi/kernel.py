"""One fused CPU kernel (numba) for the binary logistic models of DP-FERMI's batched steps on sparse rows.

:meth:`~dpfair.algorithms.dpfermi.models.LinearModels.gradient_sum` with one logit computes, for every
row ``i`` of a batch and model ``g`` of its seed group ``s`` (``σ_ig`` the sigmoid of the logit):

* ``δ_ig = a(σ_ig − y_i) + λ_g(h₁ − h₀)_{c_i,g} σ_ig(1 − σ_ig)`` (the second term only for a row with a
  cell ``c_i``), clamped to ``±r_i`` (``r_i = C/‖(x_i, 1)‖``: the clipping of the per-sample gradient
  ``(x_i, 1) ⊗ δ_ig``; ``r_i = 0`` drops the row, ``∞`` leaves it unclipped);
* the gradient sums ``Σ_i (x_i, 1) δ_ig`` over the row's non-zero columns, and ``Σ_{i in c} σ_ig`` per cell.

In eager PyTorch that is a dozen passes over ``(S, B, G)`` tensors plus a sparse product (memory-bound
on a CPU); here it is one pass per row, with the row's ``G`` values in cache. It computes the same
quantities as the PyTorch path (which GPUs and softmax models use; ``tests/algorithms/
test_dpfermi_engine.py`` checks the two agree), reads and draws no randomness, and each seed group is summed
by one thread in row order, so the result does not depend on the number of threads. The module is
imported on first use (numba compiles the kernel once and caches it on disk).
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from numba import njit


@njit(nogil=True, cache=True)
def _binary_sums(p, onehot, hd, y, r, a, cols, vals, sums, cell_p, first, last):
    """The kernel, for the seed groups ``first..last − 1`` (:func:`binary_sums`)."""
    B, G = p.shape[1], p.shape[2]
    K, C = cols.shape[2], onehot.shape[2]
    delta = np.empty(G, dtype=np.float32)
    for s in range(first, last):
        for i in range(B):
            ri = r[s, i]
            if ri == 0.0:
                continue
            c = -1
            for j in range(C):
                if onehot[s, i, j] != 0.0:
                    c = j
            yi = y[s, i]
            if c >= 0:
                for g in range(G):
                    pg = p[s, i, g]
                    cell_p[s, c, g] += pg
                    delta[g] = min(max(a * (pg - yi) + hd[s, c, g] * pg * (1.0 - pg), -ri), ri)
            else:
                for g in range(G):
                    delta[g] = min(max(a * (p[s, i, g] - yi), -ri), ri)
            for k in range(0, K - 1, 2):  # two columns a pass: each δ loaded once for both (docs/guide/benchmarks.md)
                c1, c2, v1, v2 = cols[s, i, k], cols[s, i, k + 1], vals[s, i, k], vals[s, i, k + 1]
                for g in range(G):
                    d = delta[g]
                    sums[c1, g] += v1 * d
                    sums[c2, g] += v2 * d
            if K % 2:
                col, v = cols[s, i, K - 1], vals[s, i, K - 1]
                for g in range(G):
                    sums[col, g] += v * delta[g]


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix="dpfair-kernel")


def binary_sums(p, onehot, hd, y, r, with_loss: bool, cols, vals, width: int, threads: int | None = None):
    """``(sums (S, width, G), cell sums of σ (S, c, G))`` for binary models on sparse rows (module docstring).

    ``p (S, B, G)``: σ of every row and model; ``onehot (S, B, c)``: the rows' cells (zero: none);
    ``hd (S, c, G)``: ``λ(h₁ − h₀)`` per cell; ``y``, ``r (S, B)``: labels and clamp radii; ``with_loss``:
    ``a = 1`` (else 0); ``cols``, ``vals (S, B, K)``: each row's non-zero columns (offset by ``s·width``) and
    values. The seed groups are split among ``threads`` threads (``None``: ``torch.get_num_threads()``; a fit passes
    the count it read once, :func:`dpfair.algorithms.dpfermi.loop.train`'s ``threads``).
    """
    S, B, G = p.shape
    arrays = [t.detach().numpy() for t in (p, onehot, hd, y, r)]
    cols, vals = cols.numpy().reshape(S, B, -1), vals.numpy().reshape(S, B, -1)
    sums = np.zeros((S * width, G), dtype=np.float32)
    cell_p = np.zeros((S, onehot.shape[2], G), dtype=np.float32)
    args = (*arrays, np.float32(1.0 if with_loss else 0.0), cols, vals, sums, cell_p)
    threads = torch.get_num_threads() if threads is None else threads
    bounds = np.linspace(0, S, min(threads, S) + 1).round().astype(int).tolist()
    jobs = [_pool(len(bounds) - 2).submit(_binary_sums, *args, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    _binary_sums(*args, bounds[0], bounds[1])  # the first share in this thread
    for job in jobs:
        job.result()
    return torch.from_numpy(sums).view(S, width, G), torch.from_numpy(cell_p)
