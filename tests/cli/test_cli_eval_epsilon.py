"""`dpfair train/predict --eval-epsilon` (issue 30): the test part's figures by group released through a
PrivateMetricFrame on a ledger of their own, printed apart from the fit's ε; without it, labelled non-private
diagnostics of the test people."""

import json

import pytest

from dpfair.cli import main
from dpfair.cli.evaluation import DIAGNOSTIC_LABEL

TRAIN = ["train", "--method", "erm", "--quiet"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One private evaluation and one without, of erm on the embedded adult."""
    folder = tmp_path_factory.mktemp("eval")
    assert main([*TRAIN, "--eval-epsilon", "1", "--out", str(folder / "private.json")]) == 0
    assert main([*TRAIN, "--out", str(folder / "exact.json")]) == 0
    return folder


def test_train_with_an_evaluation_budget_writes_both_ledgers_apart(trained):
    result = json.loads((trained / "private.json").read_text())
    ev = result["evaluation"]
    assert ev["private"] is True and ev["unit"] == "sensitive" and 0 < ev["epsilon"] <= 1
    # two groups at ε = 1, δ = 1/n²: the measurement's mechanism="auto" picks Laplace (public inputs only)
    assert [e["count"] for e in ev["privacy_ledger"]] == [1] and ev["privacy_ledger"][0]["mechanism"] == "laplace"
    # the fit's ledger is the fit's alone (erm: non-private), the evaluation's is under its own key
    assert [e["label"] for e in result["privacy_ledger"]] == ["non-private training"]
    assert "disjoint" in ev["composition"]
    assert set(ev["intervals"]["fairness"]) == set(result["fairness"])
    assert set(ev["intervals"]["per_group_accuracy"]) == {"Female", "Male"}


def test_train_without_an_evaluation_budget_labels_its_figures(trained):
    result = json.loads((trained / "exact.json").read_text())
    assert result["evaluation"]["private"] is False
    assert "non-private diagnostics of the test people" in result["evaluation"]["note"]


def test_the_printed_rows_say_which_figures_are_private(tmp_path, capsys):
    assert main([*TRAIN, "--eval-epsilon", "2", "--out", str(tmp_path / "a.json")]) == 0
    printed = capsys.readouterr().out
    lines = {line.split("  ")[1].strip(): line for line in printed.splitlines()[1:] if line.startswith("  ")}
    assert lines["evaluation"].split("evaluation", 1)[1].strip().startswith("ε = ")
    assert "for each person's sex; their label and prediction public" in lines["evaluation"]
    assert "released once" in lines["figures by group"]
    assert "epsilon spent" in lines  # the fit's ε, on its own line
    assert DIAGNOSTIC_LABEL not in printed


def test_predict_evaluates_privately_and_refuses_the_training_part(trained, tmp_path, capsys):
    model = trained / "exact.pt"
    capsys.readouterr()
    assert main(["predict", str(model)]) == 0
    assert DIAGNOSTIC_LABEL in capsys.readouterr().out
    assert main(["predict", str(model), "--eval-epsilon", "1"]) == 0
    printed = capsys.readouterr().out
    assert "evaluation" in printed and DIAGNOSTIC_LABEL not in printed
    assert main(["predict", str(model), "--eval-epsilon", "1", "--part", "train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfair: error: --eval-epsilon") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--eval-epsilon", "0"], "--eval-epsilon must be > 0"),
    (["--eval-epsilon", "1", "--eval-delta", "2"], "--eval-delta must lie strictly between 0 and 1"),
    (["--eval-delta", "1e-9"], "give --eval-epsilon too"),
])
def test_a_bad_evaluation_budget_is_one_line_before_any_fit(tmp_path, capsys, argv, message):
    assert main([*TRAIN, *argv, "--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a.json").exists()


def test_tune_releases_its_test_figures_on_their_own_ledger(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["tune", "--dataset", "synthetic", "--quiet", "--param", "epochs=2", "--epsilon", "1", "--notion",
                 "demographic_parity", "--grid", "lam=0,1", "--eval-epsilon", "0.5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert [e["label"] for e in result["privacy_ledger"]] == ["group counts", "dp-fermi step"]  # the search's own
    ev = result["evaluation"]
    assert ev["private"] is True and ev["epsilon"] <= 0.5 and len(ev["privacy_ledger"]) == 1
    assert "  evaluation " in printed and "epsilon spent" in printed
