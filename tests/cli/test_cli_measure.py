"""Issue 30: `dpfair measure`: the private fairness table of a file of predictions from any system, in one command."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main

#: the fixture's 1 % 'islands' group (and one test's 8-person 'nobody') is too small for ε = 1 by design: the command
#: prints the warning as one line on stderr and the tests assert the flag in its figures
pytestmark = pytest.mark.filterwarnings("default:too few people behind:dpfair.exceptions.UtilityWarning")


@pytest.fixture(scope="module")
def predictions(tmp_path_factory):
    """Predictions another system wrote: string labels and groups (one small group), not a built-in data set."""
    rng = np.random.default_rng(0)
    n = 4000
    region = rng.choice(["north", "south", "east", "islands"], n, p=[0.45, 0.35, 0.19, 0.01])
    approved = rng.random(n) < np.where(region == "north", 0.5, 0.35)
    predicted = np.where(rng.random(n) < 0.85, approved, ~approved)
    frame = pd.DataFrame({"applicant": np.arange(n), "region": region,
                          "approved": np.where(approved, "yes", "no"), "score_label": np.where(predicted, "yes", "no")})
    folder = tmp_path_factory.mktemp("measure")
    frame.to_csv(folder / "decisions.csv", index=False)
    return folder


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


BASE = ("measure", "--label", "approved", "--prediction", "score_label", "--sensitive", "region",
        "--classes", "no,yes", "--bootstrap", "200", "--quiet")
GROUPS = ("--groups", "north,south,east,islands")


def _exact(folder):
    frame = pd.read_csv(folder / "decisions.csv")
    y, p = frame["approved"] == "yes", frame["score_label"] == "yes"
    return {g: {"selection_rate": p[frame.region == g].mean(),
                "true_positive_rate": p[(frame.region == g) & y].mean(),
                "count": int((frame.region == g).sum())} for g in ["north", "south", "east", "islands"]}


def test_measure_prints_the_table_and_writes_the_figures_and_the_ledger(predictions, capsys):
    out_file = predictions / "m.json"
    code, out, err = _cli(capsys, *BASE, *GROUPS, "--predictions", predictions / "decisions.csv", "--epsilon", "1",
                          "--seed", "0", "--out", out_file)
    assert code == 0, err
    assert "released with ε = " in out and "each person's region" in out
    for line in ("north", "south", "east", "islands", "everyone", "difference", "ratio",
                 "demographic parity difference", "equalized odds difference"):
        assert line in out
    result = json.loads(out_file.read_text())
    assert result["command"] == "measure" and result["n"] == 4000 and result["positive_class"] == "yes"
    pure = result["mechanism"] == "laplace"  # a Laplace release is pure DP: δ = 0
    assert 0.9 < result["epsilon"] <= 1.0 and result["delta"] == (0.0 if pure else pytest.approx(1 / 4000 ** 2))
    assert result["privacy_unit"] == "sensitive"
    assert [r["label"] for r in result["privacy_ledger"]]  # the release is on the ledger
    assert all(r["noise_multiplier"] > 0 for r in result["privacy_ledger"])
    # the tiny group (≈ 40 people) is flagged for its rates, and the printed table says so
    assert result["by_group"]["islands"]["true_positive_rate"]["flagged"]
    assert "! too few people" in out and "islands" in out.split("! too few people")[1]
    # the released figures are noisy, not the exact ones, and near them
    exact = _exact(predictions)
    for g, figures in exact.items():
        released = result["by_group"][g]["count"]["value"]
        assert released != figures["count"]
        assert abs(released - figures["count"]) < 6 * result["noise_std"] * 2  # ≤ 6 std of a sum of ≤ 4 cells
    north = result["by_group"]["north"]["selection_rate"]
    assert abs(north["value"] - exact["north"]["selection_rate"]) < 0.03
    lo, hi = result["demographic_parity_difference"]["interval"]
    assert lo <= result["demographic_parity_difference"]["value"] <= hi


def test_at_infinite_epsilon_the_figures_are_exact_and_say_so(predictions, capsys):
    code, out, err = _cli(capsys, *BASE, "--predictions", predictions / "decisions.csv", "--epsilon", "inf",
                          "--out", predictions / "exact.json")
    assert code == 0, err
    assert "NOT private" in out
    result = json.loads((predictions / "exact.json").read_text())
    assert result["epsilon"] is None  # JSON has no infinity: ε = ∞ (no privacy) is null
    exact = _exact(predictions)
    for g, figures in exact.items():
        for m in ("selection_rate", "true_positive_rate"):
            assert result["by_group"][g][m]["value"] == pytest.approx(figures[m], abs=1e-12)
        assert result["by_group"][g]["count"]["value"] == figures["count"]


def test_a_result_is_never_replaced_unasked(predictions, capsys):
    out_file = predictions / "kept.json"
    out_file.write_text("{}")
    code, _, err = _cli(capsys, *BASE, *GROUPS, "--predictions", predictions / "decisions.csv", "--epsilon", "1",
                        "--out", out_file)
    assert code == 2 and "already exists" in err and out_file.read_text() == "{}"
    code, _, err = _cli(capsys, *BASE, *GROUPS, "--predictions", predictions / "decisions.csv", "--epsilon", "1",
                        "--out", out_file, "--overwrite")
    assert code == 0, err and json.loads(out_file.read_text())["command"] == "measure"


@pytest.mark.parametrize("argv, message", [
    (("--epsilon", "1"), "declare the groups with --groups"),
    (("--epsilon", "1", "--groups", "north,south"), "outside groups"),
    (("--epsilon", "1", "--groups", "north,south,north"), "lists a value twice"),
    (("--epsilon", "0", *GROUPS), "--epsilon must be > 0"),
    (("--epsilon", "1", *GROUPS, "--metrics", "selection_rate,parity"), "unknown metric 'parity'"),
    (("--epsilon", "1", *GROUPS, "--positive", "maybe"), "--positive 'maybe' is not one of"),
])
def test_bad_input_is_one_line_naming_the_fix(predictions, capsys, argv, message):
    code, out, err = _cli(capsys, *BASE, "--predictions", predictions / "decisions.csv", *argv,
                          "--out", predictions / "bad.json")
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (predictions / "bad.json").exists()


def test_unknown_columns_and_undeclared_labels_are_refused(predictions, capsys):
    code, _, err = _cli(capsys, "measure", "--predictions", predictions / "decisions.csv", "--label", "approved",
                        "--prediction", "decision", "--sensitive", "region", *GROUPS, "--epsilon", "1")
    assert code == 2 and "no column 'decision' (--prediction)" in err
    code, _, err = _cli(capsys, "measure", "--predictions", predictions / "decisions.csv", "--label", "approved",
                        "--prediction", "score_label", "--sensitive", "region", *GROUPS, "--epsilon", "1")
    assert code == 2 and "declare them with --classes" in err
    code, _, err = _cli(capsys, "measure", "--predictions", predictions / "decisions.csv", "--model", "m.pt",
                        "--epsilon", "1")
    assert code == 2 and "name the rows once" in err


@pytest.mark.parametrize("name, content, message", [
    ("semi.csv", "y;p;s\n1;1;a\n0;0;b\n", "seems ';'-separated and a .csv file is read comma-separated; save it "
                                           "comma-separated"),
    ("tabs.csv", "y\tp\ts\n1\t1\ta\n0\t0\tb\n", "seems tab-separated and a .csv file is read comma-separated; "
                                                   "name the file .tsv"),
    ("commas.tsv", "y,p,s\n1,1,a\n0,0,b\n", "seems ','-separated and a .tsv file is read tab-separated; name the "
                                             "file .csv"),
    ("utf16.csv", "y,p,s\n1,1,a\n0,0,b\n".encode("utf-16"), "not UTF-8 text"),
    ("scores.csv", "y,p,s\n1,0.7,a\n0,0.2,b\n1,0.9,a\n0,0.4,b\n", "the predictions are not 0/1 labels"),
    ("labels.csv", "y,p,s\n2,1,a\n0,0,b\n", "the labels are not 0/1"),
    ("one.csv", "y,p,s\n1,1,a\n", "the default delta 1/n² is 1 for 1 row(s); pass delta (--delta) below 1"),
])
def test_a_users_file_that_cannot_be_measured_is_one_line_naming_the_fix(tmp_path, capsys, name, content, message):
    """A file from another system, saved the way spreadsheets save them: the error says what is wrong and the fix."""
    path = tmp_path / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    code, _, err = _cli(capsys, "measure", "--predictions", path, "--label", "y", "--prediction", "p",
                        "--sensitive", "s", "--groups", "a,b", "--epsilon", "1", "--quiet", "--out",
                        tmp_path / "r.json")
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_measure_a_model_trained_on_a_users_table(tmp_path, capsys):
    """`--model M --data FILE`: the model predicts the rows first; the schema's groups and classes are used."""
    rng = np.random.default_rng(1)
    n = 2000
    region = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * x - 0.5 * (region == "a"))), "good", "bad")
    pd.DataFrame({"x": x, "region": region, "outcome": y}).to_csv(tmp_path / "t.csv", index=False)
    code, toml, err = _cli(capsys, "schema", tmp_path / "t.csv", "--label", "outcome", "--sensitive", "region")
    (tmp_path / "schema.toml").write_text(toml)
    code, _, err = _cli(capsys, "train", "--data", tmp_path / "t.csv", "--schema", tmp_path / "schema.toml",
                        "--method", "erm", "--quiet", "--out", tmp_path / "r.json")
    assert code == 0, err
    code, out, err = _cli(capsys, "measure", "--model", tmp_path / "r.pt", "--data", tmp_path / "t.csv",
                          "--epsilon", "2", "--bootstrap", "100", "--quiet", "--out", tmp_path / "m.json")
    assert code == 0, err
    result = json.loads((tmp_path / "m.json").read_text())
    assert result["groups"] == ["a", "b", "c"] and result["classes"] == ["bad", "good"]
    assert result["model"].endswith("r.pt") and result["n"] == n and result["epsilon"] <= 2.0
    code, _, err = _cli(capsys, "measure", "--model", tmp_path / "r.pt", "--data", tmp_path / "t.csv",
                        "--groups", "a,b", "--epsilon", "2")
    assert code == 2 and "drop --groups" in err
    # the same rows as three CSV parts in a folder, predicted and counted a batch at a time: the same exact figures
    parts = tmp_path / "parts"
    parts.mkdir()
    frame = pd.read_csv(tmp_path / "t.csv", dtype=str, keep_default_na=False)
    for i in range(3):
        frame.iloc[i::3].to_csv(parts / f"t-{i}.csv", index=False)
    figures = []
    for data in (tmp_path / "t.csv", parts):
        code, _, err = _cli(capsys, "measure", "--model", tmp_path / "r.pt", "--data", data, "--epsilon", "inf",
                            "--batch-rows", "300", "--bootstrap", "20", "--quiet", "--out", tmp_path / "exact.json",
                            "--overwrite")
        assert code == 0, err
        figures.append(json.loads((tmp_path / "exact.json").read_text())["by_group"])
    assert figures[0] == figures[1]


