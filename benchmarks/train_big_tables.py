"""Issue 44: `dpfair train --data` on tables of millions of rows: peak memory of the float32 feature store against
the path before it, and training from a memory-mapped store larger than the memory a fit may take.

A lender's table as a warehouse holds it: Parquet parts of 500,000 rows (row groups of 65,536) in one folder, `d`
numeric features, a 0/1 label and a two-group `sex`, with a declared schema (each feature clipped to [-5, 5]).
Each run is a fresh `dpfair train` process (DP-FERMI or DP-SGD, logistic, ε = 1, the methods' defaults otherwise);
the parent samples the child's `/proc/PID/status` every 0.1 s (its peak resident memory `VmHWM`, its anonymous
memory `RssAnon` and its file pages `RssFile`):

- `budget`: the done-when's bound, 1.5 × the float32 size of the features + 0.6 GiB;
- `store`: the feature store (`--store memory`, or `--store disk`: a memory-mapped file in a cache folder);
- `before`: the same command run on the commit before the store (`--before REV`: a `git worktree` of it on
  `PYTHONPATH`), on the smaller table only, with its test error, ε, δ and ledger beside the store's;
- `slope`: the cost of one DP-FERMI epoch on the first n training rows of the 20M-row store on disk (n = 1/8, 1/4,
  1/2 and all of them, one process, a whole one-epoch fit each), its log-log slope against n, and the process's
  peak `RssAnon` meanwhile.

Writes `results/datasets/train_big_tables.{csv,md}`. Needs about 40 GiB of disk in a temporary folder (`--tmp`)
and an hour on 2 cores at the defaults: `python benchmarks/train_big_tables.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import load_average, machine_info  # noqa: E402

PART_ROWS = 500_000
ROW_GROUP = 65_536
GIB = 2**30


def write_table(folder: Path, n: int, d: int, seed: int = 0) -> tuple[Path, Path]:
    """``(folder of Parquet parts, schema TOML)``: ``n`` rows of ``d`` float32 features, a logistic label and sex."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpfair.datasets.columns import Column
    from dpfair.datasets.schema import Schema

    root = folder / f"loans-{n // 1_000_000}M-{d}"
    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d) * 3 / np.sqrt(d)
    for i, start in enumerate(range(0, n, PART_ROWS)):
        m = min(PART_ROWS, n - start)
        X = rng.normal(size=(m, d)).astype(np.float32)
        sex = rng.integers(0, 2, m)
        y = (rng.random(m) < 1 / (1 + np.exp(-(X @ w + 0.5 * sex)))).astype(np.int8)
        columns = {f"x{j}": X[:, j] for j in range(d)}
        columns.update(approved=y, sex=np.where(sex == 1, "female", "male"))
        pq.write_table(pa.table(columns), root / f"part-{i:04d}.parquet", row_group_size=ROW_GROUP)
    schema = Schema(tuple(Column.numeric(f"x{j}", -5, 5, 0, 1) for j in range(d)),
                    source="benchmark: declared by the lender", label="approved", classes=("0", "1"),
                    sensitive="sex", groups=("female", "male"))
    toml = folder / f"{root.name}.toml"
    toml.write_text(schema.to_toml())
    return root, toml


def one_file(root: Path) -> Path:
    """The folder's parts as one Parquet file (the path before the store reads a file, not a folder)."""
    path = root.with_suffix(".parquet")
    if not path.exists():  # in a child, so that this process stays small
        code = ("import sys, pyarrow.dataset as pads, pyarrow.parquet as pq\n"
                "d = pads.dataset(sys.argv[1], format='parquet')\n"
                "with pq.ParquetWriter(sys.argv[2], d.schema) as w:\n"
                f"    [w.write_batch(b, row_group_size={ROW_GROUP}) for b in d.to_batches(batch_size={ROW_GROUP})]\n")
        subprocess.run([sys.executable, "-c", code, str(root), str(path)], check=True)
    return path


def _status(pid: int) -> dict:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) * 1024
    return fields


