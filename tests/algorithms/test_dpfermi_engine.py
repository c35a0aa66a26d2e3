"""DP-FERMI's engine as laid out for speed: the public part reads no s."""

import numpy as np
import torch

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