def test_a_difference_that_includes_a_flagged_group_says_so_and_gives_the_one_without(tmp_path, capsys):
    """A group of 8 people (named "nobody") at ε = 1: its noisy rates are anything, so every difference that
    includes one is marked ``!`` and printed again over the unflagged groups (post-processing of the released figures). (A group
    of nobody may have no figure at all: a noisy denominator ≤ 0 leaves its rates undefined, outside the
    difference.)"""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"y": rng.integers(0, 2, 3000), "p": rng.integers(0, 2, 3000),
                          "s": np.append(rng.choice(["a", "b"], 2992), ["nobody"] * 8)})
    frame.to_csv(tmp_path / "p.csv", index=False)
    code, out, err = _cli(capsys, "measure", "--predictions", tmp_path / "p.csv", "--label", "y", "--prediction", "p",
                          "--sensitive", "s", "--groups", "a,b,nobody", "--epsilon", "1", "--quiet", "--bootstrap",
                          "200", "--out", tmp_path / "m.json")
    assert code == 0, err
    record = json.loads((tmp_path / "m.json").read_text())
    dp = record["demographic_parity_difference"]
    assert dp["flagged_groups"] == ["nobody"]
    rates = [record["by_group"][g]["selection_rate"]["value"] for g in ("a", "b")]
    assert dp["value_unflagged"] == pytest.approx(max(rates) - min(rates))
    assert record["aggregates"]["selection_rate"]["flagged_groups"] == ["nobody"]
    line = next(row for row in out.splitlines() if "demographic parity difference" in row)
    assert "!" in line and f"(unflagged groups: {dp['value_unflagged']:.3f})" in line
    assert "a difference marked ! includes them" in out


