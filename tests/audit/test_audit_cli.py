"""`dpfair audit` catches, through the command line, each planted bug the guide says it catches.

Each test runs ``main([...])`` inside ``planted_bug(name)`` (tests/planted.py) with the settings that catch it and asserts the
lower bound is above the claim in the JSON and in the exit status (1), then runs the correct code at the same
settings and asserts it stays at or below (exit status 0). Halved noise is caught by the primitive audit
(``dpfair audit release``): the whole-method game at a few hundred runs cannot see it on a Gaussian release
(docs/guide/audits.md, "Privacy audits"). The release audits run on the tests' reproducible noise (each world has its own
stream, so the game stays valid and the result is fixed); the method games need fresh secret noise per fit,
as the reused-seed bug shows.
"""

import json

import pytest
import torch

from dpfair.cli import main
from tests.planted import planted_bug


@pytest.fixture
def one_thread():
    """Small fits on one torch thread: more threads only contend on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _audit(tmp_path, capsys, argv, bug=None, name="a.json"):
    """``(exit status, JSON result, stdout)`` of ``dpfair audit ...`` (with ``bug`` planted around it)."""
    out = tmp_path / name
    argv = ["audit", *argv, "--quiet", "--out", str(out)]
    if bug is None:
        code = main(argv)
    else:
        with pytest.warns(Warning, match="planted bugs"), planted_bug(bug):
            code = main(argv)
    stdout = capsys.readouterr().out
    return code, json.loads(out.read_text()), stdout


def _caught_and_correct_not(tmp_path, capsys, argv, bug):
    code, broken, stdout = _audit(tmp_path, capsys, argv, bug, "broken.json")
    assert code == 1 and broken["epsilon_lower_bound"] > broken["epsilon_claimed"] and not broken["consistent"]
    assert "LOWER BOUND ABOVE THE CLAIM" in stdout
    code, correct, stdout = _audit(tmp_path, capsys, argv, None, "correct.json")
    assert code == 0 and correct["epsilon_lower_bound"] <= correct["epsilon_claimed"] and correct["consistent"]
    assert "consistent with the claim" in stdout
    assert broken["epsilon_claimed"] == correct["epsilon_claimed"]  # the ledger does not see the bug
    return broken, correct


@pytest.mark.parametrize("mechanism,unit", [("gaussian", "record"), ("laplace", "record"), ("laplace", "sensitive")])
def test_release_audit_catches_halved_noise(tmp_path, capsys, mechanism, unit):
    argv = ["release", "--mechanism", mechanism, "--unit", unit, "--epsilon", "1"]
    broken, correct = _caught_and_correct_not(tmp_path, capsys, argv, "halve_noise")
    for result in (broken, correct):
        assert result["command"] == "audit release" and result["mechanism"] == mechanism
        assert result["runs"] == 400_000 and result["unit"] == unit and result["audit"] == "release primitive"
        assert result["epsilon_claimed"] <= 1.0 and result["test"]["statistic"] == "released value"
    if mechanism == "laplace":  # its ε lives where 400,000 releases reach: the bound comes close to it
        assert correct["epsilon_lower_bound"] > 0.9 and broken["epsilon_lower_bound"] > 1.8


def test_release_audit_of_randomized_response_comes_close_to_its_epsilon(tmp_path, capsys):
    code, result, stdout = _audit(tmp_path, capsys, ["release", "--mechanism", "randomized-response",
                                                     "--buckets", "3", "--epsilon", "2"])
    assert code == 0 and result["unit"] == "sensitive" and result["buckets"] == 3
    assert 1.9 < result["epsilon_lower_bound"] <= result["epsilon_claimed"] <= 2.0
    assert "randomized response release" in stdout and "epsilon lower bound" in stdout


@pytest.mark.parametrize("argv,match", [
    (["--mechanism", "exponential"], "invalid choice"),
    (["--epsilon", "0"], "--epsilon must be a finite number > 0"),
    (["--epsilon", "inf"], "--epsilon must be a finite number > 0"),
    (["--delta", "1"], "--delta must lie in [0, 1)"),
    (["--releases", "2"], "--releases must be >= 4"),
    (["--confidence", "1"], "--confidence must be in (0, 1)"),
    (["--mechanism", "randomized-response", "--unit", "record"], "drop --unit record"),
    (["--mechanism", "randomized-response", "--buckets", "1"], "--buckets must be >= 2"),
    (["--out", "x.txt"], "--out must name a .json file"),
])
def test_release_audit_bad_input_is_one_line(tmp_path, capsys, argv, match):
    out = tmp_path / "r.json"
    try:
        code = main(["audit", "release", "--out", str(out), *argv])
    except SystemExit as exc:  # argparse's own choices
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and match in err and not out.exists()
    assert err.startswith(("dpfair: error:", "usage:"))


@pytest.mark.secret_noise
def test_method_audit_catches_a_reused_seed(tmp_path, capsys):
    # every fit of a world shares its noise: the worlds separate perfectly, and 25 evaluation runs per world
    # prove ln((1 − u)/u) ≈ 1.84 with u = 1 − 0.025^(1/25)
    # (600 rows: enough for a useful model at epsilon=1, so its fits do not warn of too little data)
    argv = ["--dataset", "synthetic", "--method", "output-perturbation", "--epsilon", "1", "--rows", "600",
            "--runs", "100"]
    broken, _ = _caught_and_correct_not(tmp_path, capsys, argv, "reuse_seed")
    assert broken["epsilon_lower_bound"] > 1.8 and broken["runs"] == 100


@pytest.mark.secret_noise
# 500 of Adult's rows keep 200 DP-SGD fits fast; a privacy audit needs no useful model, so the fits' too-little-data
# warning is shown, not an error
@pytest.mark.filterwarnings("default:DP-SGD protects whole records:dpfair.exceptions.UtilityWarning")
def test_method_audit_catches_skipped_clipping(tmp_path, capsys, one_thread):
    # the crafted record canary, unclipped, moves the model wherever the model gets it wrong (on Adult's rows it
    # does; on tiny synthetic sets the noisy model may already fit it, and its gradient then vanishes clipped or not)
    argv = ["--dataset", "adult", "--method", "dp-sgd", "--epsilon", "1", "--rows", "500", "--runs", "200",
            "--param", "epochs=2"]
    broken, _ = _caught_and_correct_not(tmp_path, capsys, argv, "skip_clipping")
    assert broken["canary"]["kind"] == "add record"


@pytest.mark.secret_noise
def test_method_audit_catches_published_exact_proportions(tmp_path, capsys):
    argv = ["--dataset", "synthetic", "--method", "dp-fermi", "--epsilon", "1", "--rows", "1000", "--runs", "100",
            "--param", "epochs=1", "--param", "batch_size=256",
            "--param", "proportions_budget=0.5"]  # released group counts not too small for a fairness constraint
    broken, _ = _caught_and_correct_not(tmp_path, capsys, argv, "private_proportions")
    assert broken["unit"] == "sensitive" and broken["test"]["statistic"].startswith("released number")


def test_audit_help_says_what_the_game_catches(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = " ".join(capsys.readouterr().out.lower().split())
    for phrase in ("reused seed", "skipped clipping", "halved noise", "dpfair audit release", "exit status 1"):
        assert phrase in text, phrase
