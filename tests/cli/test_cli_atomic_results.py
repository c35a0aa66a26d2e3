"""Results are written as one unit, never silently replaced (issue 27, items 3 and 4).

A command's result (and the model beside it) is written in full to temporary files, then linked to its
names under a lock, which refuses a name that exists at that moment: a file written by another command
while this one ran is never replaced, a default (time-stamped) name that is taken moves to the next free
one, and a full disk leaves the folder as it was with one line saying so.
"""

import errno
import io
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

import dpfair.cli.results
import dpfair.experiments
from dpfair.algorithms import load_estimator
from dpfair.cli import main

TRAIN = ["train", "--dataset", "synthetic", "--quiet", "--param", "epochs=2"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def files_in(folder: Path) -> list[str]:
    """Every file under ``folder`` (temporary and hidden ones included), relative to it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def printed(stdout: str, row: str) -> str:
    return next(line.split()[-1] for line in stdout.splitlines() if line.strip().startswith(row + " "))


def assert_one_unit(result_path: Path) -> None:
    """The JSON names its model file, which exists beside it and holds the model the JSON describes."""
    result = json.loads(result_path.read_text())
    model = result_path.with_name(result["model_file"])
    assert model == result_path.with_suffix(".pt")
    assert load_estimator(model).privacy_spent_[0] == pytest.approx(result["epsilon"])


class _OneSecond(datetime):
    """Every run stamped with the same second (the runs of issue 27 item 3 started together)."""

    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 11, 27, 7, 38, 38)


def test_default_names_taken_in_the_same_second_move_to_the_next_free_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dpfair.cli.results, "datetime", _OneSecond)
    names = []
    for _ in range(3):
        code, stdout, err = run(capsys, *TRAIN)
        assert code == 0, err
        names.append(printed(stdout, "result"))
    stem = "dpfair-runs/synthetic-dp-fermi-seed0-20261127-073838"
    assert names == [f"{stem}.json", f"{stem}-2.json", f"{stem}-3.json"]
    assert files_in(tmp_path) == sorted(f"{stem}{n}{s}" for n in ("", "-2", "-3") for s in (".json", ".pt"))
    for name in names:
        assert_one_unit(tmp_path / name)


def test_default_name_of_audit_release_moves_to_the_next_free_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dpfair.cli.results, "datetime", _OneSecond)
    argv = ["audit", "release", "--mechanism", "gaussian", "--epsilon", "1", "--releases", "2000"]
    assert run(capsys, *argv)[0] in (0, 1)  # 1: a lower bound above the claim, which does not matter here
    code, stdout, err = run(capsys, *argv)
    assert code in (0, 1), err
    assert printed(stdout, "result") == "dpfair-runs/release-gaussian-audit-20261127-073838-2.json"
    assert len(files_in(tmp_path)) == 2


@pytest.mark.parametrize("taken", [".json", ".pt"])
def test_a_file_written_while_the_command_ran_is_not_replaced(tmp_path, capsys, monkeypatch, taken):
    """The existence check at write time: another command wrote ``r.json`` (or ``r.pt``) during the fit."""
    out = tmp_path / "r.json"
    evaluate = dpfair.experiments.evaluate

    def another_command_writes(*args, **kwargs):
        out.with_suffix(taken).write_text("precious")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(dpfair.experiments, "evaluate", another_command_writes)
    code, _, err = run(capsys, *TRAIN, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and err.startswith("dpfair: error: ")
    assert f"{out.with_suffix(taken)} already exists (written by another command while this one ran)" in err
    assert "nothing was written (the fit spent ε = " in err and "pass --overwrite or choose another --out" in err
    # neither half of this command's unit, no temporary file, and the other command's file as it wrote it
    assert files_in(tmp_path) == [f"r{taken}"] and out.with_suffix(taken).read_text() == "precious"


def test_overwrite_replaces_model_and_result_together(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("old")
    out.with_suffix(".pt").write_text("old")
    code, _, err = run(capsys, *TRAIN, "--out", str(out), "--overwrite")
    assert code == 0, err
    assert files_in(tmp_path) == ["r.json", "r.pt"]  # no temporary or set-aside file left
    assert_one_unit(out)


def _full_disk_on(monkeypatch, name: str) -> None:
    """Opening the file ``name`` (or a temporary file ``.name.*`` beside it) for writing fails with ENOSPC."""
    real_open = io.open

    def open_(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+"):
            path = os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else os.fspath(file)
            base = os.path.basename(path)
            if base == name or base.startswith(f".{name}."):
                if isinstance(file, int):
                    os.close(file)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", open_)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names an open file by /proc/self/fd")
@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("failing", [".pt", ".json"])
def test_full_disk_writes_nothing_and_says_what_was_kept(tmp_path, capsys, monkeypatch, failing, overwrite):
    out = tmp_path / "r.json"
    if overwrite:
        out.write_text("old result")
        out.with_suffix(".pt").write_text("old model")
    _full_disk_on(monkeypatch, f"r{failing}")
    code, _, err = run(capsys, *TRAIN, "--out", str(out), *(["--overwrite"] if overwrite else []))
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"dpfair: error: cannot write {out.with_suffix(failing)}: the disk is full; nothing was "
                          "written (the fit spent ε = ")
    assert err.rstrip().endswith("free some space or choose another --out")
    if overwrite:
        assert files_in(tmp_path) == ["r.json", "r.pt"]
        assert out.read_text() == "old result" and out.with_suffix(".pt").read_text() == "old model"
    else:
        assert files_in(tmp_path) == []


CHILD_WITH_FILE_SIZE_LIMIT = """
import resource, signal, sys
from dpfair.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # the model file is larger (about 6 KiB)
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_file_size_limit_is_one_line_without_traceback(tmp_path):
    """A real failing write (not a patched one): torch's zip writer used to raise its RuntimeError here."""
    proc = subprocess.run([sys.executable, "-c", CHILD_WITH_FILE_SIZE_LIMIT, *TRAIN, "--out", "r.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("dpfair: error: cannot write r.pt: the file is larger than the system allows; "
                                  "nothing was written (the fit spent ε = ")
    assert files_in(tmp_path) == []


CHILD_AT_THE_SIGNAL = """
import os, sys, time
from pathlib import Path
from dpfair.cli import main
sync = Path(sys.argv[1])
(sync / f"ready-{os.getpid()}").touch()
while not (sync / "go").exists():  # every process imported: start together
    time.sleep(0.01)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("explicit_out", [False, True])
def test_parallel_runs_into_one_folder_lose_nothing_silently(tmp_path, explicit_out):
    """Issue 27 item 3: 8 ``dpfair train`` started together into one folder. With the default ``--out`` each
    keeps its own result; with one ``--out r.json`` one writes it and every other says it was refused (at
    write time, or at the start when it started after the winner had written)."""
    sync, work = tmp_path / "sync", tmp_path / "work"
    sync.mkdir()
    work.mkdir()
    argv = [*TRAIN, *(["--out", "r.json"] if explicit_out else [])]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD_AT_THE_SIGNAL, str(sync), *argv], cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    for _ in range(60000):
        if len(list(sync.glob("ready-*"))) == 8 or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    (sync / "go").touch()
    done = [(*p.communicate(timeout=600), p.returncode) for p in procs]
    codes = sorted(code for _, _, code in done)
    if explicit_out:
        assert codes == [0] + [2] * 7, [err for _, err, _ in done]
        for _, err, code in done:
            if code:
                assert err.count("\n") == 1, err
                assert err.startswith(("dpfair: error: r.json already exists", "dpfair: error: r.pt already exists"))
        assert files_in(work) == ["r.json", "r.pt"]
        assert_one_unit(work / "r.json")
    else:
        assert codes == [0] * 8, [err for _, err, _ in done]
        names = [printed(stdout, "result") for stdout, _, _ in done]
        assert len(set(names)) == 8 and len(files_in(work)) == 16
        for name in names:
            assert_one_unit(work / name)
