"""Issue 44: `dpfair measure` over a warehouse-sized table: the streamed count table against the rows held in memory.

A lender's decisions table, as a warehouse holds it: Parquet parts under `month=NN/` folders (the label and the
decision as small integers, the region as text, beside an applicant id and a score the measurement does not read),
and a 10M-row CSV export of it. Each path runs in a fresh process, as `dpfair measure` would, and the table gives
its wall time, CPU time, time per row and peak resident memory (its own, and its child processes' for the Dask
cluster):

- `rows in memory`: the path before issue 44 (`read_predictions` + `measure_rows`: the three columns read whole as
  text, coded in pandas), on the 10M-row CSV only;
- `streamed`: `measure_file`, a record batch at a time through Arrow compute (`dpfair.measurement.counts`);
- `dask, 2 workers`: the same count table on a loopback cluster of two worker processes (`--backend dask`).

Every run releases at ε = 1 for the region, at the same settings; the first row of each size is the reference of
its `x per row` column. Writes `results/measurement/measure_streaming.csv` and `.md`. Needs about 3 GiB of disk in
a temporary folder and ~10 minutes on 2 cores at the default 100M rows: `python benchmarks/measure_streaming.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import load_average, machine_info  # noqa: E402

GROUPS = ("north", "south", "east", "islands")
PART_ROWS = 5_000_000

#: One measurement in a fresh process: its wall and CPU seconds and its peak resident memory (and its children's).
CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
path, how = sys.argv[1], sys.argv[2]
wall, cpu = time.perf_counter(), time.process_time()
import numpy as np
from dpfair.measurement import PrivateMetricFrame
from dpfair.measurement.files import measure_file, measure_rows, read_predictions
imported = time.perf_counter()
options = dict(epsilon=1.0, groups=["north", "south", "east", "islands"], n_bootstrap=200, random_state=0)
columns = dict(label="approved", prediction="decision", sensitive="region")
if how == "rows":
    frame = measure_rows(read_predictions(path, **columns), **options)
elif how == "streamed":
    frame = measure_file(path, show_progress=False, **columns, **options)
else:
    from dpfair.experiments.dask_backend import DaskBackend
    with DaskBackend(workers=2) as backend:
        started = time.perf_counter()
        frame = measure_file(path, client=backend.client, **columns, **options)
    imported += started - imported  # the cluster's start is a fixed cost, like the imports
done = time.perf_counter()
# the release alone (the plan, the noise, the intervals) on a table of the same shape and size
cube = np.full((4, 2, 2), frame.n_ // 16, dtype=np.int64)
cube[0, 0, 0] += frame.n_ - cube.sum()
PrivateMetricFrame.from_counts(["count", "selection_rate", "true_positive_rate", "false_positive_rate",
                                "accuracy"], cube, **options)
release = time.perf_counter() - done
self_use, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"n": frame.n_, "wall_s": done - wall, "fixed_s": imported - wall, "release_s": release,
                  "pass_s": done - imported - release, "cpu_s": time.process_time() - cpu,
                  "children_cpu_s": children.ru_utime + children.ru_stime,
                  "peak_mib": self_use.ru_maxrss / 1024, "children_peak_mib": children.ru_maxrss / 1024,
                  "selection_rate": frame.by_group["selection_rate"].round(4).tolist()}))
"""


def write_parquet(folder: Path, rows: int, seed: int) -> Path:
    """``rows`` decisions as Parquet parts of :data:`PART_ROWS` rows under ``month=NN/`` folders."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    root = folder / f"decisions-{rows // 1_000_000}M"
    for part, start in enumerate(range(0, rows, PART_ROWS)):
        n = min(PART_ROWS, rows - start)
        region = rng.choice(len(GROUPS), size=n, p=[0.45, 0.35, 0.19, 0.01]).astype(np.int8)
        approved = (rng.random(n) < np.where(region == 0, 0.5, 0.35)).astype(np.int8)
        decision = np.where(rng.random(n) < 0.85, approved, 1 - approved).astype(np.int8)
        table = pa.table({"applicant": pa.array(np.arange(start, start + n, dtype=np.int64)),
                          "approved": approved, "decision": decision,
                          "region": pa.DictionaryArray.from_arrays(pa.array(region), pa.array(GROUPS)),
                          "score": rng.random(n, dtype=np.float32)})
        month = root / f"month={part % 12 + 1:02d}"
        month.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, month / f"part-{part:04d}.parquet")
    return root


def write_csv(parquet_root: Path, folder: Path) -> Path:
    """The Parquet table as one CSV export with the region as text (what the path before issue 44 read)."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    path = folder / f"{parquet_root.name}.csv"
    table = pads.dataset(parquet_root, format="parquet", partitioning="hive").to_table(
        columns=["applicant", "approved", "decision", "region"])
    table = table.set_column(3, "region", table.column("region").cast("string"))
    pacsv.write_csv(table, path)
    return path


