"""The results store's privacy totals per population (issue 26): record-level releases compose per data set
whatever attribute they declared, and each attribute's total adds them, converted to replace-one of it, to
its sensitive-unit releases.

The stores here are written directly (release rows with their events), so nothing trains. The events are
those of real fits on compas at ε = 1 and the default δ: DP-SGD (record unit; the same event whichever
attribute is declared, since its training does not read s) and DP-FERMI (sensitive unit, s = sex).
"""

from __future__ import annotations

import json
import math
import sqlite3

import dp_accounting as dpa
import pytest

from dpfair.cli import main
from dpfair.experiments.store import ResultsStore
from dpfair.privacy import epsilon_of
from dpfair.privacy.accounting import event_to_json, replace_one_by_group_privacy

DELTA = 6.3833465128161e-08
DP_SGD = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.06467913087417888, dpa.GaussianDpEvent(5.604614764144914)),
                                 310)
DP_FERMI = dpa.ComposedDpEvent([dpa.GaussianDpEvent(163.23635602488628), dpa.SelfComposedDpEvent(
    dpa.PoissonSampledDpEvent(0.12481051035876706, dpa.GaussianDpEvent(23.955829083897864)), 401)])
RECORD, REPLACE = "ADD_OR_REMOVE_ONE", "REPLACE_ONE"


def _store(path, releases) -> ResultsStore:
    """A store holding ``releases``: ``(dataset, sensitive, relation, event, models)`` each, at δ = DELTA,
    each with its ``models`` rows in ``runs`` (the totals count a release's stored models)."""
    store = ResultsStore(path).create()
    with sqlite3.connect(path) as db:
        for i, (dataset, sensitive, relation, event, models) in enumerate(releases):
            private = not isinstance(event, dpa.NonPrivateDpEvent)
            eps = epsilon_of(event, DELTA, "record" if relation == RECORD else "sensitive") if private else math.inf
            cur = db.execute("INSERT INTO releases (data_key, relation, event, delta, epsilon, models, created) "
                             "VALUES (?, ?, ?, ?, ?, ?, 0)",
                             (json.dumps({"dataset": dataset, "sensitive": sensitive}), relation,
                              json.dumps(event_to_json(event)), DELTA, eps, models))
            db.executemany("INSERT INTO runs (key, release_id) VALUES (?, ?)",
                           [(f"{i}-{m}", cur.lastrowid) for m in range(models)])
    return store


MIXED = [("compas", "race", RECORD, DP_SGD, 1), ("compas", "sex", RECORD, DP_SGD, 1),
         ("compas", "sex", REPLACE, DP_FERMI, 2)]


def _rows(store) -> dict:
    return {r["sensitive"]: r for r in store.privacy_totals().to_dict("records")}


def test_record_level_models_compose_per_data_set_and_each_attribute_adds_them_converted(tmp_path):
    rows = _rows(_store(tmp_path / "s.sqlite", MIXED))
    assert list(rows) == [None, "race", "sex"]
    record, race, sex = rows[None], rows["race"], rows["sex"]
    # the record total: both DP-SGD models, whatever attribute they declared (the old totals: two rows of 0.996)
    alone = epsilon_of(DP_SGD, DELTA, "record")
    assert record["epsilon"] == pytest.approx(epsilon_of(dpa.ComposedDpEvent([DP_SGD, DP_SGD]), DELTA, "record"))
    assert record["epsilon"] > alone * 1.3
    assert (record["relation"], record["models"], record["release_groups"], record["delta"]) == (RECORD, 2, 2, DELTA)
    assert record["uncovered_models"] == 2  # DP-FERMI's two models protect sex only, not records
    assert "every record-level model, whatever sensitive attribute it declared" in record["covers"]
    # each attribute: its sensitive-unit models and both DP-SGD models re-accounted under replace-one
    converted = epsilon_of(dpa.ComposedDpEvent([DP_SGD, DP_SGD]), DELTA, "sensitive")
    fermi = epsilon_of(DP_FERMI, DELTA, "sensitive")
    assert race["epsilon"] == pytest.approx(converted) and race["epsilon"] > record["epsilon"]
    assert (race["models"], race["uncovered_models"], race["conversion"]) == (2, 2, "exact")
    assert sex["epsilon"] == pytest.approx(epsilon_of(dpa.ComposedDpEvent([DP_FERMI, DP_SGD, DP_SGD]), DELTA,
                                                      "sensitive"))
    assert sex["epsilon"] >= max(fermi, converted)
    assert (sex["models"], sex["release_groups"], sex["uncovered_models"]) == (4, 3, 0)
    assert sex["protects"] == "replace one person's sex"
    assert sex["covers"] == ("what the releases reveal about each person's sex: the sensitive-unit models that "
                             "declared sex and every record-level model, converted to replace-one of sex")
    # the exact conversion is tighter than group privacy on these events
    assert converted < replace_one_by_group_privacy(dpa.ComposedDpEvent([DP_SGD, DP_SGD]), DELTA)


