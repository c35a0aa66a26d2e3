"""Every backend of DP-FERMI's engine equals the reference step of Algorithm 1 on the same batches and noise.

:func:`~dpfair.algorithms.dpfermi_reference.reference_train` runs Algorithm 1 for one model, one row at a
time with autograd; each backend of :mod:`dpfair.algorithms.dpfermi_engine` runs it for a grid of models.
Both draw their Poisson batches from a :class:`~dpfair.privacy.SecretRandom` of the same key under
``reproducible_noise`` (the same batches) and their public minibatches from equally seeded generators; the
noise is an injected tape: the engine's release draws it (one standard normal tensor per released block),
the reference replays each model's slice of it. Tolerance: the two sum the same float32 terms in different
orders (a batch of ≤ 64 rows, closed forms against autograd), a relative rounding of a few float32 ulps
(1.2e-7) per sum, carried through 8 steps of a contracting update (parameters of size ≤ 1.1 here; the largest
difference seen is one ulp, 1.2e-7): ``rtol = atol = 1e-5``.
"""

import numpy as np
import pytest
import torch

from dpfair.algorithms import dpfermi_engine as engine
from dpfair.algorithms.dpfermi_reference import FermiHyperParameters, FermiSchedule, reference_train
from dpfair.nn import LogisticRegression, make_model
from dpfair.privacy import SecretRandom, reproducible_noise

BACKENDS = list(engine.BACKENDS.values())
TOLERANCE = dict(rtol=1e-5, atol=1e-5)

pytestmark = pytest.mark.filterwarnings("ignore::dpfair.exceptions.PrivacyLeakWarning")


class Tape:
    """A stand-in for the step's :class:`~dpfair.privacy.Release` that draws standard normal noise from a seeded
    generator and keeps it, so that the reference can add each model's slice of the same draws."""

    def __init__(self, seed=0):
        self.generator, self.draws = torch.Generator().manual_seed(seed), []

    def noisy_sum(self, blocks, scale):
        z = [torch.randn(b.shape, generator=self.generator) for b in blocks]
        self.draws.append(z)
        return [b + s * zb for b, s, zb in zip(blocks, scale, z)]

    def flush(self):
        pass


class Replay:
    """The reference's release: model ``(g, j)``'s slice of the tape, in step order."""

    def __init__(self, tape, g, j):
        self.draws, self.slot = iter(tape.draws), (g, j)

    def noisy_sum(self, blocks, scale):
        z = next(self.draws)
        return [b + s * zb[self.slot] for b, s, zb in zip(blocks, scale, z)]


def _one_hot_data(n=240, k=2, classes=2, notion="demographic_parity", seed=0):
    """Two numeric columns and three one-hot categoricals of 6 levels (5 of 20 columns non-zero: sparse rows)."""
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 6, (n, 3))
    X = np.concatenate([rng.normal(size=(n, 2)), *[np.eye(6)[levels[:, j]] for j in range(3)]], axis=1)
    s = rng.integers(0, k, n)
    score = X[:, 0] + levels[:, 0] / 3 + 0.5 * s + rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    cells, m = (y, classes) if notion == "equalized_odds" else (np.zeros(n, dtype=np.int64), 1)
    return engine.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s),
                            torch.tensor(cells), m, k, classes)


def _hp(schedule, lam, noise):
    return FermiHyperParameters(schedule, lam=lam, learning_rate=0.5, w_learning_rate=0.2, w_radius=2.0,
                                noise_theta=noise, noise_w=noise / 2, w_bound=3.0)


