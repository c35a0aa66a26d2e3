"""The results store under faults (issue 27, part C): a store of another schema or a damaged one is refused when
opened, a full disk or a held lock is one line saying what was kept, two sweeps on one store share the work and
the totals count each stored model once, a refused command leaves no store file, and `dpfair report` renders an
empty store or one holding only failures (listing them).

Every test here failed before the change: the other schema was a traceback after training, the damaged store
"already stored" every model and exited 0, the full disk a sqlite3 traceback, two sweeps each trained everything
and the totals counted the duplicates' releases, refused commands left an empty store, and `report` refused
stores without models.
"""

from __future__ import annotations

import copy
import json
import resource
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib

import pytest

from dpfair.cli import main
from dpfair.experiments import store as store_module
from dpfair.experiments import sweep as sweep_module
from dpfair.experiments.runner import run_task
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore, StoreError
from dpfair.experiments.sweep import plan_tasks, run_sweep

SPEC = """
[sweep]
name = "c27"
datasets = ["synthetic"]
methods = ["erm", "dp-sgd"]
epsilon = [1.0]
seeds = [0, 1]

[params.dp-sgd]
epochs = 1
"""


def _spec(text: str = SPEC) -> SweepSpec:
    return SweepSpec.from_dict(tomllib.loads(text))


@pytest.fixture(scope="module")
def results():
    """The four tasks of SPEC, trained once: ``[(points, result)]`` (ERM seeds 0 and 1, DP-SGD seeds 0 and 1)."""
    tasks = sorted(plan_tasks(_spec(), set()), key=lambda t: (t[0].method, t[0].seed))
    return [(task, run_task(task)) for task in tasks]


def _filled(path, results) -> ResultsStore:
    store = ResultsStore(path)
    for _, result in results:
        store.add(result, "c27")
    return store


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpfair: error: ") and "Traceback" not in err, err
    return lines[0]


# ---- item 5: another schema, a damaged store ----------------------------------------------------------------

@pytest.mark.parametrize("setup, message", [
    (["CREATE TABLE runs (key TEXT PRIMARY KEY, b)"],
     r"written by another program or version \(table runs has columns \(key, b\); a results store's runs has 27"),
    (["CREATE TABLE bookmarks (url TEXT)"], r"another program or version \(it holds a table 'bookmarks'"),
    (["PRAGMA application_id = 1234"], r"another program or version \(application id 0x4d2\)"),
    (["PRAGMA user_version = 99"], r"store layout 99; this dpfair writes layout 1\): use the dpfair that wrote it"),
])
def test_a_store_of_another_schema_is_refused_when_opened_before_anything_trains(tmp_path, monkeypatch, capsys,
                                                                                 setup, message):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        for statement in setup:
            db.execute(statement)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=message + r".*choose another --store"):
        ResultsStore(path)
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(SPEC)
    monkeypatch.setattr(sweep_module, "run_task", lambda task: pytest.fail("trained before the store was checked"))
    assert main(["sweep", str(spec_file), "--store", str(path), "--quiet"]) == 2
    assert "written by another program or version" in _one_line_error(capsys)
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 2
    assert "written by another program or version" in _one_line_error(capsys)
    assert path.read_bytes() == before and not (tmp_path / "r.html").exists()  # left as it was


def test_a_store_written_by_an_earlier_version_opens_and_is_upgraded_at_its_first_write(tmp_path, results):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # the layout of earlier versions: no claims table, user_version 0
        db.executescript(store_module._SCHEMA.split("CREATE TABLE IF NOT EXISTS claims")[0])
    store = ResultsStore(path)
    store.add(results[0][1], "c27")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (store_module.SCHEMA_VERSION,)
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
    assert len(ResultsStore(path).frame()) == 1


