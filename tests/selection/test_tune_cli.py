"""``dpfair tune``: one model out, its JSON with the choice, the search's total ε and its parts; one-line errors."""

import json

import pytest

from dpfair.algorithms import load_estimator
from dpfair.cli import main

FAST = ["--dataset", "synthetic", "--quiet", "--param", "epochs=2"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_tune_writes_the_chosen_model_and_the_searchs_total(tmp_path, capsys):
    out = tmp_path / "t.json"
    code, stdout, err = run(capsys, "tune", *FAST, "--epsilon", "1", "--notion", "demographic_parity",
                            "--max-error-increase", "0.02", "--grid", "lam=0,1,4", "--strategy", "random-stopping",
                            "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["command"] == "tune" and result["grid"] == {"lam": [0, 1, 4]}
    assert result["strategy"] == "random_stopping"
    assert result["chosen"]["lam"] in (0, 1, 4) and result["hyperparameters"]["lam"] == result["chosen"]["lam"]
    assert result["epsilon"] <= 1.0 and result["per_model_epsilon"] < result["epsilon"]
    assert result["hyperparameters"]["epsilon"] == pytest.approx(result["per_model_epsilon"])
    labels = [e["label"] for e in result["privacy_ledger"]]
    assert labels[0] == "validation counts" and labels[1].startswith("repeated runs")
    assert result["released_scores"] == [{"params": result["chosen"], "score": result["selection"]["released_score"]}]
    assert set(result["fairness"]) >= {"demographic_parity", "equalized_odds"} and 0 <= result["test_error"] <= 1
    model = load_estimator(tmp_path / "t.pt")
    assert model.privacy_spent_[0] == pytest.approx(result["epsilon"])
    assert "chosen" in stdout and "epsilon spent" in stdout and "repeated runs" in stdout
    code, stdout, err = run(capsys, "info", str(tmp_path / "t.pt"))
    assert code == 0, err


def test_tune_follows_the_error_constraint_with_one_fit_by_default(tmp_path, capsys):
    """dp-fermi under the sensitive unit, a grid of λ: one fit at the whole ε, λ moved by the public error."""
    out = tmp_path / "c.json"
    code, stdout, err = run(capsys, "tune", *FAST, "--epsilon", "1", "--notion", "demographic_parity",
                            "--max-error-increase", "0.02", "--grid", "lam=0,1,4", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["strategy"] == "constrained" and result["released_scores"] == []
    assert result["per_model_epsilon"] == result["epsilon"] and 0.99 * 1.0 <= result["epsilon"] <= 1.0
    assert [e["label"] for e in result["privacy_ledger"]] == ["group counts", "dp-fermi step"]  # the model's own
    selection = result["selection"]
    assert result["chosen"]["lam"] == selection["lam_path"][-1] > 0 and selection["lam_start"] == 1.0
    assert selection["score"]["threshold"] == pytest.approx(selection["score"]["reference_error"] + 0.02)
    assert result["hyperparameters"]["target_error"] == pytest.approx(selection["score"]["threshold"])
    assert "constrained" in stdout and "epsilon spent" in stdout
    model = load_estimator(tmp_path / "c.pt")
    assert model.privacy_spent_[0] == pytest.approx(result["epsilon"])


@pytest.mark.parametrize("argv,match", [
    (["--epsilon", "0"], "--epsilon must be > 0"),
    (["--lam", "1"], "--lam fixes λ"),
    (["--grid", "lam"], "--grid takes KEY=V1,V2,..."),
    (["--grid", "epsilon=1,2"], "may not set 'epsilon'"),
    (["--grid", "lam=0,1", "--grid", "epochs=2,3"], "spend differently per run"),
    (["--max-error-increase", "-1"], "--max-error-increase must be >= 0"),
    (["--method", "dp-sgd"], "has no default grid; give the candidates with --grid"),
    (["--method", "erm", "--epsilon", "inf", "--grid", "epochs=1,2"], "is not private"),
    (["--repetitions", "often"], "repetitions must be one of"),
    (["--strategy", "constrained", "--param", "privacy_unit=record"], "strategy='constrained' does not apply"),
])
def test_bad_tune_arguments_fail_in_one_line(tmp_path, capsys, argv, match):
    code, stdout, err = run(capsys, "tune", *FAST, *argv, "--out", str(tmp_path / "x.json"))
    assert code == 2 and match in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()


def _form(value):
    """The shape of a published value: its type and structure, numbers and strings replaced by their type."""
    if isinstance(value, dict):
        return {k: _form(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_form(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("strategy", ["random-stopping", "constrained"])
def test_nothing_a_search_publishes_depends_on_its_number_of_runs(tmp_path, capsys, monkeypatch, strategy):
    """The search's bound holds while K stays secret (issue 26): stdout, the JSON, the model file and the warnings
    have one form whatever K is, and no duration of the search is published (its time grows with K)."""
    import warnings

    from dpfair.selection import Repetitions

    draw = Repetitions.draw
    published = {}
    for k in (1, 4, 9):
        monkeypatch.setattr(Repetitions, "draw", lambda self, secret, k=k: (draw(self, secret), k)[1])
        out = tmp_path / f"k{k}.json"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code, stdout, err = run(capsys, "tune", *FAST, "--epsilon", "1", "--notion", "demographic_parity",
                                    "--grid", "lam=0,1,4", "--strategy", strategy, "--seed", "3", "--out", str(out))
        assert code == 0, err
        result = json.loads(out.read_text())
        model = load_estimator(out.with_suffix(".pt"))
        labels = [line.split("  ")[1] if line.startswith("  ") else line.split(" on ")[0]
                  for line in stdout.splitlines()]
        published[k] = {"json": _form(result), "stdout": labels, "stderr": err,
                        "warnings": sorted({(w.category.__name__, str(w.message)) for w in caught}),
                        "model": _form({key: v for key, v in vars(model).items() if key.endswith("_")
                                        and isinstance(v, (dict, list, tuple, str, int, float, type(None)))}),
                        "selection": _form(model.selection_)}
        text = (stdout + err + out.read_text()).lower()
        assert "seconds" not in text and "time" not in text.replace("times", "")
        assert not any("time" in key or "second" in key for key in _keys(result))
    assert published[1] == published[4] == published[9]


def _keys(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)
