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
from pathlib import Path

from dp_accounting import NeighboringRelation

from dpfair.privacy import epsilon_of
from dpfair.privacy.accounting import event_from_json

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
    >>> store.privacy_totals()                     # the ε of everything released per data set  # doctest: +SKIP
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
        """The (ε, δ) of everything stored, per data set and neighbouring relation, as a DataFrame.

        Every model trained on a data set (any split, seed, preset or option: the same people) is composed
        on the PLD accountant: each release group's event once, the groups as independent releases (each
        fit draws its own secret generator), read at the largest δ the groups were trained for.
        ``epsilon`` is ∞ as soon as one non-private model was released; ``private_epsilon`` is the ε of
        the private release groups alone (what publishing only those would cost). Columns: data_key (and
        its dataset and sensitive attribute), relation (and what it protects, in words), models,
        release_groups, private_models, epsilon, private_epsilon, delta.
        """
        import dp_accounting as dpa
        import pandas as pd

        with self._connect() as db:
            releases = db.execute("SELECT data_key, relation, event, delta, models, epsilon FROM releases").fetchall()
        rows = []
        for (data_key, relation), group in _group(releases).items():
            private = [(event_from_json(json.loads(r[2])), r[3], r[4]) for r in group
                       if r[5] is not None and math.isfinite(r[5])]
            delta = max(r[3] for r in group)
            eps_private = (epsilon_of(dpa.ComposedDpEvent([p[0] for p in private]), max(p[1] for p in private),
                                      NeighboringRelation[relation]) if private else 0.0)
            models = sum(r[4] for r in group)
            private_models = sum(p[2] for p in private)
            data = json.loads(data_key)
            rows.append({"data_key": data_key, "dataset": data.get("dataset"), "sensitive": data.get("sensitive"),
                         "relation": relation, "protects": RELATION_NAMES.get(relation, relation), "models": models,
                         "release_groups": len(group), "private_models": private_models,
                         "epsilon": eps_private if private_models == models else math.inf,
                         "private_epsilon": eps_private, "delta": delta})
        return pd.DataFrame(rows, columns=["data_key", "dataset", "sensitive", "relation", "protects", "models",
                                           "release_groups", "private_models", "epsilon", "private_epsilon",
                                           "delta"])

    def releases(self):
        """The release groups as a DataFrame: release_id, data_key, relation, epsilon (the group's joint ε
        at its δ: a batched grid's models released together), delta, models."""
        import pandas as pd

        with self._connect() as db:
            return pd.read_sql_query("SELECT release_id, data_key, relation, epsilon, delta, models FROM releases "
                                     "ORDER BY release_id", db)


def _group(releases) -> dict:
    out: dict = {}
    for r in releases:
        out.setdefault((r[0], r[1]), []).append(r)
    return out

