"""Releases stay within their declared sensitivity on random neighbours (Hypothesis).

Covers: per-example and per-layer clipping bounds, the ghost path, losses that depend on the
sensitive attribute (replace-one), PF-LD's three releases with unknown groups, the post-processing counts, the
brute-force helpers themselves, and :class:`~dpfair.privacy.Release` adding noise that does not depend on the data.

A release ``noisy_sum(total, bound)`` is correct when ``total`` moves by at most ``bound`` when a record comes or
goes (add/remove, the record unit) and by at most ``2·bound`` when one person's s changes (replace-one, the
sensitive unit): the bound convention of :mod:`dpfair.privacy.units`.
"""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.algorithms._jagielski import cell_counts
from dpfair.algorithms.pfld import constraint_cells, dual_sums, group_counts, per_sample_values, primal_sum
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.nn import MLP, clipped_gradient_sum, clipped_sum
from dpfair.privacy import (
    Part,
    PrivacyLedger,
    Release,
    SecretRandom,
    max_neighbour_distance,
    neighbours,
    reproducible_noise,
)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
MODELS = settings(max_examples=12, deadline=None, derandomize=True)  # a model per example, n+1 gradient sums
TOL = 1e-9  # float64 throughout

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


def _matrix(draw, rows, cols, elements=finite):
    return np.array(draw(st.lists(st.lists(elements, min_size=cols, max_size=cols), min_size=rows, max_size=rows)),
                    dtype=np.float64).reshape(rows, cols)


@st.composite
def tabular(draw, max_rows=8, max_groups=3):
    """``(X, y, s, k)``: a few rows with large features (so clipping binds), binary y, groups ``0..k-1``."""
    n = draw(st.integers(2, max_rows))
    k = draw(st.integers(2, max_groups))
    X = _matrix(draw, n, 3, st.floats(-20, 20))
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.int64)
    s = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), dtype=np.int64)
    return X, y, s, k


def _norm(value) -> float:
    if isinstance(value, dict):
        return math.sqrt(sum(_norm(v) ** 2 for v in value.values()))
    return float(torch.as_tensor(value, dtype=torch.float64).norm())


# ---- clipping ---------------------------------------------------------------------------------------------------

@st.composite
def per_sample_grads(draw):
    """Per-example gradients of two or three "layers", per-example bounds, and possibly a layer partition (at least
    two examples: removing the only one hits the empty-batch bug marked below)."""
    n = draw(st.integers(2, 10))
    shapes = draw(st.lists(st.sampled_from([(3,), (2, 2), (1,)]), min_size=2, max_size=3))
    scale = draw(st.sampled_from([0.0, 1e-3, 1.0, 1e3]))  # all-zero gradients, tiny, moderate, huge
    grads = {f"p{j}": torch.tensor(_matrix(draw, n, math.prod(shape)) * scale).reshape(n, *shape)
             for j, shape in enumerate(shapes)}
    bounds = torch.tensor(draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n)), dtype=torch.float64)
    layers = draw(st.sampled_from([None, [[name] for name in grads], [list(grads)]]))
    return grads, bounds, layers


@SETTINGS
@given(per_sample_grads())
def test_removing_an_example_moves_the_clipped_sum_by_at_most_its_bound(case):
    """clipped_sum scales g_i by min(1, C_i/‖g_i‖) (per layer to C_i/√m with m layers), so example i adds at most C_i
    in L2 and removing it moves the sum by at most C_i, whatever the gradients (zero, tiny, huge) and the other
    examples' bounds: the add/remove sensitivity of every DP-SGD step, group-aware and per-layer clipping included."""
    grads, bounds, layers = case
    n = len(bounds)
    full, norms = clipped_sum(grads, bounds, layers)
    assert torch.allclose(norms, torch.sqrt(sum(g.reshape(n, -1).pow(2).sum(1) for g in grads.values())))
    for i in range(n):
        keep = torch.arange(n) != i
        part, _ = clipped_sum({k: g[keep] for k, g in grads.items()}, bounds[keep], layers)
        moved = _norm({k: full[k] - part[k] for k in full})
        assert moved <= float(bounds[i]) * (1 + 1e-9) + TOL
        if layers is not None and len(layers) > 1:  # and each layer's part by at most C_i/√m
            for layer in layers:
                moved_layer = _norm({k: full[k] - part[k] for k in layer})
                assert moved_layer <= float(bounds[i]) / math.sqrt(len(layers)) * (1 + 1e-9) + TOL


