"""Issue 41's measurement: coverage of `PrivateMetricFrame`'s 95 % intervals by group size, down to one person.

Synthetic population (public, generated here): five groups of 1, 4, 16, 64 and 1,000 people whose base rate,
true- and false-positive rates all differ (`tests/fairness/test_interval_coverage.py`'s `_population`); and the
issue's case, 12,000 decisions in groups of 2,725 / 2,178 / 16 / 7,081 through `dpfair measure`'s own path
(`dpfair.measurement.files.measure_rows`, its default metrics). Each setting is released `--releases` times with fresh
noise (under `sampling=True`, "population" intervals, fresh rows too) and each group's interval is checked against
the true value: the exact value on the rows for noise-only intervals, the population's value otherwise. The
simulation is the test's (`_coverage`), so the table is what the test asserts, with more releases.

Writes `results/measurement/group_sizes.csv` and `.md`. About ten minutes on one core:

    nice -n 10 python benchmarks/measurement_group_sizes.py [--releases 400]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fairness"))

import pandas as pd  # noqa: E402
from _machine import load_average, machine_info  # noqa: E402
from test_interval_coverage import METRICS, SIZES, _coverage, _floor, _measured  # noqa: E402

ISSUE_CASE = (2725, 2178, 16, 7081)


def rows_of(setting: str, epsilon: float, sampling: bool, sizes, result, releases: int) -> list[dict]:
    hits, valid, diff_hits, diff_valid = result
    out = []
    for m in METRICS:
        for j, size in enumerate(sizes):
            n = int(valid[m][j])
            out.append({"setting": setting, "epsilon": epsilon, "intervals": "population" if sampling else "rows",
                        "group_size": int(size), "figure": m, "releases": n,
                        "coverage": hits[m][j] / n if n else math.nan,
                        "floor_3se": _floor(n) if n else math.nan})
    for m, n in diff_valid.items():
        out.append({"setting": setting, "epsilon": epsilon, "intervals": "population" if sampling else "rows",
                    "group_size": -1, "figure": f"difference of {m}", "releases": n,
                    "coverage": diff_hits[m] / n if n else math.nan, "floor_3se": _floor(n) if n else math.nan})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=400)
    ap.add_argument("--out", type=Path, default=REPO / "results" / "measurement")
    args = ap.parse_args()
    start, load = time.time(), load_average()
    rows = []
    for epsilon in (0.1, 1.0):
        for sampling in (False, True):
            rows += rows_of("sizes 1-1000", epsilon, sampling, SIZES,
                            _coverage(SIZES, epsilon=epsilon, sampling=sampling, releases=args.releases),
                            args.releases)
    for sampling in (False, True):
        rows += rows_of("issue case (measure)", 0.1, sampling, ISSUE_CASE,
                        _coverage(ISSUE_CASE, epsilon=0.1, sampling=sampling, releases=args.releases,
                                  frame=_measured), args.releases)
    table = pd.DataFrame(rows)
    table["holds"] = table.coverage >= table.floor_3se
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "group_sizes.csv", index=False)
    lines = ["# Issue 41: interval coverage by group size", "",
             f"`nice -n 10 python benchmarks/measurement_group_sizes.py --releases {args.releases}` "
             f"({', '.join(f'{k} {v}' for k, v in machine_info(load).items())}; {time.time() - start:.0f} s). Nominal 95 %; floor: 95 % − 3 s.e. of the "
             "releases with a defined truth. Group size −1: the between-groups difference (max − min).", ""]
    for (setting, eps, kind), part in table.groupby(["setting", "epsilon", "intervals"], sort=False):
        lines += [f"## {setting}, ε = {eps:g}, {kind} intervals", ""]
        pivot = part.pivot_table(index="figure", columns="group_size", values="coverage", sort=False)
        lines += ["| figure | " + " | ".join("difference" if c == -1 else f"{c:,}" for c in pivot.columns) + " |",
                  "|---|" + "---|" * len(pivot.columns)]
        for fig, r in pivot.iterrows():
            lines.append(f"| {fig} | " + " | ".join("–" if math.isnan(v) else f"{100 * v:.1f} %" for v in r) + " |")
        bad = part[~part.holds & part.coverage.notna()]
        lines += ["", "all ≥ floor" if bad.empty else f"**{len(bad)} below the floor**", ""]
    (args.out / "group_sizes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
