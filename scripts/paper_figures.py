"""Redraw every reproduction spec's paper figure from its committed models.csv, with its verdict table.

For each shipped spec with a ``[figure]`` table, reads ``results/experiments/<spec>/models.csv`` (and the
companions' of its ``with``; loader options recovered from ``points.csv`` where the CSV lacks them) and writes
``figure.png``, ``verdicts.md`` and ``verdicts.csv`` beside it (dpfair.experiments.paper_figure); then prints,
per paper, how many published values are reproduced within tolerance. Run from the repository root:

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python scripts/paper_figures.py [SPEC ...]
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

from dpfair.experiments.paper_figure import read_models, reproduction_files, verdicts
from dpfair.experiments.spec import SweepSpec, shipped_specs

RESULTS = Path("results/experiments")


def frame_of(spec: SweepSpec) -> pd.DataFrame:
    names = [spec.name, *spec.figure.with_specs]
    return pd.concat([read_models(RESULTS / name / "models.csv") for name in names], ignore_index=True)


def write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def main(names: list[str]) -> int:
    names = names or [n for n in shipped_specs() if SweepSpec.load(n).figure is not None]
    per_paper: dict[str, list[int]] = {}
    for name in names:
        start = time.perf_counter()
        spec = SweepSpec.load(name)
        frame = frame_of(spec)
        command = (f"dpfair reproduce {name} " + " ".join(f"--from {RESULTS / n / 'models.csv'}"
                                                          for n in [name, *spec.figure.with_specs])
                   + f" --out {RESULTS / name} --overwrite  (or scripts/paper_figures.py {name})")
        files = reproduction_files(spec, frame, command=command)
        files["verdicts.md"] += (f"Written {time.strftime('%Y-%m-%d', time.gmtime())} on {platform.node()} "
                                 f"({os.cpu_count()} cores, shared) in {time.perf_counter() - start:.1f} s of wall "
                                 "time.\n").encode()
        for file, data in files.items():
            write(RESULTS / name / file, data)
        table = verdicts(spec, frame)
        judged = table[table["verdict"] != "not comparable"]
        counts = per_paper.setdefault(spec.figure.paper, [0, 0])
        counts[0] += int((judged["verdict"] == "reproduced").sum())
        counts[1] += len(judged)
        print(f"{name}: {len(table)} cells, {len(judged)} with a published value, "
              f"{int((judged['verdict'] == 'reproduced').sum())} reproduced; figure "
              f"{len(files['figure.png']) / 1024:.0f} KiB; {time.perf_counter() - start:.1f} s")
    print(f"machine: {platform.node()} ({platform.processor() or platform.machine()}), Python {platform.python_version()}")
    for paper, (ok, total) in per_paper.items():
        print(f"{paper}: {ok} of {total} published values reproduced within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
