"""Mangold et al. (ICML 2023): certified bounds on what privacy costs fairness, on CelebA (issue 11).

Set-up as the authors describe it (Sec. 5, App. G.1): label ``Smiling``, group ``Male`` (not a
feature), the other 38 attributes coded ±1, a 90/10 split (seed 42: 182,339 training rows), rows
scaled to norm at most R = 1 (the cap is not given in the paper; R = 1 is our choice), ℓ2-regularised
logistic regression without intercept, μ = 1, ε = 1, δ = 1/n², probability 1 − ζ = 0.99, bounds
evaluated on the test part. Private models by output perturbation with σ calibrated on our accountant
(the paper's closed form σ² = 8Λ² log(1.25/δ)/(μ²n²ε²) is larger: the ``paper σ`` rows use it).

Parts (results/certificates/):

* ``table``: Table 1 — the certified bound (Theorem 4.4, Chernoff with Remark B.2's truncation) per
  notion, with Markov and untruncated Chernoff, the reference model h* (the paper) and h_priv (what a
  model's user can compute), and the empirical gap of 100 private draws. Folktables ACSIncome is run
  when its file is on disk (``dpfair datasets acs_income``), else listed as not available offline.
  Then "On the paper's own model" (issue 31; ``table1_paper_model.csv``): the ±1 rows unscaled (R = √38, a
  public constant of the encoding), μ = 1, the authors' split; our certificate beside the paper's bound as
  printed and as the authors' published code computes it, and a ladder changing one difference at a time
  (σ, distance, margin constant, groups, row scale, μ in the fit, solver) to show which moves each number.
  ``--published EO,EOdds,DP,AP,ACC`` adds relative differences (Table 1 is withheld in our copy).
* ``curves``: Figures 1–3 — fairness of h*, the range of 100 private draws, the bound (solid), the
  bound at the draws' largest actual distance (dashed) and with App. G.3's refined constant for the
  farthest draw (dotted), against n (20 log-spaced sizes from 10 to all training rows, ε = 1, δ = 1/n²)
  and against ε (20 log-spaced values in [1e-3, 10], all rows).
* ``dpsgd``: the same certificate for DP-SGD (logistic, weight decay μ, plain SGD, clipping bound ≥ Λ:
  Lemma 4.2's assumptions hold) and why DP-FERMI gets none.

The empirical parts use the non-private model h* and many private draws from one data set: research
diagnostics on public data, not releases covered by one ε.

    python benchmarks/certificates.py table|curves|dpsgd|all
"""

from __future__ import annotations

import argparse
import gzip
import io
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpfair.algorithms import DPSGDClassifier, OutputPerturbationClassifier  # noqa: E402
from dpfair.algorithms.output_perturbation import (  # noqa: E402
    bound_rows,
    minimize_regularized_logistic,
    perturb_minimizer,
)
from dpfair.bounds import (  # noqa: E402
    CERTIFIED_NOTIONS,
    certify,
    certify_margins,
    chernoff_bound,
    confidence_margins,
    fairness_levels,
    flip_probability,
    linear_lipschitz,
    markov_bound,
    normalized_margins,
    notion_coefficients,
    output_perturbation_radius,
    paper_noise_std,
    refined_lipschitz,
)
from dpfair.datasets import load_dataset  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import load_average, machine_info  # noqa: E402

OUT = REPO / "results" / "certificates"
PROBABILITY = 0.99
MU, R = 1.0, 1.0
DRAWS = 100
LABELS = {"equal_opportunity": "Equality of opportunity", "equalized_odds": "Equalized odds",
          "demographic_parity": "Demographic parity", "accuracy_parity": "Accuracy parity", "accuracy": "Accuracy"}


def celeba():
    data = load_dataset("celeba", encoding="pm1", test_size=0.1, random_state=42)
    return data, bound_rows(data.X_train, R), bound_rows(data.X_test, R)


def _fair(notion, y, pred, s) -> float:
    return float(np.mean(np.abs(fairness_levels(notion, y, pred, s))))


def _point(Xtr, ytr, str_, Xte, yte, ste, epsilon, *, sigma_rule="accountant", draws=DRAWS) -> list[dict]:
    """One point of the curves: h* on (Xtr, ytr), 100 output-perturbation draws, bounds and ranges per notion."""
    n = len(ytr)
    delta = 1.0 / n**2
    w_star = minimize_regularized_logistic(Xtr, ytr, n_classes=2, l2_regularization=MU)
    if sigma_rule == "paper":
        sigma = paper_noise_std(R, MU, n, epsilon, delta)
    else:
        est = OutputPerturbationClassifier(epsilon=epsilon, delta=delta, l2_regularization=MU, norm_bound=R,
                                           classes=2, groups=2).fit(Xtr, ytr, sensitive_features=str_)
        sigma = est.noise_std_
    models = perturb_minimizer(w_star, sigma, draws, radius=R / MU)
    distance = output_perturbation_radius(sigma, Xtr.shape[1], PROBABILITY)
    gaps = np.linalg.norm(models - w_star, axis=1)
    far = models[int(np.argmax(gaps))]
    scores = Xte @ w_star
    margins = confidence_margins(scores, yte)
    pred_star = (scores > 0).astype(int)
    pred_draws = (Xte @ models.T > 0).astype(int)
    solid = certify_margins(margins, linear_lipschitz(Xte, single_vector=True), yte, ste, distance)
    dashed = certify_margins(margins, linear_lipschitz(Xte, single_vector=True), yte, ste, gaps.max())
    dotted = certify_margins(margins, refined_lipschitz(Xte, w_star, far), yte, ste, gaps.max())
    rows = []
    for notion in CERTIFIED_NOTIONS:
        star = _fair(notion, yte, pred_star, ste)
        drawn = np.array([_fair(notion, yte, pred_draws[:, j], ste) for j in range(draws)])
        rows.append(dict(n=n, epsilon=epsilon, sigma=sigma, sigma_rule=sigma_rule, notion=notion, fair_star=star,
                         draw_min=drawn.min(), draw_max=drawn.max(), gap_max=np.abs(drawn - star).max(),
                         within=float(np.mean(np.abs(drawn - star) <= solid.gaps[notion].bound_fair)),
                         distance=distance, distance_max=gaps.max(), bound=solid.gaps[notion].bound_fair,
                         chernoff=solid.gaps[notion].chernoff_fair, markov=solid.gaps[notion].markov_fair,
                         bound_empirical_distance=dashed.gaps[notion].bound_fair,
                         bound_refined=dotted.gaps[notion].bound_fair))
    return rows


