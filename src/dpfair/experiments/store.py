"""The results store of sweeps: one SQLite file, one row per released model, written a task at a time.

Tables:

- ``runs``: one row per model, keyed by its configuration hash (:attr:`Point.key`): the configuration,
  the test error, the violation of the targeted notion, :func:`~dpfair.experiments.evaluate`'s full
  metrics (JSON), the (ε, δ) the model spent, its ledger, wall and fit time, and where it ran: the git
  commit, the package versions, the host and the time.
- ``releases``: one row per release group: the models released together and the dp_accounting event of
  their joint release (a batched DP-FERMI grid's joint event, whose models share Poisson batches; a single
  fit's own ledger otherwise), with the data set it was drawn from.
- ``failures``: points whose fit refused its input (the message only reads public quantities), retried
  on the next run.

A task's rows and its release are written in one transaction, so a sweep killed at any point leaves
only whole tasks: a rerun skips them and trains the rest, and nothing is stored twice (the key is the
primary key). A model killed before its transaction committed was never published, so it costs no
privacy; every stored model is counted by :meth:`ResultsStore.privacy_totals`.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import dp_accounting as dpa
from dp_accounting import NeighboringRelation

from dpfair.privacy import epsilon_of
from dpfair.privacy.accounting import event_from_json, replace_one_by_group_privacy, replace_one_equivalent

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY, sweep TEXT, release_id INTEGER, dataset TEXT, preset TEXT, sensitive TEXT,
    options TEXT, method TEXT, notion TEXT, epsilon REAL, delta REAL, seed INTEGER, params TEXT, config TEXT,
    error REAL, violation REAL, metrics TEXT, epsilon_spent REAL, delta_spent REAL, privacy_unit TEXT,
    ledger TEXT, wall_s REAL, fit_s REAL, commit_hash TEXT, versions TEXT, host TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS releases (
    release_id INTEGER PRIMARY KEY AUTOINCREMENT, data_key TEXT, relation TEXT, event TEXT, delta REAL,
    epsilon REAL, models INTEGER, created REAL
);
CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, sweep TEXT, config TEXT, message TEXT, created REAL);
"""

#: The neighbouring relations of the stored releases, in words (what a reader of the totals is protected from).
RELATION_NAMES = {"REPLACE_ONE": "replace one person's sensitive attribute",
                  "ADD_OR_REMOVE_ONE": "add or remove one record"}

#: Columns of :meth:`ResultsStore.frame` that hold JSON (decoded there).
_JSON_COLUMNS = ("options", "params", "config", "metrics", "ledger", "versions")


