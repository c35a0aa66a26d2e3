"""Sweeps: specs, the results store, resuming after a kill, and the privacy totals of what was released."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import dp_accounting as dpa
import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.experiments.report import write_tables
from dpfair.experiments.runner import run_grid
from dpfair.experiments.spec import SweepSpec, shipped_specs
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import plan_tasks, run_sweep
from dpfair.privacy import PrivacyLedger, epsilon_of
from dpfair.privacy.accounting import event_from_json, event_to_json

TINY = """
[sweep]
name = "tiny"
datasets = ["compas"]
methods = ["dp-fermi", "erm"]
epsilon = [1.0]
seeds = [0, 1]

[grid.dp-fermi]
lam = [0.0, 1.0]
"""


def _spec(text: str = TINY) -> SweepSpec:
    import tomllib

    return SweepSpec.from_dict(tomllib.loads(text))


def test_the_issue_spec_expands_to_its_models_with_stable_distinct_keys():
    points = _spec().points()
    # DP-FERMI: 2 seeds × 2 λ at ε = 1 (its default notion); ERM: once per seed, no ε, no notion
    assert sorted((p.method, p.seed, dict(p.params).get("lam"), p.epsilon, p.notion) for p in points) == [
        ("dp-fermi", 0, 0.0, 1.0, "demographic_parity"), ("dp-fermi", 0, 1.0, 1.0, "demographic_parity"),
        ("dp-fermi", 1, 0.0, 1.0, "demographic_parity"), ("dp-fermi", 1, 1.0, 1.0, "demographic_parity"),
        ("erm", 0, None, None, None), ("erm", 1, None, None, None)]
    assert len({p.key for p in points}) == 6
    assert [p.key for p in points] == [p.key for p in _spec().points()]  # a function of the configuration
    tasks = plan_tasks(_spec(), done=set())
    assert sorted(len(t) for t in tasks) == [1, 1, 2, 2]  # one batched grid per seed, ERM one fit per task
    assert "tiny" in shipped_specs() and SweepSpec.load("tiny").points() == points


@pytest.mark.parametrize("text, message", [
    ("[sweep]\nname='x'\nmethods=['erm']", "needs 'datasets'"),
    ("[sweep]\nname='x'\ndatasets=['nope']\nmethods=['erm']", "unknown data set 'nope'"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\nepsilon=[0]", "epsilon must be > 0"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\ndelta=1.5", r"delta must be in \(0, 1\)"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\n[grid.dp-fermi]\nlamb=[1]",
     "no hyper-parameter 'lamb'"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\n[grid.erm]\nC=[1]", r"\[grid.erm\] names a method"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\n[params.dp-fermi]\nepsilon=2",
     "set by the sweep"),
    ("[sweep]\nname='x'\ndatasets=['compas']\nmethods=['dp-fermi']\nseed=[1]", "unknown key 'seed'"),
])
def test_a_bad_spec_names_the_key_and_the_fix(text, message):
    import tomllib

    with pytest.raises(ValueError, match=message):
        SweepSpec.from_dict(tomllib.loads(text))


def test_a_missing_or_broken_spec_file_is_one_line_at_the_cli(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\n")
    assert main(["sweep", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "r.html")]) == 2
    assert "run `dpfair sweep" in capsys.readouterr().err


def test_events_and_ledgers_round_trip_through_json():
    event = dpa.ComposedDpEvent([dpa.GaussianDpEvent(3.0), dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.0)), 17), dpa.NonPrivateDpEvent()])
    assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event
    with pytest.raises(ValueError, match="not a dp_accounting event"):
        event_from_json({"dp_event": "os.system"})
    ledger = PrivacyLedger("sensitive")
    ledger.record(dpa.GaussianDpEvent(5.0), "counts")
    ledger.record(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.0)), "step", 40)
    again = PrivacyLedger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert again == ledger and again.epsilon(1e-5) == ledger.epsilon(1e-5)


def test_run_grid_batches_dp_fermi_and_releases_the_grid_under_its_joint_event():
    from dpfair.datasets import load_dataset

    data = load_dataset("compas")
    result = run_grid("dp-fermi", data, {"lam": [0.0, 2.0]}, params={"epochs": 2, "random_state": 0})
    assert [row["params"]["lam"] for row in result.rows] == [0.0, 2.0]
    (release,) = result.releases  # one joint release, not two independent ones
    assert release["rows"] == [0, 1] and release["epsilon"] > max(r["epsilon_spent"] for r in result.rows)
    joint = event_from_json(release["event"])
    assert epsilon_of(joint, release["delta"], "sensitive") == pytest.approx(release["epsilon"])
    for row in result.rows:
        assert row["violation"] == row["metrics"]["fairness"]["demographic_parity"]
    # a grid with ε = ∞ models: those are a release of their own, so the private models' ε stays finite
    mixed = run_grid("dp-fermi", data, {"epsilon": [1.0, math.inf], "lam": [0.0, 2.0]},
                     params={"epochs": 2, "random_state": 0})
    private, public = mixed.releases
    assert (private["rows"], public["rows"]) == ([0, 1], [2, 3]) and math.isinf(public["epsilon"])
    assert private["epsilon"] == pytest.approx(release["epsilon"], rel=1e-6)  # the same plan as the grid above
    assert [row["release"] for row in mixed.rows] == [0, 0, 1, 1]
    erm = run_grid("erm", data)
    assert len(erm.rows) == 1 and math.isinf(erm.rows[0]["epsilon_spent"]) and math.isnan(erm.rows[0]["violation"])


def test_a_task_that_refuses_its_input_is_a_failure_that_is_retried(tmp_path):
    # a setting only the data refuse (compas has 2 groups); one refused by the method alone fails the spec's check
    spec = _spec(TINY.replace("lam = [0.0, 1.0]", "lam = [0.0, 1.0]\n\n[params.dp-fermi]\ngroup_proportions = [1.0]"))
    store = ResultsStore(tmp_path / "s.sqlite")
    summary = run_sweep(spec, store, workers=1, verbose=False)
    assert summary.trained == 2 and sum(summary.failed.values()) == 4  # ERM trains, DP-FERMI refuses
    (message,) = summary.failed
    assert "group_proportions" in message
    assert {f["config"]["method"] for f in store.failures()} == {"dp-fermi"}
    assert len(store.done_keys()) == 2 and len(store.frame()) == 2


def test_the_tiny_sweep_stores_each_model_once_with_its_provenance_and_the_total_privacy(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    first = run_sweep(_spec(), store, workers=1, verbose=False)
    assert (first.points, first.skipped, first.trained, first.failed) == (6, 0, 6, {})
    again = run_sweep(_spec(), store, workers=1, verbose=False)
    assert (again.skipped, again.trained) == (6, 0)
    frame = store.frame()
    assert len(frame) == 6 and frame["key"].is_unique
    assert set(frame["commit_hash"].map(type)) <= {str, type(None)}
    assert {"torch", "dp-accounting", "numpy"} <= set(frame["versions"][0])
    assert (frame["wall_s"] > 0).all() and frame["error"].between(0, 1).all()
    dp = frame[frame["method"] == "dp-fermi"]
    assert np.allclose(dp["violation"], dp["fairness.demographic_parity"])
    # the totals compose every release: per seed the grid's joint event, across seeds independently
    totals = store.privacy_totals().set_index("relation")
    sensitive = totals.loc["REPLACE_ONE"]  # compas's race: DP-FERMI's models and the record-level ERM ones
    assert sensitive["sensitive"] == "race" and sensitive["release_groups"] == 4
    assert (sensitive["models"], sensitive["private_models"], sensitive["uncovered_models"]) == (6, 4, 0)
    joint = [event_from_json(json.loads(e)) for (e,) in sqlite3.connect(store.path).execute(
        "SELECT event FROM releases WHERE relation = 'REPLACE_ONE'")]
    assert sensitive["private_epsilon"] == pytest.approx(epsilon_of(dpa.ComposedDpEvent(joint), sensitive["delta"],
                                                                    "sensitive"))
    assert sensitive["private_epsilon"] > dp["epsilon_spent"].max()
    assert math.isinf(sensitive["epsilon"])  # the non-private ERM models reveal everyone's race too
    record = totals.loc["ADD_OR_REMOVE_ONE"]  # the non-private ERM models
    assert math.isinf(record["epsilon"]) and record["private_models"] == 0 and record["private_epsilon"] == 0
    assert record["models"] == 2 and record["uncovered_models"] == 4  # DP-FERMI protects race only
    assert store.releases()["models"].tolist().count(2) == 2  # the two grids, each released together
    # the tables committed beside a report: one row per model, per point (seeds averaged), the best points
    written = write_tables(store, tmp_path / "tables")
    assert [p.name for p in written] == ["models.csv", "points.csv", "best.csv", "best.md"]
    models = pd.read_csv(tmp_path / "tables" / "models.csv")
    assert len(models) == 6 and {"error", "violation", "epsilon_spent", "fairness.equalized_odds"} <= set(models)
    points = pd.read_csv(tmp_path / "tables" / "points.csv")
    assert set(points.loc[points["method"] == "dp-fermi", "n_seeds"]) == {2}
    assert (tmp_path / "tables" / "best.md").read_text().startswith("| data | notion | method |")


SLOW_SPEC = TINY.replace("seeds = [0, 1]", "seeds = [0, 1, 2, 3, 4, 5, 6, 7]").replace(
    'methods = ["dp-fermi", "erm"]', 'methods = ["dp-fermi", "erm", "dp-sgd"]')


def test_a_sweep_killed_mid_run_resumes_without_duplicates_or_partial_rows(tmp_path):
    """SIGKILL (no clean-up at all) once the first tasks are stored; the rerun trains only the rest."""
    spec_file, store_path = tmp_path / "spec.toml", tmp_path / "s.sqlite"
    spec_file.write_text(SLOW_SPEC)
    cmd = [sys.executable, "-m", "dpfair", "sweep", str(spec_file), "--store", str(store_path), "--workers", "1",
           "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 240
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if store_path.exists():
            stored = len(ResultsStore(store_path).done_keys())
            if stored >= 3:
                break
    assert proc.poll() is None, "the sweep finished before it could be killed; make SLOW_SPEC longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultsStore(store_path)
    killed = store.frame()
    total = len(_spec(SLOW_SPEC).points())
    assert 0 < len(killed) < total
    # whole tasks only: a task's rows and its release were written together
    releases = dict(sqlite3.connect(store_path).execute("SELECT release_id, models FROM releases").fetchall())
    assert killed.groupby("release_id").size().to_dict() == releases

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert re.search(r"already stored\s+(\d+)", done.stdout).group(1) == str(len(killed))
    frame = store.frame()
    assert len(frame) == total and frame["key"].is_unique
    assert set(killed["key"]) <= set(frame["key"])
    assert (frame.set_index("key").loc[killed["key"], "created"].values == killed["created"].values).all()
    (race,) = store.privacy_totals().query("sensitive == 'race'").to_dict("records")
    assert race["models"] == total and race["uncovered_models"] == 0  # every stored model counted once, none twice


def test_the_fits_warnings_come_back_to_the_sweep_not_to_the_workers_stderr(tmp_path):
    spec = _spec('[sweep]\nname = "w"\ndatasets = ["german"]\nmethods = ["dp-sgd"]\nepsilon = [1.0]\n'
                 'seeds = [0, 1]\n[params.dp-sgd]\nepochs = 1\n')
    summary = run_sweep(spec, ResultsStore(tmp_path / "s.sqlite"), workers=1, verbose=False)
    # (the tests' reproducible noise adds its own warning; a user's run has only the utility one)
    ((line, tasks),) = [(k, n) for k, n in summary.warnings.items() if k.startswith("UtilityWarning")]
    assert tasks == 2 and line.startswith("UtilityWarning: DP-SGD protects whole records at epsilon=1")
