"""Safe model files (dpfair.persistence): round trips of every method, and refusal of crafted files."""

import io
import json
import math
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import skops.io
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import Perceptron
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from dpfair.algorithms import (
    METHODS,
    DPPostProcessingClassifier,
    DPSGDClassifier,
    ERMClassifier,
)
from dpfair.utils.capabilities import capabilities
from dpfair.datasets import make_synthetic
from dpfair.persistence import FORMAT, VERSION, load_estimator, save_estimator

#: the reductions (private-demographics, reductions) run fairlearn, which uses pandas calls pandas deprecates
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:fairlearn.*")

N = 600
FAST = dict(epochs=2, batch_size=64)

#: Small, fast settings per method (every method of METHODS must appear).
#: half of ε on the released group counts (default 5 %), so that their noise does not make a group of ~270 look
#: possibly under 30 (a SmallGroupWarning), and a chosen oracle tolerance: "auto" at ε = 1 over 600 rows warns
#: that the audit cannot see a violation of 0.05 (a UtilityWarning); what is saved has the same parts
COUNTS, TOLERANCE = dict(proportions_budget=0.5), dict(tolerance=0.05)
SETTINGS = {
    "dp-fermi": dict(FAST, **COUNTS),
    "dp-sgd": FAST,
    "erm": FAST,
    "pf-ld": dict(FAST, counts_budget=0.5, dual_tolerance=0.05),
    "dp-postprocess": {},
    "dp-oracle": dict(n_rounds=3, **TOLERANCE),
    "private-demographics": dict(max_iter=5),
    "output-perturbation": dict(sample_size=N),
    "reductions": dict(max_iter=5),
    "threshold": {},
}

#: More variants: other models, nested estimators, other notions, other base learners.
VARIANTS = {
    "erm-mlp-kwargs": ("erm", dict(model="mlp", model_kwargs={"hidden": (8, 4), "activation": "tanh"}, **FAST)),
    "dp-oracle-aware": ("dp-oracle", dict(n_rounds=3, sensitive_aware=True, **TOLERANCE)),
    "threshold-eo": ("threshold", dict(notion="equalized_odds")),
    "reductions-eo-nb": ("reductions", dict(notion="equalized_odds", estimator=GaussianNB(), max_iter=5)),
    "dp-postprocess-dpsgd": ("dp-postprocess", dict(estimator=DPSGDClassifier(epsilon=2.0, epochs=1,
                                                                               batch_size=150))),
    "dp-postprocess-inf": ("dp-postprocess", dict(epsilon=math.inf)),
    "output-perturbation-intercept": ("output-perturbation", dict(sample_size=N, fit_intercept=True,
                                                                  intercept_scaling=0.5)),
    "output-perturbation-sensitive": ("output-perturbation", dict(privacy_unit="sensitive")),
}


def test_settings_cover_every_method():
    assert set(SETTINGS) == set(METHODS)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(n_samples=N, n_features=5, random_state=0)


def _fit(method, kwargs, data, labels=((0, 1), (0, 1))):
    """``labels``: the public lists of classes and of groups (make_synthetic's codes, or names for them)."""
    X, y, s = data
    y, s = np.array(labels[0])[y], np.array(labels[1])[s]
    params = METHODS[method]().get_params()
    public = {key: list(values) for key, values in zip(("classes", "groups"), labels) if key in params}
    return METHODS[method](random_state=0, **public, **kwargs).fit(X, y, sensitive_features=s)


class _Fitted(dict):
    """Estimators fitted on first use (each test worker fits only what its tests need)."""

    def __init__(self, data):
        super().__init__()
        self.data = data
        self.cases = {m: (m, k) for m, k in SETTINGS.items()} | VARIANTS

    def __missing__(self, name):
        method, kwargs = self.cases[name]
        self[name] = est = _fit(method, kwargs, self.data)
        return est

    def __iter__(self):
        return iter(self.cases)


@pytest.fixture(scope="module")
def fitted(data):
    return _Fitted(data)


def _needs_s(est) -> bool:
    return capabilities(est).predict_needs_sensitive


def _predictions(est, X, s):
    extra = {"sensitive_features": s} if _needs_s(est) else {}
    return est.predict_proba(X, **extra), est.predict(X, **extra)


