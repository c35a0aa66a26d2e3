"""DP-FERMI's MLP and CNN on MNIST: time per epoch against the same non-private training, on a CPU or a GPU.

The MNIST images on disk (``load_dataset("mnist", sensitive="inverted")``: 10 classes, group = inverted
images; the data home is ``--data`` or ``$DPFAIR_DATA``). For each model (``mlp``, ``cnn``: dpfair's named
models) and batch size B, three trainings of ``--epochs`` epochs:

* ``DP-FERMI``: :class:`dpfair.algorithms.DPFERMIClassifier` (equalized odds, λ = 0.5, ε = 3 of the group,
  Poisson batches of expected size B, step size 0.1): per-sample clipping, noise, the W ascent;
* ``ERM (dpfair)``: :class:`dpfair.algorithms.ERMClassifier`, the non-private estimator (SGD, step size 0.1,
  shuffled batches of B; it reads the loss back every step);
* ``SGD loop``: a plain PyTorch loop over the same model and batches (SGD, mean cross-entropy, no read-back).

An epoch's time is read between the ends of epochs (the estimators' ``callback``, after a device
synchronisation); the first epoch (warm-up: calibration, cuDNN's plans, the ghost path's exactness check)
is left out. The non-private trainings report the median of their other epochs; DP-FERMI, whose epochs
are ``round(n/B)`` Poisson steps (and a last short one), its time per step over the other epochs times
``n/B`` steps. The whole fit's seconds (DP-FERMI's calibration included) are shown too.
The ratios are DP-FERMI's epoch over each non-private one, from the same run. Test errors are printed as
a check that each training learnt, not as results (a few epochs, one seed).

Writes ``results/speed/dpfermi_mnist_epoch[_<device>].{csv,md}``. Run from the repository root:
``python benchmarks/dpfermi_mnist_epoch.py --device cuda``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
OUT = REPO / "results" / "speed"


def timed_fit(est, fit_args, sync) -> tuple[list[float], list[int], float]:
    """Fit ``est`` with a callback stamping each epoch's end; returns the epochs' durations, the ``step`` the
    callback reported at each end and the fit's seconds."""
    stamps, steps = [], []

    def callback(_est, info):
        sync()
        stamps.append(time.perf_counter())
        steps.append(info["step"])

    sync()
    t0 = time.perf_counter()
    est.fit(*fit_args, callback=callback)
    sync()
    ends = [t0, *stamps]
    return [b - a for a, b in itertools.pairwise(ends)], steps, time.perf_counter() - t0