@pytest.mark.parametrize("page", ["runs leaf", "runs index", "header"])
def test_a_damaged_store_is_refused_by_sweep_and_report_and_left_as_it_is(tmp_path, results, capsys, page):
    path = tmp_path / "s.sqlite"
    _filled(path, results)
    with sqlite3.connect(path) as db:
        size = db.execute("PRAGMA page_size").fetchone()[0]
        index_root = db.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
                                ).fetchone()[0]
        leaves = [n for (n,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'runs' AND pagetype = 'leaf'")]
    number = {"runs leaf": leaves[0], "runs index": index_root, "header": 1}[page]
    data = bytearray(path.read_bytes())
    data[(number - 1) * size:number * size] = bytes(size)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"damaged.*left as it is: restore it from a copy, or choose another --store"):
        ResultsStore(path)
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(SPEC)
    assert main(["sweep", str(spec_file), "--store", str(path), "--quiet"]) == 2  # was: "already stored 4", exit 0
    assert "damaged" in _one_line_error(capsys)
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 2
    assert "damaged" in _one_line_error(capsys)
    assert path.read_bytes() == bytes(data)


# ---- item 6: two sweeps at once; a release only with its rows; totals count each model once --------------------

def test_a_release_is_stored_only_with_its_rows_and_the_totals_count_each_model_once(tmp_path, results):
    store = _filled(tmp_path / "s.sqlite", results)
    totals = store.privacy_totals().to_dict("records")
    for _, result in results:  # the same tasks stored again (a second sweep that trained them too)
        store.add(result, "c27")
    assert len(store.frame()) == 4 and store.releases()["models"].tolist() == [1, 1, 1, 1]
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT COUNT(*), SUM(models) FROM releases").fetchone() == (4, 4)  # was (8, 8)
    assert store.privacy_totals().to_dict("records") == totals

    # a release whose rows are stored in part keeps the new ones, under the group's joint event
    (_, erm), (_, other) = results[0], results[1]
    mixed = copy.deepcopy(erm)
    mixed["releases"][0]["rows"] = erm["releases"][0]["rows"] + [
        {**other["releases"][0]["rows"][0], "key": "new-key", "config": {**other["configs"][0], "key": "new-key"}}]
    mixed["configs"] = erm["configs"] + [{**other["configs"][0], "key": "new-key"}]
    store.add(mixed, "c27")
    assert store.releases()["models"].tolist() == [1, 1, 1, 1, 1] and len(store.frame()) == 5

    # an earlier version's store with a release row whose models were never stored (the duplicate of a
    # concurrent sweep): it published nothing, and the totals do not count it
    path = tmp_path / "old.sqlite"
    old = _filled(path, results)
    expected = old.privacy_totals().to_dict("records")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO releases (data_key, relation, event, delta, epsilon, models, created) "
                   "SELECT data_key, relation, event, delta, epsilon, models, created FROM releases")
        db.execute("PRAGMA user_version = 0")
    reopened = ResultsStore(path)
    assert reopened.privacy_totals().to_dict("records") == expected
    assert reopened.privacy_totals()["models"].tolist() == [4, 4]  # was [8, 8]


SHARED = """
[sweep]
name = "shared"
datasets = ["synthetic"]
methods = ["erm"]
seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
"""

_SWEEPER = """
import json, pathlib, sys, time
from dpfair.datasets import load_dataset
from dpfair.experiments.runner import run_grid
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import run_sweep

run_grid("erm", load_dataset("synthetic", random_state=99))  # warm up (imports, first fit) before the start
go = pathlib.Path(sys.argv[3])
pathlib.Path(sys.argv[4]).touch()  # ready
while not go.exists():
    time.sleep(0.01)
summary = run_sweep(SweepSpec.load(sys.argv[1]), ResultsStore(sys.argv[2]), workers=1, verbose=False)
print(json.dumps({"trained": summary.trained, "elsewhere": summary.elsewhere, "skipped": summary.skipped,
                  "failed": summary.failed}))
"""


def test_two_sweeps_on_one_store_at_the_same_time_train_each_task_once(tmp_path):
    spec_file, path, go = tmp_path / "shared.toml", tmp_path / "s.sqlite", tmp_path / "go"
    spec_file.write_text(SHARED)
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    sweeps = [subprocess.Popen([sys.executable, "-c", _SWEEPER, str(spec_file), str(path), str(go), str(r)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in ready]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()  # both start sweeping at once
    outs = [s.communicate(timeout=300) for s in sweeps]
    assert [s.returncode for s in sweeps] == [0, 0], [err for _, err in outs]
    summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    total = len(_spec(SHARED).points())
    # together they trained each task once (was: each trained all 12), and each saw the whole spec stored
    assert sum(s["trained"] for s in summaries) == total
    assert all(s["trained"] + s["elsewhere"] == total and not s["failed"] for s in summaries), summaries
    assert all(s["trained"] > 0 for s in summaries), summaries  # shared, not one after the other
    store = ResultsStore(path)
    assert len(store.frame()) == total
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*), SUM(models) FROM releases").fetchone() == (total, total)
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)  # released with their tasks
    assert store.privacy_totals()["models"].tolist() == [total, total]


def test_a_claim_of_a_dead_or_silent_sweep_is_taken_over_and_a_live_one_is_waited_for(tmp_path, monkeypatch):
    spec = _spec(SHARED.replace("seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]", "seeds = [0, 1, 2]"))
    keys = [p.key for p in spec.points()]
    store = ResultsStore(tmp_path / "s.sqlite").create()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time()
    with sqlite3.connect(store.path) as db:
        db.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?)", [
            (keys[0], "a", dead.pid, store_module.socket.gethostname(), now, now),  # killed on this host
            (keys[1], "b", 1, "elsewhere", now - 1000, now - 1000),  # another host, silent past STALE_S
            (keys[2], "c", 1, "elsewhere", now, now)])  # another host, refreshed just now
    monkeypatch.setattr(store_module, "STALE_S", 3.0)
    monkeypatch.setattr(sweep_module, "POLL_S", 0.2)
    started = time.monotonic()
    summary = run_sweep(spec, store, workers=1, verbose=False)
    assert summary.trained == 3 and summary.elsewhere == 0
    assert time.monotonic() - started >= 2.0  # the live claim was waited for until it went stale
    assert store.done_keys() == set(keys)


