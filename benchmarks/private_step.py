"""A private training step against plain SGD, dpfair against Opacus, on this machine's CPU (or a GPU).

Two models (``--model``):

* ``cnn`` (the default): FairDP's MNIST CNN shape (``dpfair.nn.CNN`` defaults: two 5x5 convolutions with 16
  and 32 channels, two Linear layers, 423,798 parameters), float32, on 28x28 inputs;
* ``resnet18``: a ResNet-18 (the ImageNet layout: 7x7 stem, max-pool, four stages of two basic blocks,
  11,181,642 parameters with 10 classes) with ``GroupNorm(32, c)`` wherever it would hold BatchNorm
  (BatchNorm mixes the examples of a batch, which per-example clipping cannot bound), float32, on 3x32x32
  inputs; ``torchvision.models.resnet18`` where torchvision imports, else the same network defined below.
  Every ``nn.ReLU`` is made out-of-place (``inplace = False``) for every method, so the comparison stays
  fair: torchvision's in-place ReLUs modify the outputs of Opacus's backward hooks, which autograd refuses.

For every batch size B a step is timed for

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
the median and the fastest (best) step over its timed steps and its peak memory during the timed steps
above what it held when they began (Linux's ``VmHWM`` after resetting it; on a GPU the peak allocated
CUDA memory less the memory allocated when the timed steps began). The ratios to SGD are taken from the
same run. A scaling table fits ``time ∝ B^k`` per method by least squares on log-log. A cell that runs
out of GPU memory is recorded as ``OOM``, one that outlasts ``--cell-timeout`` as ``timeout``, and the
cells left when ``--budget`` seconds have passed as ``skipped``; the tables are written all the same
(the CSV also after every cell, so a run stopped from outside keeps what it measured). ``--skip METHOD:BATCH``
leaves cells out (blank in the tables).

The dpfair cells first try the ghost path alone on a few rows (``clip_method="ghost"``) and report
whether the model takes it: ``"auto"`` falls back to materialising every per-sample gradient where it
does not.

``--profile B`` instead runs ``--profile-methods`` (dpfair and sgd) at batch B under ``torch.profiler``
over the timed steps and writes the top operators by device (CUDA) time, then by CPU time, to
``<stem>_profile.txt``.

Writes ``results/speed/private_step[_<device>][_<model>].{csv,md}`` (no model suffix for the CNN). Run
from the repository root: ``python benchmarks/private_step.py`` (``--device cuda`` on a GPU machine,
``--batches 256 1024 4096``, ``--model resnet18``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

METHODS = ("sgd", "dpfair", "dpfair-fairdp", "dpfair-vmap", "opacus", "opacus-ghost")
MODELS = ("cnn", "resnet18")
OUT = REPO / "results" / "speed"
#: the input of each model: (channels, height, width); rows are flattened images
SHAPES = {"cnn": (1, 28, 28), "resnet18": (3, 32, 32)}
WARMUP = 2  # untimed steps of the baselines before the timed ones


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


def resnet18_groupnorm(n_classes: int = 10):
    """ResNet-18 with ``GroupNorm(32, c)`` for BatchNorm: torchvision's where it imports, else the same layout
    built here (stem conv 7x7/2 + max-pool 3x3/2, stages of 64/128/256/512 channels with two basic blocks each,
    1x1 projections where the shape changes, average pool, Linear). Returns ``(module, where it came from)``."""
    from torch import nn

    def norm(c):
        return nn.GroupNorm(32, c)

    try:
        from torchvision.models import resnet18
    except ImportError:
        pass
    else:
        return resnet18(num_classes=n_classes, norm_layer=norm), "torchvision.models.resnet18"

    class Basic(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), norm(c_out), nn.ReLU(),
                nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), norm(c_out))
            self.skip = (nn.Identity() if stride == 1 and c_in == c_out else
                         nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), norm(c_out)))

        def forward(self, x):
            return (self.body(x) + self.skip(x)).relu()

    stages, c_in = [], 64
    for c, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        stages += [Basic(c_in, c, stride), Basic(c, c, 1)]
        c_in = c
    net = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), norm(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                        *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(512, n_classes))
    return net, "local definition (torchvision not importable)"


def _out_of_place_block(block):
    """A residual block's forward as torchvision's ``BasicBlock``, the residual sum out of place."""
    def forward(x):
        out = block.relu(block.bn1(block.conv1(x)))
        out = block.bn2(block.conv2(out))
        identity = x if block.downsample is None else block.downsample(x)
        return block.relu(out + identity)
    return forward


def build_model(name: str):
    """The benchmark's model on flattened rows: ``(module, where it came from)``."""
    import torch
    from torch import nn

    from dpfair.nn import CNN

    if name == "cnn":
        return CNN(1, 10, image_size=28), "dpfair.nn.CNN"
    net, source = resnet18_groupnorm(10)
    for m in net.modules():  # Opacus's hooks cannot take in-place ReLUs: out-of-place for every method
        if isinstance(m, nn.ReLU):
            m.inplace = False
        if type(m).__name__ == "BasicBlock" and hasattr(m, "conv1"):  # torchvision's ``out += identity``: also
            m.forward = _out_of_place_block(m)  # in place on a hooked output, which Opacus cannot take either
    shape = SHAPES[name]

    class Images(nn.Module):
        """Flattened rows as images (the estimator takes 2-D X); the reshape is a view, no parameters."""

        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x.reshape(x.shape[0], *shape))

    return Images(), source


