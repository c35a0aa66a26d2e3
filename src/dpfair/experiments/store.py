"""The results store of sweeps: one SQLite file, one row per released model, written a task at a time.

Tables:

- ``runs``: one row per model, keyed by its configuration hash (:attr:`Point.key`): the configuration,
  the test error, the violation of the targeted notion, :func:`~dpfair.experiments.evaluate`'s full
  metrics (JSON; their ``evaluation`` says whether the test figures by group were released privately, at
  which ε), the (ε, δ) the model spent, its ledger, wall and fit time, and where it ran: the git
  commit, the package versions, the host and the time.
- ``releases``: one row per release group: the models released together and the dp_accounting event of
  their joint release (a batched DP-FERMI grid's joint event, whose models share Poisson batches; a single
  fit's own ledger otherwise), with the data set it was drawn from.
- ``failures``: points whose fit refused its input (the message only reads public quantities), retried
  on the next run.
- ``claims``: the points a running sweep is training (its host, pid and when it claimed and last
  refreshed them), so that another sweep on the same store trains something else (:class:`Claims`).

A task's rows and its release are written in one transaction, so a sweep killed at any point leaves
only whole tasks: a rerun skips them and trains the rest, and nothing is stored twice (the key is the
primary key). A release row is written only together with the rows it stores: a model whose key is
already stored (trained twice, e.g. by a sweep that took over the claim of one thought dead) is not
stored again and its release not recorded, since a model never stored was never published and costs
no privacy. Rows of a release stored in part are covered by the group's joint event, an upper bound
(publishing some outputs of a mechanism is post-processing of its release). Every stored model is
counted once by :meth:`ResultsStore.privacy_totals`, which counts the stored rows of each release.

Opening a store checks it: its tables and their columns, its layout version (``PRAGMA user_version``,
:data:`SCHEMA_VERSION`), its application id and its integrity (``PRAGMA quick_check``); a store written
by another program or version, or a damaged one, is refused with one line before anything trains. The
file is created at the first write (a sweep's first claim), so a refused command leaves no file behind.
A write that fails (a full disk, a lock held past :data:`LOCK_TIMEOUT_S`) raises :class:`StoreError`,
whose one line says what was kept: the transaction is rolled back, every task committed before stays.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dp_accounting import NeighboringRelation

from dpfair.privacy import epsilon_of
from dpfair.privacy.accounting import (compose_releases, event_from_json, replace_one_by_group_privacy,
                                       replace_one_equivalent)

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
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, token TEXT, pid INTEGER, host TEXT, claimed REAL, seen REAL);
"""

#: The layout of the stores this version writes, kept in ``PRAGMA user_version``. 0 is the layout of
#: earlier versions (the same tables without ``claims``), upgraded at its first write.
SCHEMA_VERSION = 1

#: ``PRAGMA application_id`` of a results store (the bytes ``dpfS``): a SQLite file of another program
#: that sets its own id is refused whatever tables it holds.
APPLICATION_ID = 0x64706653

#: Seconds a read or write waits for another process's transaction before it gives up ("database is locked").
LOCK_TIMEOUT_S = 60.0

#: Seconds between refreshes of a sweep's claims, and the age at which a claim nobody refreshed is stale
#: (its sweep is gone, whatever its host; on the claimant's own host a dead pid makes it stale at once).
HEARTBEAT_S = 30.0
STALE_S = 300.0

#: The neighbouring relations of the stored releases, in words (what a reader of the totals is protected from).
RELATION_NAMES = {"REPLACE_ONE": "replace one person's sensitive attribute",
                  "ADD_OR_REMOVE_ONE": "add or remove one record"}

#: Columns of :meth:`ResultsStore.frame` that hold JSON (decoded there).
_JSON_COLUMNS = ("options", "params", "config", "metrics", "ledger", "versions")


