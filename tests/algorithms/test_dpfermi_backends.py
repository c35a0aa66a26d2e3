"""Every step backend of DP-FERMI equals the reference step of Algorithm 1 on the same batch and noise, and the one
loop trains a small fit the same on the reference backend as on the batched one.

:class:`~dpfair.algorithms.dpfermi.reference.Reference` computes a step's sums for one model, one row at a time
with autograd; each backend of :mod:`dpfair.algorithms.dpfermi.batched` computes them for a grid of models. Both
go through the same step (:func:`~dpfair.algorithms.dpfermi.loop.step`: the release, the θ descent, the W ascent
and projection) from the same state, on the same secret Poisson batch (a :class:`~dpfair.privacy.SecretRandom`
under ``reproducible_noise``) and public minibatch; the noise is an injected tape: the grid's release draws it
(one standard normal tensor per released block), each model's reference step replays its slice. Tolerance: the
two sum the same float32 terms in different orders (a batch of ≤ 64 rows, closed forms against autograd), a
relative rounding of a few float32 ulps (1.2e-7) per sum; a whole fit carries it through 20 steps of a
contracting update: ``rtol = atol = 1e-5``.
"""

import numpy as np
import pytest
import torch

import dpfair.algorithms.dpfermi.kernel as kernel

import dpfair.algorithms.dpfermi.loop as loop
from dpfair.algorithms.dpfermi.data import FermiData, FermiHyperParameters, FermiModels, FermiSchedule
from dpfair.algorithms.dpfermi.models import LinearModels, ModuleModel
from dpfair.algorithms.dpfermi.reference import Reference
from dpfair.nn import LogisticRegression, make_model
from dpfair.privacy import SecretRandom, reproducible_noise

BATCHED = [backend for backend in loop.BACKENDS.values() if not isinstance(backend, Reference)]
REFERENCE = loop.BACKENDS["reference"]
TOLERANCE = dict(rtol=1e-5, atol=1e-5)



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
        return [b + s * zb[self.slot][None, None] for b, s, zb in zip(blocks, scale, z)]


def _one_hot_data(n=240, k=2, classes=2, notion="demographic_parity", seed=0):
    """Two numeric columns and three one-hot categoricals of 6 levels (5 of 20 columns non-zero: sparse rows)."""
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 6, (n, 3))
    X = np.concatenate([rng.normal(size=(n, 2)), *[np.eye(6)[levels[:, j]] for j in range(3)]], axis=1)
    s = rng.integers(0, k, n)
    score = X[:, 0] + levels[:, 0] / 3 + 0.5 * s + rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    cells, m = (y, classes) if notion == "equalized_odds" else (np.zeros(n, dtype=np.int64), 1)
    return FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s), torch.tensor(cells),
                     m, k, classes)


def _hp(schedule, lam, noise):
    return FermiHyperParameters(schedule, lam=lam, learning_rate=0.5, w_learning_rate=0.2, w_radius=2.0,
                                noise_theta=noise, noise_w=noise / 2, w_bound=3.0)


def _run_step(backend, models, data, schedule, hp, W, idx, valid, pub, release):
    rows = backend.layout(data, models, public=not schedule.record, threads=2)
    with backend.running(models, rows):
        fetched = (idx, valid, backend.take(rows, idx, public=False), pub,
                   None if pub is None else backend.take(rows, pub, public=True))
        loop.step(backend, models, data, schedule, hp, W, rows, fetched, release)


