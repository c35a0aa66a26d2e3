"""One DP-FERMI model through ``dpfair train`` against an epoch of the paper's public code, re-created, in one run.

(a) The reference: the structure of the DP-FERMI authors' public training code (Lowy, Gupta et al., ICLR
2023), written anew here: a torch ``DataLoader`` over the training rows with ``batch_size=1,
shuffle=True, num_workers=2``; for each single example a forward of the logistic model with the binary
cross-entropy (``BCEWithLogitsLoss``), the FERMI term of that one example's prediction,
``−tr(W diag(p̂) Wᵀ) + 2 tr(W p̂_{ŷ,s} P_s^{-1/2}) − 1`` with ``W`` a 2×2 ``nn.Parameter``, the loss
``(ℓ + λ·fermi)/batch_size`` backpropagated, each of the model's parameters' gradient norm read with
``.item()``, the gradient clipped by dividing by it and added to a dict of sums; every ``batch_size``
(1024) examples Gaussian noise (``torch.normal``, one draw per parameter), an SGD step on θ, an ascent
step on W with ``W.grad`` (summed by backward over the batch), the projection of W onto a Frobenius ball
and the zeroing. One epoch is timed (its loader's worker start included, as every epoch of that code
pays it).

(b) ``dpfair train --dataset parkinsons --method dp-fermi --quiet`` as a subprocess, first with an empty
accounting cache (``DPFAIR_CACHE_DIR`` a fresh folder: σ is calibrated on the PLD accountant), then
again with that cache warm (the same plan: σ read back, :mod:`dpfair.privacy.accounting_cache`); the
result JSON gives ``fit_seconds`` and the epochs. Each is followed by the same command run in-process
(``dpfair.cli.console_main``, in a fresh interpreter) with timers around the library calls, which splits the wall
time into interpreter start, imports, data loading, calibration, the training loop, the rest of the fit
(checks, the group counts' release, initialisation, the ledger's ε), evaluation, writing and the rest
(printing), and reports the interpreter's peak resident memory.

Ratios are per epoch: the reference's epoch against ``fit_seconds / epochs`` (calibration included) and
against the training loop's time per epoch. Torch's default threads for both (2 on the 2-core machine
this was written on). Run from the repository root: ``python benchmarks/dpfermi_single_model.py``;
writes ``results/speed/dpfermi_single_model.csv`` and ``.md`` and prints the table.
"""

from __future__ import annotations

import time

WALL_AT_START = time.time()  # the instrumented child's first instant, against its parent's clock

import argparse
import contextlib
import csv
import io
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _machine import load_average, machine_info

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))
OUT = REPO / "results" / "speed"
DATASET = "parkinsons"
TRAIN_ARGS = ["train", "--dataset", DATASET, "--method", "dp-fermi", "--quiet"]

#: The wall-time phases of ``dpfair train``, in the order they happen.
PHASES = ("interpreter", "imports", "data loading", "calibration", "training loop", "fit, other", "evaluation",
          "writing", "exit", "other")


# ---- (a) the reference ---------------------------------------------------------------------------------------