def _layout() -> dict[str, tuple[str, ...]]:
    """Each table of :data:`_SCHEMA` and its columns, in order (read off SQLite itself)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(_SCHEMA)
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite%'")]
        return {n: tuple(c[1] for c in db.execute(f"PRAGMA table_info({n})")) for n in names}
    finally:
        db.close()


_TABLES = _layout()


class StoreError(OSError):
    """A results store that cannot be read or written now (a full disk, a lock held past
    :data:`LOCK_TIMEOUT_S`, an I/O error). The message says what was kept: a failed write is rolled
    back whole, and every task committed before it stays."""


class ResultsStore:
    """A sweep's results in SQLite at ``path``, checked when opened; the file (and its folder) is created
    at the first write.

    >>> store = ResultsStore("runs.sqlite")        # doctest: +SKIP
    >>> store.frame()                              # one row per model, metrics flattened  # doctest: +SKIP
    >>> store.privacy_totals()                     # ε per data set: record-level, and per attribute  # doctest: +SKIP

    Raises ``ValueError`` (one line naming the fix) for a folder, a path that cannot be created, a file
    that is not a SQLite database or is damaged (``PRAGMA quick_check``), and a store written by another
    program or a newer layout (its tables, columns, ``user_version`` or ``application_id``).
    """

    def __init__(self, path):
        self.path = Path(path)
        self._ready = False  # the tables exist at this layout (checked or made by this object's first write)
        self._check()

    def create(self) -> ResultsStore:
        """Create the file with its tables now, if missing (the first write does it otherwise); returns the store."""
        with self._write("nothing was written"):
            pass
        return self

    # ---- opening -------------------------------------------------------------------------------
    def _check(self) -> None:
        where = repr(str(self.path))
        if self.path.is_dir():
            raise ValueError(f"the results store {where} is a folder; pass a file path such as "
                             f"{str(self.path / 'results.sqlite')!r}")
        if not self.path.exists():
            folder = next(p for p in self.path.absolute().parents if p.exists())
            if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                raise ValueError(f"cannot create the results store {where}: {str(folder)!r} is not a writable "
                                 "folder; pass --store PATH in a writable folder")
            return
        if not self.path.is_file():
            raise ValueError(f"the results store {where} is not a file; pass --store PATH to a SQLite file "
                             "(it is created if missing)")
        salvage = "restore it from a copy, or choose another --store and run the sweep again"
        try:
            db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S)
            try:
                problems = [m for (m,) in db.execute("PRAGMA quick_check(3)")]
                app = db.execute("PRAGMA application_id").fetchone()[0]
                version = db.execute("PRAGMA user_version").fetchone()[0]
                names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                  "AND name NOT LIKE 'sqlite%'")]
                columns = {n: tuple(c[1] for c in db.execute("SELECT * FROM pragma_table_info(?)", (n,)))
                           for n in names}
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise ValueError(f"cannot read the results store {where} ({exc}): it is damaged or not a SQLite "
                             f"file, and was left as it is: {salvage}") from None
        if problems != ["ok"]:
            first = " ".join(problems[0].replace("*** in database main ***", "").split())  # one line
            raise ValueError(f"the results store {where} is damaged (integrity check: {first}); it was left as "
                             f"it is: {salvage}")
        other = f"the results store {where} was written by another program or version"
        if app not in (0, APPLICATION_ID):
            raise ValueError(f"{other} (application id {app:#x}); choose another --store")
        if version > SCHEMA_VERSION:
            raise ValueError(f"{other} (store layout {version}; this dpfair writes layout {SCHEMA_VERSION}): use "
                             "the dpfair that wrote it, or choose another --store")
        for name in names:
            if name not in _TABLES:
                raise ValueError(f"{other} (it holds a table {name!r}, which a results store does not have); "
                                 "choose another --store")
            if columns[name] != _TABLES[name]:
                raise ValueError(f"{other} (table {name} has columns ({', '.join(columns[name])}); a results "
                                 f"store's {name} has {len(_TABLES[name])}: {', '.join(_TABLES[name][:4])}, …); "
                                 "choose another --store")
        self._ready = version == SCHEMA_VERSION and app == APPLICATION_ID and set(names) == set(_TABLES)

    # ---- connections -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _connect(self):
        """A connection for reading, whose block is one transaction (rolled back on an error); a store
        not created yet reads as an empty one (in memory: nothing is created by reading)."""
        exists = self.path.exists()
        db = sqlite3.connect(self.path if exists else ":memory:", timeout=LOCK_TIMEOUT_S)
        try:
            if not exists:
                db.executescript(_SCHEMA)
            with db:
                yield db
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:  # OSError: pandas' DatabaseError around a failed query
            raise StoreError(f"cannot read the results store {str(self.path)!r} ({exc}); nothing was changed: "
                             "if another program holds it, try again when it ends") from None
        finally:
            db.close()

    @contextlib.contextmanager
    def _write(self, lost: str):
        """A connection whose block is one write transaction (``BEGIN IMMEDIATE``: the store's write lock
        from the start, so two writers queue instead of failing), committed at its end. The first write
        creates the file and its tables or upgrades an earlier layout, in the same transaction. Any failure
        rolls the whole block back and raises :class:`StoreError` naming ``lost`` and what was kept."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._failed(exc, lost) from None
        try:
            db.execute("BEGIN IMMEDIATE")
            if not self._ready:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            yield db
            db.execute("COMMIT")
            self._ready = True
        except sqlite3.Error as exc:
            _rollback(db)
            raise self._failed(exc, lost) from None
        except BaseException:
            _rollback(db)
            raise
        finally:
            db.close()

    def _failed(self, exc: Exception, lost: str) -> StoreError:
        """The one line of a failed write: the cause, what was not written, what was kept, the fix."""
        try:  # a quick look: the store may be locked or unreadable for the same reason
            db = sqlite3.connect(self.path, timeout=1.0)
            try:
                stored = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                kept = f"the {_count(stored, 'model')} stored before {'is' if stored == 1 else 'are'} kept"
            finally:
                db.close()
        except sqlite3.Error:
            kept = "the models stored before are kept"
        cause = getattr(exc, "strerror", None) or str(exc)
        return StoreError(f"cannot write to the results store {str(self.path)!r} ({cause}): {lost}; {kept}. "
                          "Make room on its disk (or end the program that holds it) and run the same sweep "
                          "again: it trains only what is missing")

    # ---- writing -------------------------------------------------------------------------------
    def done_keys(self) -> set[str]:
        """Keys of every model already stored."""
        with self._connect() as db:
            return {k for (k,) in db.execute("SELECT key FROM runs")}

    def add(self, result: dict, sweep: str = "", claims: Claims | None = None) -> None:
        """Store one task's ``result`` (:func:`dpfair.experiments.runner.run_task`) in one transaction:
        its release groups and their rows, or its failure, and release ``claims``' hold on its points.

        Keys already stored are left as they are, and so is their model's release: a release row is
        written with the rows it stores (``models`` counts them), never without one."""
        keys = [config["key"] for config in result["configs"]]
        n = len(keys)
        lost = (f"this task's {_count(n, 'model')} {'was' if n == 1 else 'were'} not stored (never published: "
                f"{'it costs' if n == 1 else 'they cost'} no privacy)" if result.get("failure") is None
                else f"this task's failure ({_count(n, 'point')}) was not recorded")
        now = time.time()
        with self._write(lost) as db:
            stored = {k for k in keys if db.execute("SELECT 1 FROM runs WHERE key = ?", (k,)).fetchone()}
            if result.get("failure") is not None:
                for config in result["configs"]:
                    if config["key"] not in stored:
                        db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)",
                                   (config["key"], sweep, json.dumps(config), result["failure"], now))
            else:
                for release in result["releases"]:
                    rows = [row for row in release["rows"] if row["key"] not in stored]
                    if not rows:
                        continue
                    cur = db.execute(
                        "INSERT INTO releases (data_key, relation, event, delta, epsilon, models, created) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (release["data_key"], release["relation"], json.dumps(release["event"]),
                         release["delta"], release["epsilon"], len(rows), now))
                    for row in rows:
                        self._insert_row(db, row, sweep, cur.lastrowid, now)
                        stored.add(row["key"])
            if claims is not None:
                db.executemany("DELETE FROM claims WHERE key = ? AND token = ?", [(k, claims.token) for k in keys])

    @staticmethod
    def _insert_row(db, row: dict, sweep: str, release_id: int, now: float) -> None:
        config = row["config"]
        db.execute(
            "INSERT INTO runs VALUES (" + ", ".join("?" * 27) + ")",
            (row["key"], sweep, release_id, config["dataset"], config["preset"], config["sensitive"],
             json.dumps(config["options"]), config["method"], config["notion"], config["epsilon"],
             config["delta"], config["seed"], json.dumps(config["params"]), json.dumps(config),
             row["metrics"]["error"], row["violation"], json.dumps(row["metrics"]), row["epsilon_spent"],
             row["delta_spent"], row["privacy_unit"], json.dumps(row["ledger"]), row["wall_s"], row["fit_s"],
             row["commit"], json.dumps(row["versions"]), row["host"], now))
        db.execute("DELETE FROM failures WHERE key = ?", (row["key"],))

    def claims(self) -> Claims:
        """This process's claims on points of the store, for one sweep (``with store.claims() as claims``)."""
        return Claims(self)

    # ---- reading -------------------------------------------------------------------------------
    def frame(self, sweep: str | None = None):
        """Every stored model as a pandas DataFrame, one row each.

        Columns: the ``runs`` table's (JSON decoded), plus ``lam`` (the fairness strength λ where the
        method has one, else NaN), ``fairness.<notion>`` for each notion's violation,
        ``per_group_accuracy`` (dict), and what those test figures are: ``eval_private`` (whether they were
        released through a private evaluation, the sweep's ``eval_epsilon``; rows stored before it existed are
        exact, non-private diagnostics) and ``eval_epsilon`` (its ε; NaN when not private).
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
        frame["eval_private"] = frame["metrics"].map(lambda m: bool(m.get("evaluation", {}).get("private", False)))
        frame["eval_epsilon"] = frame["metrics"].map(
            lambda m: float(m["evaluation"]["epsilon"]) if m.get("evaluation", {}).get("private") else math.nan)
        return frame

    def failures(self) -> list[dict]:
        """The points whose last attempt failed: ``{"key", "sweep", "config", "message", "created"}``."""
        with self._connect() as db:
            return [{"key": k, "sweep": s, "config": json.loads(c), "message": m, "created": t}
                    for k, s, c, m, t in db.execute("SELECT * FROM failures ORDER BY created, key")]

    def privacy_totals(self):
        """The (ε, δ) of everything stored, per population (data set) and what it protects, as a DataFrame.

        The people of a data set are the same whatever split, seed, preset, option or declared sensitive
        attribute a model used (conservatively: one data set name, one population). A release group counts
        its stored models (each model once; a group without one published nothing). Release groups compose
        on the PLD accountant: each group's event once, the groups as independent releases (each fit draws
        its own secret generator; equal events merged into self-compositions,
        :func:`~dpfair.privacy.accounting.compose_releases`), read at the largest δ of the groups composed.
        Per data set:

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
            releases = db.execute(_STORED_RELEASES.format("r.data_key, r.relation, r.event, r.delta, "
                                                          "COUNT(u.key), r.epsilon")).fetchall()
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
        """The release groups of the stored models as a DataFrame: release_id, data_key, relation, epsilon
        (the group's joint ε at its δ: a batched grid's models released together), delta, models (stored)."""
        import pandas as pd

        with self._connect() as db:
            return pd.read_sql_query(_STORED_RELEASES.format("r.release_id, r.data_key, r.relation, r.epsilon, "
                                                             "r.delta, COUNT(u.key) AS models"), db)


