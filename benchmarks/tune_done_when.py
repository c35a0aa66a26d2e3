"""Issue 16's done-when command, run as a user runs it, against the published DP-FERMI curve.

``dpfair tune --dataset adult --method dp-fermi --epsilon 1 --notion demographic_parity
--max-error-increase 0.01`` is run ``--runs`` times (each run's privacy noise is secret and fresh; the split,
seed 0, is the same), and ``dpfair train --dataset adult --method erm`` once on that split for the
non-private test error. Each run's total ε and δ (search included), chosen λ, test error and
demographic-parity violation are compared with the bound that the readings of the paper's Fig. 2 put on
its curve (``private_selection.PUBLISHED``, :func:`private_selection.published_bound`): at the run's own
test error, and at the same distance above each one's non-private error.

Writes ``results/selection/done_when.csv`` and ``done_when.md``. Run from the repository root:
``python benchmarks/tune_done_when.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import pandas as pd  # noqa: E402
from _machine import load_average, machine_info  # noqa: E402
from private_selection import PUBLISHED, published_bound  # noqa: E402

COMMAND = ["tune", "--dataset", "adult", "--method", "dp-fermi", "--epsilon", "1", "--notion", "demographic_parity",
           "--max-error-increase", "0.01"]
KEY = ("adult", "demographic_parity", 1.0)


def cli(args: list[str], out: Path) -> tuple[dict, float]:
    """``dpfair ARGS --out OUT --quiet`` in a fresh interpreter; its JSON and wall seconds."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dpfair.cli", *args, "--out", str(out), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text()), time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", default=str(REPO / "results" / "selection"))
    args = parser.parse_args()
    load = load_average()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        erm, _ = cli(["train", "--dataset", "adult", "--method", "erm"], Path(tmp) / "erm.json")
        for run in range(args.runs):
            result, wall = cli(COMMAND, Path(tmp) / f"tune{run}.json")
            error, violation = result["test_error"], result["fairness"]["demographic_parity"]
            score = result["selection"]["score"]
            rows.append({
                "run": run, "epsilon": result["epsilon"], "delta": result["delta"], "strategy": result["strategy"],
                "lam": result["selection"]["chosen"]["lam"], "reference_error": score["reference_error"],
                "threshold": score["threshold"], "test_error": error, "violation": violation,
                "erm_test_error": erm["test_error"], "above_erm": error - erm["test_error"],
                "published_bound": published_bound(*KEY, error),
                "published_bound_relative": published_bound(*KEY, error - erm["test_error"] + PUBLISHED[KEY]["erm"]),
                "wall_seconds": wall,
            })
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()}), flush=True)
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "done_when.csv", index=False)
    info = machine_info(load)
    beats = (frame.violation < frame.published_bound).sum(), (frame.violation < frame.published_bound_relative).sum()
    text = "\n".join([
        "# Issue 16's done-when command against the published DP-FERMI curve",
        "",
        f"{info['date']}, {info['cpus']} CPUs, Python {info['python']}. Command: `python benchmarks/tune_done_when.py "
        f"--runs {args.runs}`: `dpfair {' '.join(COMMAND)}` run {args.runs} times (fresh secret noise each time, "
        f"split seed 0), and `dpfair train --dataset adult --method erm` once on the same split (test error "
        f"{erm['test_error']:.4f}, violation {erm['fairness']['demographic_parity']:.4f}).",
        "",
        "`published bound`: the least violation the published curve (Lowy et al. 2023, Fig. 2, ε = 1) can have at "
        "the run's test error, from the readings our issue 4 quotes (about 0.087 at error ≤ 0.169, 0.010 at "
        "≤ 0.189; non-private error 0.159) and the front not rising with the error; `relative`: the same at the "
        "same distance above each one's non-private error (ours is 0.004–0.007 lower than the paper's on this split).",
        "",
        frame.drop(columns=["strategy"]).assign(delta=frame.delta.map("{:.2e}".format)).to_markdown(
            index=False, floatfmt=("d", ".4f", "", ".3f", *[".4f"] * 8, ".1f")),
        "",
        f"Below the published bound at its own error in {beats[0]}/{len(frame)} runs, at the same distance above "
        f"the non-private error in {beats[1]}/{len(frame)}; mean test error {frame.test_error.mean():.4f} "
        f"({frame.above_erm.mean():+.4f} from ERM's), mean violation {frame.violation.mean():.4f}, "
        f"total ε ≤ {frame.epsilon.max():.4f} (δ {frame.delta.max():.2e}).",
        "",
    ])
    (out / "done_when.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
