"""The audit game of the private measurement itself (:func:`dpfair.audit.games.audit_measurement`): the correct
PrivateMetricFrame audits at or below its claim under both units, and its counts released without noise
(the planted ``unnoised_counts``) or one seed for every frame (``reuse_seed``) are caught; and through
``dpfair audit measurement``."""

import json
import math

import numpy as np
import pytest

from dpfair.audit.games import audit_measurement
from tests.planted import planted_bug

# The game needs the secret generators: under the tests' reproducible noise every frame of a world would draw the
# same noise (one public random_state), which is exactly the reused-seed bug the audit catches.
pytestmark = pytest.mark.secret_noise


def _people(n=1000, seed=0):
    """A table (y, ŷ, s) with a small group (about 30 %)."""
    rng = np.random.default_rng(seed)
    s = np.where(rng.random(n) < 0.3, "b", "a")
    y = (rng.random(n) < 0.4).astype(int)
    y_pred = np.where(rng.random(n) < 0.8, y, 1 - y)
    return y, y_pred, s


def _most_provable(eval_runs: int, delta: float, confidence: float = 0.95) -> float:
    """The bound of a perfect separation with ``eval_runs`` evaluation runs per world (no error counted)."""
    u = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / eval_runs)
    return math.log((1.0 - delta - u) / u)


@pytest.mark.parametrize("unit", ["sensitive", "record"])
def test_measurement_audit_holds_and_catches_unnoised_counts(unit):
    y, y_pred, s = _people()
    correct = audit_measurement(y, y_pred, s, groups=["a", "b"], epsilon=1.0, unit=unit, releases=200)
    assert correct.method == "PrivateMetricFrame" and correct.unit == unit and correct.runs == 200
    # the plan's Laplace release is pure ε-DP: claimed at δ = 0 (a Gaussian one would claim δ = 1/n² = 1e-6)
    assert 0.9 < correct.epsilon_claimed <= 1.0 and correct.delta == 0.0
    assert correct.epsilon_lower_bound <= correct.epsilon_claimed and correct.consistent
    with pytest.warns(Warning, match="planted bugs"), planted_bug("unnoised_counts"):
        broken = audit_measurement(y, y_pred, s, groups=["a", "b"], epsilon=1.0, unit=unit, releases=100)
    # each world's figures sit at one point: the worlds separate perfectly, the most 25 runs per world prove
    assert broken.epsilon_claimed == correct.epsilon_claimed  # the ledger does not see the bug
    assert broken.epsilon_lower_bound == pytest.approx(_most_provable(25, broken.delta)) and not broken.consistent
    assert broken.epsilon_lower_bound > 1.8 > 1.0 >= broken.epsilon_claimed
    assert broken.bound.false_positives == broken.bound.false_negatives == 0


def test_measurement_audit_catches_one_seed_for_every_frame():
    """Every frame of a world then draws the same noise: its figures sit at one point, as without noise."""
    y, y_pred, s = _people(400)
    with pytest.warns(Warning, match="planted bugs"), planted_bug("reuse_seed"):
        broken = audit_measurement(y, y_pred, s, groups=["a", "b"], epsilon=1.0, releases=100)
    assert broken.epsilon_lower_bound == pytest.approx(_most_provable(25, broken.delta))
    assert broken.epsilon_lower_bound > 1.8 > 1.0 >= broken.epsilon_claimed


def test_the_canary_is_a_person_of_the_smallest_group_in_its_rarest_cell():
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1, 0, 1])
    y_pred = np.array([0, 1, 1, 1, 0, 1, 1, 0, 0, 1])
    s = np.array(["a"] * 6 + ["bb"] * 4)  # group "bb" (4 people): cells (y, ŷ) = (1, 1), (1, 0), (0, 0), (1, 1)
    moved = audit_measurement(y, y_pred, s, groups=["bb", "a", "ccc"], epsilon=1.0, releases=8)
    # to the largest group present ("ccc" is empty), from the first of the cells that hold one person: (0, 0)
    assert moved.canary == {"kind": "flip s", "row": 8, "from_group": "bb", "to_group": "a", "y_true": 0,
                            "y_pred": 0}
    added = audit_measurement(y, y_pred, s, groups=["bb", "a", "ccc"], epsilon=1.0, unit="record", releases=8)
    # the smallest group present, its least populated cell (an empty one: (0, 1))
    assert added.canary == {"kind": "add person", "group": "bb", "y_true": 0, "y_pred": 1}
    assert moved.runs == added.runs == 8


def test_a_longer_group_name_is_not_cut_when_the_canary_moves():
    """World 1 holds the canary's new group whole (written into a numpy array of one-letter names, it would be
    cut to "l", which is no group: the frame would refuse it)."""
    y, y_pred, s = _people(200)
    canary = {"kind": "flip s", "row": 0, "to_group": "longer", "y_true": int(y[0]), "y_pred": int(y_pred[0])}
    report = audit_measurement(y, y_pred, s, groups=["a", "b", "longer"], epsilon=1.0, releases=8, canary=canary)
    assert report.canary == canary and s.dtype == np.dtype("<U1")


