"""The command line refuses features that encode s under the sensitive unit (issue 26, part 3).

``dpfair train --dataset german --option include_sensitive=true --method dp-postprocess`` printed ε = 0.997 of
sex while the base model read the sex columns without noise; every command that fits (train, tune, certify,
audit, audit membership) and the sweeps now refuse it with one line naming the fix, accept the record unit,
and hand output perturbation the columns so that it accounts for them.
"""

import json
import tomllib

import pytest

from dpfair.cli import main
from dpfair.datasets import load_dataset
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import run_sweep

WITH_SEX = ["--dataset", "german", "--option", "include_sensitive=true", "--quiet"]
REFUSAL = ("dpfair: error: feature(s) 'personal_status_sex=A91', 'personal_status_sex=A92', "
           "'personal_status_sex=A93', 'personal_status_sex=A94' and 1 more encode the sensitive attribute 'sex'; "
           "under privacy_unit='sensitive' X is public")
FIX = "drop them from X (include_sensitive=false for a built-in data set) or use privacy_unit='record'"


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv", [
    ["train", "--method", "dp-postprocess"],  # the command
    ["train", "--method", "dp-fermi"],
    ["train", "--method", "pf-ld"],
    ["train", "--method", "dp-oracle"],
    ["tune", "--method", "dp-fermi", "--grid", "lam=0,1"],
    ["certify", "--method", "dp-fermi"],
    ["audit", "--method", "dp-postprocess", "--runs", "4"],
    ["audit", "--method", "dp-fermi", "--param", "privacy_unit=record", "--unit", "sensitive", "--runs", "4"],
    ["audit", "membership", "--method", "dp-fermi", "--attack", "loss"],
], ids=["train-dp-postprocess", "train-dp-fermi", "train-pf-ld", "train-dp-oracle", "tune", "certify", "audit",
        "audit-unit", "audit-membership"])
def test_every_command_that_fits_refuses_them_with_one_line(tmp_path, capsys, argv):
    command, rest = (argv[:2], argv[2:]) if argv[1] == "membership" else (argv[:1], argv[1:])
    out = tmp_path / "r.json"
    code, stdout, err = run(capsys, *command, *WITH_SEX, *rest, "--out", str(out))
    assert code == 2 and stdout == ""
    assert err.startswith(REFUSAL) and err.rstrip("\n").endswith(FIX) and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


# printed by the command, one line each, and asserted
@pytest.mark.filterwarnings("default::dpfair.exceptions.SmallGroupWarning",
                            "default:DP-FERMI protects whole records:dpfair.exceptions.UtilityWarning")
def test_the_record_unit_is_accepted(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "train", *WITH_SEX, "--method", "dp-fermi", "--param", "privacy_unit=record",
                       "--param", "epochs=2", "--out", str(out))
    assert code == 0, err
    # german's 750 training rows: under the record unit the released group counts are too noisy for its women,
    # and 64 parameters too many for ε = 1
    assert "SmallGroupWarning: DP-FERMI: group(s)" in err and "too little data for that privacy" in err
    result = json.loads(out.read_text())
    assert result["hyperparameters"]["privacy_unit"] == "record" and 0.9 < result["epsilon"] <= 1.0


@pytest.mark.parametrize("unit", ["sensitive", "record"])
@pytest.mark.filterwarnings("default:output perturbation protects whole records:dpfair.exceptions.UtilityWarning")
def test_output_perturbation_is_handed_the_columns_and_spends_epsilon_on_them(tmp_path, capsys, unit, shared_data):
    data = load_dataset("german", include_sensitive=True, data_home=shared_data)
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "train", *WITH_SEX, "--method", "output-perturbation",
                       "--param", f"privacy_unit={unit}", "--out", str(out))
    assert code == 0, err
    # whole records at ε = 1 on german's 750 rows and 63 parameters: too little data, as the fit says
    assert ("too little data for that privacy" in err) == (unit == "record")
    result = json.loads(out.read_text())
    assert result["hyperparameters"]["sensitive_feature_columns"] == list(data.sensitive_columns)
    assert 0.9 < result["epsilon"] <= 1.0  # before the fix: 0 under the sensitive unit, with sex in the model
    assert [e["label"] for e in result["privacy_ledger"]] == ["perturbed minimiser"]


SWEEP = """
[sweep]
name = "with-sex"
datasets = [{name = "german", options = {include_sensitive = true}}]
methods = ["dp-fermi", "output-perturbation"]
epsilon = [1.0]

[grid.dp-fermi]
lam = [0.0, 1.0]

[params.output-perturbation]
privacy_unit = "sensitive"
"""


def test_a_sweep_refuses_the_points_that_read_them_as_public(tmp_path):
    spec = SweepSpec.from_dict(tomllib.loads(SWEEP))
    store = ResultsStore(tmp_path / "s.sqlite")
    summary = run_sweep(spec, store, workers=1, verbose=False)
    assert summary.trained == 1 and list(summary.failed.values()) == [2]  # DP-FERMI's two λ
    (message,) = summary.failed
    assert message.startswith(REFUSAL.removeprefix("dpfair: error: ")) and message.endswith(FIX)
    (row,) = store.frame().to_dict("records")
    assert row["method"] == "output-perturbation" and 0.9 < row["epsilon_spent"] <= 1.0