def test_claims_are_refreshed_while_held_and_released_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "HEARTBEAT_S", 0.05)
    store = ResultsStore(tmp_path / "s.sqlite")
    with store.claims() as claims:
        assert not store.path.exists()  # nothing claimed, nothing written
        assert claims.take(["a", "b"]) == ["a", "b"]
        time.sleep(0.5)
        with sqlite3.connect(store.path) as db:
            ((claimed, seen),) = set(db.execute("SELECT claimed, seen FROM claims"))
        assert seen > claimed
        other = ResultsStore(store.path).claims()
        assert other.take(["a", "b", "c"]) == ["c"] and other.others(["a", "b", "c"]).keys() == {"a", "b"}
    with sqlite3.connect(store.path) as db:
        assert [k for (k,) in db.execute("SELECT key FROM claims")] == ["c"]  # ours released, the other's kept


def test_a_sweep_waits_for_what_another_sweep_stores_and_counts_it(tmp_path, monkeypatch, results):
    spec = _spec()
    store = ResultsStore(tmp_path / "s.sqlite").create()
    other = ResultsStore(store.path)
    keys = [c["key"] for _, r in results for c in r["configs"]]
    with other.claims() as claims:  # another sweep of this process, holding every point
        assert sorted(claims.take(keys)) == sorted(keys)
        monkeypatch.setattr(sweep_module, "POLL_S", 0.1)

        def store_later():
            time.sleep(0.5)
            for _, result in results:
                other.add(result, "c27", claims)

        thread = threading.Thread(target=store_later)
        thread.start()
        summary = run_sweep(spec, store, workers=1, verbose=False)
        thread.join()
    assert (summary.trained, summary.elsewhere, summary.skipped) == (0, 4, 0)


# ---- item 4: a full disk, a held lock --------------------------------------------------------------------------

def test_a_full_disk_stops_the_sweep_with_one_line_saying_what_was_kept(tmp_path, results):
    path, spec_file = tmp_path / "s.sqlite", tmp_path / "spec.toml"
    _filled(path, results[:1])
    spec_file.write_text(SPEC.replace("seeds = [0, 1]", "seeds = [0, 1, 2, 3, 4, 5]"))
    size = path.stat().st_size

    def full_disk():  # writes past the store's size fail (EFBIG, as ENOSPC on a full disk)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    done = subprocess.run([sys.executable, "-m", "dpfair", "sweep", str(spec_file), "--store", str(path),
                           "--workers", "1", "--quiet"], preexec_fn=full_disk, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"dpfair: error: cannot write to the results store {str(path)!r}")
    assert "was not stored (never published: it costs no privacy)" in line
    kept = ResultsStore(path)  # intact: every committed task, each with its release
    stored = len(kept.frame())
    assert f"the {stored} model{'s' if stored > 1 else ''} stored before" in line and stored >= 1
    assert kept.releases()["models"].sum() == stored


def test_a_store_locked_past_the_timeout_is_one_line_and_nothing_half_written(tmp_path, results, monkeypatch):
    store = _filled(tmp_path / "s.sqlite", results[:1])
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match=r"\(database is locked\): this task's 1 model was not stored.*kept"):
            store.add(results[1][1], "c27")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(store.frame()) == 1 and store.releases()["models"].tolist() == [1]


# ---- item 9: refused commands leave no store; report renders an empty store and failures --------------------

def test_a_refused_sweep_command_creates_no_store_file(tmp_path, capsys):
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(SPEC)
    folder = tmp_path / "runs"
    assert main(["sweep", str(spec_file), "--store", str(folder / "s.sqlite"), "--address", "tcp://127.0.0.1:1",
                 "--quiet"]) == 2
    assert "takes no --address" in _one_line_error(capsys)
    assert not folder.exists()
    store = ResultsStore(folder / "s.sqlite")  # opened and read: still nothing on disk
    assert store.done_keys() == set() and store.frame().empty and store.failures() == []
    assert store.privacy_totals().empty and not folder.exists()
    with pytest.raises(ValueError, match="is not a writable folder; pass --store PATH in a writable folder"):
        ResultsStore(spec_file / "s.sqlite")


def test_report_renders_an_empty_store_and_one_holding_only_failures(tmp_path, capsys):
    empty = ResultsStore(tmp_path / "empty.sqlite").create()
    assert main(["report", str(empty.path), "--out", str(tmp_path / "e.html"), "--tables",
                 str(tmp_path / "t")]) == 0
    text = (tmp_path / "e.html").read_text(encoding="utf-8")
    assert "holds no models yet" in text and "No model is stored: nothing was released" in text
    assert (tmp_path / "t" / "models.csv").exists()

    point = _spec().points()[0]
    failed = ResultsStore(tmp_path / "failed.sqlite")
    failed.add({"configs": [{**point.config(), "key": point.key}], "failure": "batch_size must be > 0, got 0",
                "releases": [], "warnings": []}, "c27")
    assert main(["report", str(failed.path), "--out", str(tmp_path / "f.html")]) == 0
    text = (tmp_path / "f.html").read_text(encoding="utf-8")
    assert 'id="failures">Failed points' in text and "batch_size must be &gt; 0, got 0 (1 point)" in text
    assert "1 point failed at its last attempt" in text and "holds no models yet" in text
    capsys.readouterr()
