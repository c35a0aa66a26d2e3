"""A sweep's ``eval_epsilon`` (issue 30): each model's test figures by group released privately, its event composed
into the model's release group (so the store's totals count it), the store's rows saying whether their test figures
are private, and the report labelling them (old rows: non-private diagnostics)."""

from __future__ import annotations

import math
import tomllib

import pandas as pd
import pytest

from dpfair.experiments.report import evaluation_label, render_report
from dpfair.experiments.runner import run_grid
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import run_sweep
from dpfair.privacy import epsilon_of
from dpfair.privacy.accounting import event_from_json

SPEC = """
[sweep]
name = "evaluated"
datasets = ["compas"]
methods = ["output-perturbation", "erm"]
epsilon = [1.0]
seeds = [0]
"""


def _spec(text: str) -> SweepSpec:
    return SweepSpec.from_dict(tomllib.loads(text))


def test_eval_epsilon_reaches_every_point_and_leaves_the_old_keys_alone():
    plain = _spec(SPEC).points()
    evaluated = _spec(SPEC.replace("seeds = [0]", "seeds = [0]\neval_epsilon = 0.5")).points()
    assert all(p.eval_epsilon is None for p in plain) and all(p.eval_epsilon == 0.5 for p in evaluated)
    assert "eval_epsilon" not in plain[0].config()  # the keys of stores written before it stay as they were
    assert {p.key for p in plain}.isdisjoint({p.key for p in evaluated})


@pytest.mark.parametrize("value, message", [("0", "eval_epsilon must be > 0"), ("'one'", "must be a number"),
                                            ("1e9", "above")])
def test_a_bad_eval_epsilon_is_refused_when_the_spec_is_read(value, message):
    with pytest.raises(ValueError, match=message):
        _spec(SPEC.replace("seeds = [0]", f"seeds = [0]\neval_epsilon = {value}"))


def test_run_grid_composes_the_evaluation_into_the_release():
    from dpfair.datasets import load_dataset

    data = load_dataset("compas")
    plain = run_grid("output-perturbation", data, params={"random_state": 0})
    evaluated = run_grid("output-perturbation", data, params={"random_state": 0}, eval_epsilon=1.0)
    (row,) = evaluated.rows
    assert row["metrics"]["evaluation"]["private"] is True and row["metrics"]["evaluation"]["epsilon"] <= 1.0
    assert plain.rows[0]["metrics"]["evaluation"]["private"] is False
    (before,), (after,) = plain.releases, evaluated.releases
    assert after["epsilon"] > before["epsilon"]  # the fit's release and the evaluation's, composed
    assert epsilon_of(event_from_json(after["event"]), after["delta"], "record") == pytest.approx(after["epsilon"])
    assert row["epsilon_spent"] == plain.rows[0]["epsilon_spent"]  # the model's own ε is the fit's


def test_the_store_and_the_report_say_whether_the_test_figures_are_private(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    run_sweep(_spec(SPEC.replace("seeds = [0]", "seeds = [0]\neval_epsilon = 1.0")), store, workers=1,
              verbose=False)
    frame = store.frame()
    assert frame["eval_private"].all() and (frame["eval_epsilon"] <= 1.0).all()
    assert "released privately" in evaluation_label(frame)
    out = render_report(store, tmp_path / "r.html", verbose=False)
    assert "released privately" in out.read_text()


def test_rows_without_an_evaluation_record_are_labelled_non_private():
    old = pd.DataFrame({"metrics": [{"fairness": {}}]})  # a row of a store written before eval_epsilon existed
    assert "non-private diagnostics of the test people" in evaluation_label(old)
    mixed = pd.DataFrame({"eval_private": [True, False], "eval_epsilon": [1.0, math.nan]})
    label = evaluation_label(mixed)
    assert "1 of 2 models" in label and "non-private diagnostics" in label