def out_of_memory(err: BaseException) -> bool:
    import torch

    text = str(err)
    return isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in text or "ALLOC_FAILED" in text


def ghost_check(model, X, y) -> str:
    """Whether ``model`` takes the ghost path (``"yes"``), tried alone on four rows; else the refusal."""
    import copy

    import torch.nn.functional as F

    from dpfair.nn import GhostUnsupportedError, clipped_gradient_sum

    try:
        clipped_gradient_sum(copy.deepcopy(model), lambda o, t: F.cross_entropy(o, t, reduction="sum"),
                             X[:4], y[:4], 1.0, method="ghost")
    except GhostUnsupportedError as err:
        return f"no: {err}"[:300]
    return "yes"


class Profile:
    """``torch.profiler`` over the timed steps of a cell: :meth:`start` at the first, :meth:`write` after the last."""

    def __init__(self, path: str | None, device: str):
        self.path, self.device, self.prof, self.t0, self.wall = path, device, None, 0.0, None

    def start(self) -> None:
        if self.path is None or self.prof is not None:
            return
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device == "cuda" else [])
        self.prof = profile(activities=acts)
        self.prof.start()
        self.t0 = time.perf_counter()

    def stop(self) -> None:
        if self.prof is None or self.wall is not None:
            return
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()
        self.wall = time.perf_counter() - self.t0
        self.prof.stop()

    def write(self, header: str, steps: int) -> None:
        if self.prof is None:
            return
        self.stop()
        wall = self.wall
        events = self.prof.key_averages()
        device_us = sum(getattr(e, "self_device_time_total", 0) for e in events)
        launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel",
                                                              "cudaLaunchKernelExC", "cuLaunchKernelEx"))
        lines = [header,
                 (f"{steps} steps profiled: {1e3 * wall / max(steps, 1):.2f} ms per step wall (profiler on), "
                  f"{device_us / 1e3 / max(steps, 1):.2f} ms per step of device (kernel) time, "
                  f"{launches / max(steps, 1):.0f} kernel launches per step."), ""]
        if self.device == "cuda":
            lines += ["Top 20 by self device (CUDA) time:",
                      events.table(sort_by="self_device_time_total", row_limit=20, max_name_column_width=60), ""]
        lines += ["Top 15 by self CPU time:",
                  events.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=60), ""]
        Path(self.path).write_text("\n".join(lines))


def cell(method: str, batch: int, steps: int, device: str, threads: int, model_name: str = "cnn",
         profile: str | None = None) -> dict:
    """Time ``steps`` steps of one method at batch ``batch``: the median and best step and the peak memory;
    ``status`` "OOM" where the GPU's memory ran out."""
    import torch

    head = {"method": method, "batch": batch}
    try:
        return {**head, **_cell(method, batch, steps, device, threads, model_name, profile)}
    except (torch.cuda.OutOfMemoryError, RuntimeError) as err:
        if not out_of_memory(err):
            raise
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
        print(f"{method} at batch {batch}: out of memory: {str(err).splitlines()[0][:200]}", file=sys.stderr)
        return {**head, "status": "OOM", "peak_mb": round(peak, 1)}


