"""PF-LD Table 2's non-private baseline (CLF) on Bank: our ``erm`` as logistic regression and as the paper's network.

The reproduction specs' baseline is dpfair's ``erm`` method, a logistic regression; the paper's CLF is a network with
two hidden layers. This measures both on the folds of ``benchmarks/pfld_table.py`` (the pooled rows of
``load_dataset("bank", preset="pf-ld")``, ``StratifiedKFold(5, shuffle=True, random_state=0)`` on label × group):
accuracy and each notion's violation, mean ± sd over the folds, non-private. It is the measurement behind the
``[[figure.explain]]`` entries of ``src/dpfair/experiments/specs/pf-ld-fig1.toml``.

Writes ``results/experiments/pf-ld-bank-gap/clf_models.md`` (about a minute):

    nice -n 10 python benchmarks/pfld_clf_models.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _machine import load_average, machine_info  # noqa: E402
from pfld_table import DATASETS, EPOCHS, NOTIONS, VIOLATIONS, pooled  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402

from dpfair.algorithms import ERMClassifier  # noqa: E402

OUT = REPO / "results" / "experiments" / "pf-ld-bank-gap" / "clf_models.md"
MODELS = {"logistic (the specs' erm)": {"model": "logistic"},
          "MLP 64-64, 20 epochs (the paper's CLF)": {"model": "mlp", "epochs": EPOCHS["clf"], "learning_rate": 1e-3}}


def main() -> None:
    load, start = load_average(), time.perf_counter()
    X, y, s, k = pooled(*DATASETS["bank"])
    scores = {name: [] for name in MODELS}
    for fold, (train, test) in enumerate(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y * k + s)):
        for name, kw in MODELS.items():
            pred = ERMClassifier(random_state=fold, **kw).fit(X[train], y[train], s[train]).predict(X[test])
            scores[name].append([float(np.mean(pred == y[test]))]
                                + [float(VIOLATIONS[n](y[test], pred, s[test])) for n in NOTIONS])
    machine = machine_info(load)
    lines = ["# PF-LD Table 2's CLF on Bank: logistic regression against the paper's network", "",
             f"`nice -n 10 python benchmarks/pfld_clf_models.py` — {machine['date']}, {machine['cpus']} CPUs, "
             f"{time.perf_counter() - start:.0f} s. Non-private, the 5 folds of `benchmarks/pfld_table.py`; mean ± sd "
             "over the folds.", "",
             "| model | accuracy | " + " | ".join(f"{n} violation" for n in NOTIONS) + " |",
             "|---|---|" + "---|" * len(NOTIONS)]
    for name, rows in scores.items():
        v = np.array(rows)
        lines.append(f"| {name} | " + " | ".join(f"{m:.3f} ± {sd:.3f}" for m, sd in
                                                    zip(v.mean(axis=0), v.std(axis=0, ddof=1))) + " |")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