def _same(a, b) -> bool:
    """Deep equality of the values estimators hold (arrays by dtype and content, estimators by parameters)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
                and (np.array_equal(a, b, equal_nan=a.dtype.kind in "fc") if a.dtype != object
                     else all(_same(x, y) for x, y in zip(a.ravel(), b.ravel()))))
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return type(a) is type(b) and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (pd.Series, pd.DataFrame)):
        return type(a) is type(b) and a.shape == b.shape and a.index.equals(b.index) and (
            all(_same(x, y) for x, y in zip(a.to_numpy().ravel(), b.to_numpy().ravel())))
    if isinstance(a, BaseEstimator):
        return type(a) is type(b) and _same(a.get_params(deep=False), b.get_params(deep=False)) and all(
            _same(v, getattr(b, k, None)) for k, v in vars(a).items() if k.endswith("_") and not k.startswith("_")
            and k != "constraints_")
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return type(a) is type(b)
    if type(a).__module__.split(".")[0] in ("fairlearn", "dpfair"):  # moments, threshold rules: their state
        return type(a) is type(b) and _same({k: v for k, v in vars(a).items()}, dict(vars(b)))
    return type(a) is type(b) and a == b


def _public(est) -> dict:
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _read(path) -> tuple[dict, dict]:
    """A model file's tensors and its safetensors metadata (``format``, ``version``, ``meta``: JSON text)."""
    raw = open(path, "rb").read()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    return safetensors.torch.load(raw), header["__metadata__"]


def _meta(path) -> dict:
    return json.loads(_read(path)[1]["meta"])


def _rewrite(path, out, edit_meta=None, edit_info=None, edit_tensors=None):
    """A copy of a model file with its JSON, its metadata or its tensors edited, written with safetensors."""
    tensors, info = _read(path)
    if edit_meta is not None:
        meta = json.loads(info["meta"])
        edit_meta(meta)
        info["meta"] = json.dumps(meta)
    if edit_info is not None:
        edit_info(info)
    if edit_tensors is not None:
        edit_tensors(tensors)
    Path(out).write_bytes(safetensors.torch.save(tensors, metadata=info))
    return out