def measure(path: Path, how: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), how], capture_output=True, text=True, env=env,
                         check=False)
    if out.returncode:
        raise SystemExit(f"{how} on {path} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10_000_000, help="rows of the table every path measures")
    ap.add_argument("--large", type=int, default=100_000_000, help="rows of the table the streamed paths measure")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "measurement")
    args = ap.parse_args()
    load = load_average()
    folder = Path(tempfile.mkdtemp(prefix="dpfair-measure-"))
    try:
        small = write_parquet(folder, args.small, seed=0)
        small_csv = write_csv(small, folder)
        large = write_parquet(folder, args.large, seed=1)
        runs = [(args.small, "CSV file", small_csv, "rows"), (args.small, "CSV file", small_csv, "streamed"),
                (args.small, "partitioned Parquet", small, "streamed"),
                (args.small, "partitioned Parquet", small, "dask"),
                (args.large, "partitioned Parquet", large, "streamed"),
                (args.large, "partitioned Parquet", large, "dask")]
        rows = []
        for n, layout, path, how in runs:
            start = time.perf_counter()
            result = measure(path, how)
            assert result["n"] == n, result
            size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) if Path(path).is_dir() \
                else Path(path).stat().st_size
            rows.append({"rows": n, "layout": layout, "MiB on disk": round(size / 2**20),
                         "path": {"rows": "rows in memory (before)", "streamed": "streamed",
                                  "dask": "dask, 2 workers"}[how],
                         "wall s": round(result["wall_s"], 2), "imports (+cluster) s": round(result["fixed_s"], 2),
                         "release s": round(result["release_s"], 2), "pass s": round(result["pass_s"], 2),
                         "cpu s": round(result["cpu_s"], 2),
                         "workers' cpu s": round(result["children_cpu_s"], 2),
                         "ns per row": round(1e9 * result["pass_s"] / n, 1),
                         "peak MiB": round(result["peak_mib"]),
                         "workers' peak MiB": round(result["children_peak_mib"]) if how == "dask" else 0,
                         "selection rates": result["selection_rate"]})
            print(rows[-1], f"({time.perf_counter() - start:.1f} s with start-up)", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = pd.DataFrame(rows)
    before = table.loc[0, "ns per row"]
    table["x per row vs before"] = (before / table["ns per row"]).round(1)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "measure_streaming.csv", index=False)
    info = machine_info(load)
    lines = ["# `dpfair measure` over a warehouse-sized table (issue 44)", "",
             f"{info['date']}, {info['machine']}, {info['cpus']} CPUs, load {info['load_before']} before, "
             f"{info['load_after']} after; Python {info['python']}. `python benchmarks/measure_streaming.py` "
             f"(--small {args.small:,} --large {args.large:,}).", "",
             "Each run is a fresh process releasing the count table at ε = 1 for the region (4 groups). `wall s` "
             "is the whole run; `imports (+cluster) s` its imports and, for Dask, the loopback cluster's start; "
             "`release s` the release alone (plan, noise, intervals) timed again on a table of the same shape; "
             "`pass s` the rest: reading and counting the rows, whose time `ns per row` divides by n. `x per row "
             "vs before`: the first row's time per row over this row's. Peak memory: the process's own, and its "
             "children's (the Dask workers) largest.", "", table.to_markdown(index=False), ""]
    (args.out / "measure_streaming.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
