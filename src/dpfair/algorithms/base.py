"""The scikit-learn style base every dpfair estimator stands on.

What it gives a method, so that the method's file reads like its paper's
pseudo-code:

- ``fit(X, y, sensitive_features=s)``: input checks (finite features, aligned
  lengths, labels and groups encoded as scikit-learn does, enough members per
  class and group), then the subclass's ``_fit``;
- seeding: one ``random_state`` seeds a numpy and a torch generator
  (``self._np_rng``, ``self._torch_rng``) from which every random draw comes;
- device choice (``"auto"``: CUDA when available);
- privacy plumbing: a :class:`~dpfair.privacy.PrivacyLedger` under the
  estimator's privacy unit, noise calibration over the whole planned ledger
  (``_plan``), and ``privacy_spent_ = (ε, δ)`` from the ledger actually spent;
- Poisson sampling of minibatches (:func:`poisson_batches`), empty batches
  included;
- ``history_``: one row per epoch of what the method logs; it is saved with the model, so a
  private method logs public counters and post-processed releases only.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpfair.nn import make_model
from dpfair.privacy import PrivacyLedger, calibrate_noise, check_privacy_unit
from dpfair.validation import (
    check_delta,
    check_epsilon,
    check_features,
    check_min_count,
    check_positive,
    encode_categories,
)


def resolve_device(device) -> torch.device:
    """``"auto"`` → CUDA if available else CPU; anything else is passed to ``torch.device``."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} asked for CUDA but none is available; use device='cpu'")
    return dev


def make_generators(random_state, device: torch.device) -> tuple[np.random.Generator, torch.Generator, int]:
    """Numpy and torch generators seeded from ``random_state`` (an int, or None for fresh entropy)."""
    if random_state is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        seed = int(random_state)
    else:
        raise ValueError(f"random_state must be an int or None, got {random_state!r}")
    ss = np.random.SeedSequence(seed)
    np_seed, torch_seed = ss.spawn(2)
    np_rng = np.random.default_rng(np_seed)
    torch_rng = torch.Generator(device=device)
    torch_rng.manual_seed(int(torch_seed.generate_state(1, dtype=np.uint64)[0] >> 1))
    return np_rng, torch_rng, seed


def poisson_batches(n: int, sampling_probability: float, steps: int, generator: torch.Generator,
                    device=None) -> Iterator[torch.Tensor]:
    """``steps`` Poisson samples of ``range(n)``: each index is in a batch independently with prob. q.

    A batch may be empty; a private step must still release its noise then
    (the accounting of the subsampled mechanism assumes every step releases).
    """
    device = generator.device if device is None else device
    for _ in range(steps):
        mask = torch.rand(n, generator=generator, device=device) < sampling_probability
        yield mask.nonzero(as_tuple=True)[0]


