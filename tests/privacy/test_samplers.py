"""Secure samplers (dpfair.privacy.samplers): exact laws, grid, fresh coins, validation, accounting.

The draws come from the OS and cannot be seeded, so every statistical check is a
test with a fixed false-failure rate: mean and variance within 6 standard
errors (two-sided ≈ 2e-9 each under normality), chi-square / Kolmogorov–Smirnov
p-values above 1e-6 against the exact law. About 40 such checks: a spurious
failure of the file has probability below 1e-4.
"""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

from dpfair.privacy import samplers as S
from dpfair.privacy.samplers import exact as coins

P_MIN = 1e-6
N_SE = 6.0


# ---- helpers ---------------------------------------------------------------------------------------------


def assert_moments(x, mean, var, mu4):
    """Sample mean and variance within N_SE standard errors (SE of the variance from the 4th central moment)."""
    n = x.size
    assert abs(x.mean() - mean) < N_SE * math.sqrt(var / n), (x.mean(), mean)
    assert abs(x.var() - var) < N_SE * math.sqrt((mu4 - var * var) / n), (x.var(), var)


def chisquare_p(counts, probs):
    """Chi-square p-value of integer counts against probabilities, pooling cells with expectation < 5."""
    counts, probs = np.asarray(counts, dtype=float), np.asarray(probs, dtype=float)
    n = counts.sum()
    exp = probs / probs.sum() * n
    obs_cells, exp_cells, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(counts, exp):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            obs_cells.append(acc_o)
            exp_cells.append(acc_e)
            acc_o = acc_e = 0.0
    obs_cells[-1] += acc_o
    exp_cells[-1] += acc_e
    return stats.chisquare(obs_cells, exp_cells).pvalue


def dgauss_pmf(sigma, support):
    z = np.arange(-support, support + 1)
    w = np.exp(-z.astype(float) ** 2 / (2 * sigma * sigma))
    return z, w / w.sum()


def dlap_cdf(z, s):
    """CDF of P(y) ∝ exp(-|y|/s) on the integers, vectorised over integer z."""
    q = math.exp(-1.0 / s)
    z = np.asarray(z, dtype=float)
    return np.where(z < 0, q ** (-z) / (1 + q), 1 - q ** (z + 1) / (1 + q))


def counts_on(x, z):
    """Counts of x on the integer support z (everything outside goes to the end cells)."""
    idx = np.clip(x - z[0], 0, len(z) - 1)
    return np.bincount(idx, minlength=len(z))


def binned_chisquare_p(x, cdf_at_edges, edges):
    """Chi-square over bins (edges[i], edges[i+1]] with exact CDF values at the (integer) edges."""
    probs = np.diff(np.concatenate([[0.0], cdf_at_edges, [1.0]]))
    idx = np.searchsorted(edges, x, side="left")  # x ≤ edges[0] → bin 0, ..., x > edges[-1] → last bin
    return chisquare_p(np.bincount(idx, minlength=len(probs)), probs)


# ---- uniforms and integers ------------------------------------------------------------------------------------------


def test_uniform_is_an_exact_dyadic_uniform():
    u = S.secure_uniform((1000, 1000))
    assert u.shape == (1000, 1000) and u.dtype == np.float64
    assert u.min() >= 0.0 and u.max() < 1.0
    k = u * 2.0**53
    assert np.array_equal(k, np.floor(k))  # multiples of 2^-53
    assert_moments(u, 0.5, 1 / 12, 1 / 80)


def test_integers_are_uniform_and_in_range():
    x = S.secure_integers(-3, 4, 70_000)
    assert x.dtype == np.int64 and x.min() >= -3 and x.max() <= 3
    assert chisquare_p(np.bincount(x + 3, minlength=7), np.ones(7)) > P_MIN
    full = S.secure_integers(-(2**63), 2**63, 1000)  # the whole int64 range
    assert full.dtype == np.int64 and (full < 0).any() and (full > 0).any()
    top = S.secure_integers(2**63 - 3, 2**63, 3000)
    assert set(top.tolist()) == {2**63 - 3, 2**63 - 2, 2**63 - 1}
    assert np.array_equal(S.secure_integers(5, 6, 10), np.full(10, 5))