def run(argv: list[str], env: dict) -> dict:
    """``argv`` in a child process: its wall time, its peak RSS (``VmHWM``), peak ``RssAnon`` and ``RssFile``
    (sampled from ``/proc`` every 0.1 s)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True)
        peaks = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0}
        done = threading.Event()

        def sample():
            while not done.is_set():
                for key, value in _status(child.pid).items():
                    if key in peaks:
                        peaks[key] = max(peaks[key], value)
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({child.returncode}):\n{stderr[-3000:]}")
    # the child's own high-water mark (VmHWM, sampled: it only grows); wait4's ru_maxrss would also count the
    # memory this process held when it forked the child
    return {"wall_s": time.perf_counter() - start, "peak_rss": max(peaks["VmHWM"], 0), "peak_anon": peaks["RssAnon"],
            "peak_file": peaks["RssFile"], "stdout": stdout, "ru_maxrss": usage.ru_maxrss * 1024}


def train(data: Path, schema: Path, method: str, store: str, cache: Path, out: Path, env: dict,
          extra=()) -> dict:
    """``dpfair train --data`` in a child; ``store=None``: the path before the store (which has no such flags)."""
    argv = [sys.executable, "-m", "dpfair", "train", "--data", str(data), "--schema", str(schema), "--method",
            method, "--epsilon", "1", "--quiet", "--out", str(out), *extra]
    if store is not None:
        argv += ["--store", store, "--cache-dir", str(cache)]
    result = run(argv, env)
    saved = json.loads(out.read_text())
    result.update(test_error=saved["test_error"], epsilon=saved["epsilon"], delta=saved["delta"],
                  ledger=json.dumps(saved["privacy_ledger"], sort_keys=True), n_train=saved["n_train"],
                  fit_s=saved.get("fit_seconds"))
    return result


#: One process: DP-FERMI epochs on the first n training rows of the store on disk, timed per n.
SLOPE = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from dpfair.datasets import load_table
from dpfair.algorithms import DPFERMIClassifier
data = load_table(sys.argv[1], schema=sys.argv[2], where="disk", cache_dir=sys.argv[3])
n_all = len(data.y_train)

def fit(n, epochs):
    start = time.perf_counter()
    DPFERMIClassifier(epsilon=1.0, groups=2, epochs=epochs, random_state=0).fit(
        data.X_train[:n], data.y_train[:n], sensitive_features=data.s_train[:n])
    return time.perf_counter() - start

fit(n_all // 16, 1)  # warm-up: thread pools, the first pages of the store
print(json.dumps([{"n": n_all // share, "epoch_s": fit(n_all // share, 1)} for share in (8, 4, 2, 1)]))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="1000000x200,5000000x100", help="N x D of the tables held in memory")
    ap.add_argument("--large", default="20000000x100", help="N x D of the table kept on disk")
    ap.add_argument("--before", default="7960df6", help="the commit of the path before the store ('' skips it)")
    ap.add_argument("--tmp", type=Path, default=None, help="a folder with room for the tables and stores")
    ap.add_argument("--keep", type=Path, default=None, help="reuse (and keep) the tables in this folder")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "datasets")
    ap.add_argument("--write", default=None, help=argparse.SUPPRESS)  # N x D: write that table (in a child)
    args = ap.parse_args()
    if args.write:
        write_table(args.keep, *(int(v) for v in args.write.split("x")))
        return
    load = load_average()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="dpfair-big-", dir=args.tmp))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    before_src = None
    rows = []
    try:
        if args.before:
            before_src = folder / "before"
            if not before_src.exists():
                subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(before_src), args.before],
                               check=True, capture_output=True)
        sizes = [tuple(int(v) for v in t.split("x")) for t in args.tables.split(",") if t]
        large = tuple(int(v) for v in args.large.split("x")) if args.large else None
        for n, d in sizes + ([large] if large else []):
            root = folder / f"loans-{n // 1_000_000}M-{d}"
            toml = folder / f"{root.name}.toml"
            if not root.exists():
                started = time.perf_counter()
                subprocess.run([sys.executable, __file__, "--write", f"{n}x{d}", "--keep", str(folder)], check=True)
                print(f"wrote {root.name} in {time.perf_counter() - started:.0f} s", flush=True)
            on_disk = (n, d) == large
            feature_bytes = n * d * 4
            paths = [("store on disk" if on_disk else "store in memory", "disk" if on_disk else "memory", env)]
            if before_src is not None and (n, d) == sizes[0]:
                paths.append(("before", None, {**env, "PYTHONPATH": str(before_src / "src")}))
            for method in ("dp-fermi", "dp-sgd"):
                extra = ("--param", "epochs=1") if on_disk else ()
                if on_disk and method == "dp-sgd":
                    continue  # DP-SGD's epochs over 15M rows take an hour here; DP-FERMI's are the check
                for label, store, child_env in paths:
                    out = folder / f"{root.name}-{method}-{label.replace(' ', '-')}.json"
                    out.unlink(missing_ok=True)
                    out.with_suffix(".pt").unlink(missing_ok=True)
                    source = root if store is not None else one_file(root)
                    result = train(source, toml, method, store, folder / "stores", out, child_env, extra)
                    rows.append({"rows": n, "features": d, "method": method, "path": label,
                                 "float32 GiB": round(feature_bytes / GIB, 2),
                                 "budget GiB": round(1.5 * feature_bytes / GIB + 0.6, 2),
                                 "peak RSS GiB": round(result["peak_rss"] / GIB, 2),
                                 "peak RssAnon GiB": round(result["peak_anon"] / GIB, 2),
                                 "peak RssFile GiB": round(result["peak_file"] / GIB, 2),
                                 "wall s": round(result["wall_s"], 1),
                                 "fit s": None if result["fit_s"] is None else round(result["fit_s"], 1),
                                 "test error": round(result["test_error"], 4),
                                 "epsilon": round(result["epsilon"], 6), "delta": f"{result['delta']:.3g}",
                                 "ledger": result["ledger"]})
                    print({k: v for k, v in rows[-1].items() if k != "ledger"}, flush=True)
        slope_rows = []
        if large:
            n, d = large
            root = folder / f"loans-{n // 1_000_000}M-{d}"
            result = run([sys.executable, "-c", SLOPE, str(root), str(folder / f"{root.name}.toml"),
                          str(folder / "stores")], env)
            slope_rows = json.loads(result["stdout"].strip().splitlines()[-1])
            ns = np.array([r["n"] for r in slope_rows], float)
            ts = np.array([r["epoch_s"] for r in slope_rows], float)
            slope = float(np.polyfit(np.log(ns), np.log(ts), 1)[0])
            for r in slope_rows:
                r.update({"1-epoch fit s": round(r.pop("epoch_s"), 2), "log-log slope": round(slope, 3),
                          "peak RssAnon GiB": round(result["peak_anon"] / GIB, 2)})
            print(slope_rows, flush=True)
    finally:
        if before_src is not None and before_src.exists() and args.keep is None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before_src)],
                           capture_output=True)
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    table = pd.DataFrame(rows)
    same = []
    for (n, d, method), part in table.groupby(["rows", "features", "method"], sort=False):
        if (part["path"] == "before").any():
            a, b = part[part["path"] == "before"].iloc[0], part[part["path"] != "before"].iloc[0]
            same.append(f"{n:,} × {d} {method}: ledger {'identical' if a['ledger'] == b['ledger'] else 'DIFFERENT'}"
                        f", ε {a['epsilon']} / {b['epsilon']}, test error {a['test error']} before, "
                        f"{b['test error']} with the store")
    table["within budget"] = np.where(table["path"] == "before", "",
                                      np.where(table["peak RSS GiB"] <= table["budget GiB"], "yes", "NO"))
    args.out.mkdir(parents=True, exist_ok=True)
    table.drop(columns="ledger").to_csv(args.out / "train_big_tables.csv", index=False)
    slopes = pd.DataFrame(slope_rows)
    if len(slopes):
        slopes.to_csv(args.out / "train_big_tables_slope.csv", index=False)
    info = machine_info(load)
    lines = ["# `dpfair train --data` on tables of millions of rows (issue 44)", "",
             f"{info['date']}, {info['machine']}, {info['cpus']} CPUs, load {info['load_before']} before, "
             f"{info['load_after']} after; Python {info['python']}. `python benchmarks/train_big_tables.py "
             f"--tables {args.tables} --large {args.large} --before {args.before}`.", "",
             "Each row is a fresh `dpfair train --data FOLDER --schema S.toml --method M --epsilon 1` process on "
             "Parquet parts (d float32 features, declared ranges). `peak RSS`: the process's peak resident memory "
             "(VmHWM); `peak RssAnon` and `peak RssFile`: its anonymous memory and its file pages, sampled every "
             "0.1 s (a memory-mapped store's pages are file pages, not anonymous; so are the libraries' code pages); "
             "`budget`: 1.5 × the features' float32 size + 0.6 GiB. `before`: the same "
             "command on the commit before the feature store. The table on disk trains one epoch "
             "(`--param epochs=1`).", "", table.drop(columns="ledger").to_markdown(index=False), ""]
    if same:
        lines += ["Same privacy and accuracy as the path before:", "", *[f"- {s}" for s in same], ""]
    if len(slopes):
        lines += ["## One DP-FERMI epoch on the first n rows of the store on disk", "",
                  "One process, after a warm-up fit; on `X_train[:n]` of the memory-mapped store, `1-epoch fit s` "
                  "is a whole fit of one epoch (ε = 1; the noise calibration and the row layout included). The "
                  "slope is the least-squares fit of log(1-epoch fit s) on log(n).", "",
                  slopes.to_markdown(index=False), ""]
    (args.out / "train_big_tables.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
