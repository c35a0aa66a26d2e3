import json
import subprocess
import sys

import numpy as np
import pytest

from dpfair.algorithms import load_estimator
from dpfair.cli import main
from dpfair.datasets import list_datasets

FAST = ["--dataset", "synthetic", "--quiet", "--param", "epochs=2"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_writes_json_and_model(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, stdout, err = run(capsys, "train", *FAST, "--epsilon", "2", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    for key in ("test_error", "fairness", "epsilon", "delta", "dataset", "method", "hyperparameters",
                "privacy_ledger", "seed"):
        assert key in result
    assert set(result["fairness"]) == {"demographic_parity", "equalized_odds", "equal_opportunity",
                                       "accuracy_parity", "predictive_equality"}
    assert result["method"] == "dp-fermi" and result["epsilon"] <= 2.0
    assert result["hyperparameters"]["epochs"] == 2
    est = load_estimator(tmp_path / "r.pt")
    assert est.privacy_spent_[0] == pytest.approx(result["epsilon"])
    assert "test error" in stdout and "epsilon spent" in stdout


def test_erm_method_and_model_option(tmp_path, capsys):
    code, _, err = run(capsys, "train", *FAST, "--method", "erm", "--epsilon", "inf", "--model", "mlp",
                       "--out", str(tmp_path / "e.json"))
    assert code == 0, err
    result = json.loads((tmp_path / "e.json").read_text())
    assert result["epsilon"] is None and result["hyperparameters"]["model"] == "mlp"  # ε = ∞: null (issue 13)
    assert result["privacy_guarantee"].startswith("none")


def test_existing_result_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("precious")
    code, _, err = run(capsys, "train", *FAST, "--out", str(out))
    assert code == 2 and "already exists" in err and out.read_text() == "precious"
    code, _, _ = run(capsys, "train", *FAST, "--out", str(out), "--overwrite")
    assert code == 0 and json.loads(out.read_text())["dataset"] == "synthetic"


@pytest.mark.parametrize("argv,match", [
    (["--dataset", "nope"], "unknown data set 'nope'"),
    (["--method", "magic"], "unknown method 'magic'"),
    (["--epsilon", "0"], "--epsilon must be > 0"),
    (["--epsilon", "-1"], "--epsilon must be > 0"),
    (["--delta", "2"], "delta must lie strictly between 0 and 1"),
    (["--param", "bogus=1"], "has no hyper-parameter 'bogus'"),
    (["--param", "noequals"], "--param takes KEY=VALUE"),
    (["--sensitive", "height"], "height"),
    (["--method", "erm", "--epsilon", "1"], "is not private"),
])
def test_bad_input_prints_one_line_and_exits_2(tmp_path, capsys, argv, match):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "train", "--dataset", "synthetic", "--quiet", "--out", str(out), *argv)
    assert code == 2
    assert match in err and err.count("\n") == 1 and err.startswith("dpfair: error:")
    assert not out.exists()


def test_missing_data_file_offline_names_the_file(tmp_path, capsys, monkeypatch):
    import dpfair.datasets._files as files

    def offline(url, dest):
        raise OSError("network is unreachable")

    monkeypatch.setattr(files, "_download", offline)
    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = run(capsys, "train", "--dataset", "credit", "--quiet", "--out", str(tmp_path / "r.json"))
    assert code == 2 and "default_of_credit_card_clients.csv" in err and err.count("\n") == 1


def test_subprocess_error_is_one_line_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dpfair", "train", "--dataset", "nope", "--out",
                           str(tmp_path / "x.json")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_datasets_lists_every_data_set(capsys):
    code, out, _ = run(capsys, "datasets")
    assert code == 0
    for name in list_datasets():
        assert name in out
    code, out, _ = run(capsys, "datasets", "german", "--json")
    info = json.loads(out)[0]
    assert info["rows"] == 1000 and info["on_disk"] is True


def test_accountant_both_directions(capsys):
    code, out, _ = run(capsys, "accountant", "--noise", "1", "--sampling-rate", "0.03", "--steps", "6600",
                       "--delta", "1e-9", "--unit", "sensitive")
    assert code == 0
    eps = float(out.split("epsilon = ")[1].split()[0])
    assert 40 < eps < 46
    code, out, _ = run(capsys, "accountant", "--epsilon", "1", "--n", "10000", "--batch-size", "100",
                       "--epochs", "5", "--delta", "1e-5")
    sigma = float(out.split("noise multiplier = ")[1].split()[0])
    assert code == 0 and 0.5 < sigma < 5
    code, _, err = run(capsys, "accountant", "--delta", "1e-5", "--steps", "10", "--sampling-rate", "0.1")
    assert code == 2 and "exactly one of --noise" in err


def test_default_train_on_embedded_adult_meets_the_foundation_bar(tmp_path, capsys, monkeypatch):
    """`dpfair train` with no argument: DP-FERMI at epsilon = 1 on adult (embedded, no data home),
    epsilon <= 1 from the ledger, test error within 3 points of the non-private ERM, a fairer model."""
    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "train", "--quiet")
    assert code == 0, err
    (result_file,) = (tmp_path / "dpfair-runs").glob("adult-dp-fermi-seed0-*.json")
    private = json.loads(result_file.read_text())
    assert private["method"] == "dp-fermi" and private["epsilon"] <= 1.0
    assert private["delta"] == pytest.approx(1 / private["n_train"] ** 2)
    code, _, err = run(capsys, "train", "--quiet", "--method", "erm", "--epsilon", "inf", "--out",
                       str(tmp_path / "erm.json"))
    assert code == 0, err
    erm = json.loads((tmp_path / "erm.json").read_text())
    assert private["test_error"] <= erm["test_error"] + 0.03
    assert private["fairness"]["demographic_parity"] < 0.75 * erm["fairness"]["demographic_parity"]


def test_dp_fermi_equalized_odds_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "eo.json"
    code, stdout, err = run(capsys, "train", *FAST, "--method", "dp-fermi", "--notion", "equalized_odds",
                            "--lam", "1", "--epsilon", "1", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["hyperparameters"]["notion"] == "equalized_odds" and result["hyperparameters"]["lam"] == 1.0
    assert result["epsilon"] <= 1.0


def test_option_a_method_does_not_take_is_one_line_error(capsys):
    code, out, err = run(capsys, "train", *FAST, "--method", "erm", "--epsilon", "inf", "--lam", "1")
    assert code == 2 and "takes no --lam" in err and len(err.strip().splitlines()) == 1


def test_method_using_groups_at_prediction_time(tmp_path, capsys):
    code, _, err = run(capsys, "train", "--dataset", "synthetic", "--quiet", "--method", "threshold",
                       "--epsilon", "inf", "--out", str(tmp_path / "t.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "t.json").read_text())["estimator"] == "ThresholdClassifier"


@pytest.mark.secret_noise
def test_a_default_run_carries_the_guarantee_and_its_files_hold_no_secret(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, stdout, err = run(capsys, "train", *FAST, "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["privacy_guarantee"] == "differential privacy" and "privacy guarantee" not in stdout
    assert result["hyperparameters"]["groups"] == 2 and result["hyperparameters"]["classes"] == 2
    est = load_estimator(tmp_path / "r.pt")
    assert not [k for k in vars(est) if k.startswith("_")]


@pytest.mark.secret_noise
@pytest.mark.filterwarnings("default:reproducible_noise is active:dpfair.exceptions.PrivacyLeakWarning")  # the subject
def test_reproducible_noise_replays_a_run_and_says_the_guarantee_is_void(tmp_path, capsys):
    results = []
    for name in ("a", "b"):
        code, stdout, err = run(capsys, "train", *FAST, "--reproducible-noise", "3", "--out",
                                str(tmp_path / f"{name}.json"))
        assert code == 0, err
        assert "privacy guarantee" in stdout and "void" in stdout
        results.append(json.loads((tmp_path / f"{name}.json").read_text()))
    assert results[0]["privacy_guarantee"].startswith("void")
    assert results[0]["test_error"] == results[1]["test_error"]
    assert "reproducible_noise" not in json.dumps(results[0]["hyperparameters"])


def test_a_non_private_method_needs_no_epsilon_flag(tmp_path, capsys):
    code, _, err = run(capsys, "train", *FAST, "--method", "erm", "--out", str(tmp_path / "e.json"))
    assert code == 0, err


def test_a_negative_seed_is_a_one_line_error(capsys):
    code, _, err = run(capsys, "train", *FAST, "--seed", "-1")
    assert code == 2 and "--seed must be a non-negative integer" in err


# ---- per-group accuracy and inequality in `dpfair train` ------------------------------------------


def test_train_reports_per_group_accuracy_and_inequality(tmp_path, capsys):
    from dpfair.fairness import accuracy_inequality

    out = tmp_path / "r.json"
    code, stdout, err = run(capsys, "train", *FAST, "--method", "erm", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert set(result["per_group_accuracy"]) == set(result["groups"]) == {"group 0", "group 1"}
    assert set(result["accuracy_inequality"]) == {"atkinson", "gini", "mean_log_deviation", "theil"}
    # recompute from the saved model on the same test split
    from dpfair.datasets import load_dataset

    data = load_dataset("synthetic", random_state=0)
    y_pred = load_estimator(tmp_path / "r.pt").predict(data.X_test)
    expected = accuracy_inequality(data.y_test, y_pred, data.s_test)
    assert result["per_group_accuracy"]["group 1"] == pytest.approx(expected["per_group_accuracy"][1])
    assert result["accuracy_inequality"]["theil"] == pytest.approx(expected["theil"])
    assert 1 - result["test_error"] == pytest.approx(
        sum(expected["per_group_accuracy"][g] * n for g, n in expected["group_sizes"].items()) / len(y_pred))
    for text in ("accuracy, group 0", "accuracy, group 1", "Atkinson index (aversion 1)", "Gini coefficient",
                 "mean log deviation", "Theil index (T)"):
        assert text in stdout


# ---- dpfair audit membership --------------------------------------------------------------------

AUDIT = ["audit", "membership", "--dataset", "synthetic", "--quiet", "--param", "epochs=2", "--shadow", "2"]


def test_audit_membership_prints_the_table_and_the_note_and_writes_json(tmp_path, capsys):
    from dpfair.audit import NOTE

    out = tmp_path / "m.json"
    code, stdout, err = run(capsys, *AUDIT, "--method", "dp-fermi", "--epsilon", "2", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    for key in ("method", "dataset", "epsilon", "delta", "privacy_spent", "attacks", "note", "n_pool", "n_shadow"):
        assert key in result
    assert result["method"] == "dp-fermi" and result["dataset"] == "synthetic" and result["note"] == NOTE
    assert result["epsilon"] <= 2.0 and result["privacy_spent"]["epsilon"] == result["epsilon"]
    assert result["privacy_unit"] == "sensitive"
    assert list(result["attacks"]) == ["loss", "shadow", "lira", "lira-offline"]
    assert set(result["attacks"]["lira"]) == {"all", "group 0", "group 1"}
    row = result["attacks"]["loss"]["all"]
    assert row["auc_low"] <= row["auc"] <= row["auc_high"] and row["n_members"] + row["n_nonmembers"] == 1500
    assert result["n_pool"] == 1500 and result["n_shadow"] == 2
    assert NOTE in stdout and "AUC [95% CI]" in stdout and "TPR@0.1%FPR" in stdout and "group 1" in stdout
    assert "not whether their record was trained on" in stdout  # the sensitive unit's ε says nothing of membership
    assert not list(tmp_path.glob("*.pt"))


def test_audit_membership_constants_match_the_library():
    from dpfair.audit import ATTACKS, NOTE
    from dpfair.cli import audit

    assert audit.ATTACK_NAMES == ATTACKS
    assert audit.MEMBERSHIP_NOTE.rstrip(".").lower() == NOTE.lower()


def test_audit_membership_loss_only_on_a_non_private_method(tmp_path, capsys):
    out = tmp_path / "m.json"
    code, stdout, err = run(capsys, *AUDIT, "--method", "erm", "--attack", "loss", "--shadow", "0", "--out",
                            str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert list(result["attacks"]) == ["loss"] and result["epsilon"] is None and result["n_shadow"] == 0
    assert result["privacy_unit"] is None and "privacy unit:" not in stdout


@pytest.mark.parametrize("argv,match", [
    (["--attack", "loss,magic"], "--attack: unknown attack 'magic'"),
    (["--attack", ","], "--attack is empty"),
    (["--shadow", "1"], "--shadow must be >= 2"),
    (["--method", "magic"], "unknown method 'magic'"),
    (["--dataset", "nope"], "unknown data set 'nope'"),
    (["--epsilon", "0"], "--epsilon must be > 0"),
    (["--seed", "-2"], "--seed must be a non-negative integer"),
    (["--method", "erm", "--epsilon", "1"], "is not private"),
    (["--param", "bogus=1"], "has no hyper-parameter 'bogus'"),
    (["--out", "x.txt"], "--out must name a .json file"),
])
def test_audit_bad_input_is_one_line_and_exits_2(tmp_path, capsys, argv, match):
    out = tmp_path / "m.json"
    code, _, err = run(capsys, *AUDIT, "--out", str(out), *argv)
    assert code == 2
    assert match in err and err.count("\n") == 1 and err.startswith("dpfair: error:")
    assert not out.exists()


def test_audit_does_not_overwrite(tmp_path, capsys):
    out = tmp_path / "m.json"
    out.write_text("precious")
    code, _, err = run(capsys, *AUDIT, "--out", str(out))
    assert code == 2 and "already exists" in err and out.read_text() == "precious"
    code, _, err = run(capsys, "audit", "--dataset", "synthetic", "--runs", "400", "--out", str(out))
    assert code == 2 and "already exists" in err and out.read_text() == "precious"


@pytest.mark.secret_noise  # reproducible noise repeats across fits: the audit would (rightly) catch it
def test_audit_epsilon_prints_the_bound_beside_the_claim(tmp_path, capsys):
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "audit", "--dataset", "synthetic", "--method", "output-perturbation",
                            "--runs", "200", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    for key in ("epsilon_claimed", "epsilon_lower_bound", "confidence", "runs"):
        assert key in result
    assert result["runs"] == 200 and result["epsilon_lower_bound"] <= result["epsilon_claimed"] <= 1.0
    assert "epsilon lower bound" in stdout and "LOWER bound" in stdout
    code, _, err = run(capsys, "audit", "--dataset", "synthetic", "--runs", "2", "--out", str(tmp_path / "b.json"))
    assert code == 2 and "--runs" in err and not (tmp_path / "b.json").exists()


def test_an_unwritable_out_fails_before_training(tmp_path, capsys):
    """Issue 13, item 9: the --out check comes first, names --out, and nothing is trained or written."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, stdout, err = run(capsys, "train", *FAST, "--out", str(blocker / "r.json"))
    assert code == 2 and "--out" in err and "cannot write" in err and stdout == ""


def test_predict_before_fit_raises_not_fitted():
    """Issue 13, item 12: scikit-learn's NotFittedError, not an AttributeError."""
    from sklearn.exceptions import NotFittedError

    from dpfair.algorithms import DPSGDClassifier, ERMClassifier

    for cls in (ERMClassifier, DPSGDClassifier):
        with pytest.raises(NotFittedError):
            cls().predict(np.zeros((2, 3)))


def test_warnings_print_one_line_without_a_source_path(tmp_path, capsys):
    """Issue 13, item 11: the δ > 1/n warning reads as one line, with no file path or line number."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code, _, err = run(capsys, "train", *FAST, "--delta", "0.001", "--out", str(tmp_path / "d.json"))
    assert code == 0
    lines = [line for line in err.splitlines() if "exceeds 1/n" in line]
    assert lines and all(line.startswith("dpfair: UserWarning:") and ".py" not in line for line in lines)


def test_one_corrupt_file_spoils_only_its_own_row(tmp_path, capsys, shared_data):
    """Issue 13, item 10: a corrupt data file marks its data set unreadable and the listing goes on."""
    import shutil

    home = tmp_path / "data"
    shutil.copytree(shared_data / "german", home / "german")
    shutil.copytree(shared_data / "parkinsons", home / "parkinsons")
    (home / "german" / "german.data").write_text("corrupted\n")
    code, out, err = run(capsys, "datasets", "--data-home", str(home))
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "unreadable" in rows["german"] and " yes " in rows["parkinsons"]
    assert any(line.startswith("german: ") and "sha256" in line.lower() for line in out.splitlines())