def sgd_loop(model, X, y, batch: int, epochs: int, lr: float, device: str, sync) -> tuple[list[float], float, object]:
    """Plain SGD over shuffled batches (the non-private reference without an estimator around it)."""
    import torch
    import torch.nn.functional as F

    model = model.to(device)
    Xd = torch.as_tensor(X, dtype=torch.float32, device=device)
    yd = torch.as_tensor(y, dtype=torch.long, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator(device=device).manual_seed(0)
    epochs_s = []
    sync()
    t_fit = time.perf_counter()
    for _ in range(epochs):
        t0 = time.perf_counter()
        order = torch.randperm(len(yd), generator=g, device=device)
        for start in range(0, len(yd), batch):
            idx = order[start:start + batch]
            opt.zero_grad()
            F.cross_entropy(model(Xd[idx]), yd[idx]).backward()
            opt.step()
        sync()
        epochs_s.append(time.perf_counter() - t0)
    return epochs_s, time.perf_counter() - t_fit, model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--rows", type=int, default=None, help="train on the first ROWS rows only (a quick check)")
    parser.add_argument("--data", default=None, help="data home holding mnist/ (default $DPFAIR_DATA)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first epoch is the warm-up)")
    if args.data:
        os.environ["DPFAIR_DATA"] = args.data
    os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

    import numpy as np
    import pandas as pd
    import torch

    from _machine import load_average, machine_info
    from dpfair.algorithms import DPFERMIClassifier, ERMClassifier
    from dpfair.datasets import load_dataset
    from dpfair.nn import make_model

    torch.set_num_threads(args.threads)
    load = load_average()
    start = time.monotonic()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    data = load_dataset("mnist", sensitive="inverted", random_state=0)
    X, y, s = data.X_train.astype(np.float32), data.y_train, data.s_train
    if args.rows:
        X, y, s = X[:args.rows], y[:args.rows], s[:args.rows]
    rows = []

    def record(model, batch, training, epochs_s, fit_s, predict, steps=None):
        """``steps``: the step count at each epoch's end (DP-FERMI): then time per step × n/B."""
        error = float(np.mean(predict(data.X_test) != data.y_test))
        if steps is None:
            ms = 1e3 * statistics.median(epochs_s[1:])
        else:
            ms = 1e3 * sum(epochs_s[1:]) / (steps[-1] - steps[0]) * len(y) / batch
        rows.append({"model": model, "batch": batch, "training": training, "ms_per_epoch": ms,
                     "first_epoch_ms": 1e3 * epochs_s[0], "fit_s": fit_s, "epochs": args.epochs, "test_error": error})
        print(rows[-1], flush=True)

    for name in args.models:
        for batch in args.batch_sizes:
            common = {"model": name, "batch_size": batch, "epochs": args.epochs, "learning_rate": 0.1,
                      "device": args.device, "random_state": 0}
            est = DPFERMIClassifier(notion="equalized_odds", lam=0.5, epsilon=3.0, groups=data.n_groups, **common)
            epochs_s, steps, fit_s = timed_fit(est, (X, y, s), sync)
            record(name, batch, "DP-FERMI", epochs_s, fit_s, est.predict, steps)
            est = ERMClassifier(solver="minibatch", optimizer="sgd", **common)
            epochs_s, _, fit_s = timed_fit(est, (X, y), sync)
            record(name, batch, "ERM (dpfair)", epochs_s, fit_s, est.predict)
            torch.manual_seed(0)
            epochs_s, fit_s, net = sgd_loop(make_model(name, X.shape[1], 10), X, y, batch, args.epochs, 0.1,
                                            args.device, sync)

            def predict(Z, net=net):
                with torch.no_grad():
                    return net(torch.as_tensor(Z, dtype=torch.float32, device=args.device)).argmax(1).cpu().numpy()

            record(name, batch, "SGD loop", epochs_s, fit_s, predict)

    frame = pd.DataFrame(rows)
    epoch = frame.set_index(["model", "batch", "training"])["ms_per_epoch"]
    frame["dpfermi_x"] = [epoch[(r.model, r.batch, "DP-FERMI")] / r.ms_per_epoch for r in frame.itertuples()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "dpfermi_mnist_epoch" + ("" if args.device == "cpu" else f"_{args.device.replace(':', '')}")
    frame.round(4).to_csv(out / f"{stem}.csv", index=False)
    info = machine_info(load)
    where = f"{info['cpus']} CPUs, {args.threads} torch threads"
    if args.device.startswith("cuda"):
        where += f", an {torch.cuda.get_device_name()}"
    shown = frame.assign(ms_per_epoch=frame.ms_per_epoch.round(1), first_epoch_ms=frame.first_epoch_ms.round(1),
                         fit_s=frame.fit_s.round(2), test_error=frame.test_error.round(3),
                         dpfermi_x=frame.dpfermi_x.round(2)).rename(
        columns={"dpfermi_x": "DP-FERMI's epoch ÷ this one"})
    text = [
        f"# DP-FERMI on MNIST: time per epoch against non-private training ({args.device})",
        "",
        f"{info['date']}, {where} (torch {torch.__version__}), Python {info['python']}, load {info['load_before']} "
        f"before and {info['load_after']} after, {time.monotonic() - start:.0f} s in all. Command: `python "
        f"benchmarks/dpfermi_mnist_epoch.py --device {args.device} --models {' '.join(args.models)} --batch-sizes "
        f"{' '.join(map(str, args.batch_sizes))} --epochs {args.epochs} --threads {args.threads}"
        + (f" --rows {args.rows}" if args.rows else "") + "`. "
        f"{len(y):,} training rows; an epoch's time is the median over epochs 2-{args.epochs} (epoch 1 is the "
        "warm-up, shown apart; DP-FERMI: its time per step over those epochs × n/B steps); DP-FERMI: equalized "
        "odds, λ = 0.5, ε = 3 (the group), Poisson batches; the non-private trainings: SGD on shuffled batches "
        "of the same size, step size 0.1 for all.",
        "",
        data.description,
        "",
        shown.to_markdown(index=False),
        "",
    ]
    (out / f"{stem}.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
