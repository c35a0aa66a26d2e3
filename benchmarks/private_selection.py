"""Private model selection (``dpfair tune``) against the non-privately selected DP-FERMI trade-off curve.

For each data set (the ``dp-fermi`` preset: adult, credit, parkinsons), notion (demographic parity,
equalized odds), total ε and seed, :class:`dpfair.selection.PrivateSearch` picks λ of DP-FERMI (the
reproduction's set-up: logistic regression, 200 epochs, batch 1024, the λ list of the
``dp-fermi-figures`` spec) with the search's default validation, with the whole search within ε. Since
34f7df0 that default holds out no part for this logistic model: every run trains and is scored on the
whole train part (before, 80 % and 20 %). The chosen model's test error and violation are compared with

* the curve's own choice on the same split (seed): the ``dp-fermi-figures`` sweep's models of that seed
  at per-model ε (each model trained on the whole train part), the one of least test violation among
  those within 0.01 of the non-private test error (ERM's), chosen on the test part with no accounting:
  its per-model ε is ε, its total is that of its models composed plus a choice no ledger counts;
* the curve itself at the tuned model's error: the Pareto front of the sweep's seed-averaged points
  (``points.csv``) at that ε, interpolated.

The paper's published curves (Lowy et al. 2023, Figs. 2-4, 7-9) are images whose numbers the text does
not give (``dpfair/experiments/published/dp-fermi.toml``), so the comparison is with our committed
reproduction of them, ``results/experiments/dp-fermi-figures/``; and, for adult, demographic parity at
ε = 1, with the two readings of Fig. 2 that our issue 4 quotes (:data:`PUBLISHED`, :func:`published_bound`).

Writes ``results/selection/selection.csv`` (one row per search), ``summary.csv`` / ``summary.md``
(per data set, notion and ε) and ``tradeoff.png``. Run from the repository root, niced on a shared
machine: ``nice -n 19 python benchmarks/private_selection.py`` (``--help`` for subsets).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import dp_accounting as dpa  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from dpfair.algorithms import DPFERMIClassifier  # noqa: E402
from dpfair.algorithms.dpfermi.estimator import dpfermi_plan  # noqa: E402
from dpfair.datasets import load_dataset  # noqa: E402
from dpfair.experiments import evaluate  # noqa: E402
from dpfair.experiments.runner import declared_estimator  # noqa: E402
from dpfair.privacy import epsilon_of  # noqa: E402
from dpfair.selection import PrivateSearch  # noqa: E402

OUT = REPO / "results" / "selection"
CURVE = REPO / "results" / "experiments" / "dp-fermi-figures"

#: The reproduction's DP-FERMI set-up (src/dpfair/experiments/specs/dp-fermi-figures.toml).
PARAMS = {"epochs": 200, "batch_size": 1024, "learning_rate": 0.125, "w_learning_rate": 0.005}
LAMBDAS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 4.0, 8.0, 16.0, 32.0]
SLACK = 0.01


#: Readings of the paper's published DP-FERMI curve (Lowy et al. 2023, Fig. 2, adult, demographic parity,
#: ε = 1) as our issue 4 quotes them: the non-private model errs 0.159 (violation ≈ 0.20), and the curve's
#: least violation is about 0.087 among its points of error ≤ 0.169 and about 0.010 among those ≤ 0.189.
PUBLISHED = {("adult", "demographic_parity", 1.0): {"erm": 0.159, "points": ((0.169, 0.087), (0.189, 0.010))}}


def published_bound(dataset: str, notion: str, epsilon: float, error: float) -> float:
    """A lower bound on the published curve's violation at test ``error`` (NaN where no reading applies).

    The curve is a Pareto front: its violation does not rise with the error. Its least violation among the
    points of error ≤ e_p being v_p, every point of error ≤ e_p has violation ≥ v_p; so at an error e the
    curve is ≥ v_p of the first reading with e ≤ e_p. A model below that bound beats the curve at its error
    whatever the figure shows between the readings.
    """
    reading = PUBLISHED.get((dataset, notion, float(epsilon)))
    if reading is None:
        return math.nan
    return next((v for e, v in reading["points"] if error <= e), math.nan)


def curve_choice(models: pd.DataFrame, dataset: str, notion: str, epsilon: float, seed: int, lambdas) -> dict:
    """The sweep's model of least test violation within ``SLACK`` of ERM's test error, on this seed's split."""
    erm = models[(models.method == "erm") & (models.dataset == dataset) & (models.seed == seed)]
    rows = models[(models.method == "dp-fermi") & (models.dataset == dataset) & (models.notion == notion)
                  & (models.epsilon == epsilon) & (models.seed == seed) & models.lam.isin(lambdas)]
    if erm.empty or rows.empty:
        return {}
    base = float(erm.error.iloc[0])
    within = rows[rows.error <= base + SLACK]
    pick = within.loc[within.violation.idxmin()] if not within.empty else rows.loc[rows.error.idxmin()]
    return {"curve_lam": float(pick.lam), "curve_error": float(pick.error), "curve_violation": float(pick.violation),
            "erm_error": base, "curve_models": len(rows), "curve_delta": float(pick.delta_spent)}