def _compare_steps(backend, data, record, lams, groups=2, inv_sqrt_p=None, module=None):
    """One step of a grid of ``groups`` seed groups × ``len(lams)`` models on ``backend``, and of every model alone
    on the reference, from the same random state (θ, W) on the same batches and noise; returns
    ``[(grid θ, reference θ, grid W, reference W)]``."""
    n, l, m, k = len(data.y), data.n_classes, data.n_cells, data.n_groups
    schedule = FermiSchedule(0.2, 1, 24, record, 0.8)
    grid = [[_hp(schedule, lam, noise=2.0) for lam in lams] for _ in range(groups)]
    inv = (torch.rand(m, k, generator=torch.Generator().manual_seed(3)) + 1.2) if inv_sqrt_p is None else inv_sqrt_p
    hp = FermiModels.stack(grid, inv.expand(groups, len(lams), m, k).clone(), "cpu")
    g = torch.Generator().manual_seed(5)
    W = torch.randn(groups, len(lams), m, k, l, generator=g) * 0.5  # a state inside the balls, with every term
    if module:
        assert groups == len(lams) == 1  # torch.func models train one at a time
        models = ModuleModel(make_model(module, data.X.shape[1], l, hidden=(4,), seed=0))
        theta = models.flat().clone()
    else:
        L = 1 if l == 2 else l
        models = LinearModels(torch.randn(groups, len(lams), L, data.X.shape[1], generator=g) * 0.3,
                              torch.randn(groups, len(lams), L, generator=g) * 0.3)
        theta = models.flat().clone()
    with reproducible_noise(7):
        idx, valid = loop.poisson_batch(n, [(SecretRandom(("batches", gi)), 0.2) for gi in range(groups)], "cpu")
    assert groups == 1 or valid is not None  # two seed groups: batches of different sizes, padded
    pub = None if record else loop.PublicBatches(n, 24, [torch.Generator().manual_seed(gi) for gi in range(groups)],
                                                 "cpu").next()
    tape, W_grid = Tape(), W.clone()
    _run_step(backend, models, data, schedule, hp, W_grid, idx, valid, pub, tape)
    out = []
    for gi in range(groups):
        for j, h in enumerate(grid[gi]):
            module_ij = (make_model(module, data.X.shape[1], l, hidden=(4,), seed=0) if module
                         else LogisticRegression(data.X.shape[1], l, seed=0))
            one = ModuleModel(module_ij)
            one.load(theta[gi, j][None, None])
            W_ref = W[gi, j][None, None].clone()
            rows = idx[gi] if valid is None else idx[gi][valid[gi]]
            _run_step(REFERENCE, one, data, schedule, FermiModels.stack([[h]], inv[None, None], "cpu"), W_ref,
                      rows[None], None, None if pub is None else pub[gi:gi + 1], Replay(tape, gi, j))
            out.append((models.flat()[gi, j], one.flat()[0, 0], W_grid[gi, j], W_ref[0, 0]))
    return out


def _assert_equal(pairs):
    for theta, theta_ref, W, W_ref in pairs:
        assert theta_ref.abs().max() > 0
        torch.testing.assert_close(theta, theta_ref, **TOLERANCE)
        torch.testing.assert_close(W, W_ref, **TOLERANCE)


@pytest.mark.parametrize("backend", BATCHED, ids=lambda b: b.name)
@pytest.mark.parametrize("classes,unit", [(2, "sensitive"), (2, "record"), (3, "sensitive"), (3, "record")])
def test_each_backends_step_equals_the_reference_step(backend, classes, unit, monkeypatch):
    """Logistic (binary: one logit, the fused kernel's case on these one-hot rows under the sensitive unit; three
    classes: softmax) under both units, two seed groups of two λ (one of them 0): every model's θ and W after the
    step."""
    calls, sums = [], kernel.binary_sums
    monkeypatch.setattr(kernel, "binary_sums", lambda *a, **k: calls.append(1) or sums(*a, **k))
    data = _one_hot_data(classes=classes)
    _assert_equal(_compare_steps(backend, data, unit == "record", lams=(0.0, 4.0)))
    assert bool(calls) == (backend.fused and classes == 2 and unit == "sensitive")


@pytest.mark.parametrize("backend", BATCHED, ids=lambda b: b.name)
def test_each_backends_step_equals_the_reference_under_equalized_odds_with_public_proportions(backend):
    """A W block per label, three groups, and public proportions (P^{-1/2} of the true shares, as a fit given
    ``group_proportions`` uses): the same θ and W."""
    data = _one_hot_data(k=3, classes=2, notion="equalized_odds", seed=1)
    shares = torch.stack([torch.bincount(data.s[data.cells == c], minlength=3).float() for c in range(2)])
    inv = (shares / shares.sum(1, keepdim=True)).rsqrt()
    _assert_equal(_compare_steps(backend, data, False, lams=(2.0,), inv_sqrt_p=inv))


