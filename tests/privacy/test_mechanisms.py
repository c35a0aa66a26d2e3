import math

import numpy as np
import pytest
import torch

from dpfair.privacy import PrivacyLedger, max_neighbour_distance, release_gaussian, release_laplace


def test_gaussian_noise_has_the_calibrated_standard_deviation():
    # n draws of N(0, s^2): the sample std has standard error s/sqrt(2n); allow 5 standard errors.
    n, bound, sigma = 200_000, 0.7, 3.0
    ledger = PrivacyLedger("sensitive")
    g = torch.Generator().manual_seed(0)
    out = release_gaussian(torch.zeros(n, dtype=torch.float64), bound=bound, noise_multiplier=sigma,
                           generator=g, ledger=ledger, sampling_probability=0.1, label="step")
    s = bound * sigma
    assert abs(out.mean().item()) < 5 * s / math.sqrt(n)
    assert abs(out.std().item() - s) < 5 * s / math.sqrt(2 * n)
    assert ledger.to_records() == [{"label": "step", "mechanism": "gaussian", "noise_multiplier": 3.0,
                                    "sampling_probability": 0.1, "count": 1}]


def test_laplace_noise_has_the_calibrated_scale_numpy_and_torch():
    # Laplace(b): mean |X| = b, variance of |X| is b^2, so 5 standard errors is 5 b / sqrt(n).
    n, bound, mult = 200_000, 2.0, 1.5
    b = bound * mult
    for total, gen in [(np.zeros(n), np.random.default_rng(0)), (torch.zeros(n, dtype=torch.float64),
                                                                  torch.Generator().manual_seed(0))]:
        out = release_laplace(total, bound=bound, noise_multiplier=mult, generator=gen,
                              ledger=PrivacyLedger("record"))
        mean_abs = float(np.mean(np.abs(np.asarray(out))))
        assert abs(mean_abs - b) < 5 * b / math.sqrt(n)


def test_release_of_a_dict_noises_every_entry_and_records_one_event():
    ledger = PrivacyLedger("record")
    total = {"w": torch.ones(3, 2), "b": torch.ones(2)}
    out = release_gaussian(total, bound=1.0, noise_multiplier=1.0, generator=torch.Generator().manual_seed(1),
                           ledger=ledger)
    assert set(out) == {"w", "b"} and out["w"].shape == (3, 2)
    assert not torch.equal(out["w"], total["w"])
    assert len(ledger) == 1


def test_same_seed_same_noise():
    def run(seed):
        return release_gaussian(np.zeros(5), bound=1.0, noise_multiplier=1.0,
                                generator=np.random.default_rng(seed), ledger=PrivacyLedger("record"))
    assert np.array_equal(run(3), run(3)) and not np.array_equal(run(3), run(4))


@pytest.mark.parametrize("bad", [dict(bound=0.0), dict(bound=-1.0), dict(noise_multiplier=-0.1)])
def test_release_rejects_bad_bounds(bad):
    args = dict(bound=1.0, noise_multiplier=1.0)
    args.update(bad)
    with pytest.raises(ValueError, match=next(iter(bad))):
        release_gaussian(np.zeros(2), generator=np.random.default_rng(0), ledger=PrivacyLedger("record"), **args)


def test_brute_force_sensitivity_of_group_counts():
    # Group counts: replacing one s moves one unit between two cells (L2 distance sqrt 2, L1 2);
    # removing a record changes one cell by 1.
    rng = np.random.default_rng(0)
    X, y, s = rng.normal(size=(30, 2)), rng.integers(0, 2, 30), rng.integers(0, 3, 30)

    def counts(X, y, s):
        return np.bincount(s, minlength=3)

    assert max_neighbour_distance(counts, X, y, s, "sensitive", n_groups=3) == pytest.approx(math.sqrt(2))
    assert max_neighbour_distance(counts, X, y, s, "sensitive", ord=1, n_groups=3) == pytest.approx(2.0)
    assert max_neighbour_distance(counts, X, y, s, "record") == pytest.approx(1.0)


def test_brute_force_sensitivity_catches_an_unclipped_sum():
    rng = np.random.default_rng(0)
    X, y, s = rng.normal(size=(20, 3)) * 10, rng.integers(0, 2, 20), rng.integers(0, 2, 20)

    def clipped(X, y, s, C=1.0):
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        return (X * np.minimum(1.0, C / norms)).sum(0)

    assert max_neighbour_distance(clipped, X, y, s, "record") <= 1.0 + 1e-12
    assert max_neighbour_distance(lambda X, y, s: X.sum(0), X, y, s, "record") > 1.0