def reference_epoch_seconds(data, lam: float, clip: float, sigma: float, batch_size: int = 1024,
                            learning_rate: float = 0.5, w_learning_rate: float = 0.02) -> float:
    """One epoch of the per-example loop described in the module docstring (our re-creation)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    X = torch.tensor(data.X_train, dtype=torch.float32)
    y = torch.tensor(data.y_train, dtype=torch.float32)
    s = torch.tensor(data.s_train, dtype=torch.long)
    k = int(data.n_groups)
    share = torch.bincount(s, minlength=k).float() / len(s)
    inv_sqrt_p = torch.diag(share.rsqrt())  # P_s^{-1/2}
    radius = math.sqrt(2 / float(share.min()))
    model = torch.nn.Linear(X.shape[1], 1)
    W = torch.nn.Parameter(0.1 * torch.randn(k, 2))
    bce = torch.nn.BCEWithLogitsLoss()
    sums = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    loader = DataLoader(TensorDataset(X, y, s), batch_size=1, shuffle=True, num_workers=2)

    start = time.perf_counter()
    for count, (x, label, group) in enumerate(loader, 1):
        logit = model(x).squeeze(1)
        loss = bce(logit, label)
        p1 = torch.sigmoid(logit)
        p_hat = torch.cat([1 - p1, p1])  # the predicted distribution of ŷ
        p_hat_s = torch.outer(p_hat, torch.nn.functional.one_hot(group, k).float()[0])  # p̂_{ŷ,s}
        fermi = -torch.trace(W @ torch.diag(p_hat) @ W.T) + 2 * torch.trace(W @ p_hat_s @ inv_sqrt_p) - 1
        ((loss + lam * fermi) / batch_size).backward()  # W.grad sums over the batch
        for name, p in model.named_parameters():
            norm = p.grad.norm().item()
            sums[name] += p.grad / max(1.0, norm * batch_size / clip)
        model.zero_grad()
        if count % batch_size == 0:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p -= learning_rate * (sums[name] + torch.normal(0.0, sigma * clip / batch_size, size=p.shape))
                    sums[name].zero_()
                W += w_learning_rate * (W.grad + torch.normal(0.0, sigma / batch_size, size=W.shape))
                W *= min(1.0, radius / W.norm().item())
            W.grad = None
    return time.perf_counter() - start


# ---- (b) dpfair train, timed from outside and split into phases from inside ----------------------------------

def plain_run(cache: Path, out: Path) -> dict:
    """``dpfair train`` as a user runs it: wall time, its JSON's fit time, epochs and noise multiplier."""
    env = {**os.environ, "DPFAIR_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    subprocess.run(["dpfair", *TRAIN_ARGS, "--out", str(out)], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    result = json.loads(out.read_text())
    return {"wall_s": wall, "fit_s": result["fit_seconds"], "epochs": result["hyperparameters"]["epochs"],
            "noise_multiplier": result["noise_multiplier"]}


def instrumented_run(cache: Path, out: Path) -> dict:
    """The same command in a fresh interpreter running :func:`phases_of_train`; its phases and peak memory."""
    env = {**os.environ, "DPFAIR_CACHE_DIR": str(cache)}
    report = out.with_suffix(".phases.json")
    start = time.time()
    subprocess.run([sys.executable, __file__, "--phases-into", str(report), "--", *TRAIN_ARGS, "--out", str(out)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    end = time.time()
    phases = json.loads(report.read_text())
    phases["interpreter"] = phases.pop("started_at") - start
    phases["exit"] = end - phases.pop("finished_at")
    phases["other"] = (end - start) - sum(phases[p] for p in PHASES[:-1])
    return {"instrumented_wall_s": end - start, **phases}


def phases_of_train(argv: list[str], report: Path) -> None:
    """Run ``dpfair train`` in this process with timers around the library calls; write the phases to ``report``."""
    started = time.perf_counter()
    from dpfair import cli, datasets, privacy  # what the command imports lazily: counted as imports
    import dpfair.cli.train as train_command
    from dpfair.algorithms import base
    import dpfair.algorithms.dpfermi.loop as dpfermi_loop
    from dpfair.privacy.plan import PrivacyPlan

    del datasets, privacy

    spent = defaultdict(float)
    spent["imports"] = time.perf_counter() - started

    def timed(owner, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - t0

        setattr(owner, name, wrapper)

    timed(train_command, "load_data", "data loading")  # the names `dpfair train` calls, in its own module
    timed(base.FairEstimator, "fit", "fit")
    timed(PrivacyPlan, "calibrate", "calibration")  # σ for the budget: what a fit's plan() runs
    timed(dpfermi_loop, "train", "training loop")
    timed(train_command, "evaluate", "evaluation")
    timed(train_command, "write_result", "writing")
    with contextlib.redirect_stdout(io.StringIO()):
        if cli.console_main(argv) != 0:
            raise SystemExit("dpfair train failed")
    spent["fit, other"] = spent.pop("fit") - spent["calibration"] - spent["training loop"]
    report.write_text(json.dumps({**spent, "started_at": WALL_AT_START, "finished_at": time.time(),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# ---- the table -----------------------------------------------------------------------------------------------

def measure() -> tuple[list[dict], dict]:
    from dpfair.datasets import load_dataset

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for cache_state in ("cold", "warm"):
            # cold: a fresh cache for each of the two runs; warm: the caches the cold runs filled
            plain_cache, inst_cache = tmp / "cache-plain", tmp / "cache-instrumented"
            plain = plain_run(plain_cache, tmp / f"{cache_state}.json")
            inst = instrumented_run(inst_cache, tmp / f"{cache_state}-instrumented.json")
            rows.append({"cache": cache_state, **plain, **inst})
    data = load_dataset(DATASET, random_state=0)
    sigma = rows[0]["noise_multiplier"]
    reference = reference_epoch_seconds(data, lam=1.0, clip=1.0, sigma=sigma)
    info = {"reference_epoch_s": reference, "n_train": len(data.y_train), "features": data.X_train.shape[1],
            "reference_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for row in rows:
        per_epoch, loop_per_epoch = row["fit_s"] / row["epochs"], row["training loop"] / row["epochs"]
        row.update({"fit_ms_per_epoch": 1e3 * per_epoch, "loop_ms_per_epoch": 1e3 * loop_per_epoch,
                    "ratio_fit": reference / per_epoch, "ratio_loop": reference / loop_per_epoch})
    return rows, info


def markdown(rows: list[dict], info: dict, meta: dict) -> str:
    import torch

    lines = [
        "# One DP-FERMI model: `dpfair train` against the paper's public code",
        "",
        f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs, load average before the run "
        f"{meta['load_before']}, after {meta['load_after']}); Python {meta['python']}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads). Command: `python benchmarks/dpfermi_single_model.py` (one run).",
        "",
        f"Reference (our re-creation of the structure of the DP-FERMI authors' public code, module docstring of "
        f"the benchmark): one epoch of {DATASET}'s {info['n_train']} training rows ({info['features']} features), "
        f"per-example DataLoader (batch_size=1, 2 workers), autograd, `.item()` norms, noise every 1024 examples: "
        f"**{info['reference_epoch_s']:.2f} s** (peak memory of its process {info['reference_peak_rss_mib']:.0f} "
        "MiB).",
        "",
        f"dpfair: `dpfair train --dataset {DATASET} --method dp-fermi --quiet` (ε = 1, λ = 1, logistic, 50 epochs "
        "of Poisson batches); `cold`: an empty accounting cache (σ calibrated on the PLD accountant), `warm`: "
        "the same plan again (σ read back from the cache, `dpfair.privacy.accounting_cache`).",
        "",
        "| cache | wall s | fit s | fit ms / epoch | × reference (fit) | training loop ms / epoch "
        "| × reference (loop) | peak memory MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['cache']} | {r['wall_s']:.2f} | {r['fit_s']:.3f} | {r['fit_ms_per_epoch']:.2f} | "
                     f"**{r['ratio_fit']:.0f}×** | {r['loop_ms_per_epoch']:.2f} | {r['ratio_loop']:.0f}× | "
                     f"{r['peak_rss_mib']:.0f} |")
    lines += [
        "",
        "Where the wall time goes (the same command run in-process in a fresh interpreter, timers around the "
        "library calls; seconds):",
        "",
        "| cache | " + " | ".join(PHASES) + " | total |",
        "|---|" + "---:|" * (len(PHASES) + 1),
    ]
    for r in rows:
        lines.append(f"| {r['cache']} | " + " | ".join(f"{r[p]:.3f}" for p in PHASES)
                     + f" | {r['instrumented_wall_s']:.2f} |")
    lines += [
        "",
        "`fit, other`: the fit's checks, the group counts' release, initialisation and the ε of the ledger; "
        "`exit`: the interpreter's shutdown (the command freezes the garbage collector first, `dpfair.cli.console_main`); "
        "`other`: the command's parsing, estimator set-up and printing. Peak memory: the maximum resident set "
        "of the instrumented `dpfair train` process.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--phases-into", type=Path, help=argparse.SUPPRESS)  # the instrumented child
    parser.add_argument("train_argv", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phases_into is not None:
        phases_of_train(args.train_argv, args.phases_into)
        return

    load_before = load_average()
    rows, info = measure()
    meta = machine_info(load_before)
    args.out.mkdir(parents=True, exist_ok=True)
    fields = ["cache", "wall_s", "fit_s", "epochs", "fit_ms_per_epoch", "ratio_fit", "loop_ms_per_epoch",
              "ratio_loop", *PHASES, "instrumented_wall_s", "peak_rss_mib", "noise_multiplier"]
    with open(args.out / "dpfermi_single_model.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*fields, "reference_epoch_s"], extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**{k: round(v, 5) if isinstance(v, float) else v for k, v in r.items()},
                             "reference_epoch_s": round(info["reference_epoch_s"], 4)})
    text = markdown(rows, info, meta)
    (args.out / "dpfermi_single_model.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