@pytest.mark.parametrize("layers", [None, [["w"], ["b"]]])
def test_removing_the_only_example_leaves_the_zero_sum(layers):
    """The add/remove neighbour of a one-example batch is the empty batch, whose clipped sum is 0 (the sum over no
    one). A plain test, not a Hypothesis one: it fails for every input, and a failing @given writes a patch file."""
    grads = {"w": torch.full((1, 2, 2), 3.0, dtype=torch.float64), "b": torch.ones(1, 2, dtype=torch.float64)}
    bounds = torch.tensor([0.5], dtype=torch.float64)
    full, _ = clipped_sum(grads, bounds, layers)
    assert _norm(full) <= 0.5 * (1 + 1e-9)
    empty, norms = clipped_sum({k: g[:0] for k, g in grads.items()}, bounds[:0], layers)
    assert norms.shape == (0,) and all(torch.equal(empty[k], torch.zeros_like(full[k])) for k in full)


def _group_weighted_ce(logits, target):
    """A loss of one example that depends on its group: (1 + s)·CE, as group-reweighted objectives do."""
    y, s = target
    return ((1.0 + s) * F.cross_entropy(logits, y, reduction="none")).sum()


@MODELS
@given(tabular(), st.floats(0.05, 2.0), st.sampled_from(["vmap", "ghost"]), st.integers(0, 2**16))
def test_the_clipped_gradient_sum_is_within_its_bound_for_both_units_and_methods(data, clip, method, seed):
    """An MLP made of nn.Linear (so the ghost path is exact) and a loss that depends on s. Record unit: removing any
    record moves the clipped gradient sum by at most C. Sensitive unit: changing one person's s changes only their
    own clipped gradient, both versions of norm ≤ C, so the sum moves by at most 2C. Both methods."""
    X, y, s, k = data
    model = MLP(3, 2, hidden=(4,), seed=seed).double()

    def step_sum(X, y, s):
        target = (torch.as_tensor(y), torch.as_tensor(s, dtype=torch.float64))
        summed, _ = clipped_gradient_sum(model, _group_weighted_ce, torch.as_tensor(X), target, clip, method)
        return summed

    assert max_neighbour_distance(step_sum, X, y, s, "record") <= clip * (1 + 1e-7) + TOL
    assert max_neighbour_distance(step_sum, X, y, s, "sensitive", n_groups=k) <= 2 * clip * (1 + 1e-7) + TOL


# ---- the releases of PF-LD and of the post-processing methods ----------------------------------------------------

@st.composite
def pfld_problem(draw):
    """PF-LD data where some s are unknown (coded k for the brute force: the releases take −1)."""
    X, y, s, k = draw(tabular(max_rows=7))
    unknown = np.array(draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y))))
    s = np.where(unknown, k, s)
    notion = draw(st.sampled_from(["demographic_parity", "equalized_odds", "accuracy_parity", "predictive_equality"]))
    return X, y, s, k, notion


def _pfld_groups(notion, y, s, k):
    groups, _ = constraint_cells(notion, y, np.where(s == k, -1, s), k)
    return groups, k * (2 if notion == "equalized_odds" else 1)


