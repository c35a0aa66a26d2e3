"""Small models used by the private and fair estimators.

Every model maps a batch of inputs to **logits of shape** ``(B, n_classes)``;
the estimators train them with cross-entropy over those ``n_classes`` logits
(binary problems included, ``n_classes == 2``).  None of the models uses
BatchNorm: it mixes the examples of a batch, so per-sample gradients (and with
them DP-SGD clipping) would be meaningless.  :class:`CNN` offers GroupNorm as an
opt-in alternative.

Initialisation is deterministic when a ``seed`` (an ``int`` or a
``torch.Generator``) is given: ``make_model("mlp", 10, 2, seed=0)`` builds the
same weights every time, on every device.  The distribution is PyTorch's own
default for ``nn.Linear`` / ``nn.Conv2d``: weights and biases uniform on
``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import nn

__all__ = [
    "CNN",
    "MLP",
    "LogisticRegression",
    "MODEL_NAMES",
    "count_parameters",
    "init_parameters",
    "make_model",
]

MODEL_NAMES = ("logistic", "mlp", "cnn")

_ACTIVATIONS = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "leaky_relu": nn.LeakyReLU,
    "selu": nn.SELU,
}


# --------------------------------------------------------------------------- helpers


def _generator(seed) -> torch.Generator | None:
    if seed is None:
        return None
    if isinstance(seed, torch.Generator):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        g = torch.Generator()
        g.manual_seed(int(seed))
        return g
    raise ValueError(f"seed must be None, an int or a torch.Generator, got {type(seed).__name__}")


@torch.no_grad()
def init_parameters(module: nn.Module, seed: int | torch.Generator | None = None) -> nn.Module:
    """(Re-)initialise every ``nn.Linear`` / ``nn.Conv*`` in ``module`` in place.

    Weights and biases are drawn uniformly on ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``
    (PyTorch's default).  The draws are made on the CPU with a generator seeded
    by ``seed`` and then copied, so the result does not depend on the device.
    Norm layers are reset to weight 1, bias 0.  Returns ``module``.
    """
    gen = _generator(seed)
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            w = m.weight
            fan_in = w[0].numel() if w.shape[0] > 0 else 1
            bound = 1.0 / math.sqrt(max(fan_in, 1))
            w.copy_(torch.empty(w.shape, dtype=torch.float64).uniform_(-bound, bound, generator=gen))
            if m.bias is not None:
                b = m.bias
                b.copy_(torch.empty(b.shape, dtype=torch.float64).uniform_(-bound, bound, generator=gen))
        elif isinstance(m, (nn.GroupNorm, nn.LayerNorm)) and getattr(m, "weight", None) is not None:
            m.weight.fill_(1.0)
            if m.bias is not None:
                m.bias.zero_()
    return module


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) scalar parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def _check_pos_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _activation(name) -> nn.Module:
    if isinstance(name, nn.Module):
        return name
    key = str(name).lower()
    if key not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {name!r}")
    return _ACTIVATIONS[key]()


def _flatten(x: torch.Tensor) -> torch.Tensor:
    return x if x.dim() == 2 else x.flatten(1)


# --------------------------------------------------------------------------- models


class LogisticRegression(nn.Module):
    """Linear model for binary and softmax (multinomial) logistic regression.

    ``forward`` always returns logits of shape ``(B, n_classes)`` so that every
    estimator can use cross-entropy over ``n_classes`` logits.

    * ``n_classes > 2`` (softmax): one ``nn.Linear(n_features, n_classes)``.
    * ``n_classes == 2`` (binary): by default (``binary_single_logit=True``) a
      single logit ``z = w·x + b`` (``nn.Linear(n_features, 1)``, i.e. classic
      logistic regression with ``n_features + 1`` parameters) returned as the
      two logits ``[0, z]``; then ``softmax(logits)[:, 1] == sigmoid(z)`` and the
      cross-entropy equals the logistic loss.  With
      ``binary_single_logit=False`` the binary model is an over-parameterised
      2-logit softmax model like the multiclass case.
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int = 2,
        *,
        binary_single_logit: bool = True,
        seed: int | torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.n_features = _check_pos_int(n_features, "n_features")
        self.n_classes = _check_pos_int(n_classes, "n_classes", 2)
        self.single_logit = bool(binary_single_logit) and self.n_classes == 2
        self.linear = nn.Linear(self.n_features, 1 if self.single_logit else self.n_classes)
        init_parameters(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(_flatten(x))
        if self.single_logit:
            return torch.cat([torch.zeros_like(z), z], dim=1)
        return z


class MLP(nn.Module):
    """Fully connected network ``n_features -> hidden... -> n_classes`` logits.

    The default, two hidden layers of 64 ReLU units, is the network of the
    PF-LD paper.  ``hidden=()`` gives a (softmax) linear model.  ``dropout > 0``
    adds ``nn.Dropout`` after every hidden activation.  Inputs with more than
    two dimensions are flattened.
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int = 2,
        hidden: Sequence[int] = (64, 64),
        activation: str = "relu",
        dropout: float = 0.0,
        *,
        seed: int | torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.n_features = _check_pos_int(n_features, "n_features")
        self.n_classes = _check_pos_int(n_classes, "n_classes", 2)
        if isinstance(hidden, numbers.Integral):
            hidden = (hidden,)
        hidden = tuple(_check_pos_int(h, "hidden layer width") for h in hidden)
        if not (0.0 <= float(dropout) < 1.0):
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        _activation(activation)  # validate early
        layers: list[nn.Module] = []
        width = self.n_features
        for h in hidden:
            layers += [nn.Linear(width, h), _activation(activation)]
            if dropout > 0:
                layers.append(nn.Dropout(float(dropout)))
            width = h
        layers.append(nn.Linear(width, self.n_classes))
        self.net = nn.Sequential(*layers)
        self.hidden = hidden
        init_parameters(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(_flatten(x))


class CNN(nn.Module):
    """Small convolutional network (2 conv + 2 linear layers) for MNIST-like images.

    Architecture (defaults, 1x28x28 input, 10 classes)::

        Conv2d(1, 16, 5, padding=2) -> ReLU -> MaxPool2d(2)     # 16 x 14 x 14
        Conv2d(16, 32, 5, padding=2) -> ReLU -> MaxPool2d(2)    # 32 x 7 x 7
        Flatten -> Linear(1568, 260) -> ReLU -> Linear(260, 10)

    = 416 + 12,832 + 407,940 + 2,610 = **423,798** trainable parameters, the
    size (~425K) of the FairDP MNIST network.  ``hidden`` is the width of the
    first linear layer.  ``norm="group"`` inserts ``GroupNorm(min(8, c), c)``
    after each convolution (BatchNorm is deliberately not offered: it breaks
    per-sample gradients); the default is no normalisation.

    Accepts images ``(B, C, H, W)`` or flattened rows ``(B, C*H*W)``, which are
    reshaped to ``(B, in_channels, image_size, image_size)``; non-square images
    can be given as ``image_size=(H, W)``.
    """

    def __init__(
        self,
        in_channels: int = 1,
        n_classes: int = 10,
        image_size: int | tuple[int, int] = 28,
        channels: Sequence[int] = (16, 32),
        hidden: int = 260,
        kernel_size: int = 5,
        activation: str = "relu",
        norm: str | None = None,
        dropout: float = 0.0,
        *,
        seed: int | torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.in_channels = _check_pos_int(in_channels, "in_channels")
        self.n_classes = _check_pos_int(n_classes, "n_classes", 2)
        if isinstance(image_size, numbers.Integral):
            image_size = (image_size, image_size)
        h, w = (_check_pos_int(s, "image_size") for s in image_size)
        self.image_size = (h, w)
        channels = tuple(_check_pos_int(c, "channels") for c in channels)
        if not channels:
            raise ValueError("channels must name at least one convolution width")
        hidden = _check_pos_int(hidden, "hidden")
        k = _check_pos_int(kernel_size, "kernel_size")
        if k % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same padding), got {k}")
        if norm not in (None, "group"):
            raise ValueError(f"norm must be None or 'group', got {norm!r}")
        if not (0.0 <= float(dropout) < 1.0):
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")

        layers: list[nn.Module] = []
        c_in = self.in_channels
        for c in channels:
            layers.append(nn.Conv2d(c_in, c, k, padding=k // 2))
            if norm == "group":
                layers.append(nn.GroupNorm(math.gcd(8, c), c))
            layers += [_activation(activation), nn.MaxPool2d(2)]
            h, w = h // 2, w // 2
            if h == 0 or w == 0:
                raise ValueError(
                    f"image_size {self.image_size} is too small for {len(channels)} pooling layers"
                )
            c_in = c
        self.features = nn.Sequential(*layers)
        self.flat_features = c_in * h * w
        head: list[nn.Module] = [
            nn.Flatten(1),
            nn.Linear(self.flat_features, hidden),
            _activation(activation),
        ]
        if dropout > 0:
            head.append(nn.Dropout(float(dropout)))
        head.append(nn.Linear(hidden, self.n_classes))
        self.classifier = nn.Sequential(*head)
        init_parameters(self, seed)

    @property
    def n_features(self) -> int:
        return self.in_channels * self.image_size[0] * self.image_size[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            x = x.reshape(x.shape[0], self.in_channels, *self.image_size)
        return self.classifier(self.features(x))


# --------------------------------------------------------------------------- factory


def make_model(
    name: str | nn.Module,
    n_features: int | None = None,
    n_classes: int = 2,
    **kwargs,
) -> nn.Module:
    """Build a model by name: ``"logistic"``, ``"mlp"`` or ``"cnn"``.

    ``kwargs`` go to the model's constructor (``seed=`` included).  For
    ``"cnn"``, ``n_features`` is ``in_channels * H * W``; ``image_size`` is
    inferred as ``sqrt(n_features / in_channels)`` when not given (square
    images), and must agree with ``n_features`` when it is.

    An ``nn.Module`` passed as ``name`` is returned unchanged (``kwargs`` are
    ignored), so estimators can take either a name or a ready-built model.
    """
    if isinstance(name, nn.Module):
        return name
    if not isinstance(name, str):
        raise ValueError(
            f"model must be one of {list(MODEL_NAMES)} or a torch.nn.Module, got {type(name).__name__}"
        )
    key = name.strip().lower()
    if key not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; choose one of {list(MODEL_NAMES)} or pass a torch.nn.Module")
    if key == "logistic":
        return LogisticRegression(n_features, n_classes, **kwargs)
    if key == "mlp":
        return MLP(n_features, n_classes, **kwargs)
    # cnn
    in_channels = _check_pos_int(kwargs.pop("in_channels", 1), "in_channels")
    image_size = kwargs.pop("image_size", None)
    if n_features is None and image_size is None:
        image_size = 28
    if image_size is None:
        n_features = _check_pos_int(n_features, "n_features")
        side = math.isqrt(n_features // in_channels)
        if side * side * in_channels != n_features:
            raise ValueError(
                f"model='cnn' reads images, but the rows have n_features={n_features}, not in_channels × side² "
                f"(in_channels={in_channels}); use model='logistic' or 'mlp' for tables, or pass image_size=(H, W) "
                "for non-square images"
            )
        image_size = side
    model = CNN(in_channels, n_classes, image_size, **kwargs)
    if n_features is not None and model.n_features != n_features:
        raise ValueError(
            f"n_features={n_features} does not match in_channels * H * W = {model.n_features} "
            f"(in_channels={in_channels}, image_size={model.image_size})"
        )
    return model