#: The release groups with the number of their models stored (a release row without a stored model,
#: which stores of earlier versions could hold after two sweeps trained the same models, published nothing).
_STORED_RELEASES = ("SELECT {} FROM releases AS r JOIN runs AS u ON u.release_id = r.release_id "
                    "GROUP BY r.release_id ORDER BY r.release_id")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _rollback(db) -> None:
    with contextlib.suppress(sqlite3.Error):
        db.execute("ROLLBACK")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (signal 0 checks without sending; elsewhere than POSIX,
    where that call would end the process, every pid counts as alive and only the heartbeat decides)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        return True
    return True


class Claims:
    """The points one sweep is training, claimed in its :class:`ResultsStore` so that another sweep on the
    same store trains something else.

    A claim is a row of ``claims``: the point's key, this object's token, the process's pid and host, when it
    was claimed and when last refreshed. :meth:`take` claims a task's points in one write transaction,
    before it trains; :meth:`ResultsStore.add` releases them in the transaction that stores the task. A
    claim is stale, and taken over, when its process is gone: on its own host when its pid no longer runs,
    anywhere when nobody refreshed it for :data:`STALE_S` (a background thread refreshes this object's
    every :data:`HEARTBEAT_S`). Use as a context manager: the claims still held at its end (an interrupted
    or failed sweep's) are released.
    """

    def __init__(self, store: ResultsStore):
        self.store = store
        self.token = os.urandom(8).hex()
        self.pid, self.host = os.getpid(), socket.gethostname()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False  # whether this object ever claimed something (else it writes nothing)

    def __enter__(self) -> Claims:
        self._thread = threading.Thread(target=self._beat, name="dpfair-claims", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(StoreError):
            self.release()

    def _stale(self, pid: int, host: str, seen: float, now: float) -> bool:
        return now - seen > STALE_S or (host == self.host and not _alive(pid))

    def take(self, keys: list[str]) -> list[str]:
        """Claim the points ``keys`` not stored yet and not claimed by a live sweep; returns those claimed."""
        now, taken = time.time(), []
        if not keys:
            return taken
        self._held = True
        with self.store._write(f"nothing was trained for the next task ({_count(len(keys), 'point')})") as db:
            for key in keys:
                if db.execute("SELECT 1 FROM runs WHERE key = ?", (key,)).fetchone():
                    continue
                held = db.execute("SELECT token, pid, host, seen FROM claims WHERE key = ?", (key,)).fetchone()
                if held is not None and held[0] != self.token and not self._stale(*held[1:], now):
                    continue
                db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                           (key, self.token, self.pid, self.host, now, now))
                taken.append(key)
        return taken

    def others(self, keys: list[str]) -> dict[str, tuple[int, str]]:
        """The points of ``keys`` that another live sweep claims: ``{key: (pid, host)}``."""
        now, held = time.time(), {}
        with self.store._connect() as db:
            for key in keys:
                row = db.execute("SELECT token, pid, host, seen FROM claims WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] != self.token and not self._stale(*row[1:], now):
                    held[key] = (row[1], row[2])
        return held

    def release(self) -> None:
        """Release every claim this object still holds (its points go back to whoever sweeps next)."""
        if self._held:
            with self.store._write("the claims of this sweep stay until they are stale") as db:
                db.execute("DELETE FROM claims WHERE token = ?", (self.token,))

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(StoreError):
                if self._held:
                    with self.store._write("the claims were not refreshed") as db:
                        db.execute("UPDATE claims SET seen = ? WHERE token = ?", (time.time(), self.token))


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
        eps = epsilon_of(compose_releases(events), delta, "record") if events else 0.0
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
        return epsilon_of(compose_releases(exact), delta, "sensitive") if exact else 0.0
    share = delta / 2.0 if exact else delta
    eps = replace_one_by_group_privacy(compose_releases(grouped), share)
    return eps + (epsilon_of(compose_releases(exact), delta - share, "sensitive") if exact else 0.0)
