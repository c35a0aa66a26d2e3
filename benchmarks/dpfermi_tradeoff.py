"""DP-FERMI's tabular experiments (Lowy et al., ICLR 2023, Figures 2-3), honestly accounted, and its speed.

For each data set (adult/sex, credit/SEX, parkinsons/sex; 3:1 split, logistic regression, batch 1024,
δ = 1/n², group proportions released with 5 % of ε) and each notion (demographic parity, equalized odds):
DP-FERMI over ε ∈ {0.5, 1, 3, 9, ∞} × an 11-point λ grid × seeds, all trained as one batched
computation per (data set, notion) by :func:`dpfair.algorithms.fit_dpfermi_grid`; DP-SGD (record-level,
a stronger guarantee) at each ε and the non-private ERM as reference points. Violations are the paper's
eq. 10 (DP) and eq. 11 (EO): max over ŷ (and y) and pairs of groups.

The timed sweep is the issue's: adult, demographic parity, 4 ε × 11 λ × 15 seeds × 200 epochs. The
speed ratio compares its time per model-epoch with a straightforward one-model PyTorch loop of
Algorithm 1 (per-batch autograd, noise added to the batch gradients, as the paper's code trains),
measured in the same run.

Writes ``results/dpfermi/points.csv`` (every model), ``summary.csv`` / ``summary.md`` (lowest violation
at error ≤ non-private error + 0.01 / + 0.03, per data set, notion and ε), ``timing.md`` and one figure
per data set and notion. Run from the repository root: ``python benchmarks/dpfermi_tradeoff.py``
(``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from dpfair.algorithms import DPSGDClassifier, ERMClassifier, fit_dpfermi_grid  # noqa: E402
from dpfair.datasets import load_dataset  # noqa: E402
from dpfair.fairness import demographic_parity_violation, equalized_odds_violation  # noqa: E402

EPSILONS = [0.5, 1.0, 3.0, 9.0]
LAMBDAS = [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0]
DATASETS = {"adult": "sex", "credit": "sex", "parkinsons": "sex"}
NOTIONS = {"demographic_parity": "dp", "equalized_odds": "eo"}
#: the paper's published DP-FERMI curve on adult at ε = 1 (demographic parity), read off its Figure 2
#: as quoted in the issue: non-private error ≈ 0.159; violation ≈ 0.087 at error ≤ 0.169, ≈ 0.010 at ≤ 0.189.
PUBLISHED = {("adult", "demographic_parity", 1.0): (0.087, 0.010)}
OUT = REPO / "results" / "dpfermi"


def violations(data, y_pred) -> dict:
    return {"error": float(np.mean(y_pred != data.y_test)),
            "dp": demographic_parity_violation(y_pred, data.s_test),
            "eo": equalized_odds_violation(data.y_test, y_pred, data.s_test)}


def dpfermi_rows(data, notion, epsilons, seeds, epochs, name):
    """Fit the whole grid as one batched computation; one row per model."""
    n = len(data.y_train)
    scale = 50.0 / epochs  # the 50-epoch default step sizes, scaled so that lr × steps stays the same
    t0 = time.perf_counter()
    ests = fit_dpfermi_grid(
        data.X_train, data.y_train, data.s_train,
        {"epsilon": epsilons, "lam": LAMBDAS, "random_state": seeds},
        notion=notion, epochs=epochs, batch_size=1024, delta=1.0 / n**2, groups=data.n_groups,
        learning_rate=0.5 * scale, w_learning_rate=0.02 * scale)
    seconds = time.perf_counter() - t0
    print(f"{name} {notion}: {len(ests)} models in {seconds:.1f} s; releasing all of them together spends "
          f"epsilon={ests.privacy_spent[0]:.4g} (each model its own ε)", flush=True)
    rows = [{"dataset": name, "notion": notion, "method": "dp-fermi", "epsilon": e.epsilon, "lam": e.lam,
             "seed": e.random_state, "epsilon_spent": e.privacy_spent_[0], **violations(data, e.predict(data.X_test))}
            for e in ests]
    return rows, seconds, len(ests)


def baseline_rows(data, name, seeds, epsilons):
    rows = []
    for seed in seeds:
        erm = ERMClassifier(epochs=20, random_state=seed).fit(data.X_train, data.y_train)
        rows.append({"dataset": name, "method": "erm", "epsilon": math.inf, "seed": seed, "epsilon_spent": math.inf,
                     **violations(data, erm.predict(data.X_test))})
        for eps in epsilons:
            dpsgd = DPSGDClassifier(epsilon=eps, epochs=20, batch_size=1024, classes=data.n_classes,
                                    random_state=seed)
            dpsgd.fit(data.X_train, data.y_train)
            rows.append({"dataset": name, "method": "dp-sgd", "epsilon": eps, "seed": seed,
                         "epsilon_spent": dpsgd.privacy_spent_[0], **violations(data, dpsgd.predict(data.X_test))})
    return rows


def naive_algorithm1_seconds_per_epoch(data, epochs: int = 2, lam: float = 1.0, sigma: float = 27.0) -> float:
    """Algorithm 1 for one model the straightforward way: per-batch autograd, noise on the batch gradients."""
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
    t0 = time.perf_counter()
    for _ in range(int(epochs / q)):
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


def frontier_summary(points: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (name, notion), grid in points[points.method == "dp-fermi"].groupby(["dataset", "notion"]):
        metric = NOTIONS[notion]
        base = points[(points.dataset == name) & (points.method == "erm")].error.mean()
        means = grid.groupby(["epsilon", "lam"])[["error", metric]].mean().reset_index()
        for eps, curve in means.groupby("epsilon"):
            row = {"dataset": name, "notion": notion, "epsilon": eps, "nonprivate_error": round(base, 4)}
            for slack in (0.01, 0.03):
                ok = curve[curve.error <= base + slack]
                row[f"violation_at_+{slack}"] = round(float(ok[metric].min()), 4) if len(ok) else float("nan")
                pub = PUBLISHED.get((name, notion, eps))
                row[f"published_at_+{slack}"] = pub[0 if slack == 0.01 else 1] if pub else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def plot(points: pd.DataFrame, name: str, notion: str) -> None:
    metric = NOTIONS[notion]
    sub = points[points.dataset == name]
    fermi = sub[(sub.method == "dp-fermi") & (sub.notion == notion)]
    eps_all = sorted(fermi.epsilon.unique(), key=lambda e: (math.isinf(e), e))
    finite = [e for e in eps_all if not math.isinf(e)]
    fig, axes = plt.subplots(1, len(finite), figsize=(4 * len(finite), 3.6), sharey=True, squeeze=False)
    inf_curve = fermi[np.isinf(fermi.epsilon)].groupby("lam")[["error", metric]].mean()
    erm = sub[sub.method == "erm"][["error", metric]].mean()
    for ax, eps in zip(axes[0], finite):
        curve = fermi[fermi.epsilon == eps].groupby("lam")[["error", metric]].mean()
        ax.plot(curve[metric], curve.error, "o-", label=f"DP-FERMI ε={eps:g}")
        ax.plot(inf_curve[metric], inf_curve.error, "s--", color="grey", label="FERMI (ε=∞)")
        dpsgd = sub[(sub.method == "dp-sgd") & (sub.epsilon == eps)][["error", metric]].mean()
        ax.plot(dpsgd[metric], dpsgd.error, "^", color="red", ms=9, label="DP-SGD")
        ax.plot(erm[metric], erm.error, "*", color="black", ms=12, label="ERM (non-private)")
        ax.set_xlabel(f"{notion.replace('_', ' ')} violation")
        ax.set_title(f"{name}, ε = {eps:g}")
    axes[0, 0].set_ylabel("test error")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / f"{name}_{notion}.png", dpi=110)
    plt.close(fig)


def timing_row(args, count: int, seconds: float) -> dict:
    return {"sweep": f"adult, demographic_parity, {len(EPSILONS)} ε × {len(LAMBDAS)} λ × {args.timed_seeds} seeds "
                     f"× {args.epochs} epochs", "models": count, "seconds": round(seconds, 1),
            "ms_per_model_epoch": round(1e3 * seconds / count / args.epochs, 3)}


def write_timing(args, timing: list[dict]) -> None:
    """The sweep's time against the one-model loop's, both measured now with the same torch threads."""
    naive = naive_algorithm1_seconds_per_epoch(load_dataset("adult", sensitive="sex", random_state=0))
    ours = timing[0]["ms_per_model_epoch"] / 1e3
    text = (f"# DP-FERMI sweep timing (this machine, {args.threads} torch thread(s) for both)\n\n"
            + pd.DataFrame(timing).to_markdown(index=False)
            + f"\n\nOne-model PyTorch loop of Algorithm 1 (per-batch autograd): {1e3 * naive:.1f} ms per epoch "
            f"on adult.\nOur batched sweep: {1e3 * ours:.3f} ms per model-epoch, **{naive / ours:.0f}×** faster "
            "per model (and ours clips per sample, which the loop does not).\n")
    (OUT / "timing.md").write_text(text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds of every grid but the timed one")
    parser.add_argument("--timed-seeds", type=int, default=15, help="seeds of the timed adult sweep")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for every timed computation")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, 5 epochs, adult only")
    parser.add_argument("--timing-only", action="store_true",
                        help="only the timed adult sweep and the one-model loop: rewrite timing.md")
    args = parser.parse_args()
    if args.quick:
        args.datasets, args.seeds, args.timed_seeds, args.epochs = ["adult"], 2, 2, 5
    torch.set_num_threads(args.threads)
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.timing_only:
        data = load_dataset("adult", sensitive="sex", random_state=0)
        _, seconds, count = dpfermi_rows(data, "demographic_parity", EPSILONS, list(range(args.timed_seeds)),
                                         args.epochs, "adult")
        write_timing(args, [timing_row(args, count, seconds)])
        return
    rows, timing = [], []
    for name in args.datasets:
        data = load_dataset(name, sensitive=DATASETS[name], random_state=0)
        for notion in NOTIONS:
            timed = name == "adult" and notion == "demographic_parity"
            seeds = list(range(args.timed_seeds if timed else args.seeds))
            if timed:
                r, seconds, count = dpfermi_rows(data, notion, EPSILONS, seeds, args.epochs, name)
                timing.append(timing_row(args, count, seconds))
                rows += r
                r, _, _ = dpfermi_rows(data, notion, [math.inf], seeds, args.epochs, name)
            else:
                r, seconds, _ = dpfermi_rows(data, notion, EPSILONS + [math.inf], seeds, args.epochs, name)
            rows += r
            print(f"{name} {notion}: done at {time.perf_counter() - start:.0f} s", flush=True)
        rows += baseline_rows(data, name, list(range(min(args.seeds, 3))), EPSILONS)
    points = pd.DataFrame(rows)
    points.to_csv(OUT / "points.csv", index=False)
    summary = frontier_summary(points)
    summary.to_csv(OUT / "summary.csv", index=False)
    (OUT / "summary.md").write_text(
        "# DP-FERMI: lowest violation at error ≤ non-private error + slack (means over seeds)\n\n"
        "Non-private error: logistic ERM on the same split. Published: the paper's DP-FERMI curve where the "
        "issue quotes it (adult, ε = 1, demographic parity); other published values are not available offline.\n\n"
        + summary.to_markdown(index=False) + "\n")
    for name in args.datasets:
        for notion in NOTIONS:
            plot(points, name, notion)
    if timing:
        write_timing(args, timing)
    print(summary.to_string(index=False))
    print(f"total wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