def curve_at(points: pd.DataFrame, dataset: str, notion: str, epsilon: float, error: float) -> float:
    """The violation of the seed-averaged Pareto front at ``error`` (linear between its points; flat beyond)."""
    front = points[(points.dataset == dataset) & (points.notion == notion) & (points.method == "dp-fermi")
                   & (points.epsilon == epsilon) & points.pareto].sort_values("error")
    if front.empty:
        return math.nan
    return float(np.interp(error, front.error.to_numpy(), front.violation.to_numpy()))


def composed_epsilon(data, n_models: int, epsilon: float, delta: float) -> float:
    """ε of releasing ``n_models`` DP-FERMI fits of the reproduction's plan at per-model ε (all of the curve's)."""
    n = len(data.y_train)
    q = min(1.0, PARAMS["batch_size"] / n)
    plan = dpfermi_plan(q, math.ceil(PARAMS["epochs"] / q), 0.05)
    event = plan.event(plan.calibrate(epsilon, delta, "sensitive"))
    return epsilon_of(dpa.SelfComposedDpEvent(event, n_models), delta, "sensitive")


def search(dataset: str, notion: str, epsilon: float, seed: int, lambdas, mean_runs, strategy: str
           ) -> tuple[dict, object]:
    data = load_dataset(dataset, preset="dp-fermi", random_state=seed, test_size=0.25)
    est = declared_estimator(DPFERMIClassifier, {**PARAMS, "notion": notion, "random_state": seed}, data)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = PrivateSearch(est, {"lam": lambdas}, epsilon=epsilon, notion=notion, max_error_increase=SLACK,
                              mean_runs=mean_runs, strategy=strategy, random_state=seed)
        found.fit(data.X_train, data.y_train, data.s_train)
    seconds = time.perf_counter() - t0
    best = found.best_estimator_
    result = evaluate(best, data.X_test, data.y_test, data.s_test)
    selection = best.selection_
    return {"dataset": dataset, "notion": notion, "epsilon": epsilon, "seed": seed,
            "epsilon_total": best.privacy_spent_[0], "delta": best.privacy_spent_[1],
            "strategy": selection["strategy"],
            "per_model_epsilon": selection["per_model_epsilon"], "lam": best.lam_,
            "released_score": selection["released_score"], "reference_error": selection["score"]["reference_error"],
            "error": result["error"], "violation": result["fairness"][notion], "seconds": seconds}, data


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (dataset, notion, epsilon), g in runs.groupby(["dataset", "notion", "epsilon"], sort=False):
        beats = g.violation < g.curve_at_error
        reading = PUBLISHED.get((dataset, notion, float(epsilon)))
        if reading is None:
            published = "—"
        else:  # at the tuned model's own test error, and at the same distance above each one's non-private error
            absolute = [published_bound(dataset, notion, epsilon, e) for e in g.error]
            relative = [published_bound(dataset, notion, epsilon, e - b + reading["erm"])
                        for e, b in zip(g.error, g.erm_error)]
            published = " / ".join(f"{int(np.sum(g.violation.to_numpy() < np.array(b)))}/{len(g)}"
                                   for b in (absolute, relative))
        rows.append({
            "dataset": dataset, "notion": notion, "epsilon": epsilon, "seeds": len(g),
            "total_epsilon": g.epsilon_total.max(), "per_model_epsilon": g.per_model_epsilon.mean(),
            "tuned_error": g.error.mean(), "tuned_error_std": g.error.std(ddof=1),
            "tuned_violation": g.violation.mean(), "tuned_violation_std": g.violation.std(ddof=1),
            "curve_error": g.curve_error.mean(), "curve_violation": g.curve_violation.mean(),
            "curve_violation_std": g.curve_violation.std(ddof=1), "curve_total_epsilon": g.curve_epsilon.max(),
            "curve_at_tuned_error": g.curve_at_error.mean(), "beats_curve_at_its_error": f"{int(beats.sum())}/{len(g)}",
            "tuned_error_above_erm": (g.error - g.erm_error).mean(), "beats_published": published,
            "seconds": g.seconds.mean(),
        })
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame, command: str, lambdas) -> str:
    intro = (
        f"Commands: `{command}` (the `seeds` column says how many ran). Per data set (dp-fermi preset), notion and total ε, the mean over seeds of: the "
        "privately tuned model's test error and violation (`dpfair.selection.PrivateSearch` with the command's "
        f"strategy: `constrained`, one fit at the whole ε whose λ follows training error ≤ the non-private logistic "
        f"regression's + {SLACK} by dual ascent on the public error; `random_stopping`, λ among {lambdas} with "
        f"validation error at most that + {SLACK}, the whole search within ε); the model the curve picks on the same split with no accounting (least test violation within "
        f"{SLACK} of ERM's test error, each model at per-model ε = ε; its total is its models composed, plus a "
        "choice no ledger counts). `curve at tuned error`: the seed-averaged Pareto front of "
        "`results/experiments/dp-fermi-figures` at ε, interpolated at each tuned model's test error; `beats` "
        "counts the seeds whose tuned violation is below it. `above ERM`: the tuned model's test error minus ERM's "
        "on the same split. The paper's own curves are images without numbers in its text; `beats published` "
        "counts, where our issue 4 quotes readings of its figure (adult, demographic parity, ε = 1: violation "
        "about 0.087 at error ≤ 0.169 and 0.010 at ≤ 0.189, its non-private error 0.159), the seeds whose "
        "violation is below the bound those readings put on the published curve (a Pareto front does not rise "
        "with the error): at the tuned model's own test error / at the same distance above each one's "
        "non-private error. The reference of the `constrained` rows is ERM's 5-fold cross-validated error."
    )
    lines = [
        "# Private model selection against the non-privately selected DP-FERMI curve",
        "",
        intro,
        "",
        ("| data | notion | ε (total) | per-model ε | tuned error | tuned violation | curve error | curve violation "
         "| curve's models composed ε | curve at tuned error | beats | above ERM | beats published | seeds "
         "| s / search |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in summary.itertuples():
        lines.append(
            f"| {r.dataset} | {r.notion} | {r.total_epsilon:.3f} (≤ {r.epsilon:g}) | {r.per_model_epsilon:.3f} "
            f"| {r.tuned_error:.4f} ± {r.tuned_error_std:.4f} | {r.tuned_violation:.4f} ± {r.tuned_violation_std:.4f} "
            f"| {r.curve_error:.4f} | {r.curve_violation:.4f} ± {r.curve_violation_std:.4f} "
            f"| {r.curve_total_epsilon:.2f} + choice | {r.curve_at_tuned_error:.4f} | {r.beats_curve_at_its_error} "
            f"| {r.tuned_error_above_erm:+.4f} | {r.beats_published} | {r.seeds} | {r.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def figure(runs: pd.DataFrame, models: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpfair.plot import tradeoff

    datasets, notions = list(dict.fromkeys(runs.dataset)), list(dict.fromkeys(runs.notion))
    fig, axes = plt.subplots(len(datasets), len(notions), figsize=(5.2 * len(notions), 4.0 * len(datasets)),
                             squeeze=False)
    for (row, dataset), (col, notion) in itertools.product(enumerate(datasets), enumerate(notions)):
        ax = axes[row][col]
        tuned = runs[(runs.dataset == dataset) & (runs.notion == notion)]
        if tuned.empty:
            ax.set_visible(False)
            continue
        for i, (eps, g) in enumerate(tuned.groupby("epsilon")):
            color = f"C{i}"
            curve = models[(models.dataset == dataset) & (models.notion == notion) & (models.method == "dp-fermi")
                           & (models.epsilon == eps)]
            tradeoff(curve, x="error", y="violation", by="lam", hue="epsilon", pareto=True, spread=None, ax=ax,
                     markersize=3, color=color)
            ax.scatter(g.error, g.violation, marker="x", s=30, color=color, label=f"tuned, total ε = {eps:g}")
        base = float(tuned.erm_error.mean())
        ax.set_xlim(base - 0.01, base + 0.04)  # the region of the error budget; the CSV has the points beyond
        ax.set_title(f"{dataset}, {notion.replace('_', ' ')}")
        ax.legend(fontsize=6)
    fig.suptitle("Curves: the reproduction's models (seed means, Pareto fronts; no selection cost). "
                 "Crosses: one privately tuned model per seed (error axis: ERM's error − 0.01 to + 0.04)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,credit,parkinsons")
    parser.add_argument("--notions", default="demographic_parity,equalized_odds")
    parser.add_argument("--epsilons", default="0.5,1,3")
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (the reproduction's splits)")
    parser.add_argument("--lambdas", default=",".join(f"{v:g}" for v in LAMBDAS))
    parser.add_argument("--mean-runs", type=float, default=None, help="default: twice the candidates")
    parser.add_argument("--strategy", default="auto", choices=["auto", "random_stopping", "constrained"],
                        help="PrivateSearch's strategy (auto: constrained, λ following the public error)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--resume", action="store_true",
                        help="keep the searches already in OUT/selection.csv and run only the others")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lambdas = [float(v) for v in args.lambdas.split(",")]
    models = pd.read_csv(CURVE / "models.csv")
    points = pd.read_csv(CURVE / "points.csv")
    command = "python benchmarks/private_selection.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
        if k not in ("out", "threads", "resume") and v is not None)
    log = out / "commands.txt"  # every invocation whose searches the CSV holds (a resumed run appends)
    commands = log.read_text().splitlines() if args.resume and log.is_file() else []
    done = pd.read_csv(out / "selection.csv") if args.resume and (out / "selection.csv").is_file() else None
    rows = [] if done is None else done.to_dict("records")
    seen = {(r["dataset"], r["notion"], float(r["epsilon"]), int(r["seed"])) for r in rows}
    for dataset in args.datasets.split(","):
        for notion in args.notions.split(","):
            for epsilon in (float(e) for e in args.epsilons.split(",")):
                for seed in range(args.seeds):
                    if (dataset, notion, epsilon, seed) in seen:
                        continue
                    if command not in commands:
                        commands.append(command)
                        log.write_text("\n".join(commands) + "\n")
                    row, data = search(dataset, notion, epsilon, seed, lambdas, args.mean_runs, args.strategy)
                    choice = curve_choice(models, dataset, notion, epsilon, seed, lambdas)
                    row.update(choice)
                    row["curve_epsilon"] = (composed_epsilon(data, choice["curve_models"], epsilon, choice["curve_delta"])
                                            if choice else math.nan)
                    row["curve_at_error"] = curve_at(points, dataset, notion, epsilon, row["error"])
                    rows.append(row)
                    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                          flush=True)
                    pd.DataFrame(rows).to_csv(out / "selection.csv", index=False)
    runs = pd.DataFrame(rows)
    summary = summarise(runs)
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(markdown(summary, "`; `".join(commands), lambdas))
    figure(runs, models, out / "tradeoff.png")
    print(markdown(summary, "`; `".join(commands), lambdas))


if __name__ == "__main__":
    main()
