"""DP-FERMI with the CNN on images: MNIST digits, group = an image-derived attribute.

The paper's UTKFace images are not available offline, so the CNN path is shown on the MNIST images on
disk (``load_dataset("mnist", sensitive="inverted")``: a fixed random 30 % of the images have inverted
pixels, the group says which; 10 classes, 2 groups). Equalized odds (conditional ERMI, one W per
digit) at ε = 3 of the sensitive attribute, against the non-private CNN (ERM) and DP-FERMI with λ = 0.
The per-sample gradients of the CNN go through ``torch.func``. Any image folder works the same way:
flatten the images into X, pass the group as ``sensitive_features`` and ``model="cnn"`` with
``model_kwargs={"image_size": (H, W), "in_channels": C}``.

Writes ``results/dpfermi/mnist_cnn.csv`` and ``.md``. Run from the repository root:
``python benchmarks/dpfermi_mnist_cnn.py`` (``--epochs`` to change the training length).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from dpfair.algorithms import DPFERMIClassifier, ERMClassifier  # noqa: E402
from dpfair.datasets import load_dataset  # noqa: E402
from dpfair.fairness import accuracy_parity_violation, equalized_odds_violation  # noqa: E402

OUT = REPO / "results" / "dpfermi"


def row(name, est, data, seconds):
    y_pred = est.predict(data.X_test)
    acc = {g: float(np.mean(y_pred[data.s_test == i] == data.y_test[data.s_test == i]))
           for i, g in enumerate(data.group_names)}
    return {"model": name, "test_error": float(np.mean(y_pred != data.y_test)),
            "equalized_odds": equalized_odds_violation(data.y_test, y_pred, data.s_test),
            "accuracy_parity": accuracy_parity_violation(data.y_test, y_pred, data.s_test),
            **{f"accuracy_{g}": a for g, a in acc.items()},
            "epsilon": est.privacy_spent_[0], "fit_seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset("mnist", sensitive="inverted", random_state=0)
    rows = []
    t0 = time.perf_counter()
    erm = ERMClassifier(model="cnn", epochs=args.epochs, batch_size=128, learning_rate=1e-3, random_state=0)
    erm.fit(data.X_train, data.y_train)
    rows.append(row("CNN, non-private (ERM)", erm, data, time.perf_counter() - t0))
    for epsilon, lam in ((float("inf"), 0.0), (float("inf"), 0.5), (args.epsilon, 0.0), (args.epsilon, 0.1)):
        t0 = time.perf_counter()
        est = DPFERMIClassifier(model="cnn", notion="equalized_odds", lam=lam, epsilon=epsilon, batch_size=256,
                                epochs=args.epochs, groups=data.n_groups, random_state=0)
        est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
        rows.append(row(f"CNN, DP-FERMI ε={epsilon:g} λ={lam:g}", est, data, time.perf_counter() - t0))
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "mnist_cnn.csv", index=False)
    (OUT / "mnist_cnn.md").write_text(
        f"# DP-FERMI with the CNN on MNIST (group: inverted images), ε = {args.epsilon:g} of the group, "
        f"{args.epochs} epochs, CPU ({args.threads} threads)\n\n{data.description}\n\n"
        + table.round(4).to_markdown(index=False) + "\n")
    print(table.round(4).to_string(index=False))


if __name__ == "__main__":
    main()
