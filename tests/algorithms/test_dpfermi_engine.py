"""DP-FERMI's batched steps as laid out for speed: the public part reads no s; threads are an argument."""

import contextlib

import numpy as np
import pytest
import torch

import dpfair.algorithms.dpfermi.batched as batched

import dpfair.algorithms.dpfermi.loop as loop
import dpfair.algorithms.dpfermi.data as fdata
import dpfair.algorithms.dpfermi.models as fmodels
from dpfair.algorithms.dpfermi.data import FermiHyperParameters, FermiSchedule
from dpfair.exceptions import UtilityWarning


def _data(n=300, k=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = rng.integers(0, k, n)
    y = (X[:, 0] + 0.5 * s + rng.normal(size=n) > 0.5).astype(int)
    return X, y, s


def _hp(lam, learning_rate=0.1, w_learning_rate=0.1, w_radius=3.0, noise_theta=1.0, noise_w=1.0, w_bound=3.0,
        target_error=None, lam_rate=20.0):
    """One model's :class:`FermiHyperParameters` (its schedule unused: the loop takes the run's)."""
    return FermiHyperParameters(FermiSchedule(0.5, 1, 8, False, 1.0), lam, learning_rate, w_learning_rate, w_radius,
                                noise_theta, noise_w, w_bound, target_error, lam_rate)


@pytest.mark.parametrize("one_hot", [False, True])
def test_public_sums_do_not_read_the_sensitive_attribute(one_hot):
    """Dense rows (PyTorch) and one-hot rows (the fused kernel): the public sums are the same whatever s is."""
    if one_hot:
        data = _one_hot_data()
        X, y, s, d = data.X.numpy(), data.y.numpy(), data.s.numpy(), 34
        cells, m, k = np.zeros(len(y), dtype=np.int64), 1, 2
    else:
        X, y, s = _data()
        d, cells, m, k = 4, y, 2, 3  # equalized odds: a W per label
    other = np.random.default_rng(1).permutation(s)  # everyone's group changed, the rest kept
    g = torch.Generator().manual_seed(0)
    models = fmodels.LinearModels(torch.randn(2, 3, 1, d, generator=g), torch.randn(2, 3, 1, generator=g))
    W = torch.randn(2, 3, m, k, 2, generator=g)
    hp = fdata.FermiModels.stack([[_hp(lam) for lam in (0.0, 1.0, 4.0)]] * 2, torch.rand(2, 3, m, k) + 1, "cpu")
    pub = torch.randint(0, len(y), (2, 64), generator=g)
    sums = []
    for groups in (s, other):
        data = fdata.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(groups),
                                torch.tensor(cells), m, k, 2)
        rows = batched.RowTables.of(data, models, public=True)
        assert bool(rows.n_cols) == one_hot
        sums.append(batched.public_sums(models, hp, W, pub, rows))
    for a, b in zip(*sums):
        assert a.abs().max() > 0
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _one_hot_data(n=400, seed=0):
    """Two numeric columns and four one-hot encoded categoricals of 8 levels: 6 of 35 columns non-zero a row."""
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 8, (n, 4))
    X = np.concatenate([rng.normal(size=(n, 2)), *[np.eye(8)[levels[:, j]] for j in range(4)]], axis=1)
    s = rng.integers(0, 2, n)
    y = (X[:, 0] + levels[:, 0] / 4 + 0.5 * s + rng.normal(size=n) > 1.5).astype(int)
    return fdata.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s),
                            torch.zeros(n, dtype=torch.long), 1, 2, 2)