@pytest.mark.parametrize("low, high", [(0, 0), (3, 1), (0.0, 2), (True, 3), (0, 2**63 + 1), (-(2**63) - 1, 0)])
def test_integers_reject_bad_bounds(low, high):
    with pytest.raises(ValueError):
        S.secure_integers(low, high, 3)


# ---- the exact Bernoulli(e^-r) primitive ------------------------------------------------------------------------


def test_numpy_log_is_far_inside_the_fast_path_margin():
    # The fast path trusts float64 -ln(u) to a few ulp; its margin is 2^-40·(1 + r). Check numpy's log
    # against a correctly rounded value on the very points it is evaluated at: (p + 1)·2^-bits.
    ctx = decimal.Context(prec=40)
    for bits, words in [(53, coins.random_u64(3000) >> np.uint64(11)), (32, coins.random_u32(3000))]:
        p = words.astype(np.float64)
        u = np.concatenate([(p + 1.0) * 2.0**-bits, [2.0**-bits, 1.0 - 2.0**-bits]])
        fast = -np.log(u)
        exact = np.array([float(-ctx.ln(decimal.Decimal(float(v)))) for v in u])
        err = np.abs(fast - exact)
        assert np.all(err <= 2.0**-50 * np.maximum(np.abs(exact), 2.0**-60)), err.max()


@pytest.mark.parametrize("r", [Fraction(1, 3), Fraction(7, 2), Fraction(1, 10**6), Fraction(2**70 + 1, 3 * 2**40)])
def test_exact_path_is_a_bernoulli_of_exp_minus_r(r):
    # With no prefix bits the decision is made entirely on the exact (decimal, refined) path.
    n = 5_000
    hits = sum(coins._LazyUniform(0, 0).less_than_exp_neg(r) for _ in range(n))
    p = math.exp(-float(r))
    assert stats.binomtest(hits, n, p).pvalue > P_MIN


def test_exact_path_edges():
    assert coins._LazyUniform(0, 0).less_than_exp_neg(Fraction(0))  # U < 1
    assert not coins._LazyUniform(1, 1).less_than_exp_neg(Fraction(1))  # U ≥ 1/2 > e^-1
    assert coins._LazyUniform(0, 2).less_than_exp_neg(Fraction(1))  # U < 1/4 < e^-1
    assert not coins._LazyUniform(1, 64).less_than_exp_neg(Fraction(10**9))  # far tail: no decimal needed
    assert not coins._LazyUniform(0, 53).less_than_exp_neg(Fraction(10**12))  # zero prefix: refined, not exp(-1e12)
    with pytest.raises(ValueError):
        coins._LazyUniform(0, 0).less_than_exp_neg(Fraction(-1))


def test_samplers_stay_exact_when_most_decisions_take_the_exact_path(monkeypatch):
    # A huge margin sends a large share of the decisions to the exact path; the laws must not move.
    calls = {"n": 0}
    exact = coins._LazyUniform.less_than_exp_neg

    def counted(self, r):
        calls["n"] += 1
        return exact(self, r)

    monkeypatch.setattr(coins, "_TOL", 2.0**-12)
    monkeypatch.setattr(coins._LazyUniform, "less_than_exp_neg", counted)
    n = 20_000
    x = S.secure_discrete_laplace(n, 2.5)
    z = np.arange(-60, 61)
    probs = np.diff(np.concatenate([[0.0], dlap_cdf(z[:-1], 2.5), [1.0]]))
    assert chisquare_p(counts_on(x, z), probs) > P_MIN
    y = S.secure_discrete_gaussian(n, 1.5)
    z, pmf = dgauss_pmf(1.5, 20)
    assert chisquare_p(counts_on(y, z), pmf) > P_MIN
    assert calls["n"] > 500  # the exact path really was exercised


# ---- discrete laws ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.4, 1.5, 3.7])
def test_discrete_gaussian_matches_its_pmf_small_sigma(sigma):
    n = 200_000
    x = S.secure_discrete_gaussian(n, sigma)
    assert x.dtype == np.int64 and x.shape == (n,)
    z, pmf = dgauss_pmf(sigma, int(12 * sigma) + 3)
    assert chisquare_p(counts_on(x, z), pmf) > P_MIN
    var = float((pmf * z**2).sum())
    assert_moments(x.astype(float), 0.0, var, float((pmf * z**4).sum()))


