"""A group too small for a fair method is said before the training loop, by its declared name, with its released
size (issue 41, item 5: nothing warned that a group had 27 training rows; a test figure of 10 people was printed
to four decimals unflagged)."""

import warnings

import numpy as np
import pytest

from dpfair.algorithms import DPFERMIClassifier, DPPostProcessingClassifier
from dpfair.algorithms.signal import SMALL_GROUP_ROWS, warn_small_groups
from dpfair.exceptions import SmallGroupWarning, UtilityWarning


def table(n=4000, tiny=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + rng.normal(size=n) > 0).astype(int)
    s = np.where(np.arange(n) < tiny, "tiny", rng.choice(["large a", "large b"], size=n)).astype(object)
    return X, y, s


def small_group_warnings(caught):
    return [w.message for w in caught if isinstance(w.message, SmallGroupWarning)]


def test_dpfermi_warns_before_its_training_loop_naming_the_group(monkeypatch):
    X, y, s = table()
    warned_at_training = []
    train = DPFERMIClassifier.train_prepared

    def spy(self, prep):
        warned_at_training.append(len(small_group_warnings(caught)))
        return train(self, prep)

    monkeypatch.setattr(DPFERMIClassifier, "train_prepared", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = DPFERMIClassifier(epsilon=4.0, epochs=1, groups=["large a", "large b", "tiny"], random_state=0,
                                verbose=False).fit(X, y, sensitive_features=s)
    assert warned_at_training == [1]  # said before the loop ran
    (message,) = small_group_warnings(caught)
    # 5 people: their noisy count fell below the floor, which the message says rather than "about <floor>"
    assert message.groups == ["tiny"] and "'tiny' about" in str(message)
    assert "or fewer training people" in str(message) and "is the floor of the released counts" in str(message)
    # the printed size is the released (floored) count, not the exact 5
    assert message.sizes == [pytest.approx(float(est.group_counts_.min(axis=0)[2]))]


def test_no_warning_for_groups_of_hundreds():
    X, y, s = table(tiny=400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPFERMIClassifier(epsilon=4.0, epochs=1, groups=["large a", "large b", "tiny"], random_state=0,
                          verbose=False).fit(X, y, sensitive_features=s)
    assert small_group_warnings(caught) == []


def test_dp_postprocess_names_the_small_group():
    X, y, s = table(tiny=12)
    with pytest.warns(SmallGroupWarning, match="'tiny' about"):
        DPPostProcessingClassifier(epsilon=2.0, groups=["large a", "large b", "tiny"],
                                   random_state=0).fit(X, y, sensitive_features=s)


def test_the_warning_names_coded_groups_by_their_declared_names():
    with pytest.warns(UtilityWarning) as caught:
        warn_small_groups("M", np.arange(3), [500.0, 12.0, 800.0], noise_std=1.0)
    (message,) = [w.message for w in caught]
    assert "'1' about 12" in str(message)
    assert "'Pacific Islander' about 12" in message.naming(["a", "Pacific Islander", "c"])
    # the threshold: SMALL_GROUP_ROWS plus two noise stds of the released count
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_small_groups("M", ["g"], [SMALL_GROUP_ROWS + 2.0 * 5.0], noise_std=5.0)
    with pytest.warns(SmallGroupWarning):
        warn_small_groups("M", ["g"], [SMALL_GROUP_ROWS + 2.0 * 5.0 - 0.5], noise_std=5.0)


def test_pfld_forecast_comes_before_training_and_names_the_group_and_its_released_size(monkeypatch):
    """The issue's case: the forecast named "267 members" (a floored count of one label cell, matching no group
    size) after the training loop's time; now it names the group and the label, with the released size."""
    from dpfair.algorithms import PFLDClassifier

    X, y, s = table(n=3000, tiny=20)
    seen_at_build = []
    build = PFLDClassifier._build_model

    def spy(self, *args, **kwargs):
        seen_at_build.append(len(small_group_warnings(caught)))
        return build(self, *args, **kwargs)

    monkeypatch.setattr(PFLDClassifier, "_build_model", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = PFLDClassifier(epsilon=1.0, epochs=1, notion="equalized_odds", model="logistic", random_state=0,
                             groups=["large a", "large b", "tiny"]).fit(X, y, sensitive_features=s)
    messages = small_group_warnings(caught)
    assert seen_at_build == [len(messages)] and messages  # all of them before the model was even built
    forecast = next(m for m in messages if "cannot tell" in str(m))
    (group,) = forecast.groups
    assert group == "tiny" and "among label" in str(forecast)
    worst = int(np.argmax(est.dual_tolerance_))
    assert forecast.sizes == [pytest.approx(float(est.group_sizes_[worst]))]
    assert est.constraint_keys_[worst][1] == 2  # the tiny group's code
