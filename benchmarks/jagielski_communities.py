"""Jagielski et al.'s two private fair learners on Communities and Crime, equalized odds, over ε.

Reproduces the shape of the comparison in *Differentially Private Fair Learning* (ICML 2019):
DP post-processing (Algorithm 1) of a logistic regression, and the DP oracle learner (Algorithm 2)
in its A-blind and A-aware variants, for ε ∈ {0.5, 1, 2, 5, 10, ∞}, privacy of the sensitive
attribute (race), several seeds (each its own train/test split and noise). The non-private logistic
regression is the reference row. Errors and violations are those of the randomized classifiers in
expectation on the test set: error ``mean |y − P(Ỹ = 1)|`` and equalized-odds violation
``max_y |E[P(Ỹ = 1) | Y = y, S = 0] − E[P(Ỹ = 1) | Y = y, S = 1]|``.

Run from the repository root: ``python benchmarks/jagielski_communities.py``. Writes
``results/jagielski/communities.{csv,md,png}`` and prints the table and the wall time.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms.dp_oracle import DPOracleClassifier
from dpfair.algorithms.dp_postprocess import DPPostProcessingClassifier
from dpfair.datasets import load_dataset

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

os.environ.setdefault("DPFAIR_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))

EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
SEEDS = (0, 1, 2, 3, 4)
OUT = Path("results/jagielski")


def expected_metrics(p1: np.ndarray, y: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    error = float(np.mean(np.where(y == 1, 1.0 - p1, p1)))
    gaps = [max(p1[(y == c) & (s == r)].mean() for r in np.unique(s))
            - min(p1[(y == c) & (s == r)].mean() for r in np.unique(s)) for c in (0, 1)]
    return error, float(max(gaps))


def methods(base, eps: float, seed: int, k: int):
    # the base uses X and y only, public under the sensitive-attribute unit: fitted once per split
    yield "dp-postprocess", DPPostProcessingClassifier(base, prefit=True, epsilon=eps, groups=k, random_state=seed)
    for aware, name in ((False, "dp-oracle"), (True, "dp-oracle-aware")):
        yield name, DPOracleClassifier(aware, epsilon=eps, groups=k, random_state=seed)


def run() -> pd.DataFrame:
    rows = []
    for seed in SEEDS:
        d = load_dataset("communities", random_state=seed)
        base = LogisticRegression(max_iter=1000).fit(d.X_train, d.y_train)
        err, eo = expected_metrics(base.predict(d.X_test).astype(float), d.y_test, d.s_test)
        rows.append(dict(method="logistic (non-private)", epsilon=math.inf, seed=seed, error=err, eo=eo,
                         epsilon_spent=math.inf))
        for eps in EPSILONS:
            for name, est in methods(base, eps, seed, d.n_groups):
                est.fit(d.X_train, d.y_train, sensitive_features=d.s_train)
                err, eo = expected_metrics(est.predict_proba(d.X_test, sensitive_features=d.s_test)[:, 1],
                                           d.y_test, d.s_test)
                rows.append(dict(method=name, epsilon=eps, seed=seed, error=err, eo=eo,
                                 epsilon_spent=est.privacy_spent_[0]))
    return pd.DataFrame(rows)


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    table = raw.groupby(["method", "epsilon"], sort=False).agg(
        error_mean=("error", "mean"), error_std=("error", "std"), eo_mean=("eo", "mean"), eo_std=("eo", "std"),
        epsilon_spent_max=("epsilon_spent", "max"), seeds=("seed", "count")).reset_index()
    return table


def markdown(table: pd.DataFrame) -> str:
    lines = ["| method | ε | error mean | error std | EO violation mean | EO violation std |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in table.itertuples():
        lines.append(f"| {r.method} | {'∞' if math.isinf(r.epsilon) else f'{r.epsilon:g}'} | {r.error_mean:.3f} | "
                     f"{r.error_std:.3f} | {r.eo_mean:.3f} | {r.eo_std:.3f} |")
    return "\n".join(lines) + "\n"


def plot(table: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    finite = [e for e in EPSILONS if not math.isinf(e)]
    x_of = {e: (e if not math.isinf(e) else 2 * max(finite)) for e in EPSILONS}
    for name, part in table.groupby("method", sort=False):
        x = [x_of[e] for e in part.epsilon]
        for ax, col in zip(axes, ("error", "eo")):
            if len(part) == 1:
                ax.axhline(part[f"{col}_mean"].iloc[0], color="grey", linestyle="--", label=name)
            else:
                ax.errorbar(x, part[f"{col}_mean"], yerr=part[f"{col}_std"], marker="o", capsize=3, label=name)
    for ax, title in zip(axes, ("test error", "equalized-odds violation")):
        ax.set_xscale("log")
        ax.set_xticks([x_of[e] for e in EPSILONS], [f"{e:g}" if not math.isinf(e) else "∞" for e in EPSILONS])
        ax.set_xlabel("ε (privacy of race)")
        ax.set_title(f"Communities and Crime: {title}")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    start = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    raw = run()
    table = summarise(raw)
    assert (raw.epsilon_spent <= raw.epsilon + 1e-9).all(), "a method spent more than its target"
    table.to_csv(OUT / "communities.csv", index=False)
    (OUT / "communities.md").write_text(markdown(table))
    plot(table, OUT / "communities.png")
    print(markdown(table))
    print(f"wall time: {time.perf_counter() - start:.1f} s ({len(SEEDS)} seeds, {len(raw)} fits)")


if __name__ == "__main__":
    main()
