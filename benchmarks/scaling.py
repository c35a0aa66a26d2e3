"""How the cost of DP-FERMI's training grows with n, d, the number of models and the batch size.

Synthetic logistic data (``n`` rows, ``d`` standard normal features, a linear label with noise, a group
correlated with the first feature), demographic parity, ε = ∞ and the group proportions given: the
training loop alone (secret Poisson batches, clipped per-sample sums, public minibatches, updates);
calibration and accounting depend on the privacy plan, not on n, d or the batch, and drawing the
noise costs O(models · parameters) a step (both are in ``results/speed/dpfermi_sweep.csv``). The cost of an epoch is the
marginal cost: ``(time(E₂ epochs) − time(E₁ epochs)) / (E₂ − E₁)`` for the same fit otherwise (each the
fastest of ``--repeats`` fits), which removes preparation; the peak memory is the peak resident memory of the
longer fit above what the process held before it (Linux ``VmHWM`` after resetting it). One axis varies
at a time around the base point (n = 16,384, d = 64, 1 model, batch 512); each axis gets the
least-squares slope ``k`` of log(time) on log(size): time ∝ size^k. The private CNN step's scaling with
the batch size is in ``results/speed/private_step.md`` (``benchmarks/private_step.py``).

Writes ``results/speed/scaling.{csv,md}``. Run from the repository root: ``python benchmarks/scaling.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from _machine import load_average, machine_info  # noqa: E402
from private_step import fitted_exponent, peak_since, reset_peak  # noqa: E402

from dpfair.algorithms import fit_dpfermi_grid  # noqa: E402

OUT = REPO / "results" / "speed"
BASE = {"n": 16384, "d": 64, "models": 1, "batch": 512}
AXES = {
    "n": [4096, 8192, 16384, 32768, 65536],
    "d": [16, 32, 64, 128, 256],
    "models": [1, 4, 16, 64, 256],
    "batch": [128, 256, 512, 1024, 2048],
}


def synthetic(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal(d) / np.sqrt(d)
    y = (X @ w + 0.5 * rng.standard_normal(n) > 0).astype(np.int64)
    s = (X[:, 0] + rng.standard_normal(n) > 0.5).astype(np.int64)
    return X, y, s


def fit_seconds(X, y, s, models: int, batch: int, epochs: int) -> tuple[float, float]:
    """Wall time and peak memory (MB) of one grid of ``models`` DP-FERMI models (λ spread over [0, 4])."""
    base = reset_peak()
    t0 = time.perf_counter()
    fit_dpfermi_grid(X, y, s, {"lam": list(np.linspace(0.0, 4.0, models))}, notion="demographic_parity",
                     epsilon=float("inf"), group_proportions=np.bincount(s) / len(s), groups=2,
                     batch_size=batch, epochs=epochs, random_state=0)
    return time.perf_counter() - t0, peak_since(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, nargs=2, default=[2, 32], metavar=("E1", "E2"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = load_average()
    e1, e2 = args.epochs
    rows = []
    fit_seconds(*synthetic(2048, 8), models=2, batch=256, epochs=1)  # warm-up
    for axis, values in AXES.items():
        for value in values:
            point = {**BASE, axis: value}
            X, y, s = synthetic(point["n"], point["d"])
            # the fastest of --repeats fits of each length (the least disturbed by other load)
            short = min(fit_seconds(X, y, s, point["models"], point["batch"], e1)[0] for _ in range(args.repeats))
            runs = [fit_seconds(X, y, s, point["models"], point["batch"], e2) for _ in range(args.repeats)]
            long, peak = min(r[0] for r in runs), max(r[1] for r in runs)
            rows.append({"axis": axis, **point, "ms_per_epoch": 1e3 * (long - short) / (e2 - e1),
                         "peak_mb": peak})
            print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    frame["ms_per_epoch"] = frame["ms_per_epoch"].round(2)
    frame["peak_mb"] = frame["peak_mb"].round(1)
    fits = pd.DataFrame([
        {"axis": axis, "range": f"{AXES[axis][0]}–{AXES[axis][-1]}",
         "time exponent k": round(fitted_exponent(g[axis], g["ms_per_epoch"].clip(lower=1e-3)), 2),
         "memory exponent k": round(fitted_exponent(g[axis], g["peak_mb"].clip(lower=1.0)), 2)}
        for axis, g in frame.groupby("axis", sort=False)])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "scaling.csv", index=False)
    info = machine_info(load)
    text = [
        f"# DP-FERMI (logistic) training cost against n, d, models and batch size (CPU, {args.threads} threads)",
        "",
        f"{info['date']}, {info['cpus']} CPUs, load {info['load_before']} before and {info['load_after']} after, "
        f"Python {info['python']}. Command: `python benchmarks/scaling.py --epochs {e1} {e2} --repeats {args.repeats} "
        f"--threads {args.threads}` (each length the fastest of its repeats). Base point "
        f"n = {BASE['n']}, d = {BASE['d']}, {BASE['models']} model, batch {BASE['batch']}; one axis varied at a "
        "time; marginal time of an epoch; peak resident memory of the fit above the process's before it (growth "
        "only: memory the allocator already holds from earlier fits is reused and not counted).",
        "",
        "## Fitted exponents (time ∝ size^k)",
        "",
        fits.to_markdown(index=False),
        "",
        "## Measurements",
        "",
        frame.to_markdown(index=False),
        "",
    ]
    (out / "scaling.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
