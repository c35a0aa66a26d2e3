"""DP-FERMI's engine as laid out for speed: the public part reads no s, seed groups split between threads."""

import numpy as np
import torch

from dpfair.algorithms import fit_dpfermi_grid
from dpfair.algorithms import dpfermi_engine as engine
from dpfair.algorithms.dpfermi import stack_hyperparameters


def _data(n=300, k=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = rng.integers(0, k, n)
    y = (X[:, 0] + 0.5 * s + rng.normal(size=n) > 0.5).astype(int)
    return X, y, s


def test_public_sums_do_not_read_the_sensitive_attribute():
    X, y, s = _data()
    other = np.random.default_rng(1).permutation(s)  # everyone's group changed, the rest kept
    g = torch.Generator().manual_seed(0)
    models = engine.LinearModels(torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, generator=g))
    W = torch.randn(2, 3, 2, 3, 2, generator=g)  # equalized odds: a W per label
    hp = stack_hyperparameters([[[lam, 0.1, 0.1, 3.0, 1.0, 1.0, 3.0] for lam in (0.0, 1.0, 4.0)]] * 2,
                               torch.rand(2, 3, 2, 3) + 1, "cpu")
    pub = torch.randint(0, 300, (2, 64), generator=g)
    sums = []
    for groups in (s, other):
        data = engine.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(groups),
                                torch.tensor(y), 2, 3, 2)
        sums.append(engine.public_sums(models, hp, W, pub, engine.RowTables.of(data, models)))
    for a, b in zip(*sums):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_seed_groups_on_worker_threads_train_as_on_one(replay):
    X, y, s = _data(n=400)
    grid = {"lam": [0.0, 2.0], "epsilon": [1.0, 4.0], "random_state": [0, 1, 2]}
    fits, before = [], torch.get_num_threads()
    for threads in (2, 1):  # three seed groups split between two workers, or all on the calling thread
        torch.set_num_threads(threads)
        try:
            with replay(0):
                fits.append(fit_dpfermi_grid(X, y, s, grid, batch_size=64, epochs=3, groups=3))
            assert torch.get_num_threads() == threads  # restored after the workers' one-thread products
        finally:
            torch.set_num_threads(before)
    for a, b in zip(*fits):
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-6)
        np.testing.assert_allclose(a.W_, b.W_, atol=1e-6)
        assert a.privacy_ledger_.to_records() == b.privacy_ledger_.to_records()


def test_a_share_of_seed_groups_updates_the_models_in_place():
    models = engine.LinearModels(torch.zeros(4, 2, 1, 3), torch.zeros(4, 2, 1))
    share = models.seeds(slice(1, 3))
    share.step(torch.ones(2, 2, 4))
    assert share.S == 2
    torch.testing.assert_close(models.weight[1:3], -torch.ones(2, 2, 1, 3))
    torch.testing.assert_close(models.bias[1:3], -torch.ones(2, 2, 1))
    assert models.flat()[[0, 3]].abs().sum() == 0