class FairEstimator(ClassifierMixin, BaseEstimator):
    """Base of every dpfair classifier. Subclasses implement ``_fit`` and ``_predict_proba``.

    Class attributes a subclass may set:
    ``_requires_sensitive`` (``fit`` needs ``sensitive_features``),
    ``_min_per_class`` / ``_min_per_group`` (members needed in each),
    ``_private`` (whether ``epsilon``/``delta`` hyper-parameters exist).
    """

    _requires_sensitive = False
    _min_per_class = 2
    _min_per_group = 2
    _private = False

    # ---- fitting -------------------------------------------------------
    def fit(self, X, y, sensitive_features=None):
        self._fit(*self._start_fit(X, y, sensitive_features))
        return self

    def _start_fit(self, X, y, sensitive_features):
        """Checks, encoding, seeding, budget and an empty ledger; returns ``(X, y_codes, s_codes)``."""
        X, y_codes, s_codes = self._check_fit_inputs(X, y, sensitive_features)
        self.device_ = resolve_device(getattr(self, "device", "cpu"))
        self._np_rng, self._torch_rng, self.random_state_ = make_generators(
            getattr(self, "random_state", None), self.device_
        )
        if self._private:
            self.epsilon_target_ = check_epsilon(self.epsilon)
            self.delta_ = check_delta(self.delta if self.delta is not None else 1.0 / len(X) ** 2, n=len(X))
            self.privacy_unit_ = check_privacy_unit(self.privacy_unit)
        self.privacy_ledger_ = PrivacyLedger(
            self.privacy_unit_ if self._private else "record"
        )
        self.history_ = []
        return X, y_codes, s_codes

    def _check_features_and_labels(self, X, y):
        """Finite features and encoded labels (``self.classes_``), with enough members per class."""
        X = check_features(X, "X")
        y_codes, self.classes_ = encode_categories(y, "y", X.shape[0])
        check_min_count(y_codes, len(self.classes_), "y", self._min_per_class, what="class")
        return X, y_codes

    def _check_fit_inputs(self, X, y, s):
        X, y_codes = self._check_features_and_labels(X, y)
        n = X.shape[0]
        if s is None:
            if self._requires_sensitive:
                raise ValueError(
                    f"{type(self).__name__} needs sensitive_features: call fit(X, y, sensitive_features=s)"
                )
            self.groups_ = None
            s_codes = None
        else:
            s_codes, self.groups_ = encode_categories(s, "sensitive_features", n)
            check_min_count(s_codes, len(self.groups_), "sensitive_features", self._min_per_group,
                            what="group")
        self.n_features_in_ = X.shape[1]
        return X, y_codes, s_codes

    def _fit(self, X, y, s):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- privacy -------------------------------------------------------
    def _plan(self, noise_multiplier: float):
        """The dp_accounting event of everything ``fit`` will release with this noise multiplier."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _calibrated_noise(self) -> float:
        """The noise multiplier to use: the user's, 0 for ε = ∞, else calibrated on the whole plan."""
        given = getattr(self, "noise_multiplier", None)
        if given is not None:
            return float(check_positive(given, "noise_multiplier", allow_zero=True))
        if math.isinf(self.epsilon_target_):
            return 0.0
        return calibrate_noise(self._plan, self.epsilon_target_, self.delta_, self.privacy_unit_,
                               self.accountant)

    def _finish_privacy(self) -> None:
        if self._private:
            eps = self.privacy_ledger_.epsilon(self.delta_, self.accountant)
            self.privacy_spent_ = (eps, self.delta_)
        else:
            self.privacy_spent_ = (math.inf, 0.0)

    # ---- prediction ----------------------------------------------------
    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self, "classes_")
        X = check_features(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features but the model was fitted with {self.n_features_in_}")
        return self._predict_proba(X)

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    # ---- persistence ---------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted estimator (hyper-parameters, model weights, ledger) to ``path``."""
        check_is_fitted(self, "classes_")
        state = {k: v for k, v in self.__dict__.items() if k not in ("_np_rng", "_torch_rng")}
        torch.save({"class": type(self).__name__, "state": state}, path)


def load_estimator(path) -> FairEstimator:
    """Read an estimator written by :meth:`FairEstimator.save`."""
    from dpfair.algorithms import ESTIMATORS

    blob = torch.load(path, map_location="cpu", weights_only=False)
    est = ESTIMATORS[blob["class"]].__new__(ESTIMATORS[blob["class"]])
    est.__dict__.update(blob["state"])
    return est


class TorchClassifier(FairEstimator):
    """Estimators that train a ``torch.nn.Module`` (a name from :func:`dpfair.nn.make_model` or a module)."""

    def _build_model(self, n_classes: int) -> torch.nn.Module:
        if isinstance(self.model, torch.nn.Module):
            model = copy.deepcopy(self.model)
        else:
            kwargs = dict(self.model_kwargs or {})
            kwargs.setdefault("seed", int(self._np_rng.integers(2**31)))
            model = make_model(self.model, self.n_features_in_, n_classes, **kwargs)
        return model.to(device=self.device_, dtype=torch.float32)

    def _make_optimizer(self, params):
        name = self.optimizer
        if name == "sgd":
            return torch.optim.SGD(params, lr=self.learning_rate, momentum=self.momentum)
        if name == "adam":
            return torch.optim.Adam(params, lr=self.learning_rate)
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")

    def _tensor(self, a, dtype=torch.float32) -> torch.Tensor:
        return torch.as_tensor(a, dtype=dtype, device=self.device_)

    def _predict_proba(self, X) -> np.ndarray:
        model = self.model_
        dev = next(model.parameters()).device
        out = []
        model.eval()
        with torch.no_grad():
            for start in range(0, X.shape[0], 8192):
                xb = torch.as_tensor(X[start:start + 8192], dtype=torch.float32, device=dev)
                out.append(torch.softmax(model(xb), dim=1).double().cpu().numpy())
        return np.concatenate(out)

    def _validate_training(self):
        check_positive(self.epochs, "epochs", integer=True)
        check_positive(self.learning_rate, "learning_rate")
        check_positive(self.batch_size, "batch_size", integer=True)
