"""A private CNN training step against plain SGD, dpfair against Opacus, on this machine's CPU (or a GPU).

The model is FairDP's MNIST CNN shape (``dpfair.nn.CNN`` defaults: two 5x5 convolutions with 16 and 32
channels, two Linear layers, 423,798 parameters), float32, on 28x28 inputs. For every batch size B a
step is timed for

* ``sgd``: non-private SGD (``torch.optim.SGD``), forward, mean loss, backward, step;
* ``dpfair``: a step of :class:`dpfair.algorithms.DPSGDClassifier` (flat clipping, ``clip_method="auto"``:
  ghost norms with per-layer materialisation where cheaper, the clipped sum from the same records), noise
  from the secret generator, the ledger, the optimizer: the estimator's own loop, one step being the
  interval between the starts of two clipping phases, epochs 2 and 3 (calibration, set-up and the
  first epoch's one-off exactness check are left out);
* ``dpfair-fairdp``: the same with FairDP's per-group clipping rule (its histogram released each step);
* ``dpfair-vmap``: the same step with ``clip_method="vmap"`` (every per-sample gradient materialised);
* ``opacus``: Opacus's ``GradSampleModule`` hooks + ``DPOptimizer``;
* ``opacus-ghost``: Opacus's fast gradient clipping (``GradSampleModuleFastGradientClipping``, ghost
  clipping, two backward passes) + ``DPOptimizerFastGradientClipping``.

Each (method, B) runs in its own process (a fresh interpreter, the same torch threads), ``--rounds``
times in alternation, the fastest round kept (the one least disturbed by other load); a run reports
the median time of a step over its timed steps and its peak resident memory during the timed steps
above what it held when they began (Linux's ``VmHWM`` after resetting it; on a GPU the peak allocated
CUDA memory). The ratios to SGD are taken from the same run. A
scaling table fits ``time ∝ B^k`` per method by least squares on log-log.

Writes ``results/speed/private_step.{csv,md}``. Run from the repository root:
``python benchmarks/private_step.py`` (``--device cuda`` on a GPU machine, ``--batches 256 1024 4096``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

METHODS = ("sgd", "dpfair", "dpfair-fairdp", "dpfair-vmap", "opacus", "opacus-ghost")
OUT = REPO / "results" / "speed"


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024.0 for line in f if line.startswith(field))


def reset_peak() -> float:
    """Reset the process's peak resident memory (Linux ``clear_refs`` 5); returns the resident MB now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_mb("VmRSS")


def peak_since(base: float) -> float:
    """Peak resident MB since :func:`reset_peak` returned ``base``, above ``base``."""
    return _status_mb("VmHWM") - base


def cell(method: str, batch: int, steps: int, device: str, threads: int) -> dict:
    """Time ``steps`` steps of one method at batch ``batch``; returns the median step and the peak memory."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from dpfair.nn import CNN

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n = batch * steps
    g = torch.Generator().manual_seed(1)
    X = torch.rand(n, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    s = torch.randint(0, 2, (n,), generator=g)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times: list[float] = []

    if method.startswith("dpfair"):
        from dpfair.algorithms import DPSGDClassifier
        from dpfair.algorithms.clipping import make_clipping_rule

        stamps = []

        class Timed(type(make_clipping_rule("fairdp" if method == "dpfair-fairdp" else "flat"))):
            """The rule, stamping the start of each step's clipping phase: one step is one interval."""

            def clip(self, *a, **k):
                sync()
                stamps.append(time.perf_counter())
                return super().clip(*a, **k)

        est = DPSGDClassifier(model="cnn", epochs=3, batch_size=batch, epsilon=3.0, learning_rate=0.05,
                              clipping=Timed(),
                              clip_method="vmap" if method == "dpfair-vmap" else "auto",
                              model_kwargs={"image_size": 28, "in_channels": 1}, device=device,
                              groups=2 if method == "dpfair-fairdp" else None)
        marks, base = [], []

        def callback(_est, info):
            sync()
            if not marks:  # memory from the end of epoch 1 on: the steps, not calibration or set-up
                base.append(reset_peak())
                torch.cuda.reset_peak_memory_stats() if device == "cuda" else None
            marks.append(info["step"])

        args = (X.numpy(), y.numpy()) + ((s.numpy(),) if method == "dpfair-fairdp" else ())
        est.fit(*args, callback=callback)
        # the steps of epochs 2 and 3 (epoch 1 holds the one-off exactness check of the ghost path)
        times, base = list(np.diff(stamps[marks[0]:])), base[0]
    else:
        model = CNN(1, 10, image_size=28).to(device)
        Xd, yd = X.to(device), y.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        step = None
        if method == "sgd":
            def step(xb, yb):
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
        elif method == "opacus":
            from opacus import GradSampleModule
            from opacus.optimizers import DPOptimizer

            model = GradSampleModule(model)
            dp_opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), noise_multiplier=1.0,
                                 max_grad_norm=1.0, expected_batch_size=batch)

            def step(xb, yb):
                dp_opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                dp_opt.step()
        else:  # opacus-ghost
            from opacus.grad_sample import GradSampleModuleFastGradientClipping
            from opacus.optimizers import DPOptimizerFastGradientClipping
            from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

            model = GradSampleModuleFastGradientClipping(model, max_grad_norm=1.0, use_ghost_clipping=True)
            dp_opt = DPOptimizerFastGradientClipping(torch.optim.SGD(model.parameters(), lr=0.05),
                                                     noise_multiplier=1.0, max_grad_norm=1.0,
                                                     expected_batch_size=batch)
            criterion = DPLossFastGradientClipping(model, dp_opt, torch.nn.CrossEntropyLoss(reduction="mean"))

            def step(xb, yb):
                dp_opt.zero_grad()
                criterion(model(xb), yb).backward()
                dp_opt.step()
        for i in range(steps):
            rows = slice(i * batch, (i + 1) * batch)
            if i == 2:  # after two warm-up steps
                base = reset_peak()
                torch.cuda.reset_peak_memory_stats() if device == "cuda" else None
            sync()
            t0 = time.perf_counter()
            step(Xd[rows], yd[rows])
            sync()
            times.append(time.perf_counter() - t0)
        times = times[2:]  # warm-up
    peak = (torch.cuda.max_memory_allocated() / 2**20) if device == "cuda" else peak_since(base)
    return {"method": method, "batch": batch, "ms_per_step": 1e3 * statistics.median(times),
            "peak_mb": round(float(np.round(peak, 1)), 1)}