def test_discrete_gaussian_matches_its_cdf_large_sigma():
    # sigma = 12345.678: t = 12346, the Laplace candidates use the block split (L = 2)
    sigma, n = 12345.678, 200_000
    x = S.secure_discrete_gaussian(n, sigma)
    z, pmf = dgauss_pmf(sigma, int(13 * sigma))
    cdf = np.cumsum(pmf)
    edges = np.unique(np.round(stats.norm.ppf(np.linspace(0.01, 0.99, 60)) * sigma).astype(np.int64))
    assert binned_chisquare_p(x, cdf[edges - z[0]], edges) > P_MIN
    assert_moments(x.astype(float), 0.0, sigma**2, 3 * sigma**4)


@pytest.mark.parametrize("scale", [0.3, 2.5, 7.9])
def test_discrete_laplace_matches_its_pmf_small_scale(scale):
    n = 200_000
    x = S.secure_discrete_laplace(n, scale)
    assert x.dtype == np.int64
    z = np.arange(-int(25 * scale) - 3, int(25 * scale) + 4)
    probs = np.diff(np.concatenate([[0.0], dlap_cdf(z[:-1], scale), [1.0]]))
    assert chisquare_p(counts_on(x, z), probs) > P_MIN
    q = math.exp(-1 / scale)
    var = 2 * q / (1 - q) ** 2
    assert abs(x.mean()) < N_SE * math.sqrt(var / n)


def test_discrete_laplace_matches_its_cdf_large_scale():
    # scale = 54321.5: block split with L = 8 and the 32-bit acceptance of the low part
    s, n = 54321.5, 200_000
    x = S.secure_discrete_laplace(n, s)
    edges = np.unique(np.round(stats.laplace.ppf(np.linspace(0.01, 0.99, 60)) * s).astype(np.int64))
    assert binned_chisquare_p(x, dlap_cdf(edges, s), edges) > P_MIN
    q = math.exp(-1 / s)
    var = 2 * q / (1 - q) ** 2
    assert_moments(x.astype(float), 0.0, var, 6 * var**2)  # Laplace: mu4 = 6 var^2


# ---- real-valued noise on the grid -----------------------------------------------------------------------------------


def test_secure_gaussian_is_gaussian_on_the_default_grid():
    std = 2.5
    x = S.secure_gaussian(1_000_000, std)
    g = S.default_granularity(std)
    assert g == 2.0**-29 and x.dtype == np.float64 and x.shape == (1_000_000,)
    assert np.array_equal(x / g, np.rint(x / g))  # every value on the grid
    assert_moments(x, 0.0, std**2, 3 * std**4)
    assert stats.kstest(x, stats.norm(scale=std).cdf).pvalue > P_MIN


def test_secure_laplace_is_laplace_on_the_default_grid():
    b = 0.3
    x = S.secure_laplace((1000, 1000), b)
    g = S.default_granularity(b)
    assert x.shape == (1000, 1000) and x.dtype == np.float64
    assert np.array_equal(x / g, np.rint(x / g))
    assert_moments(x.ravel(), 0.0, 2 * b * b, 24 * b**4)
    assert stats.kstest(x.ravel(), stats.laplace(scale=b).cdf).pvalue > P_MIN


def test_custom_granularity_gives_the_discrete_law_on_that_grid():
    g = 2.0**-3
    x = S.secure_gaussian(200_000, 1.0, granularity=g)  # N_Z(0, 8^2) scaled by 1/8
    k = x / g
    assert np.array_equal(k, np.rint(k))
    z, pmf = dgauss_pmf(8.0, 110)
    assert chisquare_p(counts_on(k.astype(np.int64), z), pmf) > P_MIN
    y = S.secure_laplace(1000, 3.0, granularity=0.5)
    assert np.array_equal(y * 2, np.rint(y * 2))


@pytest.mark.parametrize("draw", [
    lambda: S.secure_gaussian(1000, 1.0), lambda: S.secure_laplace(1000, 1.0), lambda: S.secure_uniform(1000),
    lambda: S.secure_discrete_gaussian(1000, 50.0), lambda: S.secure_discrete_laplace(1000, 50.0),
    lambda: S.secure_integers(0, 2**40, 1000),
])
def test_two_calls_never_return_the_same_array(draw):
    assert not np.array_equal(draw(), draw())


