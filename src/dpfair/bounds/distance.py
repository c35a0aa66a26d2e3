"""How far a private model lies from the non-private optimum, with probability 1 − ζ (Mangold et al., Sec. 4.1).

**Output perturbation** releases ``h_priv = π(h* + N(0, σ² I_p))`` with π the projection
on a convex set holding h* (non-expansive), so ``‖h_priv − h*‖ ≤ σ·‖N(0, I_p)‖`` and

* exactly: ``‖h_priv − h*‖² ≤ σ² · χ²_p(1 − ζ)`` (the chi-square quantile) —
  :func:`output_perturbation_radius`, the default;
* Lemma 4.1 (App. E, a Chernoff bound on the same chi-square): ``‖h_priv − h*‖² ≤ 4pσ² log(2/ζ)``
  (``method="lemma_4_1"``); with the paper's calibration ``σ² = 8Λ² log(1.25/δ)/(μ²n²ε²)``
  (:func:`paper_noise_std`) it reads ``32pΛ² log(1.25/δ) log(2/ζ)/(μ²n²ε²)``.

Our estimators calibrate σ on the accountant (smaller than the paper's closed
form); both formulas take the σ actually used.

**DP-SGD** (Lemma 4.2, App. F), re-derived for the DP-SGD we run: Poisson
sampling at rate q, expected batch B = qn, no clipping active (bound C ≥ Λ, the
loss's Lipschitz constant, so every per-example gradient passes unchanged),
Gaussian noise of multiplier σ on the sum, division by B, weight decay μ (f is
μ-strongly convex and β-smooth, the data losses convex), plain SGD with step γ ≤ 1/β.
The stochastic gradient is unbiased with variance at most Λ²/B and the noise adds
``pσ²C²/B²``; App. F's argument (strong convexity, then ``‖∇f‖² ≤ 2β(f − f*)``)
gives ``E‖h_{t+1} − h*‖² ≤ (1 − γμ)‖h_t − h*‖² + γ²V`` with ``V = Λ²/B + pσ²C²/B²``, hence

    E‖h_T − h*‖² ≤ (1 − γμ)^T D₀² + γV/μ,      D₀ ≥ ‖h_0 − h*‖ (e.g. ‖h_0‖ + Λ/μ),

and Markov's inequality turns it into ``‖h_T − h*‖² ≤ (…)/ζ`` with probability 1 − ζ
(the paper's 1/ζ, as in its Lemma 4.2). Where an assumption fails (clipping active,
momentum or Adam, a non-convex model) :func:`dpsgd_radius` says which.
"""

from __future__ import annotations

import math

from scipy.stats import chi2

from dpfair.utils.validation import check_positive

__all__ = ["dpsgd_radius", "output_perturbation_radius", "paper_noise_std"]


def _zeta(probability) -> float:
    p = float(probability)
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1) (the certificate holds with probability 1 − ζ), "
                         f"got {probability!r}")
    return 1.0 - p


def output_perturbation_radius(noise_std, n_params, probability=0.99, *, method: str = "chi2") -> float:
    """``d`` with ``P(‖h_priv − h*‖ ≤ d) ≥ probability`` for Gaussian output perturbation."""
    sigma = check_positive(noise_std, "noise_std", allow_zero=True)
    p = check_positive(n_params, "n_params", integer=True)
    zeta = _zeta(probability)
    if method == "chi2":
        return sigma * math.sqrt(chi2.ppf(1.0 - zeta, p))
    if method == "lemma_4_1":
        return sigma * math.sqrt(4.0 * p * math.log(2.0 / zeta))
    raise ValueError(f"method must be 'chi2' (exact quantile) or 'lemma_4_1' (the paper's bound), got {method!r}")


def paper_noise_std(lipschitz, strong_convexity, n, epsilon, delta) -> float:
    """The paper's σ for output perturbation: ``√(8Λ² log(1.25/δ)) / (μ n ε)`` (classical Gaussian mechanism)."""
    lam = check_positive(lipschitz, "lipschitz")
    mu = check_positive(strong_convexity, "strong_convexity")
    n = check_positive(n, "n")
    eps = check_positive(epsilon, "epsilon")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return math.sqrt(8.0 * lam**2 * math.log(1.25 / delta)) / (mu * n * eps)


def dpsgd_radius(*, noise_multiplier, clip, lipschitz, batch_size, n_params, steps, learning_rate,
                 strong_convexity, smoothness, initial_distance, probability=0.99) -> float:
    """``d`` with ``P(‖h_T − h*‖ ≤ d) ≥ probability`` for unclipped DP-SGD on a strongly convex objective.

    See the module docstring for the derivation; raises ``ValueError`` naming the
    assumption that does not hold (``clip < lipschitz``: clipping changes the optimum;
    ``learning_rate > 1/smoothness`` or ``learning_rate·strong_convexity > 1``).
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    c = check_positive(clip, "clip")
    lam = check_positive(lipschitz, "lipschitz")
    b = check_positive(batch_size, "batch_size")
    p = check_positive(n_params, "n_params", integer=True)
    t = check_positive(steps, "steps", integer=True)
    gamma = check_positive(learning_rate, "learning_rate")
    mu = check_positive(strong_convexity, "strong_convexity")
    beta = check_positive(smoothness, "smoothness")
    d0 = check_positive(initial_distance, "initial_distance", allow_zero=True)
    zeta = _zeta(probability)
    if c < lam:
        raise ValueError(f"clipping bound {c:g} is below the loss's Lipschitz constant {lam:g}: clipping may be "
                         "active, so DP-SGD does not converge to h* and Lemma 4.2 does not apply; raise "
                         "max_grad_norm to at least the Lipschitz constant (or bound the features' norm)")
    if gamma * beta > 1.0 or gamma * mu > 1.0:
        raise ValueError(f"learning rate {gamma:g} exceeds 1/β = {1 / beta:g} (or 1/μ = {1 / mu:g}): Lemma 4.2 needs "
                         "a step size at most the inverse smoothness; lower learning_rate")
    variance = lam**2 / b + p * (sigma * c) ** 2 / b**2
    expected = (1.0 - gamma * mu) ** t * d0**2 + gamma * variance / mu
    return math.sqrt(expected / zeta)