def fitted_exponent(xs, ys) -> float:
    import numpy as np

    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--steps", type=int, default=12, help="steps per epoch (dpfair) / timed steps")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every cell, alternating; the fastest kept")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--cell", nargs=2, metavar=("METHOD", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(cell(args.cell[0], int(args.cell[1]), args.steps, args.device, args.threads)))
        return

    import pandas as pd

    from _machine import load_average, machine_info

    load = load_average()
    runs, failed = [], set()
    for round_ in range(args.rounds):
        for batch in args.batches:
            for method in args.methods:
                cmd = [sys.executable, __file__, "--cell", method, str(batch), "--steps", str(args.steps),
                       "--device", args.device, "--threads", str(args.threads)]
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      env={**os.environ, "PYTHONWARNINGS": "ignore"})
                if done.returncode:  # recorded, and the other cells still run
                    print(f"{method} at batch {batch} failed:\n{done.stderr[-2000:]}", file=sys.stderr, flush=True)
                    failed.add((method, batch))
                    continue
                runs.append({**json.loads(done.stdout.strip().splitlines()[-1]), "round": round_})
                print(runs[-1], flush=True)
    # per cell, the round with the fastest median step (the least disturbed by other load)
    frame = pd.DataFrame(runs).sort_values("ms_per_step").groupby(["method", "batch"], as_index=False).first()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "private_step" if args.device == "cpu" else f"private_step_{args.device}"
    sgd = frame[frame.method == "sgd"].set_index("batch")["ms_per_step"]
    frame["x_sgd"] = [round(r.ms_per_step / sgd[r.batch], 2) for r in frame.itertuples()]
    frame = frame.drop(columns="round")
    frame["ms_per_step"] = frame["ms_per_step"].round(1)
    exponents = {m: fitted_exponent(g["batch"], g["ms_per_step"]) for m, g in frame.groupby("method")}
    mem_exponents = {m: fitted_exponent(g["batch"], g["peak_mb"].clip(lower=1.0)) for m, g in frame.groupby("method")}

    frame.to_csv(out / f"{stem}.csv", index=False)
    info = machine_info(load)
    where = f"{info['cpus']} CPUs"
    if args.device == "cuda":
        import torch

        where += f" and an {torch.cuda.get_device_name()} (torch {torch.__version__})"
    missing = sorted(f"{m} at {b}" for m, b in failed if not ((frame.method == m) & (frame.batch == b)).any())
    wide = frame.pivot(index="method", columns="batch", values="x_sgd").reindex(args.methods)
    ms = frame.pivot(index="method", columns="batch", values="ms_per_step").reindex(args.methods)
    mem = frame.pivot(index="method", columns="batch", values="peak_mb").reindex(args.methods)
    scaling = pd.DataFrame({"time exponent k (ms ∝ B^k)": pd.Series(exponents).round(2),
                            "memory exponent (MB ∝ B^k)": pd.Series(mem_exponents).round(2)}).reindex(args.methods)
    text = [
        f"# A private CNN step against SGD ({args.device}, {args.threads} torch threads)",
        "",
        f"FairDP's MNIST CNN shape (423,798 parameters, float32), 28x28 inputs. {info['date']}, "
        f"{where}, load {info['load_before']} before and {info['load_after']} after, "
        f"Python {info['python']}. Command: `python benchmarks/private_step.py "
        f"--device {args.device} --batches {' '.join(map(str, args.batches))} --rounds {args.rounds} "
        f"--threads {args.threads}"
        + ("" if args.methods == list(METHODS) else f" --methods {' '.join(args.methods)}") + "` "
        "(each cell the fastest of its rounds).",
        "",
        *([f"Failed in every round (stderr above the table in the run's log): {', '.join(missing)}.", ""]
          if missing else []),
        "## Time per step relative to SGD (same run)",
        "",
        wide.to_markdown(),
        "",
        "## Milliseconds per step (median)",
        "",
        ms.to_markdown(),
        "",
        "## Peak memory above the built model and data, MB" + (" (CUDA max allocated)" if args.device == "cuda"
                                                                 else " (resident, VmHWM)"),
        "",
        mem.to_markdown(),
        "",
        "## Scaling with the batch size (least-squares slope on log-log)",
        "",
        scaling.to_markdown(),
        "",
    ]
    (out / f"{stem}.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