def test_a_non_private_model_makes_every_total_that_covers_it_infinite(tmp_path):
    erm = ("compas", "race", RECORD, dpa.NonPrivateDpEvent(), 1)
    fermi_public = ("compas", "sex", REPLACE, dpa.NonPrivateDpEvent(), 1)
    rows = _rows(_store(tmp_path / "s.sqlite", [*MIXED, erm, fermi_public]))
    private = _rows(_store(tmp_path / "p.sqlite", MIXED))
    for key, row in rows.items():  # the record-level ERM reveals everyone's race and sex too
        assert math.isinf(row["epsilon"])
        assert row["private_epsilon"] == pytest.approx(private[key]["epsilon"])
    assert (rows[None]["models"], rows[None]["private_models"], rows[None]["uncovered_models"]) == (3, 2, 3)
    assert (rows["sex"]["models"], rows["sex"]["private_models"]) == (6, 4)
    assert (rows["race"]["models"], rows["race"]["uncovered_models"]) == (3, 3)


def test_record_level_events_without_an_exact_conversion_go_through_group_privacy(tmp_path):
    laplace = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.LaplaceDpEvent(20.0)), 50)
    gaussian = dpa.GaussianDpEvent(10.0)
    rows = _rows(_store(tmp_path / "s.sqlite", [("adult", "sex", RECORD, laplace, 1),
                                                ("adult", "sex", REPLACE, gaussian, 1)]))
    sex = rows["sex"]
    assert sex["conversion"] == "group privacy"
    # δ split evenly, ε added (basic composition of the two parts)
    assert sex["epsilon"] == pytest.approx(replace_one_by_group_privacy(laplace, DELTA / 2)
                                           + epsilon_of(gaussian, DELTA / 2, "sensitive"))
    assert sex["epsilon"] > 2 * epsilon_of(laplace, DELTA, "record")
    assert rows[None]["epsilon"] == pytest.approx(epsilon_of(laplace, DELTA, "record"))


def test_data_sets_are_separate_populations_and_one_without_record_level_models_has_no_record_total(tmp_path):
    rows = _store(tmp_path / "s.sqlite", [("adult", "sex", REPLACE, DP_FERMI, 1), *MIXED]).privacy_totals()
    adult = rows[rows["dataset"] == "adult"].to_dict("records")
    assert len(adult) == 1 and adult[0]["sensitive"] == "sex" and adult[0]["conversion"] == ""
    assert adult[0]["epsilon"] == pytest.approx(epsilon_of(DP_FERMI, DELTA, "sensitive"))
    assert len(rows[rows["dataset"] == "compas"]) == 3


def test_the_sweep_summary_prints_each_total_with_what_it_covers(tmp_path, monkeypatch, capsys):
    from dpfair.experiments import sweep

    store = _store(tmp_path / "s.sqlite", MIXED)
    monkeypatch.setattr(sweep, "run_sweep", lambda spec, store, **kw: sweep.SweepSummary(
        points=4, skipped=4, privacy_totals=store.privacy_totals()))
    assert main(["sweep", "tiny", "--store", str(store.path), "--quiet"]) == 0
    out = capsys.readouterr().out
    record, race, sex = (line for line in out.splitlines() if line.strip().startswith("ε on compas"))
    totals = _rows(store)
    assert "add or remove one record" in record and f"{totals[None]['epsilon']:.4f} at δ = 6.38e-08" in record
    assert "every record-level model, whatever sensitive attribute it declared" in record
    assert "not bounded here: 2 sensitive-unit models" in record
    assert "replace one person's race" in race and "converted to replace-one of race" in race
    assert f"{totals['sex']['epsilon']:.4f}" in sex and "not bounded here" not in sex
