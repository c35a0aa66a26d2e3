"""Every CLI step over ~2 s shows progress (issue 28, item 4): `dpfair report`, `dpfair datasets` and
`dpfair.plot.privacy_spent` ran silent for tens of seconds.

Before the change: `dpfair report` and `dpfair datasets` wrote nothing to stderr, the ε curve of
`privacy_spent` had no bar, and `dpfair datasets` loaded every data set at every call (so a file changed
behind the same name, size and time was loaded again: the checksum error below).
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib

import dp_accounting as dpa
import pytest

from dpfair import plot
from dpfair.cli import main
from dpfair.experiments.runner import run_task
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import plan_tasks
from dpfair.privacy import PrivacyLedger, accounting
from dpfair.utils.progress import quiet

SPEC = """
[sweep]
name = "progress"
datasets = ["synthetic"]
methods = ["erm"]
seeds = [0, 1]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store of two models on the synthetic data (ERM, two seeds), trained in-process."""
    store = ResultsStore(tmp_path_factory.mktemp("progress") / "progress.sqlite")
    for task in plan_tasks(SweepSpec.from_dict(tomllib.loads(SPEC)), set()):
        store.add(run_task(task), "progress")
    assert len(store.frame()) == 2
    return store


def test_report_shows_a_bar_per_section_and_figure(store, tmp_path, capsys):
    assert main(["report", str(store.path), "--out", str(tmp_path / "r.html")]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("report: ")
    # one data set of ERM models, which target no notion: the fronts, a trade-off plot per notion they were
    # scored on (five), the per-group accuracies, the ledgers, the privacy totals, the published numbers
    assert "report: 100%" in captured.err and "10/10" in captured.err and "step" in captured.err
    assert "0/10" in captured.err and "0 steps" not in captured.err  # its total known from the start


def test_quiet_silences_the_report(tmp_path, capsys):
    empty = ResultsStore(tmp_path / "empty.sqlite").create()
    assert main(["report", str(empty.path), "--out", str(tmp_path / "q.html")]) == 0
    assert "3/3" in capsys.readouterr().err  # no data set: the fronts, the totals, the published numbers
    assert main(["report", str(empty.path), "--out", str(tmp_path / "q.html"), "--overwrite", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("report: ")


def test_datasets_shows_a_bar_per_data_set_and_quiet_silences_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPFAIR_CACHE_DIR", str(tmp_path / "cache"))
    home = tmp_path / "home"  # empty: only the embedded (adult, compas) and generated data sets load
    home.mkdir()
    assert main(["datasets", "--data-home", str(home)]) == 0
    captured = capsys.readouterr()
    n = len(captured.out.strip().splitlines()) - 1  # the table's rows under its header
    assert n >= 13 and "data sets: 100%" in captured.err and f"{n}/{n}" in captured.err
    assert main(["datasets", "--data-home", str(home), "--quiet"]) == 0
    again = capsys.readouterr()
    assert again.err == "" and again.out == captured.out


def _german(args, capsys) -> dict:
    assert main(["datasets", "german", "--json", "--quiet", *args]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    return info


def test_datasets_reads_each_file_once_and_again_when_it_changes(shared_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPFAIR_CACHE_DIR", str(tmp_path / "cache"))
    home = tmp_path / "home"
    shutil.copytree(shared_data / "german", home / "german")
    data = home / "german" / "german.data"
    args = ["--data-home", str(home)]
    first = _german(args, capsys)
    assert first["on_disk"] and first["rows"] == 1000 and first["group_sizes"] == {"Female": 310, "Male": 690}
    assert len(list((tmp_path / "cache" / "datasets").glob("*.json"))) == 1

    # the same file (path, size, modification time): its summary comes from the cache, not from the rows
    stat = data.stat()
    data.write_bytes(data.read_bytes().replace(b"A11", b"A12"))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _german(args, capsys) == first
    # a changed file is read again (and this one fails its checksum)
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    changed = _german(args, capsys)
    assert changed["rows"] is None and "has sha256" in changed["error"] and changed["on_disk"] is False


def _ledger() -> PrivacyLedger:
    ledger = PrivacyLedger("record")
    ledger.record(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)), "step", 10)
    return ledger


def test_privacy_spent_shows_its_accountings_and_quiet_silences_them(monkeypatch, capsys):
    monkeypatch.setattr(accounting, "CURVE_DELAY", 0.0)  # shown at once (by default: after 2 s)
    plot.privacy_spent(_ledger(), 1e-5, points=3)
    err = capsys.readouterr().err
    assert "ε curve" in err and "4/4" in err and "accounting" in err
    with quiet():
        plot.privacy_spent(_ledger(), 1e-5, points=3)
    assert capsys.readouterr().err == ""