class ResultsStore:
    """A sweep's results in SQLite at ``path`` (created with its folder if missing).

    >>> store = ResultsStore("runs.sqlite")        # doctest: +SKIP
    >>> store.frame()                              # one row per model, metrics flattened  # doctest: +SKIP
    >>> store.privacy_totals()                     # ε per data set: record-level, and per attribute  # doctest: +SKIP
    """

    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"the results store {str(self.path)!r} is a folder; pass a file path such as "
                             f"{str(self.path / 'results.sqlite')!r}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.executescript(_SCHEMA)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise ValueError(f"cannot open the results store {str(self.path)!r} ({exc}); pass --store PATH to a "
                             "writable SQLite file (it is created if missing)") from None

    @contextlib.contextmanager
    def _connect(self):
        """A connection whose block is one transaction (committed at its end, rolled back on an error)."""
        db = sqlite3.connect(self.path, timeout=60)
        try:
            with db:
                yield db
        finally:
            db.close()

    # ---- writing -------------------------------------------------------------------------------
    def done_keys(self) -> set[str]:
        """Keys of every model already stored."""
        with self._connect() as db:
            return {k for (k,) in db.execute("SELECT key FROM runs")}

    def add(self, result: dict, sweep: str = "") -> None:
        """Store one task's ``result`` (:func:`dpfair.experiments.runner.run_task`) in one transaction:
        its release groups and their rows, or its failure. Keys already stored are left as they are."""
        now = time.time()
        with self._connect() as db:
            if result.get("failure") is not None:
                for config in result["configs"]:
                    db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)",
                               (config["key"], sweep, json.dumps(config), result["failure"], now))
                return
            for release in result["releases"]:
                cur = db.execute(
                    "INSERT INTO releases (data_key, relation, event, delta, epsilon, models, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (release["data_key"], release["relation"], json.dumps(release["event"]), release["delta"],
                     release["epsilon"], len(release["rows"]), now))
                for row in release["rows"]:
                    self._insert_row(db, row, sweep, cur.lastrowid, now)

    @staticmethod
    def _insert_row(db, row: dict, sweep: str, release_id: int, now: float) -> None:
        config = row["config"]
        db.execute(
            "INSERT OR IGNORE INTO runs VALUES (" + ", ".join("?" * 27) + ")",
            (row["key"], sweep, release_id, config["dataset"], config["preset"], config["sensitive"],
             json.dumps(config["options"]), config["method"], config["notion"], config["epsilon"],
             config["delta"], config["seed"], json.dumps(config["params"]), json.dumps(config),
             row["metrics"]["error"], row["violation"], json.dumps(row["metrics"]), row["epsilon_spent"],
             row["delta_spent"], row["privacy_unit"], json.dumps(row["ledger"]), row["wall_s"], row["fit_s"],
             row["commit"], json.dumps(row["versions"]), row["host"], now))
        db.execute("DELETE FROM failures WHERE key = ?", (row["key"],))

    # ---- reading -------------------------------------------------------------------------------
    def frame(self, sweep: str | None = None):
        """Every stored model as a pandas DataFrame, one row each.

        Columns: the ``runs`` table's (JSON decoded), plus ``lam`` (the fairness strength λ where the
        method has one, else NaN), ``fairness.<notion>`` for each notion's violation,
        and ``per_group_accuracy`` (dict).
        """
        import pandas as pd

        query, args = "SELECT * FROM runs", ()
        if sweep is not None:
            query, args = query + " WHERE sweep = ?", (sweep,)
        with self._connect() as db:
            frame = pd.read_sql_query(query + " ORDER BY created, key", db, params=args)
        for column in _JSON_COLUMNS:
            frame[column] = frame[column].map(json.loads)
        frame["epsilon"] = frame["epsilon"].astype(float)
        frame["lam"] = frame["params"].map(lambda p: float(p["lam"]) if "lam" in p else math.nan)
        notions = sorted({n for m in frame["metrics"] for n in m["fairness"]})
        for notion in notions:
            frame[f"fairness.{notion}"] = frame["metrics"].map(lambda m: m["fairness"].get(notion, math.nan))
        frame["per_group_accuracy"] = frame["metrics"].map(lambda m: m["per_group_accuracy"])
        return frame

    def failures(self) -> list[dict]:
        """The points whose last attempt failed: ``{"key", "sweep", "config", "message"}``."""
        with self._connect() as db:
            return [{"key": k, "sweep": s, "config": json.loads(c), "message": m}
                    for k, s, c, m, _ in db.execute("SELECT * FROM failures ORDER BY created")]

    def privacy_totals(self):
        """The (ε, δ) of everything stored, per population (data set) and what it protects, as a DataFrame.

        The people of a data set are the same whatever split, seed, preset, option or declared sensitive
        attribute a model used (conservatively: one data set name, one population). Release groups compose
        on the PLD accountant: each group's event once, the groups as independent releases (each fit draws
        its own secret generator), read at the largest δ of the groups composed. Per data set:

        - the **record** total (``ADD_OR_REMOVE_ONE``): every record-level release, whatever sensitive
          attribute its row declared;
        - per sensitive attribute a that a release declared, the **a** total (``REPLACE_ONE`` of a): the
          sensitive-unit releases that declared a, composed with every record-level release converted to
          replace-one of a. The exact conversion (:func:`~dpfair.privacy.accounting.replace_one_equivalent`)
          re-accounts the same events; a group with an event it does not cover goes through group privacy
          (:func:`~dpfair.privacy.accounting.replace_one_by_group_privacy`, 2ε), δ split evenly between the
          two parts and basic composition adding their ε.

        A sensitive-unit release treats every attribute but its own as public, so it bounds nothing under
        the other totals: ``uncovered_models`` counts those. ``epsilon`` is ∞ as soon as a non-private model
        is among the releases composed; ``private_epsilon`` is the ε of the private ones alone (what
        publishing only those would cost). Columns: dataset, sensitive (None for the record total),
        relation, protects (the neighbouring relation in words), covers (one sentence), models,
        release_groups, private_models, epsilon, private_epsilon, delta, conversion (how the record-level
        releases were converted: ``"exact"``, ``"group privacy"``, or ``""``), uncovered_models.
        """
        import pandas as pd

        with self._connect() as db:
            releases = db.execute("SELECT data_key, relation, event, delta, models, epsilon FROM releases").fetchall()
        by_dataset: dict = {}
        for data_key, relation, event, delta, models, epsilon in releases:
            data = json.loads(data_key)
            private = epsilon is not None and math.isfinite(epsilon)
            group = _Group(data.get("sensitive"), relation, event_from_json(json.loads(event)) if private else None,
                           float(delta), int(models))
            by_dataset.setdefault(data.get("dataset"), []).append(group)
        rows = []
        for dataset, groups in sorted(by_dataset.items(), key=lambda kv: str(kv[0])):
            record = [g for g in groups if g.relation == _ADD_REMOVE]
            unit = [g for g in groups if g.relation != _ADD_REMOVE]
            if record:
                rows.append(_total(dataset, None, record, [], sum(g.models for g in unit)))
            for attribute in sorted({g.sensitive for g in groups if g.sensitive is not None}):
                own = [g for g in unit if g.sensitive == attribute]
                others = sum(g.models for g in unit if g.sensitive != attribute)
                rows.append(_total(dataset, attribute, record, own, others))
        frame = pd.DataFrame(rows, columns=list(_TOTAL_COLUMNS))
        frame["sensitive"] = pd.Series([r["sensitive"] for r in rows], dtype=object)  # None, not NaN
        return frame

    def releases(self):
        """The release groups as a DataFrame: release_id, data_key, relation, epsilon (the group's joint ε
        at its δ: a batched grid's models released together), delta, models."""
        import pandas as pd

        with self._connect() as db:
            return pd.read_sql_query("SELECT release_id, data_key, relation, epsilon, delta, models FROM releases "
                                     "ORDER BY release_id", db)


_ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE.name
_REPLACE = NeighboringRelation.REPLACE_ONE.name

_TOTAL_COLUMNS = ("dataset", "sensitive", "relation", "protects", "covers", "models", "release_groups",
                  "private_models", "epsilon", "private_epsilon", "delta", "conversion", "uncovered_models")


@dataclass(frozen=True)
class _Group:
    """One stored release group: its declared attribute, relation, event (None if non-private), δ, models."""

    sensitive: str | None
    relation: str
    event: object
    delta: float
    models: int


def _total(dataset, attribute, record: list, own: list, uncovered: int) -> dict:
    """One row of :meth:`ResultsStore.privacy_totals`: the record total (``attribute`` None) or ``attribute``'s."""
    groups = record + own
    delta = max(g.delta for g in ([g for g in groups if g.event is not None] or groups))
    models = sum(g.models for g in groups)
    private_models = sum(g.models for g in groups if g.event is not None)
    conversion = ""
    if attribute is None:
        events = [g.event for g in record if g.event is not None]
        eps = epsilon_of(dpa.ComposedDpEvent(events), delta, "record") if events else 0.0
        relation, protects = _ADD_REMOVE, RELATION_NAMES[_ADD_REMOVE]
        covers = ("everything released about these people under the record unit: every record-level model, "
                  "whatever sensitive attribute it declared")
    else:
        exact = [g.event for g in own if g.event is not None]
        grouped = []  # record-level events the exact conversion does not cover
        for g in record:
            converted = None if g.event is None else replace_one_equivalent(g.event)
            if converted is not None:
                exact.append(converted)
            elif g.event is not None:
                grouped.append(g.event)
        if any(g.event is not None for g in record):
            conversion = "group privacy" if grouped else "exact"
        eps = _replace_one_epsilon(exact, grouped, delta)
        relation, protects = _REPLACE, f"replace one person's {attribute}"
        covers = (f"what the releases reveal about each person's {attribute}: the sensitive-unit models that "
                  f"declared {attribute} and every record-level model, converted to replace-one of {attribute}")
    return {"dataset": dataset, "sensitive": attribute, "relation": relation, "protects": protects,
            "covers": covers, "models": models, "release_groups": len(groups), "private_models": private_models,
            "epsilon": eps if private_models == models else math.inf, "private_epsilon": eps, "delta": delta,
            "conversion": conversion, "uncovered_models": int(uncovered)}


def _replace_one_epsilon(exact: list, grouped: list, delta: float) -> float:
    """ε at ``delta`` under replace-one of ``exact`` (replace-one events) and ``grouped`` (add/remove events,
    converted by group privacy): one PLD if nothing needs group privacy, else each part at δ/2, ε added."""
    if not grouped:
        return epsilon_of(dpa.ComposedDpEvent(exact), delta, "sensitive") if exact else 0.0
    share = delta / 2.0 if exact else delta
    eps = replace_one_by_group_privacy(dpa.ComposedDpEvent(grouped), share)
    return eps + (epsilon_of(dpa.ComposedDpEvent(exact), delta - share, "sensitive") if exact else 0.0)
