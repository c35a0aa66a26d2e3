"""Sweeps on a user's own table: a spec's data set names a CSV and its declared schema (issue 28, part D)."""

from __future__ import annotations

import json
import sqlite3
import tomllib

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.datasets import Column, Schema
from dpfair.experiments.spec import SweepSpec

SPEC = """
[sweep]
name = "loans"
datasets = [{{ name = "loans", data = "loans.csv", {schema} }}]
methods = ["erm", "dp-sgd"]
epsilon = [1.0]
seeds = [0, 1]

[params.dp-sgd]
epochs = 1
"""


def _table(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """A small loans table that is no built-in data set: unscaled numbers, a category, string labels and groups."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["north", "south"], n)
    income = rng.uniform(1e4, 1e6, n).round()
    region = rng.choice(["a", "b", "c"], n)
    p = 1 / (1 + np.exp(-(income - 5e5) / 2e5 - (group == "north")))
    label = np.where(rng.uniform(size=n) < p, "yes", "no")
    return pd.DataFrame({"income": income, "region": region, "group": group, "repaid": label})


SCHEMA = Schema((Column.numeric("income", 0.0, 1e6), Column.categorical("region", ["a", "b", "c"], other=True)),
                source="declared for the test", label="repaid", classes=("no", "yes"), sensitive="group",
                groups=("north", "south"))


@pytest.fixture
def folder(tmp_path):
    _table().to_csv(tmp_path / "loans.csv", index=False)
    (tmp_path / "loans.toml").write_text(SCHEMA.to_toml())
    (tmp_path / "spec.toml").write_text(SPEC.format(schema='schema = "loans.toml"'))
    return tmp_path


def _keys(path) -> list[str]:
    return [p.key for p in SweepSpec.load(path).points()]


def test_a_spec_on_a_csv_and_its_schema_runs_end_to_end_from_the_cli(folder, capsys):
    store = folder / "runs.sqlite"
    assert main(["sweep", str(folder / "spec.toml"), "--store", str(store), "--workers", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "trained now" in out and "ε on loans" in out
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT dataset, method, seed, config FROM runs ORDER BY method, seed").fetchall()
        data_keys = {json.loads(k)["dataset"] for (k,) in db.execute("SELECT data_key FROM releases")}
    assert [r[:3] for r in rows] == [("loans", "dp-sgd", 0), ("loans", "dp-sgd", 1), ("loans", "erm", 0),
                                     ("loans", "erm", 1)]
    assert all(set(json.loads(r[3])["table"]) == {"data", "schema"} for r in rows)
    assert data_keys == {"loans"}  # the privacy totals compose every model on the table by its name
    # run again: everything is stored, nothing trains twice
    assert main(["sweep", str(folder / "spec.toml"), "--store", str(store), "--workers", "1", "--quiet"]) == 0
    assert "already stored" in capsys.readouterr().out
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (4,)


def test_a_changed_file_or_schema_changes_the_keys_and_a_moved_file_does_not(folder):
    before = _keys(folder / "spec.toml")
    assert len(set(before)) == 4 and before == _keys(folder / "spec.toml")
    table = _table()
    table.loc[0, "income"] += 1  # one person's value
    table.to_csv(folder / "loans.csv", index=False)
    changed = _keys(folder / "spec.toml")
    assert not set(changed) & set(before)
    wider = Schema((Column.numeric("income", 0.0, 2e6), *SCHEMA.columns[1:]), SCHEMA.source, SCHEMA.label,
                   SCHEMA.classes, SCHEMA.sensitive, SCHEMA.groups)
    (folder / "loans.toml").write_text(wider.to_toml())
    assert not set(_keys(folder / "spec.toml")) & set(changed)
    # the same bytes elsewhere, the schema's comments aside: the same keys
    (folder / "loans.toml").write_text(SCHEMA.to_toml() + "# reviewed again\n")
    _table().to_csv(folder / "loans.csv", index=False)
    moved = folder / "moved"
    moved.mkdir()
    for name in ("loans.csv", "loans.toml", "spec.toml"):
        (moved / name).write_bytes((folder / name).read_bytes())
    assert _keys(moved / "spec.toml") == before


def test_the_key_is_no_plain_hash_of_the_rows(folder):
    import hashlib

    from dpfair.experiments.spec import table_key_path

    points = SweepSpec.load(folder / "spec.toml").points()
    published = json.dumps([p.config() for p in points]) + "".join(p.key for p in points)
    digest = hashlib.sha256((folder / "loans.csv").read_bytes()).hexdigest()
    assert digest not in published
    assert points[0].data.sha256 not in published + repr(points)  # the in-memory digest is never printed
    assert table_key_path().is_file()  # the secret of the keyed digest, kept on this machine


def test_a_file_changed_after_the_spec_was_read_fails_its_points_instead_of_training(folder):
    from dpfair.experiments.runner import run_task

    spec = SweepSpec.load(folder / "spec.toml")
    table = _table()
    table.loc[0, "income"] += 1
    table.to_csv(folder / "loans.csv", index=False)
    result = run_task(spec.points()[:1])
    assert result["releases"] == [] and "changed after the spec was read" in result["failure"]


@pytest.mark.parametrize(("schema", "message"), [
    ("", "schema is required"),
    ('schema = "missing.toml"', "schema file"),
    ('schema = "bad.toml"', "not valid TOML"),
    ('schema = "nolabel.toml"', "declares no label column"),
])
def test_a_table_without_a_usable_schema_is_refused_when_the_spec_is_read(folder, capsys, schema, message):
    (folder / "bad.toml").write_text("label = \n")
    (folder / "nolabel.toml").write_text('source = "x"\n[[columns]]\nname = "income"\nkind = "binary"\n')
    (folder / "spec.toml").write_text(SPEC.format(schema=schema).replace(",  }", " }"))
    with pytest.raises(ValueError, match=message) as caught:
        SweepSpec.load(folder / "spec.toml")
    assert "\n" not in str(caught.value) and "'loans'" in str(caught.value)
    if not schema:
        assert "dpfair schema" in str(caught.value)
    store = folder / "runs.sqlite"
    assert main(["sweep", str(folder / "spec.toml"), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfair: error: ") and message in err and "Traceback" not in err
    assert not store.exists()


@pytest.mark.parametrize(("entry", "message"), [
    ('{ name = "loans", data = "nowhere.csv", schema = "loans.toml" }', "data file .* not found"),
    ('{ name = "loans", data = "loans.xlsx", schema = "loans.toml" }', "not a file dpfair reads"),
    ('{ name = "adult", data = "loans.csv", schema = "loans.toml" }', "built-in data set"),
    (('[{ name = "loans", data = "loans.csv", schema = "loans.toml" }, '
      '{ name = "loans", data = "loans.csv", schema = "loans.toml", test_data = "loans.csv" }]'), "used twice"),
    ('{ name = "loans", data = "loans.csv", schema = "loans.toml", sensitive = "region" }', "make them agree"),
    ('{ name = "loans", data = "loans.csv", schema = "loans.toml", preset = "x" }', "unknown key 'preset'"),
])
def test_a_table_entry_that_cannot_load_is_refused_when_the_spec_is_read(folder, entry, message):
    text = SPEC.format(schema='schema = "loans.toml"').replace(
        '[{ name = "loans", data = "loans.csv", schema = "loans.toml" }]', entry)
    with pytest.raises(ValueError, match=message):
        SweepSpec.from_dict(tomllib.loads(text), "spec", base=folder)


def test_built_in_data_sets_keep_their_keys():
    spec = SweepSpec.from_dict(tomllib.loads('[sweep]\nname = "t"\ndatasets = ["compas"]\nmethods = ["erm"]\n'))
    assert "table" not in spec.points()[0].config()