@SETTINGS
@given(pfld_problem(), st.floats(0.01, 3.0), st.integers(0, 2**16))
def test_pfld_counts_and_dual_releases_move_at_most_twice_their_declared_bounds(problem, clip, seed):
    """PF-LD declares bound √2/2 for its group counts and C_d/√2 for its dual sums Σ_{i∈g} clip(h_i). Changing one
    person's s (known or unknown) moves one row — a count of 1, a clipped value of norm ≤ C_d — out of one group and
    into another: distance ≤ √2 = 2·(√2/2), resp. ≤ √2·C_d = 2·(C_d/√2)."""
    X, y, s, k, notion = problem
    model = MLP(3, 2, hidden=(4,), seed=seed).double()
    columns = [0] if notion == "accuracy_parity" else [1]

    def counts(X, y, s):
        groups, G = _pfld_groups(notion, y, s, k)
        return group_counts(groups, G)

    def duals(X, y, s):
        groups, G = _pfld_groups(notion, y, s, k)
        with torch.no_grad():
            values = per_sample_values(model(torch.as_tensor(X)), torch.as_tensor(y), notion, columns)
        return dual_sums(values, torch.as_tensor(groups), G, clip)

    assert max_neighbour_distance(counts, X, y, s, "sensitive", n_groups=k + 1) <= 2 * (math.sqrt(2) / 2) + TOL
    assert max_neighbour_distance(duals, X, y, s, "sensitive", n_groups=k + 1) <= 2 * (clip / math.sqrt(2)) + TOL


@MODELS
@given(pfld_problem(), st.floats(0.01, 3.0), st.integers(0, 2**16), st.data())
def test_pfld_primal_release_moves_at_most_twice_its_declared_bound(problem, clip, seed, data):
    """PF-LD's primal release is Σ_i of ∇ψ_i clipped to C_p, ψ_i weighted by its group's dual weights in [−1, 1]
    (0 for an unknown s); it declares bound C_p. Changing one s changes only that person's clipped term: ≤ 2·C_p."""
    X, y, s, k, notion = problem
    model = MLP(3, 2, hidden=(4,), seed=seed).double()
    _, G = _pfld_groups(notion, y, s, k)
    width = 1 if notion == "accuracy_parity" else 2
    weights = torch.tensor(_matrix(data.draw, G, width, st.floats(-1.0, 1.0)))

    def primal(X, y, s):
        groups, _ = _pfld_groups(notion, y, s, k)
        return primal_sum(model, torch.as_tensor(X), torch.as_tensor(y), torch.as_tensor(groups), weights, notion,
                          clip)

    assert max_neighbour_distance(primal, X, y, s, "sensitive", n_groups=k + 1) <= 2 * clip * (1 + 1e-7) + TOL


@SETTINGS
@given(tabular(max_rows=12, max_groups=4), st.floats(-20, 20))
def test_post_processing_counts_move_by_one_record_at_most(data, threshold):
    """The count table N[ŷ, s, y] that the post-processing methods release (Jagielski et al.; Laplace, bound 1),
    ŷ the base model's prediction on the row (here a threshold on a feature): one person changing s moves one unit
    between two cells (L1 = 2 = 2·bound), one record leaving lowers one cell by one (L1 = 1 = bound)."""
    X, y, s, k = data

    def counts(X, y, s):
        return cell_counts((X[:, 0] > threshold).astype(np.int64), y, s, 2, 2, k)

    assert max_neighbour_distance(counts, X, y, s, "sensitive", ord=1, n_groups=k) == 2.0
    assert max_neighbour_distance(counts, X, y, s, "record", ord=1) == 1.0


# ---- the brute-force helpers ------------------------------------------------------------------------------------

@SETTINGS
@given(tabular(max_rows=10, max_groups=4))
def test_neighbours_are_exactly_the_one_person_changes(data):
    """Sensitive unit: n·(k−1) neighbours, each with X and y unchanged and s changed in exactly one row to another
    group. Record unit: n neighbours, each the data less one row. max_neighbour_distance is then the true worst
    case: for the unclipped sum ΣX_i it is max_i ‖x_i‖ under removal, for one-hot group counts √2 under
    replacement."""
    X, y, s, k = data
    n = len(y)
    sensitive = list(neighbours(X, y, s, "sensitive", n_groups=k))
    assert len(sensitive) == n * (k - 1)
    for Xn, yn, sn in sensitive:
        assert Xn is X and yn is y and np.sum(sn != s) == 1 and sn.max() < k
    record = list(neighbours(X, y, s, "record"))
    assert len(record) == n
    for i, (Xn, yn, sn) in enumerate(record):
        np.testing.assert_array_equal(Xn, np.delete(X, i, axis=0))
        np.testing.assert_array_equal(sn, np.delete(s, i))
    worst = max_neighbour_distance(lambda X, y, s: X.sum(0), X, y, s, "record")
    assert abs(worst - max(np.linalg.norm(x) for x in X)) <= 1e-9 * (1 + worst)
    onehot = max_neighbour_distance(lambda X, y, s: np.bincount(s, minlength=k), X, y, s, "sensitive", n_groups=k)
    assert abs(onehot - math.sqrt(2)) < 1e-12


