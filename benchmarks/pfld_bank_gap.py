"""Why PF-LD on Bank reads 0.53–0.65 accuracy against the paper's 0.80 (issue 31): one factor at a time.

The reproduction specs (``pf-ld-fig1``, ``pf-ld-fig4``, ``pf-ld-fig5``) train PF-LD on Bank (``"pf-ld"`` preset)
at ε = 1 with ``dual_tolerance = 0`` (the paper's dual update) and 10 epochs; the paper's 0.80 (Table 2) is its
non-private, unconstrained network CLF.  This script starts from the spec's set-up and changes one thing at a time
toward the paper's text or toward what our presets allow: the dual tolerance τ, the dual step s_λ, the clipping
bounds C_p and C_d, epochs, model size, optimiser and learning rate, the split (the spec's 75/25 split against
5-fold cross-validation), the preprocessing (label codes against one-hot, duration kept or dropped), and the
reference points (the majority class of each Bank file, CLF, PF-LD without noise, PF-LD without noise at the
multiplier the private run ends at).  Each cell: ``SEEDS`` seeds (the split and the initialisation; the DP noise
comes from a fresh secret generator every fit), mean ± sd of held-out accuracy and of the demographic-parity
violation of the hard predictions (largest gap between two groups, as the sweep and Table 2 measure it).

Diagnostics per run, from public fitted attributes: the largest final multiplier λ and the standard deviation, per
parameter coordinate and per step, of the noise PF-LD adds to its primal gradient at that λ,
``max_g(λ_g/ñ_g) / q · σ_p · C_p`` (``pfld.py``: the step uses ``(W/q)(clipped sum + N(0, σ_p² C_p²))``).

``--table`` adds Table 2's other rows (income, compas, bank with 2, 3 and 5 age groups; accuracy parity,
demographic parity, equalized odds): PF-LD at ε = 1 with τ = 0 and τ = auto beside CLF, same split and seeds.

``--gradient`` (alone) measures the scale of the signal: the norm of the minibatch loss gradient of the non-private
network after 1 and 20 epochs.

Run from the repository root: ``python benchmarks/pfld_bank_gap.py [--table | --only-table | --compare |
--gradient] [--quick]``.  Writes ``results/experiments/pf-ld-bank-gap/``: ``runs.csv`` per fit, ``cells.csv`` per
cell, ``table.csv`` with ``--table``, ``table2_published.csv`` (its CLF beside Table 2's published cells; also
``--compare`` alone), ``loss_gradient.csv`` with ``--gradient``, ``run_*.md`` (command, date, machine, wall time);
the ``README.md`` beside them is written by hand from these.  ``--quick`` (one seed, a fifth of the epochs) writes
under ``.../quick/``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse
import contextlib
import functools
import math
import time
import warnings

import torch

torch.set_num_threads(1)

import numpy as np
import pandas as pd
from _machine import load_average, machine_info
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from dpfair.algorithms.erm import ERMClassifier
from dpfair.algorithms.fairlearn_wrappers import ReductionsClassifier
from dpfair.algorithms.pfld import PFLDClassifier
from dpfair.datasets import load_dataset
from dpfair.fairness import (
    accuracy_parity_violation,
    demographic_parity_violation,
    equalized_odds_violation,
)

OUT = REPO / "results" / "experiments" / "pf-ld-bank-gap"
SEEDS = (0, 1, 2)
EPSILON, DELTA = 1.0, 1e-5
#: The spec's PF-LD (pf-ld-fig5 with no value missing, pf-ld-fig1's Bank cells): every cell changes one of these.
SPEC = {"model": "mlp", "notion": "demographic_parity", "epsilon": EPSILON, "delta": DELTA, "dual_tolerance": 0.0,
        "epochs": 10, "primal_clip": 10.0, "dual_clip": 5.0, "dual_learning_rate": 1.0, "learning_rate": 1e-3,
        "optimizer": "adam", "batch_size": 256}
PRESET = ("bank", {"preset": "pf-ld"})

#: (factor, label, method, PF-LD overrides, data).  method: "pfld", "clf", "majority", "reductions";
#: data: "preset" (the spec's load_dataset split), "cv" (5-fold CV on the pooled preset), or a loader variant.
CELLS = [
    ("reference", "majority class, Kaggle file (the spec's data)", "majority", {}, "preset"),
    ("reference", "majority class, UCI bank-full.csv (45,211 rows)", "majority", {}, "full"),
    ("reference", "CLF: MLP 64-64, non-private, unconstrained (20 epochs, Adam 1e-3)", "clf", {}, "preset"),
    ("reference", "CLF on one-hot categories, duration dropped (the loader's default Bank)", "clf", {}, "onehot"),
    ("reference", "reductions: non-private fair logistic regression (fairlearn EG, bound 0.01)", "reductions", {},
     "preset"),
    ("reference", "PF-LD without noise (ε = ∞), τ = 0: the paper's F-LD", "pfld", {"epsilon": math.inf}, "preset"),
    ("reference", "PF-LD without noise (ε = ∞), λ fixed at 1.0 (s_λ = 0): the spec's final λ, no noise", "pfld",
     {"epsilon": math.inf, "lambda_init": 1.0, "dual_learning_rate": 0.0}, "preset"),
    ("spec", "spec: ε = 1, τ = 0, 10 epochs, C_p = 10, C_d = 5, s_λ = 1, Adam 1e-3, MLP 64-64, 75/25 split",
     "pfld", {}, "preset"),
    ("dual tolerance", "τ = auto (dpfair's default: 3 noise sd)", "pfld", {"dual_tolerance": "auto"}, "preset"),
    ("dual step", "s_λ = 0.1", "pfld", {"dual_learning_rate": 0.1}, "preset"),
    ("dual step", "s_λ = 0.01", "pfld", {"dual_learning_rate": 0.01}, "preset"),
    ("clipping", "C_p = 1", "pfld", {"primal_clip": 1.0}, "preset"),
    ("clipping", "C_p = 0.1", "pfld", {"primal_clip": 0.1}, "preset"),
    ("clipping", "C_d = 0.5 (probabilities: C_d enters as min(C_d, 1), so 5 and 1 are the same)", "pfld",
     {"dual_clip": 0.5}, "preset"),
    ("epochs", "3 epochs", "pfld", {"epochs": 3}, "preset"),
    ("epochs", "30 epochs", "pfld", {"epochs": 30}, "preset"),
    ("model size", "logistic regression", "pfld", {"model": "logistic"}, "preset"),
    ("model size", "MLP 16-16", "pfld", {"model_kwargs": {"hidden": (16, 16)}}, "preset"),
    ("model size", "MLP 128-128", "pfld", {"model_kwargs": {"hidden": (128, 128)}}, "preset"),
    ("optimiser", "Adam, learning rate 1e-4", "pfld", {"learning_rate": 1e-4}, "preset"),
    ("optimiser", "Adam, learning rate 1e-2", "pfld", {"learning_rate": 1e-2}, "preset"),
    ("optimiser", "SGD, learning rate 1e-2", "pfld", {"optimizer": "sgd", "learning_rate": 1e-2}, "preset"),
    ("optimiser", "SGD, learning rate 1e-1", "pfld", {"optimizer": "sgd", "learning_rate": 1e-1}, "preset"),
    ("split", "5-fold CV (stratified label × group) on the pooled rows, as Table 2", "pfld", {}, "cv"),
    ("preprocessing", "one-hot categories (loader default), duration kept", "pfld", {}, "onehot_duration"),
    ("preprocessing", "one-hot categories, duration dropped (loader default)", "pfld", {}, "onehot"),
    ("public shares", "group shares public (no private counts release)", "pfld", {"group_proportions": "public"},
     "preset"),
    ("privacy", "ε = 5", "pfld", {"epsilon": 5.0}, "preset"),
    ("privacy", "ε = 50", "pfld", {"epsilon": 50.0}, "preset"),
    ("combined", "C_p = 1, s_λ = 0.1", "pfld", {"primal_clip": 1.0, "dual_learning_rate": 0.1}, "preset"),
    ("combined", "SGD 1e-1, C_p = 1", "pfld", {"optimizer": "sgd", "learning_rate": 1e-1, "primal_clip": 1.0},
     "preset"),
    ("combined", "SGD 1e-2, s_λ = 0.1", "pfld", {"optimizer": "sgd", "learning_rate": 1e-2, "dual_learning_rate": 0.1},
     "preset"),
    ("combined", "logistic regression, SGD 1e-1, C_p = 1", "pfld",
     {"model": "logistic", "optimizer": "sgd", "learning_rate": 1e-1, "primal_clip": 1.0}, "preset"),
]

DATA = {
    "preset": ("bank", {"preset": "pf-ld"}),
    "onehot_duration": ("bank", {"keep_duration": True}),
    "onehot": ("bank", {}),
    "full": ("bank", {"variant": "full"}),
}

#: Table 2's rows (its name → loader, options) and notions, for ``--table``.
TABLE = {
    "income": ("adult", {"preset": "pf-ld"}),
    "compas": ("compas", {"preset": "pf-ld"}),
    "bank": ("bank", {"preset": "pf-ld", "n_groups": 2}),
    "mbank3": ("bank", {"preset": "pf-ld", "n_groups": 3}),
    "mbank5": ("bank", {"preset": "pf-ld", "n_groups": 5}),
}
VIOLATIONS = {
    "accuracy_parity": lambda y, p, s: accuracy_parity_violation(y, p, s),
    "demographic_parity": lambda y, p, s: demographic_parity_violation(p, s),
    "equalized_odds": lambda y, p, s: equalized_odds_violation(y, p, s),
}


def primal_noise_std(est: PFLDClassifier) -> float:
    """Per-coordinate std of the noise on one primal step at the final multipliers: ``max_g(λ_g/ñ_g)/q · σ_p C_p``
    (0 without noise or when every λ is 0)."""
    lam = np.asarray(est.lambdas_).max(axis=1)
    weight = float(np.max(lam / np.asarray(est.group_sizes_)))
    return weight / est.sampling_probability_ * float(est.noise_multiplier_) * float(est.primal_clip)


def make(method: str, overrides: dict, seed: int, k: int, y, s, epochs_scale: float, notion="demographic_parity"):
    if method == "clf":
        return ERMClassifier("mlp", epochs=max(1, round(20 * epochs_scale)), learning_rate=1e-3, random_state=seed)
    if method == "reductions":
        return ReductionsClassifier(LogisticRegression(max_iter=200), notion=notion, max_iter=15, random_state=seed)
    params = {**SPEC, "notion": notion, **overrides, "random_state": seed, "groups": k}
    params["epochs"] = max(1, round(params["epochs"] * epochs_scale))
    if params.get("group_proportions") == "public":  # the shares of the training rows, declared public
        params["group_proportions"] = np.bincount(s, minlength=k) / len(s)
    return PFLDClassifier(**params)


def evaluate(est, method: str, X, y, s, Xt, yt, st, notion="demographic_parity") -> dict:
    row = {"acc": math.nan, "violation": math.nan, "positive_rate": math.nan, "lambda_max": math.nan,
           "primal_noise": math.nan, "epsilon_spent": math.nan, "seconds": math.nan}
    start = time.perf_counter()
    if method == "majority":
        pred = np.full(len(yt), int(np.bincount(y).argmax()))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y, sensitive_features=s)
        pred = est.predict(Xt)
    row["seconds"] = time.perf_counter() - start
    row.update(acc=float(np.mean(pred == yt)), violation=float(VIOLATIONS[notion](yt, pred, st)),
               positive_rate=float(np.mean(pred == 1)))
    if isinstance(est, PFLDClassifier):
        row.update(lambda_max=float(np.max(est.lambdas_)), primal_noise=primal_noise_std(est),
                   epsilon_spent=float(est.privacy_spent_[0]))
    return row


def splits(data: str, seed: int):
    """``(X, y, s, Xt, yt, st, k)`` of each train/test split of one cell and seed."""
    if data == "cv":
        d = load_dataset(*PRESET[:1], **PRESET[1])
        X, y, s = np.vstack([d.X_train, d.X_test]), np.concatenate([d.y_train, d.y_test]), \
            np.concatenate([d.s_train, d.s_test])
        for train, test in StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y * d.n_groups + s):
            yield X[train], y[train], s[train], X[test], y[test], s[test], d.n_groups
        return
    loader, options = DATA[data]
    d = load_dataset(loader, random_state=seed, **options)
    yield d.X_train, d.y_train, d.s_train, d.X_test, d.y_test, d.s_test, d.n_groups


def run_gap(seeds, epochs_scale: float, log) -> pd.DataFrame:
    rows = []
    for i, (factor, label, method, overrides, data) in enumerate(CELLS):
        for seed in seeds:
            for fold, (X, y, s, Xt, yt, st, k) in enumerate(splits(data, seed)):
                est = None if method == "majority" else make(method, overrides, seed, k, y, s, epochs_scale)
                row = dict(cell=i, factor=factor, label=label, method=method, data=data, seed=seed, fold=fold,
                           **evaluate(est, method, X, y, s, Xt, yt, st))
                rows.append(row)
        part = pd.DataFrame([r for r in rows if r["cell"] == i])
        log(f"{factor:15s} {label[:70]:70s} acc {part.acc.mean():.3f} ± {part.acc.std():.3f}  "
            f"dp {part.violation.mean():.3f} ± {part.violation.std():.3f}  λ {part.lambda_max.mean():.2f}  "
            f"noise {part.primal_noise.mean():.3g}  ({part.seconds.sum():.0f} s)")
    return pd.DataFrame(rows)


def run_table(seeds, epochs_scale: float, log) -> pd.DataFrame:
    rows = []
    for name, (loader, options) in TABLE.items():
        for seed in seeds:
            d = load_dataset(loader, random_state=seed, **options)
            data = (d.X_train, d.y_train, d.s_train, d.X_test, d.y_test, d.s_test)
            clf = make("clf", {}, seed, d.n_groups, d.y_train, d.s_train, epochs_scale)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clf.fit(d.X_train, d.y_train, sensitive_features=d.s_train)
            pred = clf.predict(d.X_test)
            for notion, violation in VIOLATIONS.items():
                rows.append({"dataset": name, "notion": notion, "method": "clf", "seed": seed,
                             "acc": float(np.mean(pred == d.y_test)),
                             "violation": float(violation(d.y_test, pred, d.s_test)),
                             "lambda_max": math.nan, "primal_noise": math.nan})
                for tol in (0.0, "auto"):
                    est = make("pfld", {"dual_tolerance": tol}, seed, d.n_groups, d.y_train, d.s_train,
                               epochs_scale, notion=notion)
                    row = evaluate(est, "pfld", *data, notion=notion)
                    rows.append(dict(dataset=name, notion=notion, method=f"pf_ld τ={tol}", seed=seed,
                                     **{k: row[k] for k in ("acc", "violation", "lambda_max", "primal_noise")}))
        part = pd.DataFrame([r for r in rows if r["dataset"] == name])
        log(part.groupby(["notion", "method"])[["acc", "violation"]].mean().round(3).to_string())
    return pd.DataFrame(rows)


def loss_gradient_scale(seeds) -> pd.DataFrame:
    """Norm of the minibatch (256 rows) loss gradient of the non-private MLP 64-64 after 1 and 20 epochs: the
    signal the primal noise is compared with (per coordinate: the norm over √(number of parameters))."""
    d = load_dataset(*PRESET[:1], **PRESET[1])
    X, y = torch.tensor(d.X_train, dtype=torch.float32), torch.tensor(d.y_train)
    rows = []
    for seed in seeds:
        for epochs in (1, 20):
            model = ERMClassifier("mlp", epochs=epochs, learning_rate=1e-3, random_state=seed).fit(
                d.X_train, d.y_train).model_
            params = list(model.parameters())
            rng = np.random.default_rng(seed)
            for _ in range(20):
                idx = torch.as_tensor(rng.choice(len(X), 256, replace=False))
                grads = torch.autograd.grad(torch.nn.functional.cross_entropy(model(X[idx]), y[idx]), params)
                norm = float(torch.sqrt(sum((g ** 2).sum() for g in grads)))
                rows.append({"seed": seed, "epochs": epochs, "norm": norm,
                             "per_coordinate": norm / math.sqrt(sum(p.numel() for p in params))})
    return pd.DataFrame(rows)


def compare_published(table: pd.DataFrame) -> pd.DataFrame:
    """Table 2's published cells (CLF only: the rest is withheld) beside ours: this split's mean and sd over the
    seeds, and the 5-fold CV mean of ``results/pfld_table.csv``; ``differs``: more than 0.02 from the paper."""
    from pfld_table import (
        published_cells,  # the published numbers, as benchmarks/pfld_table.py reads them
    )

    paper = published_cells()
    ours = table[table.method == "clf"].groupby(["dataset", "notion"]).agg(
        acc=("acc", "mean"), acc_sd=("acc", "std"), fv=("violation", "mean"), fv_sd=("violation", "std"))
    cv = pd.read_csv(REPO / "results" / "pfld_table.csv")
    cv = cv[cv.method == "clf"].set_index(["dataset", "notion"])
    rows = []
    for r in paper.itertuples():
        key = (r.dataset, r.notion)
        value, sd = ours.loc[key, r.metric], ours.loc[key, f"{r.metric}_sd"]
        rows.append({"dataset": r.dataset, "notion": r.notion, "metric": r.metric, "paper": r.paper,
                     "paper_sd": r.paper_std, "split_75_25": value, "split_sd": sd,
                     "cv_5fold": cv.loc[key, f"{r.metric}_mean"], "differs_75_25": abs(value - r.paper) > 0.02,
                     "differs_cv": abs(cv.loc[key, f"{r.metric}_mean"] - r.paper) > 0.02})
    return pd.DataFrame(rows)


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    return raw.groupby(["cell", "factor", "label"], sort=True).agg(
        runs=("acc", "size"), acc_mean=("acc", "mean"), acc_sd=("acc", "std"), dp_mean=("violation", "mean"),
        dp_sd=("violation", "std"), positive_rate=("positive_rate", "mean"), lambda_max=("lambda_max", "mean"),
        primal_noise=("primal_noise", "mean"), epsilon_spent=("epsilon_spent", "max")).reset_index()


def fmt(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "∞" if math.isinf(v) else f"{v:.{digits}f}"


def gap_table(cells: pd.DataFrame) -> list[str]:
    lines = [("| # | factor | set-up (one change from the spec) | runs | accuracy | DP violation | predicted 1 | "
              "final λ_max | primal noise sd |"), "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in cells.itertuples():
        lines.append(f"| {r.cell} | {r.factor} | {r.label} | {r.runs} | {fmt(r.acc_mean)} ± {fmt(r.acc_sd)} | "
                     f"{fmt(r.dp_mean)} ± {fmt(r.dp_sd)} | {fmt(r.positive_rate, 2)} | {fmt(r.lambda_max, 2)} | "
                     f"{fmt(r.primal_noise, 3)} |")
    return lines


def table_lines(raw: pd.DataFrame) -> list[str]:
    t = raw.groupby(["dataset", "notion", "method"], sort=False).agg(
        acc=("acc", "mean"), acc_sd=("acc", "std"), fv=("violation", "mean"), fv_sd=("violation", "std"),
        lam=("lambda_max", "mean"), noise=("primal_noise", "mean")).reset_index()
    lines = ["| dataset | notion | method | accuracy | violation | final λ_max | primal noise sd |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in t.itertuples():
        lines.append(f"| {r.dataset} | {r.notion} | {r.method} | {fmt(r.acc)} ± {fmt(r.acc_sd)} | {fmt(r.fv)} ± "
                     f"{fmt(r.fv_sd)} | {fmt(r.lam, 2)} | {fmt(r.noise, 3)} |")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="also Table 2's other rows (τ = 0 and auto beside CLF)")
    ap.add_argument("--only-table", action="store_true", help="Table 2's rows only")
    ap.add_argument("--compare", action="store_true", help="only compare table.csv's CLF with the published cells")
    ap.add_argument("--gradient", action="store_true", help="the scale of the loss gradient (CLF, batch 256)")
    ap.add_argument("--quick", action="store_true", help="one seed, a fifth of the epochs (smoke run)")
    args = ap.parse_args(argv)
    seeds, scale = ((0,), 0.2) if args.quick else (SEEDS, 1.0)
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python benchmarks/pfld_bank_gap.py" + "".join(
        f" --{k.replace('_', '-')}" for k, v in vars(args).items() if v)
    log = functools.partial(print, flush=True)
    if not (args.only_table or args.gradient or args.compare):
        with timed(out / "run_gap.md", cmd, "the Bank factors (runs.csv, cells.csv, gap_table.md)"):
            raw = run_gap(seeds, scale, log)
            raw.to_csv(out / "runs.csv", index=False)
            summarise(raw).to_csv(out / "cells.csv", index=False)
            (out / "gap_table.md").write_text("\n".join(gap_table(summarise(raw))) + "\n")
    if args.gradient:
        with timed(out / "run_gradient.md", cmd, "the loss gradient's scale (loss_gradient.csv)"):
            grad = loss_gradient_scale(seeds)
            grad.to_csv(out / "loss_gradient.csv", index=False)
            log(grad.groupby("epochs")[["norm", "per_coordinate"]].agg(["mean", "std"]).to_string())
    if args.table or args.only_table:
        with timed(out / "run_table.md", cmd, "Table 2's rows (table.csv, table2_rows.md)"):
            table = run_table(seeds, scale, log)
            table.to_csv(out / "table.csv", index=False)
            (out / "table2_rows.md").write_text("\n".join(table_lines(table)) + "\n")
    if args.compare or args.table or args.only_table:
        compare_published(pd.read_csv(out / "table.csv")).to_csv(out / "table2_published.csv", index=False)
    print(f"wrote {out}")


@contextlib.contextmanager
def timed(path: Path, cmd: str, what: str):
    """Run the block and write, to ``path``, the command, the part, the date, the machine and the wall time."""
    load_before, start = load_average(), time.perf_counter()
    yield
    wall = time.perf_counter() - start
    info = machine_info(load_before)
    path.write_text(f"`{cmd}`, {what}: {wall / 60:.1f} min wall time, one CPU thread; {info['date']} UTC, "
                    f"{info['machine']}, {info['cpus']} CPUs (shared), load {info['load_before']} → "
                    f"{info['load_after']}, Python {info['python']}.\n")
    print(f"{what}: {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()