@pytest.mark.parametrize("classes", [1, 3])
def test_sparse_rows_give_the_dense_products(monkeypatch, classes):
    """A one-hot encoded table is multiplied through its non-zeros: the same sums as the dense rows, to rounding."""
    data = _one_hot_data()
    g = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(3, 4, classes, 34, generator=g), torch.randn(3, 4, classes, generator=g)
    l = max(classes, 2)
    W = torch.randn(3, 4, 1, 2, l, generator=g)
    hp = fdata.FermiModels.stack([[_hp(lam) for lam in (0.0, 1.0, 4.0, 9.0)]] * 3, torch.rand(3, 4, 1, 2) + 1, "cpu")
    if classes > 1:
        data.y = data.y + torch.randint(0, 2, data.y.shape, generator=g)
        data.n_classes = l
    idx, valid = torch.randint(0, 400, (3, 90), generator=g), torch.rand(3, 90, generator=g) < 0.9
    sums = []
    for share in (batched.SPARSE_SHARE, 0.0):
        monkeypatch.setattr(batched, "SPARSE_SHARE", share)
        models = fmodels.LinearModels(weight.clone(), bias.clone())
        rows = batched.RowTables.of(data, models, public=True)
        assert bool(rows.n_cols) == (share > 0)
        assert not batched.RowTables.of(data, models, public=False).n_cols  # private rows: no branch on sparsity
        for unit in (False, True):
            schedule = fdata.FermiSchedule(0.2, 1, 90, unit, 0.5)
            sums += batched.secret_sums(models, data, schedule, hp, W, idx, valid, rows)
        sums += batched.public_sums(models, hp, W, idx, rows)
    half = len(sums) // 2
    for sparse, dense in zip(sums[:half], sums[half:]):
        torch.testing.assert_close(sparse, dense, rtol=1e-5, atol=1e-5)


def test_the_fused_kernel_sums_the_same_whatever_the_number_of_threads():
    """Each seed group is summed by one thread in row order: 1 thread and 3 give the same bits."""
    data = _one_hot_data()
    g = torch.Generator().manual_seed(1)
    models = fmodels.LinearModels(torch.randn(5, 3, 1, 34, generator=g), torch.randn(5, 3, 1, generator=g))
    W = torch.randn(5, 3, 1, 2, 2, generator=g)
    hp = fdata.FermiModels.stack([[_hp(lam) for lam in (0.0, 2.0, 8.0)]] * 5, torch.rand(5, 3, 1, 2) + 1, "cpu")
    rows = batched.RowTables.of(data, models, public=True)
    assert rows.n_cols  # sparse rows: the fused path
    idx, valid = torch.randint(0, 400, (5, 70), generator=g), torch.rand(5, 70, generator=g) < 0.8
    schedule = fdata.FermiSchedule(0.2, 1, 70, False, 0.5)
    before, sums = torch.get_num_threads(), []
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            sums.append([*batched.secret_sums(models, data, schedule, hp, W, idx, valid, rows),
                         *batched.public_sums(models, hp, W, idx, rows)])
    finally:
        torch.set_num_threads(before)
    for one, three in zip(*sums):
        torch.testing.assert_close(one, three, rtol=0, atol=0)


def test_the_side_thread_runs_in_the_callers_context(replay):
    """With two threads the fused path draws the next batch and the noise in a second thread: the caller's context
    (the replayed noise) and a planted bug of the audit harness (a patched seam) must reach it, or the audit would
    test a different release."""
    from dpfair.algorithms import DPFERMIClassifier
    from tests.planted import planted_bug

    data = _one_hot_data()
    X, y, s = data.X.numpy(), data.y.numpy(), data.s.numpy()
    before, fits = torch.get_num_threads(), []
    try:
        torch.set_num_threads(2)
        for bug in (False, True):
            with replay(0), contextlib.ExitStack() as stack:
                if bug:
                    stack.enter_context(pytest.warns(Warning, match="planted bugs"))
                    stack.enter_context(planted_bug("halve_noise"))
                est = DPFERMIClassifier(groups=2, classes=2, epochs=2, batch_size=64, epsilon=0.5, random_state=0,
                                        group_proportions=[0.5, 0.5])  # public: every release is a step's
                fits.append(est.fit(X, y, sensitive_features=s).model_.linear.weight.detach().clone())
    finally:
        torch.set_num_threads(before)
    assert not torch.equal(*fits)  # the halved noise changed the model: the bug reached the second thread


