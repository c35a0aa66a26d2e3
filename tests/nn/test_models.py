"""Models: shapes, conventions, factory errors, seeded initialisation."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfair.nn import CNN, MLP, LogisticRegression, count_parameters, make_model

CNN_DEFAULT_PARAMS = 423_798


def test_logistic_binary_single_logit_is_sigmoid():
    m = LogisticRegression(5, 2, seed=0)
    assert count_parameters(m) == 6
    x = torch.randn(7, 5)
    logits = m(x)
    assert logits.shape == (7, 2)
    z = m.linear(x)[:, 0]
    torch.testing.assert_close(logits.softmax(1)[:, 1], torch.sigmoid(z))
    y = torch.randint(0, 2, (7,))
    torch.testing.assert_close(
        F.cross_entropy(logits, y), F.binary_cross_entropy_with_logits(z, y.float())
    )


def test_logistic_softmax_and_two_logit_variant():
    m = LogisticRegression(5, 4, seed=0)
    assert m(torch.randn(3, 5)).shape == (3, 4)
    assert count_parameters(m) == 24
    m2 = LogisticRegression(5, 2, binary_single_logit=False)
    assert count_parameters(m2) == 12 and m2(torch.randn(3, 5)).shape == (3, 2)


def test_mlp_default_architecture():
    m = MLP(10, 3)
    linears = [l for l in m.modules() if isinstance(l, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(10, 64), (64, 64), (64, 3)]
    assert sum(isinstance(l, nn.ReLU) for l in m.modules()) == 2
    assert m(torch.randn(4, 10)).shape == (4, 3)
    assert MLP(10, 2, hidden=(), seed=0)(torch.randn(2, 10)).shape == (2, 2)
    d = MLP(10, 2, activation="tanh", dropout=0.5)
    assert any(isinstance(l, nn.Dropout) for l in d.modules())


def test_cnn_parameter_count_and_flat_inputs():
    m = CNN(seed=0)
    n = count_parameters(m)
    assert n == CNN_DEFAULT_PARAMS
    assert abs(n - 425_000) / 425_000 < 0.05
    assert not any(isinstance(l, nn.modules.batchnorm._BatchNorm) for l in m.modules())
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(m(x), m(x.reshape(3, 784)))
    assert m(x).shape == (3, 10)
    g = CNN(in_channels=3, n_classes=5, image_size=32, norm="group")
    assert g(torch.randn(2, 3 * 32 * 32)).shape == (2, 5)
    assert any(isinstance(l, nn.GroupNorm) for l in g.modules())


def test_make_model_names_and_module_passthrough():
    assert isinstance(make_model("logistic", 4, 2), LogisticRegression)
    assert isinstance(make_model("MLP", 4, 3, hidden=(8,)), MLP)
    cnn = make_model("cnn", 784, 10)
    assert isinstance(cnn, CNN) and cnn.image_size == (28, 28)
    assert make_model("cnn", 3 * 16 * 16, 4, in_channels=3).image_size == (16, 16)
    custom = nn.Linear(3, 2)
    assert make_model(custom) is custom


def test_make_model_errors():
    with pytest.raises(ValueError, match="logistic.*mlp.*cnn"):
        make_model("resnet", 4, 2)
    with pytest.raises(ValueError):
        make_model(42, 4, 2)
    with pytest.raises(ValueError, match="n_features"):
        make_model("cnn", 785, 10)
    with pytest.raises(ValueError, match="n_features"):
        make_model("cnn", 784, 10, image_size=20)
    with pytest.raises(ValueError, match="n_classes"):
        make_model("mlp", 4, 1)
    with pytest.raises(ValueError, match="activation"):
        make_model("mlp", 4, 2, activation="swishy")
    with pytest.raises(ValueError, match="seed"):
        make_model("mlp", 4, 2, seed="zero")


@pytest.mark.parametrize("name,nf,nc", [("logistic", 6, 2), ("mlp", 6, 3), ("cnn", 784, 10)])
def test_seeded_init_is_reproducible(name, nf, nc):
    a = make_model(name, nf, nc, seed=0).state_dict()
    b = make_model(name, nf, nc, seed=0).state_dict()
    c = make_model(name, nf, nc, seed=1).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    d = make_model(name, nf, nc, seed=g1).state_dict()
    e = make_model(name, nf, nc, seed=g2).state_dict()
    assert all(torch.equal(d[k], e[k]) for k in d)


def test_init_bounds_match_pytorch_default():
    m = MLP(100, 2, hidden=(50,), seed=3)
    first = m.net[0]
    assert first.weight.abs().max() <= 0.1 and first.bias.abs().max() <= 0.1
    assert first.weight.std() > 0.04