def table(args):
    load = load_average()
    data, Xtr, Xte = celeba()
    rows = []
    t0 = time.perf_counter()
    for rule in ("accountant", "paper"):
        for r in _point(Xtr, data.y_train, data.s_train, Xte, data.y_test, data.s_test, 1.0, sigma_rule=rule):
            rows.append(dict(dataset="celeba", reference="h*", **r))
    # the certificate a model's user computes: h_ref = h_priv, through the estimator and dpfair.bounds.certify
    est = OutputPerturbationClassifier(epsilon=1.0, l2_regularization=MU, norm_bound=R, classes=2, groups=2)
    est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    cert = certify(est, data.X_test, data.y_test, data.s_test, probability=PROBABILITY).to_dict()
    for notion in CERTIFIED_NOTIONS:
        rows.append(dict(dataset="celeba", reference="h_priv", n=len(data.y_train), epsilon=1.0, notion=notion,
                         sigma=est.noise_std_, sigma_rule="accountant", distance=cert["distance"],
                         bound=cert[f"bound.{notion}"], chernoff=cert[f"chernoff.{notion}"],
                         markov=cert[f"markov.{notion}"]))
    seconds = time.perf_counter() - t0
    frame = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    frame.to_csv(OUT / "table1.csv", index=False)
    wide = frame.pivot_table(index=["reference", "sigma_rule"], columns="notion", values="bound")[list(CERTIFIED_NOTIONS)]
    wide.columns = [LABELS[c] for c in wide.columns]
    lines = ["# Table 1: certified |Fair(h_priv) − Fair(h*)| at probability 0.99 (CelebA, ε = 1, δ = 1/n²)", "",
             f"Produced by `python benchmarks/certificates.py table` in {seconds:.0f} s. n = {len(data.y_train):,} "
             f"training rows, {len(data.y_test):,} test rows, 38 ±1 features scaled to norm ≤ {R:g}, μ = {MU:g}, "
             "no intercept. `accountant`: σ calibrated on our PLD accountant (what `OutputPerturbationClassifier` "
             "releases); `paper`: the paper's closed-form σ. Reference h*: the paper's Table 1; h_priv: the "
             "certificate computable from the released model alone (`dpfair certify`).", "",
             wide.round(4).reset_index().to_markdown(index=False), "",
             "Markov, untruncated Chernoff and truncated (certified) bounds, the empirical gap over 100 draws "
             "(`gap_max`) and the share of draws within the bound (`within`):", "",
             frame[["reference", "sigma_rule", "notion", "distance", "markov", "chernoff", "bound", "gap_max",
                    "within"]].round(5).to_markdown(index=False), "",
             "Folktables ACSIncome (n = 1,498,050 in the paper): not available offline (no ACS PUMS file in the "
             "mirror); `load_dataset('acs_income', path=...)` reads one, and this script runs it when present.",
             ""]
    try:
        acs = load_dataset("acs_income", test_size=0.1, random_state=42)
    except (FileNotFoundError, ValueError) as exc:
        print(f"acs_income skipped: {str(exc).splitlines()[0]}")
    else:
        Xa, Xb = bound_rows(acs.X_train, R), bound_rows(acs.X_test, R)
        acs_rows = pd.DataFrame(_point(Xa, acs.y_train, acs.s_train, Xb, acs.y_test, acs.s_test, 1.0))
        acs_rows.to_csv(OUT / "table1_acs_income.csv", index=False)
        lines[-2] = "Folktables ACSIncome:\n\n" + acs_rows.round(5).to_markdown(index=False)
    t1 = time.perf_counter()
    lines += paper_model(args)
    seconds_paper = time.perf_counter() - t1
    info = machine_info(load)
    lines[2] = lines[2].replace(f"in {seconds:.0f} s.", f"in {seconds + seconds_paper:.0f} s ({seconds:.0f} s for "
                                f"this part, {seconds_paper:.0f} s for the paper's model below) on "
                                f"{info['date']} UTC, {info['machine']}, {info['cpus']} CPUs (load "
                                f"{info['load_before']} before, {info['load_after']} after), Python "
                                f"{info['python']}.", 1)
    (OUT / "table1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---- Table 1 on the paper's own model (issue 31) -----------------------------------------------
#: The authors' published code (github.com/pmangold/fairness-privacy, read for its set-up, not copied):
#: ``load_dataset.get_celebA`` scales every ±1 row (norm √38 ≈ 6.16) to norm 6; ``expe_fairness_fct_n``
#: fits ``LogisticRegression(fit_intercept=False, C=n/mu)`` (scikit-learn's objective C Σℓ + ½‖w‖², i.e.
#: (1/n)Σℓ + ‖w‖²/(2n²): μ = 1/n² in the paper's normalisation, not 1) on the first n = 182,338 rows of an
#: unstratified ``train_test_split(test_size=0.1, random_state=42)`` (n = ``np.logspace(1, log10(182339), 20,
#: dtype=int)[-1]``), takes L = Λ = the largest training row norm, σ and the distance of Lemma 4.1 with p = 38,
#: ζ = 0.01, δ = 1/n², margin constants 2√|Y|·‖x‖ = 2√2‖x‖, and Chernoff with Remark B.2's truncation
#: (golden-section search started on [0, 1e-5]: the truncated bound is smallest at t = 0, so it returns
#: P(r ≤ d)·(1 + O(t·d)) with t·d < 1e-6), per group "population + subgroup" and averaged (``table_bound.py``
#: prints ``bound[-1]``).
ROOT38 = math.sqrt(38.0)
AUTHORS_N = int(np.logspace(1, np.log10(182_339), 20, dtype=int)[-1])
_CACHE: dict = {}  # fits, σ and empirical gaps shared by the ladder's steps (keyed by what they depend on)


@dataclass(frozen=True)
class Setup:
    """One way of computing Table 1; every field is one of the differences the ladder changes one at a time."""

    rows: float = 1.0            # R: the ±1 rows (norm √38) scaled to norm R (√38: unscaled)
    mu_fit: str = "1"            # "1": μ = 1 (the paper's text); "1/n²": the authors' code (C = n/μ)
    split: str = "dpfair"        # "dpfair": load_dataset's stratified 90/10; "authors": unstratified, first 182,338
    sigma: str = "accountant"    # "accountant" (what OutputPerturbationClassifier releases) or "paper" (closed form)
    distance: str = "chi2"       # "chi2": exact quantile; "lemma_4_1": 4pσ² log(2/ζ)
    lipschitz: str = "‖x‖"       # margin constant L_{x,y}: "‖x‖" (one weight vector), "2‖x‖" (text), "2√2‖x‖" (code)
    groups: str = "dpfair"       # "dpfair": exact coefficients; "text": Corollary 3.3 as printed; "code": authors' code
    tail: str = "truncated"      # "truncated" (Remark B.2, certified), "chernoff" (Remark B.1 only), "markov"
    solver: str = "newton"       # "newton": exact minimiser; "lbfgs": scikit-learn as the authors ran it


def _authors_celeba():
    """CelebA rows in file order (±1, the 38 features), labels, groups and the authors' split indices."""
    from sklearn.model_selection import train_test_split

    path = Path(os.environ["DPFAIR_DATA"]) / "celeba_attrs" / "list_attr_celeba.txt.gz"
    _, names, body = gzip.decompress(path.read_bytes()).split(b"\n", 2)
    columns = names.decode().split()
    frame = pd.read_csv(io.BytesIO(body), sep=" ", skipinitialspace=True, header=None, names=["image", *columns],
                        index_col=0)
    X = frame[[c for c in columns if c not in ("Smiling", "Male")]].to_numpy(np.float64)
    y, s = (frame["Smiling"] > 0).to_numpy(np.int64), (frame["Male"] > 0).to_numpy(np.int64)
    train, test = train_test_split(np.arange(len(y)), test_size=0.1, random_state=42)
    return X, y, s, train[:AUTHORS_N], test


def _fair_columns(notion, y, predictions, s) -> np.ndarray:
    """``Fair`` of every column of ``predictions`` (one private draw each): :func:`_fair`, vectorised."""
    coef, codes = notion_coefficients(notion, y, s)
    correct = (predictions == y[:, None]).astype(np.float64)
    means = np.stack([correct[codes == g].mean(axis=0) for g in range(len(coef.group_keys))])
    return np.mean(np.abs(coef.C0[:, None] + coef.C @ means), axis=0)


def _corollary_groups(notion, y, s, variant) -> list[list[np.ndarray]]:
    """Per measure, the rows of each term of χ_k with |C| = 1 (Corollary 3.3); ``code``: equalized odds as the
    authors' code forms it (the whole population and S = r for every y, i.e. demographic parity's groups)."""
    every = np.ones(len(y), dtype=bool)
    if notion == "equal_opportunity":
        return [[y == 1, (y == 1) & (s == r)] for r in (0, 1)]
    if notion == "equalized_odds":
        if variant == "code":
            return [[every, s == r] for _ in (0, 1) for r in (0, 1)]
        return [[y == v, (y == v) & (s == r)] for v in (0, 1) for r in (0, 1)]
    if notion in ("demographic_parity", "accuracy_parity"):
        return [[every, s == r] for r in (0, 1)]
    return [[every]]


def _evaluate(setup: Setup, celeba_rows) -> dict:
    """Table 1's five numbers (and the quantities behind them) under one :class:`Setup`."""
    (X, y, s, authors_train, authors_test), dpfair_split = celeba_rows
    if setup.split == "authors":
        Xtr, ytr, Xte, yte, ste = X[authors_train], y[authors_train], X[authors_test], y[authors_test], s[authors_test]
    else:
        Xtr, ytr, _, Xte, yte, ste = dpfair_split
    scale = min(1.0, setup.rows / ROOT38)  # every ±1 row has norm √38: bound_rows is this one factor
    Xtr, Xte = Xtr * scale, Xte * scale
    n = len(ytr)
    delta, p = 1.0 / n**2, Xtr.shape[1]
    mu = 1.0 if setup.mu_fit == "1" else 1.0 / n**2
    model_key = (setup.rows, setup.mu_fit, setup.split, setup.solver)
    if model_key not in _CACHE:
        if setup.solver == "lbfgs":
            from sklearn.linear_model import LogisticRegression

            fit = LogisticRegression(fit_intercept=False, C=1.0 / (n * mu), max_iter=10_000).fit(Xtr, ytr)
            _CACHE[model_key] = fit.coef_[0]
        else:
            _CACHE[model_key] = minimize_regularized_logistic(Xtr, ytr, n_classes=2, l2_regularization=mu)
    w = _CACHE[model_key]
    lam = float(np.linalg.norm(Xtr, axis=1).max())  # Λ = L: the row-norm bound (the rows' norm is the constant R)
    if setup.sigma == "paper":
        sigma = paper_noise_std(lam, 1.0, n, 1.0, delta)  # with μ = 1 even when the fit used 1/n² (as the code)
    else:
        sigma_key = (setup.rows, setup.split)
        if sigma_key not in _CACHE:
            _CACHE[sigma_key] = OutputPerturbationClassifier(
                epsilon=1.0, delta=delta, l2_regularization=1.0, norm_bound=lam, classes=2, groups=2,
            ).fit(Xtr, ytr).noise_std_
        sigma = _CACHE[sigma_key]
    radius = output_perturbation_radius(sigma, p, PROBABILITY, method=setup.distance)
    norms = np.linalg.norm(Xte, axis=1)
    factor = {"‖x‖": 1.0, "2‖x‖": 2.0, "2√2‖x‖": 2.0 * math.sqrt(2.0)}[setup.lipschitz]
    scores = Xte @ w
    margins = confidence_margins(scores, yte)
    ratios = normalized_margins(margins, factor * norms)
    tail = {"truncated": flip_probability, "chernoff": chernoff_bound, "markov": markov_bound}[setup.tail]
    out = dict(n=n, mu=mu, w_norm=float(np.linalg.norm(w)), test_accuracy=float(np.mean((scores > 0) == yte)),
               sigma=sigma, distance=radius, flip_share=flip_probability(ratios, radius))
    if setup.groups == "dpfair":
        cert = certify_margins(margins, factor * norms, yte, ste, radius)
        key = {"truncated": "bound_fair", "chernoff": "chernoff_fair", "markov": "markov_fair"}[setup.tail]
        out.update({notion: getattr(cert.gaps[notion], key) for notion in CERTIFIED_NOTIONS})
    else:
        for notion in CERTIFIED_NOTIONS:
            measures = _corollary_groups(notion, yte, ste, setup.groups)
            out[notion] = float(np.mean([sum(min(1.0, tail(ratios[rows], radius)) for rows in terms)
                                         for terms in measures]))
    # the bound should hold: 100 output-perturbation draws around this h* at this σ (the paper's green points)
    gap_key = (model_key, sigma)
    if gap_key not in _CACHE:
        predictions = (Xte @ perturb_minimizer(w, sigma, DRAWS).T > 0).astype(int)
        _CACHE[gap_key] = {notion: float(np.max(np.abs(_fair_columns(notion, yte, predictions, ste)
                                                       - _fair(notion, yte, (scores > 0).astype(int), ste))))
                           for notion in CERTIFIED_NOTIONS}
    out["gap_max"] = _CACHE[gap_key]
    return out


#: The ladder: each row changes one thing from the row above, from our certificate on the old rows to the
#: authors' computation; the middle rows are the paper's own model (±1 rows unscaled, μ = 1, its split).
LADDER = (
    ("our certificate, rows scaled to norm 1 (the old table)", Setup()),
    ("rows unscaled: R = √38 (the paper's own model)", Setup(rows=ROOT38)),
    ("the authors' split: unstratified, seed 42, first 182,338 rows", Setup(rows=ROOT38, split="authors")),
    ("σ by the paper's closed form", Setup(rows=ROOT38, split="authors", sigma="paper")),
    ("distance by Lemma 4.1 (4pσ² log(2/ζ))", Setup(rows=ROOT38, split="authors", sigma="paper",
                                                    distance="lemma_4_1")),
    ("margin constant 2‖x‖ (Sec. 2, two weight rows)", Setup(rows=ROOT38, split="authors", sigma="paper",
                                                             distance="lemma_4_1", lipschitz="2‖x‖")),
    ("Corollary 3.3's χ as printed (weight 1 per term)", Setup(rows=ROOT38, split="authors", sigma="paper",
                                                             distance="lemma_4_1", lipschitz="2‖x‖",
                                                             groups="text")),
    ("margin constant 2√2‖x‖ (the authors' code)", Setup(rows=ROOT38, split="authors", sigma="paper",
                                                         distance="lemma_4_1", lipschitz="2√2‖x‖", groups="text")),
    ("equalized odds' groups as the code forms them", Setup(rows=ROOT38, split="authors", sigma="paper",
                                                            distance="lemma_4_1", lipschitz="2√2‖x‖",
                                                            groups="code")),
    ("rows scaled to norm 6 (the authors' loader)", Setup(rows=6.0, split="authors", sigma="paper",
                                                          distance="lemma_4_1", lipschitz="2√2‖x‖", groups="code")),
    ("μ = 1/n² in the fit (C = n/μ in the code)", Setup(rows=6.0, mu_fit="1/n²", split="authors", sigma="paper",
                                                        distance="lemma_4_1", lipschitz="2√2‖x‖", groups="code")),
    ("scikit-learn's lbfgs (tol 1e-4) instead of the exact minimiser", Setup(
        rows=6.0, mu_fit="1/n²", split="authors", sigma="paper", distance="lemma_4_1", lipschitz="2√2‖x‖",
        groups="code", solver="lbfgs")),
)
#: Beside the ladder: the authors' computation without truncation, and the old table's Chernoff column.
SIDE = (
    ("the authors' computation, untruncated Chernoff", replace(LADDER[-1][1], tail="chernoff")),
    ("the old table's `paper` Chernoff column (R = 1, paper σ, χ², untruncated)",
     Setup(sigma="paper", tail="chernoff")),
)
#: The rows of the headline table: which ladder rows they are.
HEADLINE = (
    ("ours, h_ref = h*: certified (accountant σ, χ² quantile, L = ‖x‖, exact coefficients)", 2),
    ("paper's bound as printed (paper σ, Lemma 4.1, L = 2‖x‖, Cor. 3.3, truncated Chernoff)", 6),
    ("paper's bound as the authors' code computes it (L = 2√2‖x‖, its groups)", 8),
    ("the authors' code end to end (rows at norm 6, μ = 1/n², lbfgs)", len(LADDER) - 1),
)


def _published(arg) -> dict | None:
    if not arg:
        return None
    values = [float(v) for v in arg.split(",")]
    if len(values) != len(CERTIFIED_NOTIONS) or not all(0 <= v <= 1 for v in values):
        raise SystemExit(f"--published takes {len(CERTIFIED_NOTIONS)} comma-separated numbers in [0, 1] (Table 1's "
                         "CelebA row, in the order EO, EOdds, DP, AP, accuracy), got {arg!r}")
    return dict(zip(CERTIFIED_NOTIONS, values))


def paper_model(args) -> list[str]:
    """Table 1 on the paper's own model, the ladder of differences to the authors' computation, and its CSV."""
    data = load_dataset("celeba", encoding="pm1", test_size=0.1, random_state=42)
    rows_ = (_authors_celeba(), (data.X_train, data.y_train, data.s_train, data.X_test, data.y_test, data.s_test))
    published = _published(getattr(args, "published", None))
    ladder = [(name, setup, _evaluate(setup, rows_)) for name, setup in LADDER]
    side = [(name, setup, _evaluate(setup, rows_)) for name, setup in SIDE]
    records = []
    for part, items in (("ladder", ladder), ("side", side)):
        for step, (name, setup, out) in enumerate(items):
            records.append(dict(part=part, step=step, change=name, **{f"setup.{k}": v for k, v in vars(setup).items()},
                                **{k: v for k, v in out.items() if k != "gap_max"},
                                **{f"gap_max.{k}": v for k, v in out["gap_max"].items()}))
    pd.DataFrame(records).to_csv(OUT / "table1_paper_model.csv", index=False)

    def fmt(v):
        return f"{v:.4f}"

    cols = [LABELS[c] for c in CERTIFIED_NOTIONS]
    head = []
    for name, i in HEADLINE:
        out = ladder[i][2]
        head.append({"bound": name, **{LABELS[c]: fmt(out[c]) for c in CERTIFIED_NOTIONS}})
    head.append({"bound": "published (Table 1, CelebA row)",
                 **{LABELS[c]: fmt(published[c]) if published else "withheld" for c in CERTIFIED_NOTIONS}})
    if published:
        for name, i in HEADLINE:
            out = ladder[i][2]
            head.append({"bound": f"relative difference: {name.split(':')[0].split('(')[0].strip()}",
                         **{LABELS[c]: f"{out[c] / published[c] - 1:+.1%}" for c in CERTIFIED_NOTIONS}})
    ours, authors = ladder[2][2], ladder[-1][2]
    # h_ref = h_priv: the certificate a model's user computes from the released model (dpfair certify), on the same
    # rows; the estimator reads the unscaled rows as they are (norm_bound = √38 = every row's norm)
    X, y, s, train, test = rows_[0]
    est = OutputPerturbationClassifier(epsilon=1.0, l2_regularization=1.0, norm_bound=ROOT38, classes=2, groups=2)
    cert = certify(est.fit(X[train], y[train], sensitive_features=s[train]), X[test], y[test], s[test],
                   probability=PROBABILITY)
    head.insert(1, {"bound": "ours, h_ref = h_priv (`certify` on the released model, norm_bound = √38)",
                    **{LABELS[c]: fmt(cert.gaps[c].bound_fair) for c in CERTIFIED_NOTIONS}})
    steps = []
    for k, (name, setup, out) in enumerate(ladder):
        prev = ladder[k - 1][2] if k else None
        steps.append({"step": k, "change (one at a time)": name, "σ": f"{out['sigma']:.3g}",
                      "distance d": f"{out['distance']:.4g}", "‖w*‖": f"{out['w_norm']:.3g}",
                      "flip share": f"{out['flip_share']:.4f}",
                      **{LABELS[c]: fmt(out[c]) + (f" (×{out[c] / prev[c]:.2f})" if prev else "")
                         for c in CERTIFIED_NOTIONS}})
    for name, setup, out in side:
        steps.append({"step": "–", "change (one at a time)": name, "σ": f"{out['sigma']:.3g}",
                      "distance d": f"{out['distance']:.4g}", "‖w*‖": f"{out['w_norm']:.3g}",
                      "flip share": f"{out['flip_share']:.4f}",
                      **{LABELS[c]: f"{fmt(out[c])} (×{out[c] / authors[c]:.2f} of step {len(ladder) - 1})"
                         for c in CERTIFIED_NOTIONS}})
    # the log-ratio from our certificate (step 2) to the authors' computation telescopes over the steps
    def factors(c, first, last) -> str:
        """The steps' factors between two ladder rows (those moving the number by more than 2 %), largest first."""
        moves = [(ladder[k][0], ladder[k][2][c] / ladder[k - 1][2][c]) for k in range(first + 1, last + 1)]
        moves = sorted((m for m in moves if abs(math.log(m[1])) > math.log(1.02)), key=lambda m: -abs(math.log(m[1])))
        return " · ".join(f"{name.split(' (')[0]} ×{f:.2f}" for name, f in moves)

    printed, last = ladder[6][2], len(ladder) - 1
    explained = [f"- {LABELS[c]}: ours {ours[c]:.4f} → as printed {printed[c]:.4f} (×{printed[c] / ours[c]:.1f}) = "
                 f"{factors(c, 2, 6)}; → the authors' code {authors[c]:.4f} (×{authors[c] / printed[c]:.2f}) = "
                 f"{factors(c, 6, last)}" for c in CERTIFIED_NOTIONS]
    old = side[1][2]
    held = [k for k, (_, _, out) in enumerate(ladder) if all(out["gap_max"][c] <= out[c] for c in CERTIFIED_NOTIONS)]
    gaps = {c: max(out["gap_max"][c] for _, _, out in ladder) for c in CERTIFIED_NOTIONS}
    small = [2, 9, last]
    small_move = max(abs(ladder[k][2][c] / ladder[k - 1][2][c] - 1) for k in small for c in CERTIFIED_NOTIONS)
    unscale = [ladder[1][2][c] / ladder[0][2][c] for c in CERTIFIED_NOTIONS]
    coef = [printed[c] / ladder[5][2][c] for c in CERTIFIED_NOTIONS[:-1]]
    dist = ladder[4][2]["distance"] / ladder[3][2]["distance"]
    return [
        "## On the paper's own model", "",
        f"Produced by the same command (`python benchmarks/certificates.py table"
        f"{' --published ' + args.published if published else ''}`; this part: CSV "
        "`table1_paper_model.csv`, one row per step with every quantity). The paper's model as its text states it "
        "(Sec. 5, App. G.1): CelebA's 38 ±1 attributes **unscaled** (every row has norm √38 ≈ 6.164, a public "
        "constant of the encoding, so R = Λ = √38 and no row is rescaled: `OutputPerturbationClassifier("
        "norm_bound=38**0.5)` reads the rows as they are), label Smiling, group Male (not a feature), "
        "ℓ2-regularised logistic regression without intercept, 1-strongly convex (μ = 1), 90/10 split, "
        "ε = 1, δ = 1/n², ζ = 0.01, bounds on the 20,260 test rows with h* as reference, averaged over the "
        "groups. What the text leaves open (the split's seed, the margin constant, the minimiser) is taken "
        "from the authors' published code (github.com/pmangold/fairness-privacy, read, not copied), which "
        "also differs from the text in three places: it scales the rows to norm 6, fits "
        "`LogisticRegression(C=n/μ)` (μ = 1/n² in the paper's normalisation: almost unregularised, while σ "
        "is computed for μ = 1, so the sensitivity bound Δ = 2Λ/(μn) behind σ does not cover that model), and forms equalized "
        "odds' groups like demographic parity's (whole population and S = r, not Y = y).", "",
        "Published values: Table 1 is withheld in the project's copy of the paper (`[withheld]` in "
        "src/dpfair/experiments/published/mangold.toml), so no relative difference can be printed here; "
        "`--published EO,EOdds,DP,AP,ACC` adds the rows.", "",
        pd.DataFrame(head)[["bound", *cols]].to_markdown(index=False), "",
        f"Every bound is at probability 0.99. 100 output-perturbation draws (fresh secret noise on every run) "
        f"around each step's h* at its σ stayed "
        f"within the step's bound in {len(held)} of the {len(ladder)} steps (largest |Fair(h_priv) − Fair(h*)| "
        "over all steps: " + ", ".join(f"{LABELS[c]} {gaps[c]:.4f}" for c in CERTIFIED_NOTIONS)
        + "; per step in the CSV). On the paper's own model our certified bound is "
        f"×{min(printed[c] / ours[c] for c in CERTIFIED_NOTIONS):.0f}–×"
        f"{max(printed[c] / ours[c] for c in CERTIFIED_NOTIONS):.0f} below the paper's bound as printed. Both "
        "certify the same kind of release; ours uses the σ `OutputPerturbationClassifier` actually adds (calibrated "
        "on the accountant), and the paper's larger σ makes its bound a valid but looser certificate of a "
        "release with that σ.", "",
        "### Which difference explains each gap: one change at a time", "",
        "Each step changes one thing from the step above (× the factor on the step above). Steps 1–6 "
        "move from our certificate to the paper's bound as printed, on the paper's own model; 7–11 to the "
        "authors' code. `flip share`: the share of test rows with |ρ|/L ≤ d (those whose prediction a move "
        "of d can flip).", "",
        pd.DataFrame(steps).to_markdown(index=False), "",
        "Per notion, the factors (steps moving the number by more than 2 %; they multiply to the total):", "",
        *explained, "",
        "Reading the ladder:", "",
        f"- **On the paper's own model the gap is σ, the distance, the margin constant and the groups.** The "
        f"paper's closed-form σ is ×{ladder[3][2]['sigma'] / ladder[2][2]['sigma']:.2f} our accountant's; "
        f"Lemma 4.1's distance is ×{dist:.2f} the χ² quantile's (√(4p log(2/ζ)) against √χ²_p(0.99), p = 38); "
        "L = 2‖x‖ (Sec. 2, a model with one weight row per label; 2√2‖x‖ in the code) is ×2 (×2.83) the exact "
        "constant ‖x‖ of the one-vector binary model the paper fits (ρ = ±w·x moves by at most "
        "‖x‖·‖w − w'‖). The radius each normalised margin is compared with grows "
        f"×{ladder[7][2]['distance'] * 2 * math.sqrt(2) / ladder[2][2]['distance']:.0f} in all, and the bound "
        "with the share of margins inside it (`flip share`). Corollary 3.3 as printed bounds P(·|S = r) and "
        "P(·) separately (|C| = 1 each); writing P(·) = Σ_r' p_r' P(·|S = r') first, F_k = (1 − p_r)·(P(·|S = r) "
        "− P(·|S = r')) for two groups, so the exact coefficients weigh 2(1 − p_r) in all, 1 on average over the "
        "two groups instead of 2 (`dpfair.bounds.notion_coefficients`; likewise within Y = y): step 6 "
        f"multiplies the four fairness notions by ×{min(coef):.2f}–×{max(coef):.2f} and accuracy (one group) by "
        f"×{printed['accuracy'] / ladder[5][2]['accuracy']:.2f}.",
        "- **Rescaling the rows is not neutral under a fixed μ.** With R = 1 (the old table) and μ = 1 the "
        f"fit is ×38 more regularised than on the unscaled rows (‖w*‖ {ladder[0][2]['w_norm']:.3g} on "
        f"rows of norm 1, {ladder[1][2]['w_norm']:.3g} on rows of norm √38): step 1 moves the notions by "
        f"×{min(unscale):.2f}–×{max(unscale):.2f}.",
        "- **μ in the fit moves the authors' number most.** The code's C = n/μ makes h* nearly the unregularised "
        f"maximum-likelihood model (‖w*‖ {ladder[10][2]['w_norm']:.3g} against {ladder[9][2]['w_norm']:.3g}, test "
        f"accuracy {ladder[10][2]['test_accuracy']:.4f} against {ladder[9][2]['test_accuracy']:.4f}): its "
        "margins are larger, fewer rows can flip, and the bound drops "
        f"×{ladder[9][2]['accuracy'] / ladder[10][2]['accuracy']:.1f} (accuracy). The paper's Table 1 is "
        "therefore a bound for that model with a σ calibrated for μ = 1; Lemma 4.1's sensitivity bound "
        "Δ = 2Λ/(μn) at μ = 1/n² is n² times larger, so a release with the paper's guarantee would need n² times "
        "the noise, and the bound would be vacuous.",
        "- **Equalized odds in the code** uses demographic parity's groups (step 8: "
        f"×{ladder[8][2]['equalized_odds'] / ladder[7][2]['equalized_odds']:.2f} on equalized odds, ×1 elsewhere), "
        "so the code's equalized odds, demographic parity and accuracy parity columns are equal.",
        f"- The split (step 2), the row scale 6 against √38 (step 9) and the solver (step {last}) move each "
        f"number by {small_move:.0%} at most; the golden-section search's t ≤ 1e-5 changes P(r ≤ d) by a factor "
        "at most e^{t·d} < 1 + 1e-6.",
        "", "### The old table's Chernoff column against the authors' computation", "",
        "The issue measured the old table's `paper`-σ Chernoff column at +11 % to −38 % of the published "
        f"values per notion. Against our reconstruction of the authors' computation (step {last}) the same "
        "column is " + ", ".join(f"{LABELS[c]} {old[c] / authors[c] - 1:+.0%}" for c in CERTIFIED_NOTIONS)
        + ": the same range for the four notions, within two points. That column differs from the paper's "
        "number in almost every step of the ladder at once (rows at norm 1 with μ = 1, the χ² distance, "
        "L = ‖x‖, exact coefficients, no truncation), and the factors differ by notion: the factor 2 between "
        f"accuracy ({old['accuracy'] / authors['accuracy'] - 1:+.0%}) and the parity notions "
        f"({old['demographic_parity'] / authors['demographic_parity'] - 1:+.0%}) is Corollary 3.3's coefficients "
        "(step 6: ×2 on the fairness notions, ×1 on accuracy); equality of opportunity's higher ratio "
        f"({old['equal_opportunity'] / authors['equal_opportunity'] - 1:+.0%}) is the norm-1 model's small "
        "margins among the Smiling rows (its equality-of-opportunity bound is about twice its other notions', "
        f"and unscaling the rows halves it alone: step 1, ×{unscale[0]:.2f}). Untruncated Chernoff is "
        f"×{side[0][2]['accuracy'] / authors['accuracy']:.1f} the truncated value on the authors' set-up (side "
        "row); the paper's Table 1 uses the truncated one (Sec. 3.1: \"combining both techniques\").", "",
    ]


def curves(args):
    rng = np.random.default_rng(1)
    data, Xtr, Xte = celeba()
    n_full = len(data.y_train)
    order = rng.permutation(n_full)  # public subsets for the n axis
    rows = []
    sizes = np.unique(np.geomspace(10, n_full, 20).round().astype(int))
    for n in sizes:
        idx = order[:n]
        if len(np.unique(data.y_train[idx])) < 2:
            continue
        rows += [dict(axis="n", **r) for r in _point(Xtr[idx], data.y_train[idx], data.s_train[idx], Xte,
                                                       data.y_test, data.s_test, 1.0)]
        print(f"n = {n}")
    for eps in np.geomspace(1e-3, 10, 20):
        rows += [dict(axis="epsilon", **r) for r in _point(Xtr, data.y_train, data.s_train, Xte, data.y_test,
                                                             data.s_test, float(eps))]
        print(f"epsilon = {eps:.4g}")
    frame = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    frame.to_csv(OUT / "curves.csv", index=False)
    _plot(frame)


def _plot(frame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {"figure1": ("equal_opportunity", "accuracy"),
              "figure2_3": ("equalized_odds", "demographic_parity", "accuracy_parity")}
    for name, notions in groups.items():
        fig, axes = plt.subplots(2, len(notions), figsize=(4.2 * len(notions), 7), squeeze=False)
        for i, axis in enumerate(("n", "epsilon")):
            for j, notion in enumerate(notions):
                ax = axes[i, j]
                t = frame[(frame.axis == axis) & (frame.notion == notion)].sort_values(axis)
                x = t[axis]
                ax.fill_between(x, t.draw_min, t.draw_max, color="tab:green", alpha=0.4, label="100 private models")
                ax.plot(x, t.fair_star, color="black", label="h* (non-private)")
                for col, style, label in (("bound", "-", "Thm 4.4 (Lemma 4.1 distance)"),
                                          ("bound_empirical_distance", "--", "actual distance"),
                                          ("bound_refined", ":", "refined L (App. G.3)")):
                    ax.plot(x, np.clip(t.fair_star + t[col], 0, 1), style, color="tab:blue", label=label)
                    ax.plot(x, np.clip(t.fair_star - t[col], 0, 1), style, color="tab:blue")
                ax.set_xscale("log")
                ax.set_xlabel("training rows n" if axis == "n" else "ε")
                ax.set_title(LABELS[notion])
        axes[0, 0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / f"{name}.png", dpi=110)
        plt.close(fig)


def dpsgd(args):
    """The module path: DP-SGD on the same rows (Lemma 4.2's assumptions met), and DP-FERMI (not met)."""
    data, Xtr, Xte = celeba()
    rows = []
    est = DPSGDClassifier(model="logistic", epsilon=1.0, optimizer="sgd", learning_rate=args.lr, weight_decay=MU,
                          max_grad_norm=math.sqrt(R**2 + 1), batch_size=256, epochs=args.epochs, classes=2,
                          groups=2, random_state=0)
    t0 = time.perf_counter()
    est.fit(Xtr, data.y_train, sensitive_features=data.s_train)
    cert = certify(est, Xte, data.y_test, data.s_test, probability=PROBABILITY, feature_norm_bound=R).to_dict()
    seconds = time.perf_counter() - t0
    for notion in CERTIFIED_NOTIONS:
        rows.append(dict(method=f"dp-sgd (logistic, weight decay 1, SGD at lr {args.lr:g}, C = √2)", notion=notion,
                         distance=cert["distance"], bound=cert[f"bound.{notion}"],
                         chernoff=cert[f"chernoff.{notion}"], markov=cert[f"markov.{notion}"],
                         fairness=cert[f"fairness.{notion}"], holds=cert["holds"], seconds=seconds))
    frame = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    frame.to_csv(OUT / "dpsgd.csv", index=False)
    lines = ["# The certificate through the module path (Lemma 4.2)", "",
             f"Produced by `python benchmarks/certificates.py dpsgd --epochs {args.epochs} --lr {args.lr:g}`. "
             "DP-SGD on the CelebA "
             "rows of Table 1 (bias as a constant feature: Λ = ‖(x, 1)‖ ≤ √2 = C, so no clipping is active), "
             f"ε = 1, δ = 1/n², weight decay μ = {MU:g} (strongly convex), plain SGD at learning rate {args.lr:g} ≤ 1/β. "
             "The distance is our re-derivation of Lemma 4.2 for Poisson-sampled DP-SGD "
             "(`dpfair.bounds.distance`): an in-expectation bound turned into probability 0.99 by Markov's "
             "inequality (×100), whose SGD-variance term γΛ²/(μB) does not vanish with ε (it shrinks with the "
             "learning rate γ: 0.5 gives distance 0.67 and a vacuous bound of 1 for every notion).", "",
             frame.round(5).to_markdown(index=False), "",
             "DP-FERMI gets no certificate: its objective is a min-max problem (ERMI regulariser), not the "
             "strongly convex ERM of the paper's eq. (3), so neither Lemma 4.1 nor Lemma 4.2 bounds "
             "‖h_priv − h*‖; `dpfair.bounds.certify` refuses it. A non-linear module (MLP, CNN) has no unique "
             "optimum and only local margin Lipschitz constants: `certify` reports `holds = False`.", ""]
    (OUT / "dpsgd.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["table", "curves", "dpsgd", "all"])
    parser.add_argument("--epochs", type=int, default=2, help="DP-SGD epochs")
    parser.add_argument("--lr", type=float, default=0.01, help="DP-SGD learning rate (at most 1/β = 2/3)")
    parser.add_argument("--published", default=None,
                        help="table: the paper's Table 1 CelebA row (EO,EOdds,DP,AP,ACC) to print relative "
                             "differences against (withheld in the project's copy)")
    args = parser.parse_args()
    for part in (("table", "curves", "dpsgd") if args.part == "all" else (args.part,)):
        globals()[part](args)


if __name__ == "__main__":
    main()
