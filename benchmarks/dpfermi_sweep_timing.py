"""The speed of DP-FERMI's batched sweep against a one-model loop of the paper's Algorithm 1, in one run.

The timed sweep: adult, demographic parity, 4 ε × 11 λ × 15 seeds × 200 epochs, all trained as one
batched computation by :func:`dpfair.algorithms.fit_dpfermi_grid` (every model with its own secret
noise), from an empty accounting cache (a fresh ``DPFAIR_CACHE_DIR``: every σ is calibrated, as on a
first run). The ratio compares its time per model-epoch with a straightforward one-model PyTorch loop of
Algorithm 1 (per-batch autograd, noise added to the batch gradients, as the paper's code trains),
measured in the same run with the same torch threads, after one epoch of warm-up, once before the sweep and
once after (their mean: this shared machine's speed drifts by 20 % over minutes, and the loop of small ops
feels it more than the sweep). Writes
``results/dpfermi/timing.md`` and ``results/speed/dpfermi_sweep.csv`` (with the peak resident memory).

The trade-off curves this script used to draw are the reproduction spec ``dp-fermi-figures``
(``dpfair sweep dp-fermi-figures``; results under ``results/experiments/``).
Run from the repository root: ``python benchmarks/dpfermi_sweep_timing.py``.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import tempfile
import time
from pathlib import Path

from _machine import load_average, machine_info

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from dpfair.algorithms import fit_dpfermi_grid  # noqa: E402
from dpfair.algorithms.dpfermi import loop as dpfermi_loop  # noqa: E402
from dpfair.datasets import load_dataset  # noqa: E402

EPSILONS = [0.5, 1.0, 3.0, 9.0]
LAMBDAS = [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0]
OUT = REPO / "results" / "dpfermi"
SPEED = REPO / "results" / "speed"


def sweep_seconds(data, seeds: int, epochs: int) -> tuple[float, float, int]:
    """Wall time of the batched grid (from an empty accounting cache), its training loop's part, its models."""
    n = len(data.y_train)
    scale = 50.0 / epochs  # the 50-epoch default step sizes, scaled so that lr × steps stays the same
    loop, train = [], dpfermi_loop.train

    def timed_train(*args, **kwargs):
        start = time.perf_counter()
        try:
            return train(*args, **kwargs)
        finally:
            loop.append(time.perf_counter() - start)

    dpfermi_loop.train = timed_train
    user_cache = os.environ.get("DPFAIR_CACHE_DIR")
    try:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["DPFAIR_CACHE_DIR"] = cache
            t0 = time.perf_counter()
            ests = fit_dpfermi_grid(
                data.X_train, data.y_train, data.s_train,
                {"epsilon": EPSILONS, "lam": LAMBDAS, "random_state": list(range(seeds))},
                notion="demographic_parity", epochs=epochs, batch_size=1024, delta=1.0 / n**2,
                groups=data.n_groups, learning_rate=0.5 * scale, w_learning_rate=0.02 * scale)
            seconds = time.perf_counter() - t0
    finally:
        dpfermi_loop.train = train
        if user_cache is None:
            os.environ.pop("DPFAIR_CACHE_DIR", None)
        else:
            os.environ["DPFAIR_CACHE_DIR"] = user_cache
    return seconds, sum(loop), len(ests)