def _run_both(backend, data, record, lams, groups=2, inv_sqrt_p=None, module=None, steps=8, average_from=5):
    """Train a grid of ``groups`` seed groups × ``len(lams)`` models on ``backend`` and every model alone on the
    reference; returns ``[(engine θ, reference θ, engine W, reference W)]``."""
    n, l = len(data.y), data.n_classes
    schedule = FermiSchedule(0.2, steps, 24, record, 0.8, average_from)
    grid = [[_hp(schedule, lam, noise=2.0) for lam in lams] for _ in range(groups)]
    m, k = data.n_cells, data.n_groups
    inv = (torch.rand(m, k, generator=torch.Generator().manual_seed(3)) + 1.2) if inv_sqrt_p is None else inv_sqrt_p
    hp = engine.FermiModels.stack(grid, inv.expand(groups, len(lams), m, k).clone(), "cpu")
    initial = [[make_model(module, data.X.shape[1], l, hidden=(4,), seed=10 * g + j) if module else
                LogisticRegression(data.X.shape[1], l, seed=10 * g + j) for j in range(len(lams))] for g in range(groups)]
    if module:
        assert groups == len(lams) == 1  # torch.func models train one at a time
        models = engine.ModuleModel(make_model(module, data.X.shape[1], l, hidden=(4,), seed=0))
    else:
        weight = torch.stack([torch.stack([mod.linear.weight.detach() for mod in row]) for row in initial])
        bias = torch.stack([torch.stack([mod.linear.bias.detach() for mod in row]) for row in initial])
        models = engine.LinearModels(weight.clone(), bias.clone())
    tape = Tape()
    with reproducible_noise(7):
        W = engine.train(models, data, schedule, hp, [SecretRandom(("batches", g)) for g in range(groups)], tape,
                         [torch.Generator().manual_seed(g) for g in range(groups)], backend=backend)
    out = []
    for g in range(groups):
        for j, h in enumerate(grid[g]):
            model = initial[g][j]
            with reproducible_noise(7):
                W_ref, _ = reference_train(model, data, inv, h, SecretRandom(("batches", g)), Replay(tape, g, j),
                                           torch.Generator().manual_seed(g))
            theta = models.flat()[g, j]
            out.append((theta, torch.cat([p.detach().reshape(-1) for p in model.parameters()]), W[g, j], W_ref))
    return out


def _assert_equal(pairs):
    for theta, theta_ref, W, W_ref in pairs:
        assert theta_ref.abs().max() > 0
        torch.testing.assert_close(theta, theta_ref, **TOLERANCE)
        torch.testing.assert_close(W, W_ref, **TOLERANCE)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("classes,unit", [(2, "sensitive"), (2, "record"), (3, "sensitive"), (3, "record")])
def test_each_backend_equals_the_reference_step(backend, classes, unit, monkeypatch):
    """Logistic (binary: one logit, the fused kernel's case on these one-hot rows under the sensitive unit; three
    classes: softmax) under both units, two seed groups of two λ: every model's θ and W after 8 steps
    (tail-averaged θ)."""
    from dpfair.algorithms import dpfermi_kernel

    calls, kernel = [], dpfermi_kernel.binary_sums
    monkeypatch.setattr(dpfermi_kernel, "binary_sums", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    data = _one_hot_data(classes=classes)
    _assert_equal(_run_both(backend, data, unit == "record", lams=(0.0, 4.0)))
    assert bool(calls) == (backend.fused and classes == 2 and unit == "sensitive")


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_each_backend_equals_the_reference_under_equalized_odds_with_public_proportions(backend):
    """A W block per label, three groups, and public proportions (P^{-1/2} of the true shares, as a fit given
    ``group_proportions`` uses): the same θ and W."""
    data = _one_hot_data(k=3, classes=2, notion="equalized_odds", seed=1)
    shares = torch.stack([torch.bincount(data.s[data.cells == c], minlength=3).float() for c in range(2)])
    inv = (shares / shares.sum(1, keepdim=True)).rsqrt()
    _assert_equal(_run_both(backend, data, False, lams=(2.0,), inv_sqrt_p=inv))


@pytest.mark.parametrize("unit", ["sensitive", "record"])
def test_the_torch_func_path_equals_the_reference(unit):
    """Any ``torch.nn.Module`` (here a small MLP) trains through ``torch.func``'s per-sample gradients."""
    data = _one_hot_data(n=120, classes=3)
    _assert_equal(_run_both(engine.BACKENDS["torch"], data, unit == "record", lams=(1.5,), groups=1, module="mlp",
                            steps=6))


def test_the_default_backend_is_the_prefetching_kernel_only_where_it_applies():
    data = _one_hot_data()
    binary = engine.LinearModels(torch.zeros(1, 1, 1, 20), torch.zeros(1, 1, 1))
    softmax = engine.LinearModels(torch.zeros(1, 1, 3, 20), torch.zeros(1, 1, 3))
    sensitive, record = FermiSchedule(0.2, 1, 32, False, 1.0), FermiSchedule(0.2, 1, 32, True, 1.0)
    assert isinstance(engine.default_backend(binary, data, sensitive), engine.Prefetching)
    assert type(engine.default_backend(binary, data, record)) is engine.BatchedTorch
    assert type(engine.default_backend(softmax, data, sensitive)) is engine.BatchedTorch