@pytest.mark.secret_noise  # secure noise comes from the OS CSPRNG and cannot be seeded
def test_secure_noise_is_one_flag_and_says_so(predictions, capsys):
    code, out, err = _cli(capsys, *BASE, "--predictions", predictions / "decisions.csv", "--epsilon", "1", *GROUPS,
                          "--secure", "--out", predictions / "secure.json", "--overwrite")
    assert code == 0, err
    assert "Laplace noise (exact, on a grid, secure mode)" in out
    record = json.loads((predictions / "secure.json").read_text())
    assert record["secure_mode"] is True and record["epsilon"] == 1.0 and record["delta"] == 0.0


def _warehouse(predictions):
    """The decisions as a warehouse holds them: Parquet parts under region=... folders, and monthly CSV exports."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pd.read_csv(predictions / "decisions.csv")
    root = predictions / "warehouse"
    if not root.exists():
        pq.write_to_dataset(pa.Table.from_pandas(frame), root, partition_cols=["region"])
        exports = predictions / "exports"
        exports.mkdir()
        for month in range(3):
            frame.iloc[month::3].to_csv(exports / f"decisions-{month + 1:02d}.csv", index=False)
    return root, predictions / "exports" / "decisions-*.csv"


def test_a_partitioned_folder_and_a_glob_measure_as_the_one_file(predictions, capsys, tmp_path):
    """The same exact figures from the file, its Parquet partitions and its CSV parts (ε = ∞: nothing noisy)."""
    figures = []
    for source in (predictions / "decisions.csv", *_warehouse(predictions)):
        out_file = tmp_path / f"{len(figures)}.json"
        code, out, err = _cli(capsys, *BASE, *GROUPS, "--predictions", source, "--epsilon", "inf",
                              "--batch-rows", "500", "--out", out_file)
        assert code == 0, err
        record = json.loads(out_file.read_text())
        assert record["n"] == 4000 and record["source"] == str(source)
        figures.append(record["by_group"])
    assert figures[0] == figures[1] == figures[2]


def test_the_dask_backend_measures_on_a_loopback_cluster(predictions, capsys, tmp_path):
    pytest.importorskip("distributed")
    root, _ = _warehouse(predictions)
    code, out, err = _cli(capsys, *BASE, *GROUPS, "--predictions", root, "--epsilon", "inf", "--backend", "dask",
                          "--workers", "2", "--out", tmp_path / "dask.json")
    assert code == 0, err
    code, _, err = _cli(capsys, *BASE, *GROUPS, "--predictions", root, "--epsilon", "inf", "--out",
                        tmp_path / "local.json")
    assert code == 0, err
    dask, local = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("dask", "local"))
    assert dask["by_group"] == local["by_group"] and dask["n"] == local["n"] == 4000


@pytest.mark.parametrize("argv, message", [
    (("--scheduler", "tcp://127.0.0.1:1"), "--scheduler goes with --backend dask"),
    (("--workers", "2"), "--workers goes with --backend dask"),
    (("--batch-rows", "0"), "--batch-rows must be a positive integer"),
])
def test_backend_flags_out_of_place_are_one_line(predictions, capsys, argv, message):
    code, _, err = _cli(capsys, *BASE, *GROUPS, "--predictions", predictions / "decisions.csv", "--epsilon", "1",
                        *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_measure_of_a_predictions_file_imports_neither_torch_nor_sklearn(tmp_path):
    """Issue 45: `dpfair measure --predictions` in a fresh interpreter releases its count table without loading
    torch or scikit-learn (they took about 2 s of its CPU); a release with tensors still finds torch."""
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    pd.DataFrame({"y": rng.integers(0, 2, 1000), "p": rng.integers(0, 2, 1000),
                  "g": rng.choice(["a", "b"], 1000)}).to_csv(tmp_path / "p.csv", index=False)
    script = ("import json, sys\nfrom dpfair.cli import main\n"
              f"code = main(['measure', '--predictions', {str(tmp_path / 'p.csv')!r}, '--label', 'y', '--prediction', "
              f"'p', '--sensitive', 'g', '--groups', 'a,b', '--epsilon', '1', '--quiet', '--out', "
              f"{str(tmp_path / 'm.json')!r}])\n"
              "print(json.dumps([code, sorted(m for m in ('torch', 'sklearn') if m in sys.modules)]))\n"
              "import torch\nfrom dpfair.privacy import SecretRandom\n"
              "print(type(SecretRandom('check').normal((2,), torch.zeros(2))).__name__)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    code, loaded = json.loads(done.stdout.splitlines()[-2])
    assert code == 0 and (tmp_path / "m.json").is_file()
    assert loaded == [], f"dpfair measure imported {loaded}"
    assert done.stdout.splitlines()[-1] == "Tensor"
