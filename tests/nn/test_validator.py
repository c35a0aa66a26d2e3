"""dpfair.nn.validate_module / fix_module: the layers that mix a batch's examples, found and replaced (issue 13,
item 4: a BatchNorm module gave a raw torch.func error; Opacus's ModuleValidator explains and fixes)."""

import pytest
import torch
from torch import nn

from dpfair.algorithms import DPSGDClassifier
from dpfair.datasets import make_synthetic
from dpfair.nn import clipped_gradient_sum, fix_module, validate_module


def cnn_with_batchnorm():
    return nn.Sequential(
        nn.Unflatten(1, (1, 4, 4)), nn.Conv2d(1, 48, 3), nn.BatchNorm2d(48), nn.ReLU(), nn.Flatten(1),
        nn.Linear(48 * 4, 10), nn.BatchNorm1d(10), nn.Linear(10, 2),
        nn.Unflatten(1, (1, 2)), nn.InstanceNorm1d(1, track_running_stats=True), nn.Flatten(1),
    )


def test_validate_lists_every_layer_that_mixes_examples_with_its_fix():
    problems = validate_module(cnn_with_batchnorm().train())
    assert [(p.name, p.module_type) for p in problems] == [("2", "BatchNorm2d"), ("6", "BatchNorm1d"),
                                                            ("9", "InstanceNorm1d")]
    assert "training mode" in problems[0].problem and "GroupNorm" in problems[0].fix
    assert "track_running_stats=False" in problems[2].fix
    assert validate_module(nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))) == []
    frozen = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    assert validate_module(frozen) == []  # running statistics frozen in eval mode: each example alone
    (no_stats,) = validate_module(nn.BatchNorm1d(4, track_running_stats=False).eval())
    assert no_stats.name == "" and "no running statistics" in no_stats.problem


def test_fix_replaces_them_with_per_example_layers_and_leaves_the_original():
    model = cnn_with_batchnorm().train()
    with torch.no_grad():
        model[2].weight.uniform_(0.5, 1.5)
    fixed = fix_module(model)
    assert validate_module(fixed) == [] and isinstance(model[2], nn.BatchNorm2d)  # a copy was fixed
    assert isinstance(fixed[2], nn.GroupNorm) and (fixed[2].num_groups, fixed[2].num_channels) == (16, 48)
    assert isinstance(fixed[6], nn.GroupNorm) and fixed[6].num_groups == 1  # BatchNorm1d: a LayerNorm
    assert not fixed[9].track_running_stats
    torch.testing.assert_close(fixed[2].weight, model[2].weight)
    X = torch.randn(5, 16)
    assert fixed(X).shape == (5, 2)
    # each example's output no longer depends on the others
    torch.testing.assert_close(fixed(X)[:1], fixed(X[:1]))
    assert isinstance(fix_module(nn.BatchNorm1d(3)), nn.GroupNorm)


def test_the_estimators_refusal_names_the_fix_and_the_fixed_module_trains():
    X, y, s = make_synthetic(n_samples=200, n_features=16, random_state=0)
    model = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    # ε = 16: at ε = 1, 170 parameters on 200 rows are too little data for record-level privacy (a UtilityWarning)
    fast = dict(epsilon=16.0, epochs=1, batch_size=50, classes=2)
    with pytest.raises(ValueError, match=r"1 \(BatchNorm1d\) is in training mode.*dpfair.nn.fix_module"):
        DPSGDClassifier(model=model, **fast).fit(X, y)
    est = DPSGDClassifier(model=fix_module(model), random_state=0, **fast).fit(X, y)
    assert est.predict(X).shape == (200,)
    summed, _ = clipped_gradient_sum(fix_module(model).double(), lambda out, t: nn.functional.cross_entropy(
        out, t, reduction="none"), torch.tensor(X), torch.tensor(y), 1.0, method="vmap")
    assert all(torch.isfinite(v).all() for v in summed.values())


def test_an_uninitialised_lazy_batchnorm_cannot_be_fixed_blindly():
    with pytest.raises(ValueError, match="run one forward pass first"):
        fix_module(nn.Sequential(nn.LazyBatchNorm1d()))