def _cell(method, batch, steps, device, threads, model_name, profile) -> dict:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n = batch * steps
    g = torch.Generator().manual_seed(1)
    X = torch.rand(n, math.prod(SHAPES[model_name]), generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    s = torch.randint(0, 2, (n,), generator=g)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    cuda = device == "cuda"
    prof = Profile(profile, device)
    times: list[float] = []
    model, source = build_model(model_name)
    n_params = sum(p.numel() for p in model.parameters())
    extra = {"params": n_params, "model_source": source}

    if method.startswith("dpfair"):
        from dpfair.algorithms import DPSGDClassifier
        from dpfair.algorithms.clipping import make_clipping_rule

        extra["ghost"] = ghost_check(model.to(device), X[:4].to(device), y[:4].to(device))
        model = model.cpu()
        stamps = []

        class Timed(type(make_clipping_rule("fairdp" if method == "dpfair-fairdp" else "flat"))):
            """The rule, stamping the start of each step's clipping phase: one step is one interval."""

            def clip(self, *a, **k):
                sync()
                stamps.append(time.perf_counter())
                return super().clip(*a, **k)

        named = model_name == "cnn"  # the estimator's own CNN, as a user names it
        est = DPSGDClassifier(model="cnn" if named else model, epochs=3, batch_size=batch, epsilon=3.0,
                              learning_rate=0.05, clipping=Timed(),
                              clip_method="vmap" if method == "dpfair-vmap" else "auto",
                              model_kwargs={"image_size": 28, "in_channels": 1} if named else None, device=device,
                              groups=2 if method == "dpfair-fairdp" else None, classes=10)
        marks, base = [], []

        def callback(_est, info):
            sync()
            if not marks:  # memory from the end of epoch 1 on: the steps, not calibration or set-up
                base.append(torch.cuda.memory_allocated() / 2**20 if cuda else reset_peak())
                torch.cuda.reset_peak_memory_stats() if cuda else None
                prof.start()
            marks.append(info["step"])
            if info["step"] == info["steps"]:  # the last step: the profile ends before the fit's final accounting
                prof.stop()

        args = (X.numpy(), y.numpy()) + ((s.numpy(),) if method == "dpfair-fairdp" else ())
        est.fit(*args, callback=callback)
        # the steps of epochs 2 and 3 (epoch 1 holds the one-off exactness check of the ghost path)
        times, base = list(np.diff(stamps[marks[0]:])), base[0]
        profiled = marks[-1] - marks[0]
    else:
        model = model.to(device)
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
        elif method == "opacus-ghost":
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
        else:
            raise ValueError(f"unknown method {method!r}")
        for i in range(steps):
            rows = slice(i * batch, (i + 1) * batch)
            if i == WARMUP:
                sync()
                base = torch.cuda.memory_allocated() / 2**20 if cuda else reset_peak()
                torch.cuda.reset_peak_memory_stats() if cuda else None
                prof.start()
            sync()
            t0 = time.perf_counter()
            step(Xd[rows], yd[rows])
            sync()
            times.append(time.perf_counter() - t0)
        times = times[WARMUP:]
        profiled = len(times)
    peak = (torch.cuda.max_memory_allocated() / 2**20 - base) if cuda else peak_since(base)
    prof.write(f"# {method}, batch {batch}, model {model_name} ({source}, {n_params:,} parameters), {device}"
               + (f" ({torch.cuda.get_device_name()}, torch {torch.__version__})" if cuda else
                  f" (torch {torch.__version__}, {threads} threads)"), profiled)
    return {"status": "ok", "ms_per_step": 1e3 * statistics.median(times), "ms_best": 1e3 * min(times),
            "steps_timed": len(times), "peak_mb": round(float(np.round(peak, 1)), 1),
            "base_mb": round(float(base), 1), **extra}


def fitted_exponent(xs, ys) -> float:
    import numpy as np

    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def stem_of(device: str, model: str) -> str:
    return ("private_step" if device == "cpu" else f"private_step_{device}") + ("" if model == "cnn" else f"_{model}")


def run_cell(args, method: str, batch: int, timeout: float, profile: str | None = None) -> dict:
    """One cell in a fresh interpreter; a crash, a timeout or a memory error becomes the cell's status."""
    cmd = [sys.executable, __file__, "--cell", method, str(batch), "--steps", str(args.steps),
           "--device", args.device, "--threads", str(args.threads), "--model", args.model]
    if profile:
        cmd += ["--profile-out", profile]
    head = {"method": method, "batch": batch}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        print(f"{method} at batch {batch}: timed out after {timeout:.0f} s", file=sys.stderr, flush=True)
        return {**head, "status": "timeout"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        print(f"{method} at batch {batch} failed:\n{done.stderr[-2000:]}", file=sys.stderr, flush=True)
        return {**head, "status": "failed"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="cnn", choices=MODELS)
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--steps", type=int, default=12, help="steps per epoch (dpfair) / timed steps")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every cell, alternating; the fastest kept")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--cell-timeout", type=float, default=600.0, help="seconds before a cell is stopped")
    parser.add_argument("--skip", nargs="+", default=[], metavar="METHOD:BATCH",
                        help="cells not to run (left blank in the tables), e.g. opacus:4096")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the whole run: cells not started by then are recorded as skipped")
    parser.add_argument("--profile", type=int, metavar="BATCH", default=None,
                        help="profile --profile-methods at this batch instead of timing the table")
    parser.add_argument("--profile-methods", nargs="+", default=["dpfair", "sgd"], choices=METHODS)
    parser.add_argument("--cell", nargs=2, metavar=("METHOD", "BATCH"), help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    try:
        skip = {(m, int(b)) for m, b in (c.split(":") for c in args.skip)}
    except ValueError:
        parser.error(f"--skip takes METHOD:BATCH pairs such as opacus:4096, got {' '.join(args.skip)}")
    if args.cell:
        print(json.dumps(cell(args.cell[0], int(args.cell[1]), args.steps, args.device, args.threads, args.model,
                              args.profile_out)))
        return
    start = time.monotonic()
    deadline = math.inf if args.budget is None else start + args.budget
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem_of(args.device, args.model)
    if args.profile is not None:
        profile(args, out / f"{stem}_profile.txt", deadline)
        return

    import pandas as pd

    from _machine import load_average, machine_info

    load = load_average()
    runs = []
    for round_ in range(args.rounds):
        for batch in args.batches:
            for method in args.methods:
                if (method, batch) in skip:
                    continue
                left = deadline - time.monotonic()
                if left < 5:
                    runs.append({"method": method, "batch": batch, "status": "skipped", "round": round_})
                    continue
                runs.append({**run_cell(args, method, batch, min(args.cell_timeout, left)), "round": round_})
                print(runs[-1], flush=True)
                pd.DataFrame(runs).to_csv(out / f"{stem}.csv", index=False)  # what is measured so far
    write_tables(args, pd.DataFrame(runs), out, stem, load, machine_info, time.monotonic() - start)


def profile(args, path: Path, deadline: float) -> None:
    """``--profile``: each of ``--profile-methods`` at one batch under torch.profiler, into one text file."""
    parts = []
    for method in args.profile_methods:
        part = path.with_name(f"{path.stem}_{method}.txt")
        left = deadline - time.monotonic()
        if left < 5:
            parts.append(f"# {method}: skipped (the time budget was spent)\n")
            continue
        res = run_cell(args, method, args.profile, min(args.cell_timeout, left), profile=str(part))
        print(res, flush=True)
        if part.exists():
            parts.append(part.read_text())
            part.unlink()
        else:
            parts.append(f"# {method}, batch {args.profile}: {res.get('status')} (no profile)\n")
    path.write_text("\n\n".join(parts))
    print(path.read_text())


def write_tables(args, runs, out: Path, stem: str, load: str, machine_info, seconds: float) -> None:
    """The CSV and Markdown tables of a run: per cell the fastest round that finished, else its status."""
    import pandas as pd

    ok = runs[runs.status == "ok"]
    frame = (ok.sort_values("ms_per_step").groupby(["method", "batch"], as_index=False).first() if len(ok)
             else pd.DataFrame(columns=["method", "batch", "status"]))
    if len(frame):
        sgd_med = frame[frame.method == "sgd"].set_index("batch")["ms_per_step"]
        sgd_best = frame[frame.method == "sgd"].set_index("batch")["ms_best"]
        frame["x_sgd"] = [round(r.ms_per_step / sgd_med[r.batch], 2) if r.batch in sgd_med.index else float("nan")
                          for r in frame.itertuples()]
        frame["x_sgd_best"] = [round(r.ms_best / sgd_best[r.batch], 2) if r.batch in sgd_best.index
                               else float("nan") for r in frame.itertuples()]
        frame["ms_per_step"] = frame["ms_per_step"].round(1)
        frame["ms_best"] = frame["ms_best"].round(1)
    # cells that never finished: the status of their last attempt
    done = set(zip(frame.method, frame.batch)) if len(frame) else set()
    lost = (runs[[(m, b) not in done for m, b in zip(runs.method, runs.batch)]]
            .groupby(["method", "batch"], as_index=False).last())
    table = pd.concat([frame, lost[["method", "batch", "status"] + (["peak_mb"] if "peak_mb" in lost else [])]],
                      ignore_index=True)
    table = table.drop(columns=[c for c in ("round",) if c in table])
    table.to_csv(out / f"{stem}.csv", index=False)

    def wide(column: str):
        cells = {(r.method, r.batch): (getattr(r, column) if r.status == "ok" else r.status)
                 for r in table.itertuples()}
        return (pd.DataFrame([{"method": m, **{b: cells.get((m, b), "") for b in args.batches}}
                              for m in args.methods]).set_index("method"))

    exponents, mem_exponents = {}, {}
    for m, grp in frame.groupby("method") if len(frame) else []:
        if grp.batch.nunique() >= 2:
            exponents[m] = fitted_exponent(grp["batch"], grp["ms_per_step"])
            mem_exponents[m] = fitted_exponent(grp["batch"], grp["peak_mb"].clip(lower=1.0))
    scaling = pd.DataFrame({"time exponent k (ms ∝ B^k)": pd.Series(exponents, dtype=float).round(2),
                            "memory exponent (MB ∝ B^k)": pd.Series(mem_exponents, dtype=float).round(2)}
                           ).reindex(args.methods)
    info = machine_info(load)
    where = f"{info['cpus']} CPUs"
    if args.device == "cuda":
        import torch

        where += f" and an {torch.cuda.get_device_name()} (torch {torch.__version__})"
    if args.model == "cnn":
        what = "FairDP's MNIST CNN shape (423,798 parameters, float32), 28x28 inputs"
    else:
        src = frame.model_source.iloc[0] if len(frame) and "model_source" in frame else "?"
        params = int(frame.params.iloc[0]) if len(frame) and "params" in frame else 0
        what = (f"ResNet-18 with GroupNorm(32, c) for BatchNorm ({src}, {params:,} parameters, float32), "
                "3x32x32 inputs, 10 classes, every ReLU out-of-place for every method (torchvision's in-place "
                "ReLUs modify the outputs of Opacus's backward hooks, which autograd refuses)")
    ghost = sorted({(r.method, r.ghost) for r in frame.itertuples() if isinstance(getattr(r, "ghost", None), str)})
    statuses = sorted(f"{r.method} at {r.batch}: {r.status}" for r in table.itertuples() if r.status != "ok")
    command = (f"python benchmarks/private_step.py --device {args.device} --model {args.model} "
               f"--batches {' '.join(map(str, args.batches))} --steps {args.steps} --rounds {args.rounds} "
               f"--threads {args.threads}"
               + ("" if args.methods == list(METHODS) else f" --methods {' '.join(args.methods)}")
               + ("" if args.budget is None else f" --budget {args.budget:g}")
               + (f" --skip {' '.join(args.skip)}" if args.skip else "")
               + f" --cell-timeout {args.cell_timeout:g}")
    mem_title = ("(CUDA max allocated, less what was allocated when the timed steps began)" if args.device == "cuda"
                 else "(resident, VmHWM)")
    text = [
        f"# A private {args.model} step against SGD ({args.device}, {args.threads} torch threads)",
        "",
        (f"{what}. {info['date']}, {where}, load {info['load_before']} before and {info['load_after']} after, "
         f"Python {info['python']}, {seconds:.0f} s in all. Command: `{command}` (each cell the fastest of its "
         f"rounds; the baselines time {args.steps - WARMUP} steps after {WARMUP} warm-up steps, dpfair the "
         f"{2 * args.steps} steps of epochs 2-3 of its own loop, on Poisson batches"
         + (", padded to bucketed sizes)." if args.device.startswith("cuda") else ").")),
        "",
        *([(f"Cells without a time (OOM: out of GPU memory; timeout; skipped: the run's time budget was spent; "
            f"failed: the log has its error): {', '.join(statuses)}."), ""] if statuses else []),
        *([(f"Ghost path taken by dpfair's clipped sum (tried alone on four rows): "
            f"{'; '.join(f'{m}: {gh}' for m, gh in ghost)}."), ""] if ghost else []),
        "## Time per step relative to SGD, median step (same run)",
        "",
        wide("x_sgd").to_markdown(),
        "",
        "## Time per step relative to SGD, best step (same run)",
        "",
        wide("x_sgd_best").to_markdown(),
        "",
        "## Milliseconds per step (median)",
        "",
        wide("ms_per_step").to_markdown(),
        "",
        "## Milliseconds per step (best)",
        "",
        wide("ms_best").to_markdown(),
        "",
        f"## Peak memory above the built model and data, MB {mem_title}",
        "",
        wide("peak_mb").to_markdown(),
        "",
        "## Scaling with the batch size (least-squares slope on log-log, cells with a time)",
        "",
        scaling.to_markdown(),
        "",
    ]
    (out / f"{stem}.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
