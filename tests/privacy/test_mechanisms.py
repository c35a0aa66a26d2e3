import math
import pickle
import copy

import numpy as np
import pytest
import torch

from dpfair.exceptions import PrivacyLeakWarning
from dpfair.privacy import (
    Part,
    PrivacyLedger,
    Release,
    SecretRandom,
    max_neighbour_distance,
    noise_is_reproducible,
    reproducible_noise,
)


def release(part, sigma=1.0, ledger=None, secret=None):
    return Release(part, sigma, secret or SecretRandom(), PrivacyLedger("record") if ledger is None else ledger)


def test_gaussian_noise_has_the_calibrated_standard_deviation():
    # n draws of N(0, s^2): the sample std has standard error s/sqrt(2n); allow 5 standard errors.
    n, bound, sigma = 200_000, 0.7, 3.0
    ledger = PrivacyLedger("sensitive")
    out = release(Part("step", sampling_probability=0.1), sigma, ledger).noisy_sum(
        torch.zeros(n, dtype=torch.float64), bound=bound)
    s = bound * sigma
    assert abs(out.mean().item()) < 5 * s / math.sqrt(n)
    assert abs(out.std().item() - s) < 5 * s / math.sqrt(2 * n)
    assert ledger.to_records() == [{"label": "step", "mechanism": "gaussian", "noise_multiplier": 3.0,
                                    "sampling_probability": 0.1, "count": 1}]


def test_laplace_noise_has_the_calibrated_scale_numpy_and_torch():
    # Laplace(b): mean |X| = b, variance of |X| is b^2, so 5 standard errors is 5 b / sqrt(n).
    n, bound, mult = 200_000, 2.0, 1.5
    b = bound * mult
    for total in [np.zeros(n), torch.zeros(n, dtype=torch.float64)]:
        out = release(Part("counts", mechanism="laplace"), mult).noisy_sum(total, bound=bound)
        mean_abs = float(np.mean(np.abs(np.asarray(out))))
        assert abs(mean_abs - b) < 5 * b / math.sqrt(n)


def test_release_of_a_dict_noises_every_entry_and_records_one_event():
    ledger = PrivacyLedger("record")
    total = {"w": torch.ones(3, 2), "b": torch.ones(2)}
    out = release(Part("step"), 1.0, ledger).noisy_sum(total, bound=1.0)
    assert set(out) == {"w", "b"} and out["w"].shape == (3, 2)
    assert not torch.equal(out["w"], total["w"])
    assert len(ledger) == 1


@pytest.mark.secret_noise
def test_a_batched_release_draws_independent_noise_per_model_and_records_on_each_ledger():
    ledgers = [PrivacyLedger("record") for _ in range(3)]
    rel = Release(Part("step"), [1.0, 2.0, 4.0], SecretRandom(), ledgers)
    scale = torch.tensor([1.0, 2.0, 4.0])[:, None]
    out = rel.noisy_sum(torch.zeros(3, 50_000), scale=scale)
    # each row has its own std (5 standard errors) and the rows are uncorrelated (|r| < 5/sqrt(n))
    assert np.allclose(out.std(1).numpy(), [1.0, 2.0, 4.0], rtol=5 / math.sqrt(2 * 50_000))
    assert abs(np.corrcoef(out.numpy())[0, 1]) < 5 / math.sqrt(50_000)
    assert all(len(le) == 0 for le in ledgers)  # batched releases write on flush
    rel.flush()
    assert [le.entries[0].event.noise_multiplier for le in ledgers] == [1.0, 2.0, 4.0]


@pytest.mark.secret_noise
def test_fresh_secret_generators_never_repeat_and_cannot_be_saved():
    a, b = SecretRandom(key=("same", 0)), SecretRandom(key=("same", 0))
    assert not np.array_equal(a.normal((8,)), b.normal((8,)))
    assert "<secret>" in repr(a)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(a)
    with pytest.raises(TypeError, match="cannot be pickled"):
        copy.deepcopy(a)


@pytest.mark.secret_noise
def test_reproducible_noise_is_deterministic_and_warns():
    def draw():
        with pytest.warns(PrivacyLeakWarning, match="no privacy guarantee"):
            return SecretRandom(key=("k", 1)).normal((5,))
    with reproducible_noise(3):
        assert noise_is_reproducible()
        first, second = draw(), draw()
    assert not noise_is_reproducible()
    assert np.array_equal(first, second)
    with reproducible_noise(4):
        assert not np.array_equal(first, draw())


def test_poisson_sample_has_binomial_sizes_and_can_be_empty():
    secret = SecretRandom()
    sizes = np.array([len(secret.poisson_sample(1000, 0.05)) for _ in range(2000)])
    # Binomial(1000, 0.05): mean 50, sd sqrt(47.5); the mean of 2000 sizes is within 5 standard errors.
    assert abs(sizes.mean() - 50) < 5 * math.sqrt(47.5 / 2000)
    assert abs(sizes.std() - math.sqrt(47.5)) < 0.5
    assert 0 in [len(secret.poisson_sample(5, 0.05)) for _ in range(200)]
    # each index is included with probability q: 20,000 draws of n = 10, within 5 standard errors
    hits = np.bincount(np.concatenate([secret.poisson_sample(10, 0.3) for _ in range(20_000)]), minlength=10)
    assert np.all(np.abs(hits / 20_000 - 0.3) < 5 * math.sqrt(0.21 / 20_000))


@pytest.mark.parametrize("bad", [dict(bound=0.0), dict(bound=-1.0), dict(noise_multiplier=-0.1)])
def test_release_rejects_bad_bounds(bad):
    args = dict(bound=1.0, noise_multiplier=1.0)
    args.update(bad)
    with pytest.raises(ValueError, match=next(iter(bad))):
        release(Part("step"), args["noise_multiplier"]).noisy_sum(np.zeros(2), bound=args["bound"])


def test_a_release_draws_only_from_secret_randomness():
    with pytest.raises(TypeError, match="SecretRandom"):
        Release(Part("step"), 1.0, np.random.default_rng(0), PrivacyLedger("record"))


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
