"""From the evaluation sample to the population: Lemma 3.4 of Mangold et al. (App. D, the independent case).

A certificate computed on n evaluation rows bounds the gap between the two
models' *empirical* fairness. When the models do not depend on those rows
(held-out data), App. D's first case adds, with probability 1 − δ over the
sample, provided ``n ≥ 8 log((2K+1)/δ) / min_{k'} p_{k'}``: ::

    |F_k(h) − F̂_k(h)| ≤ α_C + Σ_{k'} |Ĉ^{k'}_k| α_{k'},
    α_{k'} = √(log(2(2K+1)/δ) / (n p_{k'})),    α_C = √(log(B₃(2K+1)/δ) / (B₄ n)),

where ``P(Σ_{k'} |C^{k'}_k − Ĉ^{k'}_k| > α) ≤ B₃ exp(−B₄ α² n)`` is the notion's
concentration of its coefficients. The defaults ``B₃ = 2^K'``, ``B₄ = 1/2`` are the
Bretagnolle–Huber–Carol inequality for the L1 deviation of a K'-cell
multinomial: exact for accuracy parity (``C = I − 1pᵀ``); for the conditional
notions (coefficients ``P(S | Y = y)``) pass ``B₄ = min_y P(Y = y)/2``. The
group shares ``p_{k'}`` are the population's; we use the sample's (stated as an
approximation in the certificate's notes).
"""

from __future__ import annotations

import math

import numpy as np

from dpfair.utils.validation import check_positive

__all__ = ["finite_sample_term"]


def finite_sample_term(coefficients, group_shares, n, delta, *, b3=None, b4=0.5) -> np.ndarray:
    """Lemma 3.4's additive term for each measure (rows of ``coefficients`` = Ĉ, columns the accuracy groups)."""
    C = np.abs(np.atleast_2d(np.asarray(coefficients, dtype=np.float64)))
    p = np.asarray(group_shares, dtype=np.float64).reshape(-1)
    if C.shape[1] != p.size:
        raise ValueError(f"coefficients have {C.shape[1]} columns but {p.size} group shares were given")
    if np.any(p <= 0) or np.any(p > 1):
        raise ValueError("group_shares must be in (0, 1]; drop empty groups first")
    n = check_positive(n, "n", integer=True)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta (the failure probability over the sample) must be in (0, 1), got {delta!r}")
    k = C.shape[0]
    b3 = 2.0 ** p.size if b3 is None else check_positive(b3, "b3")
    b4 = check_positive(b4, "b4")
    needed = 8.0 * math.log((2 * k + 1) / delta) / p.min()
    if n < needed:
        raise ValueError(f"Lemma 3.4 needs n >= 8 log((2K+1)/δ) / min p = {needed:.0f} evaluation rows, got {n}; "
                         "evaluate on more rows or raise delta")
    alpha_groups = np.sqrt(math.log(2 * (2 * k + 1) / delta) / (n * p))
    alpha_c = math.sqrt(math.log(b3 * (2 * k + 1) / delta) / (b4 * n))
    return alpha_c + C @ alpha_groups