# ============================================================================== round trips
@pytest.mark.parametrize("name", [*SETTINGS, *VARIANTS])
def test_round_trip_predicts_identically(name, fitted, data, tmp_path):
    X, y, s = data
    est = fitted[name]
    path = tmp_path / "model.pt"
    save_estimator(est, path)
    back = load_estimator(path)

    assert type(back) is type(est)
    for a, b in zip(_predictions(est, X, s), _predictions(back, X, s)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert back.privacy_spent_ == est.privacy_spent_
    assert back.privacy_ledger_ == est.privacy_ledger_
    assert _same(back.privacy_ledger_.to_records(), est.privacy_ledger_.to_records())
    if back.privacy_ledger_.entries:
        assert back.privacy_ledger_.epsilon(est.privacy_spent_[1] or 1e-5) == pytest.approx(
            est.privacy_ledger_.epsilon(est.privacy_spent_[1] or 1e-5))
    assert back.history_ == est.history_
    assert _same(back.get_params(deep=False), est.get_params(deep=False))
    assert set(_public(back)) == set(_public(est))
    for k, v in _public(est).items():
        if k != "device_":
            assert _same(getattr(back, k), v), k
    clone(back)  # a loaded estimator is an ordinary, clonable estimator


def test_round_trip_with_string_labels_and_groups(data, tmp_path):
    X, y, s = data
    for method in ("erm", "threshold", "dp-postprocess"):
        est = _fit(method, SETTINGS[method], data, labels=(["neg", "pos"], ["a", "b"]))
        save_estimator(est, tmp_path / "m.pt")
        back = load_estimator(tmp_path / "m.pt")
        s_str = np.array(["a", "b"])[s]
        assert _same(back.classes_, est.classes_) and _same(back.groups_, est.groups_)
        for a, b in zip(_predictions(est, X, s_str), _predictions(back, X, s_str)):
            assert np.array_equal(a, b)


def test_fairlearn_objects_keep_what_predicts_and_drop_the_training_data(fitted, data, tmp_path):
    X, y, s = data
    est = fitted["reductions"]
    save_estimator(est, tmp_path / "m.pt")
    back = load_estimator(tmp_path / "m.pt")
    pd.testing.assert_series_equal(back.mitigator_.weights_, est.mitigator_.weights_)
    pd.testing.assert_frame_equal(back.mitigator_.lambda_vecs_, est.mitigator_.lambda_vecs_)
    assert len(back.mitigator_.predictors_) == len(est.mitigator_.predictors_)
    # the loaded constraint object held X, y and s: fairlearn's fit needs it, prediction does not
    assert hasattr(est.mitigator_, "constraints_") and not hasattr(back.mitigator_, "constraints_")
    assert back.mitigator_.constraints.data_loaded is False


def test_file_objects_and_loaded_models_live_on_the_cpu(fitted, data):
    X, y, s = data
    buf = io.BytesIO()
    save_estimator(fitted["dp-fermi"], buf)
    buf.seek(0)
    back = load_estimator(buf)
    assert back.device_ == torch.device("cpu")
    assert next(back.model_.parameters()).device.type == "cpu"
    assert not back.model_.training
    assert np.array_equal(back.predict_proba(X), fitted["dp-fermi"].predict_proba(X))


def test_every_kind_of_value_round_trips(fitted, tmp_path):
    est = clone(fitted["erm"]).set_params()  # unfitted clone, then give it the fitted state
    est.__dict__.update({k: v for k, v in vars(fitted["erm"]).items() if not k.startswith("_")})
    big = np.arange(200_000, dtype=np.float64)
    values = {
        "ints": np.arange(6, dtype=np.int32).reshape(2, 3),
        "uints": np.array([0, 65535], dtype=np.uint16),
        "u64": np.array([2**64 - 1], dtype=np.uint64),
        "half": np.array([1.5, -2.0], dtype=np.float16),
        "complex": np.array([1 + 2j], dtype=np.complex128),
        "bools": np.array([[True, False]]),
        "big_endian": np.array([1.0, 2.0], dtype=">f8"),
        "strided": big[::50_000],
        "view": big[:3],
        "empty": np.zeros((0, 3)),
        "zero_d": np.array(3.5),
        "strings": np.array([["a", "bc"], ["", "déf"]]),
        "objects": np.array(["x", 1, None, 2.5], dtype=object),
        "scalars": [np.float64(0.25), np.int64(-3), np.bool_(True), np.float32(1.5), np.str_("s")],
        "floats": [math.inf, -math.inf, math.nan, 1e-300, 0.1],
        "nested": {"a": (1, [2, {"b": None}]), 3: "int key", (1, 2): "tuple key", np.int64(4): "np key"},
        "tensor": torch.arange(4.0).reshape(2, 2)[:, 1],
        "dtype": torch.float64,
        "empty_containers": ([], (), {}),
        "series": pd.Series([0.5, 0.25], index=pd.Index(["u", "v"], name="k"), name="w"),
        "objects_series": pd.Series([GaussianNB(), None], dtype=object),
        "frame": pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5]},
                              index=pd.MultiIndex.from_tuples([("+", 0), ("-", 1)], names=["sign", "g"])),
    }
    est.extra_ = values
    save_estimator(est, tmp_path / "m.pt")
    back = load_estimator(tmp_path / "m.pt")
    got = back.extra_
    for k, v in values.items():
        if k in ("big_endian",):
            assert got[k].dtype == np.float64 and np.array_equal(got[k], v)
        elif k == "frame":
            pd.testing.assert_frame_equal(got[k], v)
        elif k == "series":
            pd.testing.assert_series_equal(got[k], v)
        else:
            assert _same(got[k], v), k
    # a view is saved as its own values, not with the storage it was sliced from
    sizes = [t.numel() for t in _read(tmp_path / "m.pt")[0].values()]
    assert max(sizes) < 1000


