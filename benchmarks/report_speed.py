"""How long ``dpfair report`` takes on a 2,000-row results store, and how large its page and figures are.

The store is synthetic, built in a second without training anything, in the shape of the shipped DP-FERMI
figures spec (``dp-fermi-figures``) at 2,000 rows: two data sets (adult, credit; preset dp-fermi), DP-FERMI
over 12 λ, 2 notions, ε ∈ {0.5, 1, 3, 9, ∞} and 8 seeds, each (data set, notion, ε, seed) grid one release
group (a batched grid); ERM at 8 seeds per data set; and PF-LD (record-level releases, so the attribute
totals convert them to replace-one) on adult at 4 ε and 8 seeds. Each row has what a sweep stores: the
configuration, metrics (error, five notions' violations, per-group accuracies), a ledger of the method's
shape (group counts and Poisson-subsampled Gaussian steps, σ scaled as 1/ε), the release event, times,
commit, versions and host. The figures are made up (error and violation smooth in λ and ε plus seeded
noise): the benchmark measures the report's work, not a method.

Measured: ``dpfair report STORE --out page.html --tables DIR`` in a fresh interpreter (what a user waits
for, imports included; its progress bar to /dev/null), and :func:`~dpfair.experiments.report.render_report` in this process
(after one warm-up render of a small store, so imports are paid), each ``--repeats`` times, in wall and CPU
seconds (the machine may be shared: CPU time is the steadier figure; it counts the processes that draw the
figures too); the page's size,
its number of figures and the largest one. ``--before SRC`` also times the command from another source folder
(e.g. ``git archive HEAD src | tar -x -C /tmp/before``, then ``--before /tmp/before/src``), alternating with this
one in each repeat, so that both meet the same load. Before each command, a fresh interpreter times the command's
imports alone (:data:`IMPORTS`) and says which of :data:`HEAVY` they load. Writes ``results/speed/report_speed.csv`` and ``.md``. Run from
the repository root: ``python benchmarks/report_speed.py``; ``--keep STORE`` also keeps the store.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

import numpy as np
import pandas as pd
from _machine import load_average, machine_info

DATASETS = {"adult": ("sex", ["Female", "Male"]), "credit": ("sex", ["female", "male"])}
NOTIONS = ("demographic_parity", "equalized_odds")
EPSILONS = (0.5, 1.0, 3.0, 9.0, math.inf)
LAMS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 4.0, 8.0, 16.0, 32.0)
SEEDS = range(8)
PFLD_EPSILONS = (0.5, 1.0, 2.0, 5.0)
ALL_NOTIONS = ("demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity", "predictive_equality")
VERSIONS = {"dpfair": "0.1.0", "torch": "2.13.0+cpu", "numpy": "2.4.6", "pandas": "3.1.1", "dp-accounting": "0.6.0"}


def _steps(label: str, epsilon: float, q: float = 0.125, count: int = 401) -> dict:
    return {"label": label, "event": {"dp_event": "PoissonSampledDpEvent", "sampling_probability": q,
                                      "event": {"dp_event": "GaussianDpEvent", "noise_multiplier": 24.0 / epsilon}},
            "count": count}


def _ledger(method: str, epsilon: float) -> tuple[dict, dict, str]:
    """(ledger, release event, relation) of one model of ``method`` at ``epsilon``."""
    if method == "erm" or not math.isfinite(epsilon):
        entry = {"label": "non-private training", "event": {"dp_event": "NonPrivateDpEvent"}, "count": 1}
        return ({"relation": "ADD_OR_REMOVE_ONE", "entries": [entry]}, {"dp_event": "NonPrivateDpEvent"},
                "ADD_OR_REMOVE_ONE")
    if method == "dp-fermi":
        counts = {"label": "group counts", "event": {"dp_event": "GaussianDpEvent",
                                                       "noise_multiplier": 160.0 / epsilon}, "count": 1}
        steps = _steps("dp-fermi step", epsilon)
        event = {"dp_event": "ComposedDpEvent", "events": [
            {"dp_event": "SelfComposedDpEvent", "event": steps["event"], "count": steps["count"]}, counts["event"]]}
        return {"relation": "REPLACE_ONE", "entries": [counts, steps]}, event, "REPLACE_ONE"
    steps = _steps("pf-ld step", epsilon, q=0.05, count=200)
    event = {"dp_event": "SelfComposedDpEvent", "event": steps["event"], "count": steps["count"]}
    return {"relation": "ADD_OR_REMOVE_ONE", "entries": [steps]}, event, "ADD_OR_REMOVE_ONE"


def _row(rng, dataset: str, method: str, notion, epsilon: float, seed: int, params: dict, ledger: dict) -> dict:
    groups = DATASETS[dataset][1]
    config = {"dataset": dataset, "sensitive": None, "preset": "dp-fermi", "options": {}, "method": method,
              "notion": notion, "epsilon": None if method == "erm" else epsilon, "delta": None, "seed": seed,
              "params": params, "test_size": 0.25}
    config["key"] = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    lam = params.get("lam", 0.0)
    noise = 0.0 if not math.isfinite(epsilon) else 0.02 / epsilon
    error = 0.15 + 0.03 * lam / (1 + lam) + noise + rng.normal(0, 0.004 + noise / 4)
    fairness = {n: max(0.0, 0.18 / (1 + lam) * (1 + k / 10) + rng.normal(0, 0.01 + noise))
                for k, n in enumerate(ALL_NOTIONS)}
    accuracy = {g: 1 - error + (0.03 if i else -0.03) / (1 + lam) + rng.normal(0, 0.005) for i, g in enumerate(groups)}
    private = method != "erm" and math.isfinite(epsilon)
    metrics = {"n": 11306, "error": error, "fairness": fairness, "per_group_accuracy": accuracy,
               "accuracy_inequality": {"gini": abs(rng.normal(0, 0.01))},
               "evaluation": {"private": False, "note": "non-private diagnostics of the test people"}}
    return {"key": config["key"], "config": config, "metrics": metrics,
            "violation": fairness.get(notion, math.nan) if notion else math.nan,
            "epsilon_spent": epsilon * 0.99999 if private else math.inf,
            "delta_spent": 1.4e-8 if private else 0.0,
            "privacy_unit": "sensitive" if ledger["relation"] == "REPLACE_ONE" else "record", "ledger": ledger,
            "wall_s": float(rng.uniform(2, 40)), "fit_s": float(rng.uniform(1, 30)),
            "commit": "2c0c00e17b3924760dec6be013d50253ace6466a", "versions": VERSIONS, "host": "bench"}


def build_store(path: Path, seed: int = 0):
    """The synthetic 2,000-row store (see the module's docstring) at ``path``, written one release group a task."""
    from dpfair.experiments.store import ResultsStore

    rng = np.random.default_rng(seed)
    store = ResultsStore(path)
    tasks = []  # (dataset, method, notion, epsilon, seed, [params of the release group's models])
    for dataset in DATASETS:
        for notion in NOTIONS:
            for eps in EPSILONS:
                tasks += [(dataset, "dp-fermi", notion, eps, s, [{"lam": lam} for lam in LAMS]) for s in SEEDS]
        tasks += [(dataset, "erm", None, math.inf, s, [{}]) for s in SEEDS]
    tasks += [("adult", "pf-ld", n, eps, s, [{"epochs": 10}]) for n in NOTIONS for eps in PFLD_EPSILONS for s in SEEDS]
    for dataset, method, notion, eps, s, grid in tasks:
        ledger, event, relation = _ledger(method, eps)
        rows = [_row(rng, dataset, method, notion, eps, s, params, ledger) for params in grid]
        private = method != "erm" and math.isfinite(eps)
        release = {"data_key": json.dumps({"dataset": dataset, "sensitive": DATASETS[dataset][0]}),
                   "relation": relation, "event": event, "delta": 1.4e-8 if private else 0.0,
                   "epsilon": eps if private else math.inf, "rows": rows}
        store.add({"configs": [r["config"] for r in rows], "releases": [release]}, "report-speed")
    return store


#: Modules `dpfair report` has no use for (it trains and predicts nothing), and what the command imports.
HEAVY = ("torch", "sklearn")
IMPORTS = ("import dpfair.cli, dpfair.experiments.report, dpfair.experiments.store, dpfair.plot, dpfair.privacy\n"
           f"import sys; print(', '.join(m for m in {HEAVY!r} if m in sys.modules) or 'none')")


def _child_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: less sensitive to load than wall time."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def page_sizes(page: Path) -> dict:
    """The page's bytes, its number of figures and the largest figure's bytes (decoded)."""
    text = page.read_text(encoding="utf-8")
    images = [base64.b64decode(m) for m in re.findall(r'src="data:image/[a-z+]+;base64,([^"]+)"', text)]
    svgs = re.findall(r"<svg\b.*?</svg>", text, flags=re.DOTALL)
    sizes = [len(b) for b in images] + [len(s.encode()) for s in svgs]
    return {"page_kb": round(len(text.encode()) / 1024, 1), "figures": len(sizes),
            "largest_figure_kb": round(max(sizes, default=0) / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "results" / "speed"))
    parser.add_argument("--name", default="report_speed", help="file name of the tables (without .csv/.md)")
    parser.add_argument("--keep", help="also keep the synthetic store at this path")
    parser.add_argument("--before", help="also time the command from this source folder, alternating with this one")
    parser.add_argument("--note", help="a paragraph to end the Markdown with (what --before / --src hold)")
    parser.add_argument("--src", help="run dpfair from this source folder (e.g. `git archive` of the commit before "
                                      "into /tmp/before, then --src /tmp/before/src) instead of the installed one")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
        os.environ["PYTHONPATH"] = str(Path(args.src).resolve())
    import dpfair
    from dpfair.experiments.report import render_report

    print(f"dpfair from {Path(dpfair.__file__).parent}", flush=True)

    load = load_average()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        store = build_store(Path(args.keep) if args.keep else tmp / "store.sqlite")
        build_s = time.perf_counter() - t0
        n = len(store.frame())
        # warm-up: the imports (matplotlib, dp_accounting) a long-running process has already paid
        render_report(store.frame().head(30), tmp / "warm.html", verbose=False)
        command = [sys.executable, "-m", "dpfair.cli", "report", str(store.path), "--out", str(tmp / "cli.html"),
                   "--tables", str(tmp / "tables"), "--overwrite"]
        runs = [("dpfair report (fresh process, --tables)", "imports of dpfair report (fresh process)", None)]
        if args.before:
            before = str(Path(args.before).resolve())
            runs.append((f"dpfair report from {args.before} (before)",
                         f"imports of dpfair report from {args.before} (before)", {**os.environ, "PYTHONPATH": before}))
        for repeat in range(args.repeats):
            for what, imports, env in runs:  # the command's imports alone, then the whole command
                t0, c0 = time.perf_counter(), _child_cpu()
                done = subprocess.run([sys.executable, "-c", IMPORTS], check=True, env=env, capture_output=True,
                                      text=True)
                rows.append({"what": imports,
                             "repeat": repeat, "models": n, "seconds": round(time.perf_counter() - t0, 2),
                             "cpu_seconds": round(_child_cpu() - c0, 2), "page_kb": "", "figures": "",
                             "largest_figure_kb": "", "loaded": done.stdout.strip().splitlines()[-1]})
                t0, c0 = time.perf_counter(), _child_cpu()
                subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                rows.append({"what": what, "repeat": repeat, "models": n,
                             "seconds": round(time.perf_counter() - t0, 2),
                             "cpu_seconds": round(_child_cpu() - c0, 2), **page_sizes(tmp / "cli.html"),
                             "loaded": ""})
            t0, c0 = time.perf_counter(), time.process_time() + _child_cpu()  # its figure-drawing workers too
            render_report(store, tmp / "lib.html", verbose=False)
            rows.append({"what": "render_report (in process)", "repeat": repeat, "models": n,
                         "seconds": round(time.perf_counter() - t0, 2),
                         "cpu_seconds": round(time.process_time() + _child_cpu() - c0, 2),
                         **page_sizes(tmp / "lib.html"), "loaded": ""})
            print(*rows[-2 * len(runs) - 1:], sep="\n", flush=True)
    info = machine_info(load)
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / f"{args.name}.csv", index=False)
    lines = [f"# `dpfair report` on a {n}-row store", "",
             f"Synthetic store built in {build_s:.1f} s by `python benchmarks/report_speed.py"
             + (f" --src {args.src}" if args.src else "") + (f" --before {args.before}" if args.before else "")
             + "` (its docstring says what it holds); dpfair from "
             f"`{Path(dpfair.__file__).parent}`. Page size and figures are of the page written.", "",
             *(f"- {k}: {v}" for k, v in info.items()), "",
             ("\"imports of\" rows: a fresh interpreter importing what the command imports before it reads the store "
              f"(`{IMPORTS.splitlines()[0]}`); \"heavy modules loaded\": which of {', '.join(HEAVY)} it left in "
              "`sys.modules`."), "",
             "| what | repeat | models | wall s | CPU s | page KB | figures | largest figure KB | heavy modules loaded |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             *(f"| {r['what']} | {r['repeat']} | {r['models']} | {r['seconds']} | {r['cpu_seconds']} | {r['page_kb']} | "
               f"{r['figures']} | {r['largest_figure_kb']} | {r['loaded']} |" for r in rows)]
    if args.note:
        lines += ["", args.note]
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / args.name}.csv and .md")


if __name__ == "__main__":
    main()