@pytest.mark.parametrize("kwargs,match", [
    (dict(releases=4), "releases must be an integer >= 8"),
    (dict(unit="everything"), "privacy"),
    (dict(groups=["a"]), "groups"),
    (dict(canary={"kind": "flip s", "row": 10_000, "to_group": "a", "y_true": 0, "y_pred": 0}), "not a row"),
])
def test_measurement_audit_bad_input_is_one_line(kwargs, match):
    y, y_pred, s = _people(50)
    with pytest.raises(ValueError, match=match):
        audit_measurement(y, y_pred, s, **{"groups": ["a", "b"], "epsilon": 1.0, **kwargs})


def test_the_sensitive_canary_needs_two_groups():
    y, y_pred, _ = _people(50)
    with pytest.raises(ValueError, match="fewer than two of the groups"):
        audit_measurement(y, y_pred, np.full(50, "a"), groups=["a", "b"], epsilon=1.0, releases=8)


def _audit_cli(tmp_path, capsys, argv, bug=None):
    """``(exit status, JSON result, stdout)`` of ``dpfair audit measurement ...`` (with ``bug`` planted)."""
    from dpfair.cli import main

    out = tmp_path / f"{bug or 'correct'}.json"
    argv = ["audit", "measurement", *argv, "--quiet", "--out", str(out)]
    if bug is None:
        code = main(argv)
    else:
        with pytest.warns(Warning, match="planted bugs"), planted_bug(bug):
            code = main(argv)
    return code, json.loads(out.read_text()), capsys.readouterr().out


def test_the_command_catches_unnoised_counts_and_passes_the_correct_frame(tmp_path, capsys):
    # 100 releases: 25 evaluation runs per world, a perfect separation proves ln((1 − u)/u) ≈ 1.84 > 1
    argv = ["--dataset", "synthetic", "--option", "n_samples=2000", "--epsilon", "1", "--releases", "100"]
    code, broken, stdout = _audit_cli(tmp_path, capsys, argv, "unnoised_counts")
    assert code == 1 and broken["epsilon_lower_bound"] > 1.8 > 1.0 >= broken["epsilon_claimed"]
    assert "LOWER BOUND ABOVE THE CLAIM" in stdout and "privacy audit of PrivateMetricFrame" in stdout
    code, correct, stdout = _audit_cli(tmp_path, capsys, argv)
    assert code == 0 and correct["epsilon_lower_bound"] <= correct["epsilon_claimed"] and correct["consistent"]
    assert "consistent with the claim" in stdout
    for result in (broken, correct):
        assert result["command"] == "audit measurement" and result["audit"] == "measurement"
        assert result["unit"] == "sensitive" and result["runs"] == 100 and result["dataset"] == "synthetic"
        assert result["canary"]["kind"] == "flip s" and "to_group_name" in result["canary"]
    assert broken["epsilon_claimed"] == correct["epsilon_claimed"]  # the ledger does not see the bug


@pytest.mark.parametrize("argv,match", [
    (["--epsilon", "0"], "--epsilon must be > 0"),
    (["--delta", "1"], "--delta must lie strictly between 0 and 1"),
    (["--releases", "4"], "--releases must be >= 8"),
    (["--confidence", "1"], "--confidence must be in (0, 1)"),
    (["--rows", "-1"], "--rows must be >= 0"),
    (["--out", "x.txt"], "--out must name a .json file"),
])
def test_the_command_refuses_bad_input_in_one_line(tmp_path, capsys, argv, match):
    from dpfair.cli import main

    code = main(["audit", "measurement", "--out", str(tmp_path / "m.json"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("dpfair: error:") and match in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


def test_the_planted_bug_publishes_the_exact_table_and_keeps_the_ledger():
    from dpfair.measurement.frame import PrivateMetricFrame

    y, y_pred, s = _people(2000)  # enough people that no figure is flagged
    exact = np.stack([[[np.sum((s == g) & (y == a) & (y_pred == b)) for b in (0, 1)] for a in (0, 1)]
                      for g in ("a", "b")]).astype(float)

    def frame():
        return PrivateMetricFrame(["selection_rate", "true_positive_rate"], y, y_pred, s, groups=["a", "b"],
                                  epsilon=1.0, n_bootstrap=10, random_state=0)

    correct = frame()
    with pytest.warns(Warning, match="planted bugs"), planted_bug("unnoised_counts"):
        broken = frame()
    assert np.array_equal(broken.noisy_table_, exact) and not np.array_equal(correct.noisy_table_, exact)
    assert broken.privacy_spent_ == correct.privacy_spent_
    assert len(broken.privacy_ledger_.entries) == len(correct.privacy_ledger_.entries) > 0