# ---- the release itself -----------------------------------------------------------------------------------------

@st.composite
def totals(draw):
    """A released total: a dict of tensors, a list of arrays (with one bound per block) or one array."""
    kind = draw(st.sampled_from(["dict", "list", "array"]))
    if kind == "dict":
        return {"w": torch.tensor(_matrix(draw, 2, 3)), "b": torch.tensor(_matrix(draw, 1, 2)).reshape(2)}, 1.0
    if kind == "list":
        return [_matrix(draw, 1, 3).reshape(3), _matrix(draw, 2, 2)], draw(
            st.lists(st.floats(0.1, 5.0), min_size=2, max_size=2))
    return _matrix(draw, 1, 4).reshape(4), draw(st.floats(0.1, 5.0))


def _minus(a, b):
    if isinstance(a, dict):
        return {key: _minus(a[key], b[key]) for key in a}
    if isinstance(a, list):
        return [_minus(x, z) for x, z in zip(a, b)]
    return np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)


def _zeros(a):
    return _minus(a, a)


def _scaled(a, factors):
    if isinstance(a, dict):
        return {key: factors * v for key, v in a.items()}
    if isinstance(a, list):
        return [f * v for f, v in zip(factors, a)]
    return factors * a


@SETTINGS
@given(totals(), st.floats(0.0, 5.0), st.sampled_from(["gaussian", "laplace"]), st.integers(0, 2**16))
def test_a_release_adds_noise_that_does_not_depend_on_the_total(total_and_bound, sigma, mechanism, key):
    """noisy_sum(total, bound) = total + σ·bound·Z with Z drawn from the secret generator alone: with the same
    (reproducible) coins, releasing total and releasing 0 differ by exactly total, and the noise is σ·bound times
    the noise of a unit release. So two neighbours' releases differ by what their totals differ by — the release's
    sensitivity is the total's — and each call records one event of the part on the ledger."""
    total, bound = total_and_bound
    part = Part("step", mechanism=mechanism)

    def release(value, sigma_, bound_, ledger=None):
        with reproducible_noise(key), warnings.catch_warnings():  # the same coins on every call
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            rel = Release(part, sigma_, SecretRandom(key="property"),
                          PrivacyLedger("record") if ledger is None else ledger)
        return rel.noisy_sum(value, bound=bound_)

    ledger = PrivacyLedger("record")
    out = release(total, sigma, bound, ledger)
    noise_only = release(_zeros(total), sigma, bound)
    unit_noise = release(_zeros(total), 1.0, [1.0] * len(bound) if isinstance(bound, list) else 1.0)
    diff, noise = _minus(out, noise_only), _minus(noise_only, _zeros(total))
    expected_noise = _scaled(unit_noise, [sigma * b for b in bound] if isinstance(bound, list) else sigma * bound)
    for got, want in ((diff, total), (noise, expected_noise)):
        flat_got = np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in _leaves(got)])
        flat_want = np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in _leaves(want)])
        np.testing.assert_allclose(flat_got, flat_want, rtol=1e-9, atol=1e-9 * (1 + np.abs(flat_want).max()))
    assert [(e.label, e.event, e.count) for e in ledger.entries] == [("step", part.event(sigma), 1)]


def _leaves(value):
    if isinstance(value, dict):
        return [value[key] for key in sorted(value)]
    if isinstance(value, list):
        return value
    return [value]