@pytest.mark.parametrize("unit", ["sensitive", "record"])
def test_the_torch_func_step_equals_the_reference_step(unit):
    """Any ``torch.nn.Module`` (here a small MLP) steps through ``torch.func``'s per-sample gradients."""
    data = _one_hot_data(n=120, classes=3)
    _assert_equal(_compare_steps(loop.BACKENDS["torch"], data, unit == "record", lams=(1.5,), groups=1,
                                 module="mlp"))


def _fit(backend, seed, **params):
    """A small fit through the estimator's steps, its loop on ``backend`` (``None``: the default one)."""
    from dpfair.algorithms import DPFERMIClassifier

    data = _one_hot_data(classes=params.pop("classes", 2))
    X, y, s = data.X.numpy(), data.y.numpy(), data.s.numpy()
    est = DPFERMIClassifier(groups=2, classes=data.n_classes, epochs=2, batch_size=24, random_state=0,
                            group_proportions=[0.5, 0.5], **params)
    with reproducible_noise(seed):
        Xc, yc, sc = est.begin_fit(X, y, s)
        est.train_prepared(est.prepare_fit(est.fit_context, Xc, yc, sc), backend=backend)
        est.end_fit()
    return est


#: 240 rows are little for whole records at ε = 1, as the fit says; the subject here is the two backends' equality
LITTLE_FOR_RECORDS = pytest.mark.filterwarnings(
    "ignore:DP-FERMI protects whole records at epsilon=1 on 240 rows:dpfair.exceptions.UtilityWarning")


@pytest.mark.parametrize("params", [{},
                                    pytest.param({"classes": 3, "privacy_unit": "record"}, marks=LITTLE_FOR_RECORDS),
                                    {"target_error": 0.3}, {"model": "mlp", "model_kwargs": {"hidden": (4,)}}],
                         ids=["binary-sensitive", "softmax-record", "target-error", "mlp"])
def test_a_small_fit_trains_the_same_on_the_reference_backend(params):
    """The one loop, on the reference backend (the module itself, one row at a time) and on the default one (the
    fused kernel for the binary logistic model on these one-hot rows): the same θ, W, λ and ε."""
    fast, reference = _fit(None, 3, **params), _fit("reference", 3, **params)
    for a, b in zip(fast.model_.parameters(), reference.model_.parameters()):
        assert b.abs().max() > 0
        torch.testing.assert_close(a, b, **TOLERANCE)
    np.testing.assert_allclose(fast.W_, reference.W_, **TOLERANCE)
    assert fast.lam_ == pytest.approx(reference.lam_, rel=1e-5)
    assert fast.privacy_spent_ == reference.privacy_spent_
    assert len(fast.history_) == len(reference.history_) == 2


def test_the_reference_backend_trains_one_module():
    data = _one_hot_data()
    with pytest.raises(TypeError, match="one module"):
        REFERENCE.layout(data, LinearModels(torch.zeros(1, 1, 1, 20), torch.zeros(1, 1, 1)), public=True)


def test_the_default_backend_is_the_prefetching_kernel_only_where_it_applies():
    data = _one_hot_data()
    binary = LinearModels(torch.zeros(1, 1, 1, 20), torch.zeros(1, 1, 1))
    softmax = LinearModels(torch.zeros(1, 1, 3, 20), torch.zeros(1, 1, 3))
    sensitive, record = FermiSchedule(0.2, 1, 32, False, 1.0), FermiSchedule(0.2, 1, 32, True, 1.0)
    assert isinstance(loop.default_backend(binary, data, sensitive), loop.Prefetching)
    assert type(loop.default_backend(binary, data, record)) is loop.BatchedTorch
    assert type(loop.default_backend(softmax, data, sensitive)) is loop.BatchedTorch