@pytest.mark.parametrize("shape, expected", [(5, (5,)), ((2, 3), (2, 3)), ((), ()), (0, (0,)), ((4, 0), (4, 0)),
                                             (np.int64(3), (3,))])
def test_shapes(shape, expected):
    for draw in (lambda s: S.secure_gaussian(s, 1.0), lambda s: S.secure_laplace(s, 1.0), S.secure_uniform,
                 lambda s: S.secure_discrete_gaussian(s, 2.0)):
        out = draw(shape)
        assert out.shape == expected


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "x", None])
def test_bad_scale_is_a_clear_value_error(bad):
    for draw in (S.secure_gaussian, S.secure_laplace, S.secure_discrete_gaussian, S.secure_discrete_laplace):
        with pytest.raises(ValueError, match="positive finite"):
            draw(10, bad)


@pytest.mark.parametrize("shape", [-1, (2, -1), 2.5, (2.0,), True, "3"])
def test_bad_shape_is_a_value_error(shape):
    with pytest.raises(ValueError, match="shape"):
        S.secure_gaussian(shape, 1.0)


@pytest.mark.parametrize("granularity", [0.3, -0.5, 0.0, float("nan"), 2.0**-1020])
def test_granularity_must_be_a_power_of_two(granularity):
    with pytest.raises(ValueError, match="granularity"):
        S.secure_gaussian(10, 1.0, granularity=granularity)


def test_grid_too_fine_or_coarse_for_the_scale_is_refused():
    with pytest.raises(ValueError, match="grid steps"):
        S.secure_gaussian(10, 1.0, granularity=2.0**-50)
    with pytest.raises(ValueError, match="grid steps"):
        S.secure_laplace(10, 1.0, granularity=2.0**40)
    with pytest.raises(ValueError, match="sigma"):
        S.secure_discrete_gaussian(10, 2.0**50)


# ---- releases ---------------------------------------------------------------------------------------------------


def test_round_to_grid():
    assert np.array_equal(S.round_to_grid([0.3, -1.7, 0.25, 0.75, 1e300], 0.5), [0.5, -1.5, 0.0, 1.0, 1e300])
    with pytest.raises(ValueError, match="finite"):
        S.round_to_grid([1.0, np.nan], 0.5)
    with pytest.raises(ValueError, match="power of two"):
        S.round_to_grid([1.0], 0.1)


def test_add_secure_gaussian_is_the_rounded_sum_plus_grid_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 40)) * 7.0
    std = 1.3
    g = S.default_granularity(std)
    out = S.add_secure_gaussian(x, std)
    assert out.shape == x.shape and out.dtype == np.float64
    noise = (out - S.round_to_grid(x, g)) / g  # exact: both terms on the grid, far below 2^53 steps
    assert np.array_equal(noise, np.rint(noise))
    assert abs((noise * g).std() - std) < N_SE * std / math.sqrt(2 * x.size)
    with pytest.raises(ValueError, match="finite"):
        S.add_secure_gaussian([1.0, np.inf], std)


def test_add_secure_noise_returns_the_tensor_kind_it_was_given():
    t = torch.linspace(-3, 3, 5000, dtype=torch.float32)
    out = S.add_secure_gaussian(t, 0.5)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == t.shape
    assert abs((out - t).double().std().item() - 0.5) < N_SE * 0.5 / math.sqrt(2 * 5000)
    lap = S.add_secure_laplace(t.double(), 0.5)
    assert isinstance(lap, torch.Tensor) and lap.dtype == torch.float64
    g = S.default_granularity(0.5)
    assert torch.equal(lap / g, torch.round(lap / g))
    with pytest.raises(ValueError, match="floating"):
        S.add_secure_gaussian(torch.arange(3), 1.0)


# ---- accounting ---------------------------------------------------------------------------------------------------