def naive_algorithm1_seconds_per_epoch(data, epochs: int = 3, lam: float = 1.0, sigma: float = 27.0,
                                       warmup: int = 1) -> float:
    """Algorithm 1 for one model the straightforward way: per-batch autograd, noise on the batch gradients.

    ``warmup`` epochs run first, untimed (the sweep it is compared with runs thousands of steps).
    """
    g = torch.Generator().manual_seed(0)
    X = torch.tensor(data.X_train, dtype=torch.float32)
    y = torch.tensor(data.y_train)
    s = torch.tensor(data.s_train)
    n, d = X.shape
    k = int(s.max()) + 1
    p = torch.bincount(s, minlength=k).float() / n
    linear = torch.nn.Linear(d, 2)
    W = torch.zeros(k, 2, requires_grad=True)
    q = 1024 / n
    warm_steps = int(warmup / q)
    for step in range(warm_steps + int(epochs / q)):
        if step == warm_steps:
            t0 = time.perf_counter()
        idx = (torch.rand(n, generator=g) < q).nonzero(as_tuple=True)[0]
        logits = linear(X[idx])
        proba = torch.softmax(logits, 1)
        onehot = F.one_hot(s[idx], k).float()
        psi = -(proba * (W**2).sum(0)).sum(1) + 2 * ((onehot / p.sqrt()) @ W * proba).sum(1) - 1
        loss = F.cross_entropy(logits, y[idx]) + lam * psi.mean()
        grads = torch.autograd.grad(loss, [linear.weight, linear.bias, W])
        with torch.no_grad():
            for param, grad in zip([linear.weight, linear.bias], grads[:2]):
                param -= 0.5 * (grad + sigma / 1024 * torch.randn(param.shape, generator=g))
            W += 0.02 * (lam * grads[2] + sigma / 1024 * torch.randn(W.shape, generator=g))
            W *= torch.clamp(3.0 / W.norm(), max=1.0)
    return (time.perf_counter() - t0) / epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for both timed computations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = load_average()
    data = load_dataset("adult", sensitive="sex", random_state=0)
    naive_before = naive_algorithm1_seconds_per_epoch(data)
    seconds, loop, count = sweep_seconds(data, args.seeds, args.epochs)
    ours = seconds / count / args.epochs
    naive_after = naive_algorithm1_seconds_per_epoch(data)
    naive = (naive_before + naive_after) / 2
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    meta = machine_info(load_before)
    sweep = (f"adult, demographic_parity, {len(EPSILONS)} ε × {len(LAMBDAS)} λ × {args.seeds} seeds "
             f"× {args.epochs} epochs")
    row = {"sweep": sweep, "models": count, "seconds": round(seconds, 1), "training_loop_seconds": round(loop, 1),
           "ms_per_model_epoch": round(1e3 * ours, 3), "naive_ms_per_epoch": round(1e3 * naive, 2),
           "naive_before_ms": round(1e3 * naive_before, 2), "naive_after_ms": round(1e3 * naive_after, 2),
           "ratio": round(naive / ours, 1), "threads": args.threads, "peak_rss_mib": round(peak),
           "load_before": meta["load_before"], "load_after": meta["load_after"], "date": meta["date"]}
    table = {k: row[k] for k in ("sweep", "models", "seconds", "training_loop_seconds", "ms_per_model_epoch")}
    text = (f"# DP-FERMI sweep timing (this machine, {args.threads} torch thread(s) for both)\n\n"
            f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs, load average before the run "
            f"{meta['load_before']}, after {meta['load_after']}); Python {meta['python']}, torch "
            f"{torch.__version__}. Command: `python benchmarks/dpfermi_sweep_timing.py` (one run; the sweep "
            "from an empty accounting cache, so every σ is calibrated).\n\n"
            + pd.DataFrame([table]).to_markdown(index=False)
            + f"\n\nOne-model PyTorch loop of Algorithm 1 (per-batch autograd): {1e3 * naive:.1f} ms per epoch "
            f"on adult (the mean of {1e3 * naive_before:.1f} before the sweep and {1e3 * naive_after:.1f} after).\nOur batched sweep: {1e3 * ours:.3f} ms per model-epoch, **{naive / ours:.0f}×** faster "
            f"per model (and ours clips per sample, which the loop does not). Peak memory of the run: {peak:.0f} "
            "MiB.\n")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "timing.md").write_text(text)
    SPEED.mkdir(parents=True, exist_ok=True)
    with open(SPEED / "dpfermi_sweep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    print(text)


if __name__ == "__main__":
    main()
