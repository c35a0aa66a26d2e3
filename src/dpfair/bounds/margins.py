"""Confidence margins and their per-example Lipschitz constants (Mangold et al., ICML 2023, Sec. 2).

A model scores every label, ``h(x, y)``, and predicts the best one. Its
*confidence margin* on ``(x, y)`` is

    ρ(h, x, y) = h(x, y) − max_{y' ≠ y} h(x, y')                        (Mangold et al., Sec. 2)

(positive iff ``x`` is classified as ``y``). Assumption 2.1 asks for constants
``L_{x,y}`` with ``|ρ(h, x, y) − ρ(h', x, y)| ≤ L_{x,y} ‖h − h'‖`` (parameters in
the Euclidean norm). Since ρ is the minimum over ``y'`` of ``h(x,y) − h(x,y')``
and a minimum of Lipschitz functions is Lipschitz with the largest constant,

    L_{x,y} = max_{y' ≠ y} ‖∇_θ (h(x, y) − h(x, y'))‖

is a valid constant for models linear in their parameters (the gradient is
then the same for every θ); it is at most the paper's ``‖∇h(x,y)‖ + max ‖∇h(x,y')‖``,
i.e. ``2‖x‖`` for ``h(x, y) = W_y·x`` (ours: ``√2‖x‖``), and ``‖x‖`` for a binary
model with one weight vector (``h(x, 1) = w·x``, ``h(x, 0) = 0``). For a
non-linear module the same formula, evaluated at the model's parameters, is
the *local* constant (first order in ``‖h − h'‖``): the certificates that use it
say so.

Everything here is arithmetic on a model and evaluation rows; it spends no
privacy when the model is a released one and the rows are public (or held-out
evaluation data, which the certificate's caller owns).
"""

from __future__ import annotations

import numpy as np
import torch

from dpfair.utils.validation import check_1d, check_features

__all__ = ["confidence_margins", "linear_lipschitz", "module_lipschitz", "module_scores", "normalized_margins"]


def _labels(y, n: int, n_classes: int) -> np.ndarray:
    codes = check_1d(y, "y", n)
    if codes.dtype.kind not in "iu" or codes.min() < 0 or codes.max() >= n_classes:
        raise ValueError(f"y must hold label codes 0..{n_classes - 1} (the columns of scores); "
                         "encode labels with the model's classes_ first")
    return codes.astype(np.int64)


def confidence_margins(scores, y) -> np.ndarray:
    """``ρ(h, x_i, y_i)`` from a score matrix (n × labels; a 1-d array is a binary model's ``h(x, 1)``)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim == 1:
        s = np.stack([np.zeros_like(s), s], axis=1)
    if s.ndim != 2 or s.shape[1] < 2 or not np.all(np.isfinite(s)):
        raise ValueError("scores must be a finite (n, n_labels >= 2) matrix, or a 1-d array of binary scores")
    y = _labels(y, s.shape[0], s.shape[1])
    own = s[np.arange(len(y)), y]
    others = s.copy()
    others[np.arange(len(y)), y] = -np.inf
    return own - others.max(axis=1)


def linear_lipschitz(X, n_classes: int = 2, *, single_vector: bool = False) -> np.ndarray:
    """``L_{x,y}`` of a linear model on rows ``X`` (include a constant column for an intercept).

    ``single_vector=True``: one weight vector for two labels (``h(x,1) = w·x``): ``‖x‖``;
    otherwise one weight row per label (``h(x,y) = W_y·x``): ``√2‖x‖``.
    """
    norms = np.linalg.norm(check_features(X, "X"), axis=1)
    if single_vector:
        if n_classes != 2:
            raise ValueError("single_vector models have two labels; pass n_classes=2")
        return norms
    return np.sqrt(2.0) * norms


def module_scores(model: torch.nn.Module, X, *, batch_size: int = 4096) -> np.ndarray:
    """The module's label scores (logits) on ``X``, as float64 numpy."""
    param = next(model.parameters())
    Xt = torch.as_tensor(np.asarray(X), dtype=param.dtype, device=param.device)
    with torch.no_grad():
        return torch.cat([model(Xt[i:i + batch_size]) for i in range(0, len(Xt), batch_size)]).double().cpu().numpy()


def module_lipschitz(model: torch.nn.Module, X, y, *, batch_size: int = 1024) -> np.ndarray:
    """Local ``L_{x,y} = max_{y'≠y} ‖∇_θ (h(x,y) − h(x,y'))‖`` of any differentiable module (``torch.func``).

    Exact (and global) for modules linear in their parameters; for others it is the
    local constant at the module's parameters.
    """
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    if not params:
        raise ValueError("the module has no trainable parameters; its margin does not depend on any")
    first = next(iter(params.values()))
    Xt = torch.as_tensor(np.asarray(X), dtype=first.dtype, device=first.device)
    n_labels = module_scores(model, np.asarray(X)[:1]).shape[1]
    codes = torch.as_tensor(_labels(y, len(Xt), n_labels), device=first.device)

    def differences(x, label):
        # gradient of every label's score, then of h(x,y) − h(x,y') for all y'
        jac = torch.func.jacrev(lambda p: torch.func.functional_call(model, p, (x[None],))[0])(params)
        flat = torch.cat([j.reshape(n_labels, -1) for j in jac.values()], dim=1)  # (labels, P)
        diff = (flat[label][None, :] - flat).norm(dim=1)
        return torch.where(torch.arange(n_labels, device=flat.device) == label, 0.0, diff).max()

    out = [torch.vmap(differences)(Xt[i:i + batch_size], codes[i:i + batch_size])
           for i in range(0, len(Xt), batch_size)]
    return torch.cat(out).double().cpu().numpy()


def normalized_margins(margins, lipschitz) -> np.ndarray:
    """``|ρ| / L`` per example: how far (in parameter norm) a model may move before that prediction can flip.

    ``L = 0`` (a margin no model nearby can change) gives ``+inf``.
    """
    rho = np.abs(np.asarray(margins, dtype=np.float64))
    lip = np.asarray(lipschitz, dtype=np.float64)
    if rho.shape != lip.shape:
        raise ValueError(f"margins has shape {rho.shape} but lipschitz has {lip.shape}; pass one of each per row")
    if np.any(lip < 0) or not np.all(np.isfinite(lip)):
        raise ValueError("lipschitz constants must be finite and non-negative")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lip > 0, rho / np.where(lip > 0, lip, 1.0), np.inf)