def test_grid_sensitivity_charges_both_neighbours_rounding():
    g = 2.0**-20
    assert S.grid_sensitivity(1.0, g, 10**6, norm=2) == pytest.approx(1.0 + g * 1000, rel=1e-15)
    assert S.grid_sensitivity(1.0, g, 10**6, norm=2) >= 1.0 + g * 1000
    assert S.grid_sensitivity(2.0, g, 100, norm=1) >= 2.0 + 100 * g
    # near the worst case: per coordinate a − b = −(2 + 2^-40)·g while round(a) − round(b) = −3g
    a, b = np.full(4, g / 2 * (1 - 2**-40)), np.full(4, -g / 2 * (1 - 2**-40)) + g * 3
    ra, rb = S.round_to_grid(a, g), S.round_to_grid(b, g)
    assert np.linalg.norm(ra - rb) <= S.grid_sensitivity(np.linalg.norm(a - b), g, 4)
    with pytest.raises(ValueError):
        S.grid_sensitivity(1.0, g, 0)
    with pytest.raises(ValueError):
        S.grid_sensitivity(1.0, g, 10, norm=3)


def test_gaussian_accounting_and_calibration():
    z, delta, k = 1.1, 1.0, 10**6
    acc = S.calibrate_secure_gaussian(z, delta, k)
    assert acc.noise_multiplier >= z
    assert acc.std / (z * delta) - 1 < 1e-5  # the rounding charge is tiny on the default grid
    assert acc.granularity == S.default_granularity(acc.std)
    assert acc.sensitivity >= delta + acc.granularity * 1000
    assert acc.accounting_std <= acc.std and acc.accounting_std / acc.std > 1 - 1e-15
    assert acc.log_ratio_slack == 0.0  # 3k·ε_τ with τ = 8 is below 1e-540
    assert acc.zcdp_rho == pytest.approx(acc.sensitivity**2 / (2 * acc.std**2))
    again = S.secure_gaussian_accounting(acc.std, delta, k, granularity=acc.granularity)
    assert again == acc
    coarse = S.secure_gaussian_accounting(1.0, 1.0, 100, granularity=2.0**-4)  # 16 grid steps: τ = 8 still fits
    assert coarse.accounting_std == pytest.approx(math.sqrt(1 - (8 / 16) ** 2), rel=1e-12)


def test_laplace_accounting_and_calibration():
    acc = S.calibrate_secure_laplace(2.0, 1.0, 50)
    assert acc.noise_multiplier >= 2.0 and acc.epsilon <= 0.5
    assert acc.scale / 2.0 - 1 < 1e-6
    plain = S.secure_laplace_accounting(3.0, 1.0, 10, granularity=2.0**-10)
    assert plain.epsilon >= (1.0 + 10 * 2.0**-10) / 3.0


# ---- randomized response and the exponential mechanism ---------------------------------------------------------


def test_randomized_response_is_exact():
    k, eps, n = 4, 1.0, 100_000
    out = S.secure_randomized_response(np.full(n, 2), eps, k)
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    probs = np.full(k, (1 - keep) / (k - 1))
    probs[2] = keep
    assert chisquare_p(np.bincount(out, minlength=k), probs) > P_MIN
    values = np.array([[0, 1], [2, 3]])
    assert np.array_equal(S.secure_randomized_response(values, math.inf, k), values)
    uniform = S.secure_randomized_response(np.zeros(40_000, dtype=int), 0.0, 3)
    assert chisquare_p(np.bincount(uniform, minlength=3), np.ones(3)) > P_MIN
    for bad in [dict(values=[0, 4], epsilon=1.0, k=4), dict(values=[0.5], epsilon=1.0, k=4),
                dict(values=[0], epsilon=-1.0, k=4), dict(values=[0], epsilon=1.0, k=1)]:
        with pytest.raises(ValueError):
            S.secure_randomized_response(**bad)


def test_exponential_mechanism_is_exact():
    w = np.array([0.0, 1.0, -np.inf, 2.0, -3.0])
    x = S.secure_exponential_mechanism(w, size=100_000)
    assert x.dtype == np.int64 and not (x == 2).any()
    probs = np.exp(w - w.max())
    assert chisquare_p(np.bincount(x, minlength=5), probs) > P_MIN
    assert isinstance(S.secure_exponential_mechanism([0.0, 5.0]), int)
    for bad in ([], [np.nan, 1.0], [np.inf], [-np.inf, -np.inf], [[0.0, 1.0]]):
        with pytest.raises(ValueError):
            S.secure_exponential_mechanism(bad)