def test_fits_in_two_python_threads_leave_torchs_thread_count_as_it_was(monkeypatch):
    """The fused path runs its thread's PyTorch ops on one OpenMP thread while it trains, and the kernel on the thread
    count the fit read once: no fit sets PyTorch's thread count, and fits overlapping in two Python threads leave
    every thread's count as it was, during and after."""
    from concurrent.futures import ThreadPoolExecutor

    from dpfair.algorithms import DPFERMIClassifier
    import dpfair.algorithms.dpfermi.kernel as kernel

    data = _one_hot_data()
    X, y, s = data.X.numpy(), data.y.numpy(), data.s.numpy()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        set_calls, kernel_threads, sums = [], [], kernel.binary_sums
        monkeypatch.setattr(torch, "set_num_threads", lambda n: set_calls.append(n))
        monkeypatch.setattr(kernel, "binary_sums", lambda *a: kernel_threads.append((a[-1], torch.get_num_threads()))
                            or sums(*a))

        def fit(seed):
            counts = [torch.get_num_threads()]
            # epsilon=8: the 400 rows' released group counts are not too small (no SmallGroupWarning)
            est = DPFERMIClassifier(groups=2, classes=2, epochs=3, batch_size=32, epsilon=8.0,
                                    random_state=seed).fit(X, y, sensitive_features=s)
            return est, counts + [torch.get_num_threads()]

        with ThreadPoolExecutor(2) as pool:
            fitted = list(pool.map(fit, range(4)))
        assert torch.get_num_threads() == 2 and not set_calls
        assert kernel_threads and set(kernel_threads) == {(2, 1)}  # the kernel on 2 threads, PyTorch's ops on 1
        assert all(counts[0] == counts[1] for _, counts in fitted)  # each fit's thread gets its count back
        assert all(np.isfinite(est.predict_proba(X)).all() for est, _ in fitted)
    finally:
        monkeypatch.undo()
        torch.set_num_threads(before)


@pytest.mark.parametrize("model,one_hot,unit", [("logistic", True, "sensitive"), ("logistic", False, "record"),
                                                 ("mlp", False, "sensitive"), ("mlp", False, "record")])
def test_padded_poisson_batches_train_the_same_model(model, one_hot, unit, replay, monkeypatch):
    """On a device that pads (forced here on the CPU) every step's Poisson batch is padded to a bucketed size;
    padding rows add nothing (their loss weighs 0, their cell rows are 0), so the fit is the unpadded one."""
    from dpfair.algorithms import DPFERMIClassifier
    from dpfair.nn import per_sample

    if one_hot:
        data = _one_hot_data()
        X, y, s = data.X.numpy(), data.y.numpy(), data.s.numpy()
    else:
        X, y, s = _data(400)
    groups = sorted(set(s.tolist()))
    def fit():
        # epsilon=8: the 400 rows' released group counts are not too small (no SmallGroupWarning); an MLP's 4,610
        # parameters are still too many for them at the record unit, and that fit says so
        warns = model == "mlp" and unit == "record"
        with pytest.warns(UtilityWarning, match="protects whole records") if warns else contextlib.nullcontext():
            return DPFERMIClassifier(model=model, groups=groups, classes=2, epochs=2, batch_size=40, epsilon=8.0,
                                     random_state=0, privacy_unit=unit, max_grad_norm=1.0).fit(
                X, y, sensitive_features=s)
    with replay(5):
        plain = fit()
    widths = []
    batch = loop.poisson_batch

    def spy(n, samplers, device):
        idx, valid = batch(n, samplers, device)
        widths.append((idx.shape[1], None if valid is None else valid.sum(1).tolist()))
        return idx, valid

    monkeypatch.setattr(loop, "poisson_batch", spy)
    monkeypatch.setattr(per_sample, "PADDED_DEVICES", ("cuda", "cpu"))
    with replay(5):
        padded = fit()
    assert widths and all(width % 4 == 0 for width, _ in widths)  # expected batch 40: grain 4
    assert any(valid is not None and max(valid) < width for width, valid in widths)
    for a, b in zip(plain.model_.parameters(), padded.model_.parameters()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert padded.privacy_spent_ == plain.privacy_spent_