# ============================================================================== user modules
class TinyNet(torch.nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(5, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
        self.register_buffer("scale", torch.ones(1))

    def forward(self, x):
        return self.body(x) * self.scale


@pytest.mark.parametrize("cls", [ERMClassifier, DPSGDClassifier])
def test_user_module_round_trip_needs_a_module_of_the_same_architecture(cls, data, tmp_path):
    X, y, s = data
    torch.manual_seed(0)
    private = dict(epsilon=4.0) if cls is DPSGDClassifier else {}  # at ε = 1, 50 parameters on 600 rows warn
    est = cls(model=TinyNet(), random_state=0, classes=[0, 1], **private, **FAST).fit(X, y)
    path = tmp_path / "user.pt"
    save_estimator(est, path)
    meta = _meta(path)["estimator"]
    assert meta["fitted"]["model_"]["__torch_module__"]["kind"] == "user"

    with pytest.raises(ValueError, match=r"user-defined torch module .*TinyNet.*model="):
        load_estimator(path)
    with pytest.raises(ValueError, match=r"does not match .*same architecture"):
        load_estimator(path, model=TinyNet(width=7))
    with pytest.raises(ValueError, match="model= must be a torch.nn.Module"):
        load_estimator(path, model="mlp")

    back = load_estimator(path, model=TinyNet())
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    assert back.privacy_spent_ == est.privacy_spent_ and back.privacy_ledger_ == est.privacy_ledger_
    assert isinstance(back.model, TinyNet) and _same(back.model, est.model)  # the parameter, as given
    assert back.model_ is not back.model


# ============================================================================== secrets never saved
SECRET = 123456.789012


def _walk(node, visit, where="meta"):
    visit(node, where)
    if isinstance(node, dict):
        for k, v in node.items():
            _walk(v, visit, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(v, visit, f"{where}[{i}]")


@pytest.mark.parametrize("name", [*SETTINGS, *VARIANTS])
def test_no_private_attribute_and_no_generator_is_ever_saved(name, fitted, tmp_path):
    est = fitted[name]
    est._planted_secret = np.array([SECRET])  # what a method keeps before release, in a private attribute
    est._planted_generator = np.random.default_rng(0)
    try:
        save_estimator(est, tmp_path / "m.pt")
    finally:
        del est._planted_secret, est._planted_generator
    tensors, info = _read(tmp_path / "m.pt")
    assert set(info) == {"format", "version", "meta"}
    sklearn_part = tensors.pop("sklearn", None)  # the skops archive of the scikit-learn objects, as bytes
    assert all(type(t) is torch.Tensor for t in tensors.values())
    # nothing with one row per person (training data, sensitive features) is in the file
    assert not any(t.dim() and t.shape[0] == N for t in tensors.values())
    secret = torch.tensor(SECRET, dtype=torch.float64)
    for t in tensors.values():
        assert not (t.is_floating_point() and torch.isclose(t.double(), secret).any())
    if sklearn_part is not None:
        with zipfile.ZipFile(io.BytesIO(sklearn_part.numpy().tobytes())) as part:
            arrays = [np.load(io.BytesIO(part.read(n)), allow_pickle=False) for n in part.namelist()
                      if n.endswith(".npy")]
            schema = part.read("schema.json").decode()
        assert not any(a.ndim and a.shape[0] == N for a in arrays)
        assert not any(a.dtype.kind == "f" and np.isclose(a, SECRET).any() for a in arrays)
        assert "_planted" not in schema and "Generator" not in schema
    text = info["meta"]
    for word in ("_planted", "_np_rng", "_torch_rng", "_secret", "_sigma", "Generator", "SeedSequence"):
        assert word not in text

    estimators = []

    def visit(node, where):
        if isinstance(node, dict) and "__estimator__" in node:
            estimators.append((where, node["__estimator__"]))

    meta = json.loads(text)
    estimators.append(("estimator", meta["estimator"]))
    _walk(meta["estimator"], visit)
    for where, node in estimators:
        for key in (*node["params"], *node["fitted"]):
            assert not key.startswith("_"), f"{where}: {key}"
        assert all(k.endswith("_") for k in node["fitted"])


@pytest.mark.parametrize("make", [
    lambda: np.random.default_rng(0), lambda: np.random.RandomState(0), lambda: torch.Generator(),
    lambda: np.random.SeedSequence(1),
])
def test_a_generator_among_public_attributes_is_refused(make, fitted, tmp_path):
    est = fitted["dp-sgd"]
    for attach in ("rng_", "history_"):
        saved = getattr(est, attach, None)
        if attach == "history_":
            est.history_ = [*saved, {"rng": make()}]
        else:
            est.rng_ = make()
        try:
            with pytest.raises(ValueError, match=r"random generator.*never be saved"):
                save_estimator(est, tmp_path / "m.pt")
        finally:
            if attach == "history_":
                est.history_ = saved
            else:
                del est.rng_
    assert not (tmp_path / "m.pt").exists()


def test_a_generator_inside_a_scikit_learn_object_is_refused(data, tmp_path):
    """The scikit-learn part is checked too: skops would write a RandomState's state, a secret."""
    from sklearn.linear_model import LogisticRegression

    X, y, s = data
    base = LogisticRegression(random_state=np.random.RandomState(0))
    est = DPPostProcessingClassifier(base, random_state=0, groups=2, classes=2).fit(X, y, sensitive_features=s)
    with pytest.raises(ValueError, match=r"estimator_\.random_state is a random generator \(RandomState\)"):
        save_estimator(est, tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()


def test_dpfair_secret_generator_is_refused(fitted, tmp_path):
    privacy = pytest.importorskip("dpfair.privacy")
    secret_cls = getattr(privacy, "SecretRandom", None)
    if secret_cls is None:
        pytest.skip("dpfair.privacy has no SecretRandom")
    est = fitted["dp-sgd"]
    est.noise_ = secret_cls()
    try:
        with pytest.raises(ValueError, match="random generator"):
            save_estimator(est, tmp_path / "m.pt")
    finally:
        del est.noise_


def test_what_cannot_be_saved_safely_fails_at_save_time(data, tmp_path):
    X, y, s = data
    est = DPPostProcessingClassifier(DecisionTreeClassifier(max_depth=2), random_state=0, groups=2, classes=2).fit(
        X, y, sensitive_features=s)
    with pytest.raises(ValueError, match=r"estimator_ is a sklearn\.tree.*DecisionTreeClassifier.*cannot save safely"):
        save_estimator(est, tmp_path / "m.pt")
    est = ERMClassifier(random_state=0, **FAST).fit(X, y)
    est.notes = "public, but neither a parameter nor a fitted attribute"
    with pytest.raises(ValueError, match=r"ERMClassifier\.notes is neither a constructor parameter"):
        save_estimator(est, tmp_path / "m.pt")
    del est.notes
    est.model_kwargs = {"activation": torch.nn.Tanh()}  # a spec make_model cannot rebuild from JSON
    with pytest.raises(ValueError, match="cannot save"):
        save_estimator(est, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="saves dpfair's estimators"):
        save_estimator(GaussianNB().fit(X, y), tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()


# ============================================================================== crafted files refused
class Payload:
    """Unpickling this creates a marker file (the stand-in for arbitrary code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "PWNED"
    yield path
    assert not path.exists(), "the payload ran"


def test_raw_pickle_with_payload_is_refused(tmp_path, marker):
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"format": FORMAT, "version": VERSION, "x": Payload(marker)}))
    with pytest.raises(ValueError, match=r"evil\.pt is not a dpfair model file.*refit"):
        load_estimator(path)


def test_torch_archives_are_refused_without_being_unpickled(tmp_path, marker):
    """A torch archive (dpfair's format version 1, or anything torch.save wrote) is never unpickled."""
    blob = {"format": FORMAT, "version": VERSION, "meta": "{}", "tensors": {"t0": Payload(marker)}}
    torch.save(blob, tmp_path / "evil.pt")
    with pytest.raises(ValueError, match=r"evil\.pt is a zip archive, not a dpfair model file .*refit"):
        load_estimator(tmp_path / "evil.pt")
    torch.save(Payload(marker), tmp_path / "evil2.pt")
    with pytest.raises(ValueError, match=r"evil2\.pt is a zip archive"):
        load_estimator(tmp_path / "evil2.pt")
    with torch.serialization.safe_globals([open]):  # torch's process-wide allow-list plays no part
        with pytest.raises(ValueError, match=r"evil\.pt is a zip archive"):
            load_estimator(tmp_path / "evil.pt")


def test_a_version_1_model_file_is_refused_with_the_fix(fitted, tmp_path, marker):
    """Format version 1 (a torch archive of JSON and tensors) is not read any more: one line, naming the fix."""
    torch.save({"format": FORMAT, "version": 1, "meta": json.dumps({"format": FORMAT, "version": 1}),
                "tensors": {"t0": torch.zeros(2)}}, tmp_path / "v1.pt", pickle_protocol=2)
    with pytest.raises(ValueError, match=r"v1\.pt is a zip archive, not a dpfair model file of format version 2 "
                                         r".*older dpfair \(format version 1, a torch archive\).*refit the model") as e:
        load_estimator(tmp_path / "v1.pt")
    assert "\n" not in str(e.value)
    est = fitted["dp-sgd"]
    state = {k: v for k, v in vars(est).items() if k not in ("_np_rng", "_torch_rng")}
    torch.save({"class": type(est).__name__, "state": state}, tmp_path / "old.pt")  # the unsafe pickle format
    with pytest.raises(ValueError, match=r"old\.pt is a zip archive.*older dpfair.*refit"):
        load_estimator(tmp_path / "old.pt")


def test_corrupt_and_truncated_files_give_one_line(fitted, tmp_path):
    path = tmp_path / "good.pt"
    save_estimator(fitted["dp-fermi"], path)
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    cases = {
        "truncated.pt": raw[: len(raw) - 7],
        "header_cut.pt": raw[: 8 + n // 2],
        "length.pt": (len(raw) * 2).to_bytes(8, "little") + raw[8:],
        "header.pt": raw[:8] + b"[" + raw[9:],  # the header's JSON, corrupted
        "offsets.pt": raw[:8] + raw[8:8 + n].replace(b'"data_offsets":[0,', b'"data_offsets":[9,', 1) + raw[8 + n:],
        "empty.pt": b"",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"{re.escape(name)} is not a dpfair model file \(not a valid "
                                             "safetensors file") as e:
            load_estimator(tmp_path / name)
        assert "\n" not in str(e.value), name
    assert type(load_estimator(path)) is type(fitted["dp-fermi"])  # the file itself loads


def _with_sklearn_part(good_file, out, objects):
    part = skops.io.dumps(objects)
    return _rewrite(good_file, out, edit_tensors=lambda t: t.__setitem__(
        "sklearn", torch.frombuffer(bytearray(part), dtype=torch.uint8)))


class Planted:
    """Rebuilding this (skops calls ``__setstate__``) creates a marker file: the stand-in for arbitrary code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __setstate__(self, state):
        open(state["marker"], "w").close()


def test_a_sklearn_part_naming_an_untrusted_type_is_refused_without_building_it(good_file, tmp_path, marker):
    import os

    path = _with_sklearn_part(good_file, tmp_path / "crafted.pt", [Planted(marker), os.system])
    with pytest.raises(ValueError, match=r"crafted\.pt: its scikit-learn part names types dpfair does not trust "
                                         r"\(.*Planted.*\); it is refused") as e:
        load_estimator(path)
    assert "\n" not in str(e.value)
    path = _with_sklearn_part(good_file, tmp_path / "system.pt", [os.system])
    with pytest.raises(ValueError, match=r"system\.pt: its scikit-learn part names types .*system"):
        load_estimator(path)


def test_a_sklearn_part_holding_a_class_off_dpfairs_list_is_refused(good_file, tmp_path):
    """skops trusts every scikit-learn estimator by default; a model file holds only dpfair's allow-list."""
    other = Perceptron().fit([[0.0], [1.0]], [0, 1])
    path = _with_sklearn_part(good_file, tmp_path / "other.pt", [other])
    with pytest.raises(ValueError, match=r"other\.pt: its scikit-learn part holds a sklearn\.linear_model.*"
                                         r"Perceptron, which is not on dpfair's allow-list"):
        load_estimator(path)
    bad = _rewrite(good_file, tmp_path / "bytes.pt", edit_tensors=lambda t: t.__setitem__(
        "sklearn", torch.frombuffer(bytearray(b"PK not a zip"), dtype=torch.uint8)))
    with pytest.raises(ValueError, match=r"bytes\.pt: its scikit-learn part is malformed"):
        load_estimator(bad)


def test_a_sklearn_part_that_would_inflate_past_its_bound_is_refused_unread(good_file, tmp_path):
    """A zip bomb: 64 MiB of zeros deflate to about 64 KiB; the declared size is refused before inflating."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("schema.json", b"\0" * (64 << 20))
    path = _rewrite(good_file, tmp_path / "bomb.pt", edit_tensors=lambda t: t.__setitem__(
        "sklearn", torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)))
    with pytest.raises(ValueError, match=r"bomb\.pt: its scikit-learn part would inflate .* more than 100x; it is "
                                         r"refused unread") as e:
        load_estimator(path)
    assert "\n" not in str(e.value)


@pytest.fixture
def good_file(fitted, tmp_path):
    path = tmp_path / "good.pt"
    save_estimator(fitted["reductions"], path)
    return path


@pytest.mark.parametrize("edit,match", [
    (lambda m: m["estimator"].__setitem__("class", "Popen"), "estimator class 'Popen' is not one of dpfair's"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__object__": ["subprocess.Popen", {"args": "x"}, {}]}),
     "class 'subprocess.Popen' is not on dpfair's allow-list"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__dataclass__": ["Popen", {}]}),
     "class 'Popen' is not on dpfair's allow-list"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__dp_event__": ["DpEvent", {}]}),
     "event 'DpEvent' is not on dpfair's allow-list"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__enum__": ["Signals", "SIGKILL"]}),
     "enum 'Signals'.'SIGKILL' is not allowed"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__reduce__": ["os.system", "true"]}),
     "unknown tag '__reduce__'"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__ndarray__": ["t0", "object"]}),
     "dtype 'object' is not allowed"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__ndarray__": ["t999", "float64"]}),
     "missing tensor 't999'"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__ndarray__": ["sklearn", "uint8"]}),
     "missing tensor 'sklearn'"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__sklearn__": 99}), "missing scikit-learn object 99"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__object__": [
        "fairlearn.reductions.ExponentiatedGradient", {}, {"constraints_": None}]}), "invalid attribute names"),
    (lambda m: m["estimator"]["fitted"].__setitem__("_np_rng", 1), "only public fitted attributes"),
    (lambda m: m["estimator"]["fitted"].__setitem__("__class__", 1), "only public fitted attributes"),
    (lambda m: m["estimator"]["fitted"].__setitem__("x_", {"__torch_module__": {"kind": "dpfair", "name": "os",
                                                                                 "n_features": 1, "n_classes": 2,
                                                                                 "kwargs": None, "state": {}}}),
     "malformed model description"),
])
def test_json_naming_anything_off_the_allow_lists_is_refused(good_file, tmp_path, edit, match):
    path = _rewrite(good_file, tmp_path / "crafted.pt", edit_meta=edit)
    with pytest.raises(ValueError, match=match) as info:
        load_estimator(path)
    assert "crafted.pt" in str(info.value)


def test_unknown_version_and_foreign_files_are_refused_clearly(good_file, tmp_path):
    newer = _rewrite(good_file, tmp_path / "v3.pt", edit_info=lambda i: i.__setitem__("version", "3"))
    with pytest.raises(ValueError, match=r"v3\.pt uses dpfair model format version 3.*reads version 2.*Upgrade"):
        load_estimator(newer)
    other = _rewrite(good_file, tmp_path / "other.pt", edit_info=lambda i: i.__setitem__("format", "weights"))
    with pytest.raises(ValueError, match=r"other\.pt is not a dpfair model file"):
        load_estimator(other)
    safetensors.torch.save_file({"w": torch.zeros(2)}, tmp_path / "weights.pt")
    with pytest.raises(ValueError, match=r"weights\.pt is not a dpfair model file"):
        load_estimator(tmp_path / "weights.pt")
    bad = _rewrite(good_file, tmp_path / "bad.pt", edit_meta=lambda m: m.__setitem__("complex", ["sklearn"]))
    with pytest.raises(ValueError, match=r"bad\.pt is malformed"):
        load_estimator(bad)
    broken = _rewrite(good_file, tmp_path / "json.pt", edit_info=lambda i: i.__setitem__("meta", "{not json"))
    with pytest.raises(ValueError, match=r"json\.pt is malformed: its metadata is not valid JSON"):
        load_estimator(broken)
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(ValueError, match=r"text\.pt is not a dpfair model file"):
        load_estimator(tmp_path / "text.pt")
    with pytest.raises(FileNotFoundError):
        load_estimator(tmp_path / "missing.pt")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_model_trained_on_cuda_loads_on_the_cpu(data, tmp_path):
    X, y, s = data
    est = DPSGDClassifier(model="mlp", device="cuda", random_state=0, **FAST).fit(X, y)
    save_estimator(est, tmp_path / "gpu.pt")
    back = load_estimator(tmp_path / "gpu.pt")
    assert back.device_ == torch.device("cpu") and back.device == "cuda"
    assert _same(back.model_, est.model_.cpu())
    np.testing.assert_allclose(back.predict_proba(X), est.predict_proba(X), rtol=1e-5, atol=1e-6)
