"""``dpfair audit``: empirical privacy audits. Without a subcommand, a lower bound on a method's ε from a
distinguishing game over many fits (:mod:`dpfair.audit.games`); ``audit release`` the same for one noise primitive,
``audit measurement`` for the private measurement (many releases of a PrivateMetricFrame); all three exit with
status 1 when the bound is above the claim. ``audit membership`` trains the method on a random half of the data
set's train part and runs membership inference attacks against it (:mod:`dpfair.audit.membership`): an empirical
evaluation, not a guarantee, and its output says so."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from dpfair import __version__
from dpfair.cli.arguments import (
    DEFAULT_EPSILON,
    add_dataset_arguments,
    add_estimator_arguments,
    add_output_arguments,
    check_at_least,
    check_confidence,
    check_open_delta,
    check_positive_epsilon,
    check_run_args,
    comma_list,
    every_command_takes_quiet,
)
from dpfair.cli.output import epsilon_text, print_table, privacy_rows
from dpfair.cli.results import result_path, write_result
from dpfair.cli.runs import build_estimator, estimator_spec, load_data, not_covered, run_record
from dpfair.utils.attacks import ATTACKS, NOTE

HELP = "empirical privacy audits of a method: an ε lower bound, or membership inference"

AUDIT_NOTE = ("An audit gives a statistically valid LOWER bound on ε from one attack: a bound below the claimed ε "
              "does not prove the claim; one above it proves a bug.")

DESCRIPTION = ("Without a subcommand: run the method many times on neighbouring data sets (a canary's s "
               "flipped, or a canary record added), attack the outputs, and turn the attack's success into "
               "a lower bound on ε at the stated confidence. " + AUDIT_NOTE)

#: ``dpfair audit --help``'s last words: where the measured power of the game is (no figures here, where they would
#: go stale: ``benchmarks/privacy_audit.py --catch --rate`` measures them into ``results/audit/``).
EPILOG = ("What the game catches, and at how many runs, is measured by planting bugs (a reused seed, skipped "
          "clipping, exact group proportions, halved noise) and auditing through this command: see the guide's "
          "audits page (docs/guide/audits.md, \"What the audits catch\") and results/audit/README.md. Halved noise "
          "in a Gaussian release escapes a whole-method game of a few hundred runs; `dpfair audit release` audits "
          "the noise primitive itself, and `dpfair audit measurement` the private measurement (PrivateMetricFrame). "
          "Exit status 1 when the lower bound is above the claim, 0 otherwise.")

#: The attacks of ``audit membership`` and the note of its output (:mod:`dpfair.utils.attacks`, their one home).
ATTACK_NAMES = ATTACKS
MEMBERSHIP_NOTE = NOTE[0].upper() + NOTE[1:] + "."


def add_arguments(audit) -> None:
    add_estimator_arguments(audit)
    audit.add_argument("--runs", type=int, default=400, help="fits (half per world; default 400)")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    audit.add_argument("--rows", type=int, default=5000,
                       help="audit on a public random subset of the train part of this many rows (default 5000; "
                            "0: all): a guarantee holds for every data set, and smaller ones train faster")
    audit.add_argument("--one-run", action="store_true",
                       help="Steinke et al.'s one-run audit with --canaries inserted at random (record unit)")
    audit.add_argument("--canaries", type=int, default=1000, help="canaries of --one-run (default 1000)")
    add_output_arguments(audit)
    sub = audit.add_subparsers(dest="audit_command", required=False)
    p = sub.add_parser(
        "membership", help="membership inference attacks (loss, shadow models, LiRA) against a trained model",
        description="Train the method on a random half of the data set's train part and attack it: "
                    "AUC, advantage and TPR at low FPR, overall and per group. " + MEMBERSHIP_NOTE)
    add_estimator_arguments(p)
    p.add_argument("--attack", default=",".join(ATTACK_NAMES), metavar="A,B,...",
                   help=f"attacks, comma-separated: {', '.join(ATTACK_NAMES)} (default: all)")
    p.add_argument("--shadow", type=int, default=16, metavar="N",
                   help="shadow models for the shadow attack and LiRA (default 16; each trains the method once)")
    add_output_arguments(p)
    p.set_defaults(func=run_membership)
    p = sub.add_parser(
        "release", help="audit a noise primitive (Gaussian, Laplace, randomized response): an ε lower bound",
        description="Calibrate one release of --mechanism to --epsilon as every method's releases are, run it "
                    "--releases times on two neighbours at the worst-case distance (a canary at the bound, or one "
                    "person's value changed), and turn the best test into a lower bound on ε as the method audit "
                    "does. With hundreds of thousands of releases the bound nears the primitive's ε, so halved "
                    "noise is caught here where the whole-method game cannot see it. Exit status 1 when the bound "
                    "is above the claim. " + AUDIT_NOTE)
    p.add_argument("--mechanism", choices=["gaussian", "laplace", "randomized-response"], default="gaussian",
                   help="the primitive (default gaussian)")
    p.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                   help=f"the ε it is calibrated to (default {DEFAULT_EPSILON:g})")
    p.add_argument("--delta", type=float, default=1e-5, help="δ of the calibration and of the bound (default 1e-5)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default=None,
                   help="neighbouring relation (default: record for gaussian and laplace, sensitive for "
                        "randomized-response, which protects one person's value)")
    p.add_argument("--releases", type=int, default=400_000, help="releases (half per world; default 400000)")
    p.add_argument("--buckets", type=int, default=2, help="values of randomized-response (default 2)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--accountant", choices=["pld", "rdp"], default="pld",
                   help="the accountant that calibrates the noise and states the claim (default pld)")
    add_output_arguments(p)
    p.set_defaults(func=run_release)
    p = sub.add_parser(
        "measurement", help="audit the private measurement (PrivateMetricFrame) itself: an ε lower bound",
        description="Release the table group × label × prediction of the data set's test part (predictions of a "
                    "logistic regression fitted on 5,000 rows of its train part) --releases times through PrivateMetricFrame at "
                    "--epsilon, on the table and on its neighbour (a canary person's group moved from the smallest "
                    "group to the largest, or a canary person added), attack what each frame publishes (its "
                    "released table, per-group figures and differences), and turn the best test into a lower "
                    "bound on ε as the method audit does. Counts released without noise are caught at a few "
                    "hundred releases. Exit status 1 when the bound is above the claim. " + AUDIT_NOTE)
    add_dataset_arguments(p)
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the PUBLIC randomness: the split, the --rows subset, the frames' bootstrap (the "
                        "privacy noise is always secret and fresh)")
    p.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                   help=f"the budget of each release (default {DEFAULT_EPSILON:g})")
    p.add_argument("--delta", type=float, default=None, help="δ of each release (default 1/n²)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default="sensitive",
                   help="neighbouring relation, the frame's privacy unit (default sensitive)")
    p.add_argument("--releases", type=int, default=200, help="releases (half per world; default 200)")
    p.add_argument("--rows", type=int, default=0,
                   help="audit on a public random subset of the test part of this many rows (default 0: all)")
    p.add_argument("--metrics", default=None, metavar="M,M,...",
                   help="the figures each frame computes, comma-separated (default count, selection_rate, "
                        "true_positive_rate, false_positive_rate, accuracy)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--accountant", choices=["pld", "rdp"], default="pld",
                   help="the accountant that calibrates the noise and states the claim (default pld)")
    add_output_arguments(p)
    p.set_defaults(func=run_measurement)
    every_command_takes_quiet(sub)


def protects_of(unit, attribute, epsilon, rest: str = "features and label") -> str:
    """Whom a claimed ε under ``unit`` protects, in words (:class:`~dpfair.privacy.record.PrivacyRecord`)."""
    from dpfair.privacy.record import PrivacyRecord

    return PrivacyRecord.of(epsilon, None, unit, attribute, rest=rest).protects


def run(args) -> int:
    """``dpfair audit``: the distinguishing game over many fits of the method (or Steinke et al.'s one run)."""
    from dpfair.audit.games import audit_epsilon, audit_one_run

    check_run_args(args)
    check_at_least("--runs", args.runs, 4, "hundreds for a meaningful bound")
    check_confidence(args.confidence)
    args.unit = args.privacy_unit  # the relation audited: the estimator's unit where it has one, else the game's only
    spec = estimator_spec(argparse.Namespace(**{**vars(args), "quiet": True, "privacy_unit": None}))
    (out,) = result_path(args, "audit")
    data, options = load_data(args)
    if args.unit is not None and "privacy_unit" in spec[0]().get_params():  # the audited unit, before the estimator
        spec = (spec[0], {**spec[1], "privacy_unit": args.unit})  # is checked against the data set's s columns
    est = build_estimator(spec, data)
    X, y, s = data.X_train, data.y_train, data.s_train
    if args.rows and args.rows < len(y):  # any data set is a valid audit: a public random subset is cheaper
        keep = np.sort(np.random.default_rng(args.seed).choice(len(y), size=args.rows, replace=False))
        X, y, s = X[keep], y[keep], s[keep]
    t0 = time.perf_counter()
    if args.one_run:
        if (args.unit or "record") != "record":
            raise ValueError("--one-run audits the record unit (canaries inserted at random); drop --unit sensitive")
        found = audit_one_run(est, X, y, s, canaries=args.canaries,
                              confidence=args.confidence, random_state=args.seed, verbose=not args.quiet)
        summary = {"epsilon_claimed": found["epsilon_claimed"], "epsilon_lower_bound": found["epsilon"],
                   "confidence": args.confidence, "runs": 1, "unit": "record", "audit": "one run",
                   "canaries": found["canaries"], "guesses": found["guesses"], "correct": found["correct"],
                   "delta": found["delta"]}
    else:
        report = audit_epsilon(est, X, y, s, unit=args.unit, runs=args.runs, confidence=args.confidence,
                               random_state=args.seed, n_groups=data.n_groups, verbose=not args.quiet)
        summary = {**report.to_dict(), "audit": "distinguishing game"}
        summary.pop("method")
    seconds = time.perf_counter() - t0
    protects = protects_of(summary["unit"], data.sensitive, summary["epsilon_claimed"])
    result = {**run_record(args, est, data, options, "audit"), "note": AUDIT_NOTE, **summary,
              "protects": protects, "rows": int(len(y)), "seconds": seconds}
    (out,) = write_result(args, out, result)

    return print_audit(f"privacy audit of {args.method} on {data.name} ({len(y):,} rows; {summary['audit']}, "
                       f"unit {summary['unit']})", summary, args.confidence, seconds, out, protects)


def print_audit(title: str, summary: dict, confidence: float, seconds: float, out: Path, protects: str) -> int:
    """The table every ε audit prints (the claimed ε naming whom it protects: ``protects``); the exit status: 1
    when the lower bound is above the claim (a bug proved at ``confidence``), else 0."""
    claimed, lower = summary["epsilon_claimed"], summary["epsilon_lower_bound"]
    above = lower > claimed + 1e-12
    print(title)
    rows = [("epsilon claimed", epsilon_text(claimed, protects)), ("epsilon lower bound", f"{lower:.4g}"),
            ("confidence", f"{confidence:g}"), ("runs", str(summary["runs"]))]
    if "test" in summary:
        rows += [("attack statistic", summary["test"]["statistic"])]
    rows += [("verdict", "LOWER BOUND ABOVE THE CLAIM: a bug" if above else "consistent with the claim"),
             ("time", f"{seconds:.1f} s"), ("result", str(out))]
    print_table(rows)
    print(f"  ({AUDIT_NOTE})")
    return 1 if above else 0


def run_release(args) -> int:
    """``dpfair audit release``: the game on one noise primitive, calibrated as the methods' releases are."""
    from dpfair.audit import audit_release

    if not (args.epsilon > 0 and math.isfinite(args.epsilon)):
        raise ValueError(f"--epsilon must be a finite number > 0, got {args.epsilon}")
    if not 0.0 <= args.delta < 1.0:
        raise ValueError(f"--delta must lie in [0, 1), got {args.delta}")
    check_at_least("--releases", args.releases, 4, "hundreds of thousands for a bound near ε")
    check_confidence(args.confidence)
    mechanism = args.mechanism.replace("-", "_")
    if mechanism == "randomized_response" and args.unit == "record":
        raise ValueError("randomized response protects one person's value (a replace-one change): drop --unit "
                         "record (its unit is sensitive)")
    check_at_least("--buckets", args.buckets, 2)
    (out,) = result_path(args, name=f"release-{args.mechanism}-audit")
    report = audit_release(mechanism, epsilon=args.epsilon, delta=args.delta, unit=args.unit, runs=args.releases,
                           confidence=args.confidence, accountant=args.accountant, buckets=args.buckets)
    summary = {**report.to_dict(), "audit": "release primitive"}
    summary.pop("method")
    # a primitive protects one contribution, not a person's row: its neighbours in words
    protects = ("one person's value (neighbours replace it)" if summary["unit"] == "sensitive"
                else "one person's contribution (neighbours add or remove it)")
    result = {"dpfair_version": __version__, "command": "audit release", "mechanism": args.mechanism,
              "epsilon_target": args.epsilon, "accountant": args.accountant,
              **({"buckets": args.buckets} if mechanism == "randomized_response" else {}),
              "note": AUDIT_NOTE, **summary, "protects": protects}
    (out,) = write_result(args, out, result)
    name = args.mechanism.replace("-", " ")
    return print_audit(f"privacy audit of the {name} release ({summary['runs']:,} releases; release primitive, "
                       f"unit {summary['unit']})", summary, args.confidence, summary["seconds"], out, protects)


def run_measurement(args) -> int:
    """``dpfair audit measurement``: the game on the private measurement, many releases of a PrivateMetricFrame."""
    from sklearn.linear_model import LogisticRegression

    from dpfair.audit.games import MEASUREMENT_METRICS, audit_measurement

    check_positive_epsilon(args.epsilon)
    check_open_delta(args.delta)
    check_at_least("--releases", args.releases, 8, "hundreds for a meaningful bound")
    check_confidence(args.confidence)
    check_at_least("--rows", args.rows, 0, "0: the whole test part")
    metrics = list(MEASUREMENT_METRICS) if args.metrics is None else [m for m in comma_list(args.metrics) if m]
    (out,) = result_path(args, name=f"{args.dataset}-measurement-audit-seed{args.seed}")
    data, options = load_data(args)
    # the table audited: the test part's people, with the predictions of a model the auditor fits on (a public
    # random subset of 5,000 rows of) the train part: any model will do, the guarantee holds for every table;
    # --rows: a public random subset of the people
    rng = np.random.default_rng(args.seed)
    fit = rng.permutation(len(data.y_train))[:5000]
    model = LogisticRegression(max_iter=1000).fit(data.X_train[fit], data.y_train[fit])
    y, s, y_pred = data.y_test, data.s_test, model.predict(data.X_test)
    if args.rows and args.rows < len(y):
        keep = np.sort(rng.choice(len(y), size=args.rows, replace=False))
        y, s, y_pred = y[keep], s[keep], y_pred[keep]
    report = audit_measurement(y, y_pred, s, groups=range(data.n_groups), classes=range(data.n_classes),
                               epsilon=args.epsilon, delta=args.delta, unit=args.unit, releases=args.releases,
                               metrics=metrics, accountant=args.accountant, confidence=args.confidence,
                               random_state=args.seed, verbose=not args.quiet)
    summary = {**report.to_dict(), "audit": "measurement"}
    summary.pop("method")
    canary = dict(summary["canary"])
    for key in ("from_group", "to_group", "group"):  # the public group names beside their codes
        if key in canary:
            canary[f"{key}_name"] = data.group_names[canary[key]]
    summary["canary"] = canary
    result = {"dpfair_version": __version__, "command": "audit measurement", "dataset": data.name,
              "options": options, "sensitive": data.sensitive, "seed": args.seed, "rows": int(len(y)),
              "predictions": "logistic regression fitted on 5,000 rows of the train part (auditor-side, not "
                             "private)",
              "metrics": metrics, "epsilon_target": args.epsilon, "accountant": args.accountant,
              "note": AUDIT_NOTE, **summary}
    result["protects"] = protects_of(summary["unit"], data.sensitive, summary["epsilon_claimed"],
                                     rest="label and prediction")
    (out,) = write_result(args, out, result)
    return print_audit(f"privacy audit of PrivateMetricFrame on {data.name} ({len(y):,} rows, {summary['runs']:,} "
                       f"releases; measurement, unit {summary['unit']})", summary, args.confidence,
                       summary["seconds"], out, result["protects"])


def run_membership(args) -> int:
    """``dpfair audit membership``: membership inference attacks against the method trained on half the pool."""
    from dpfair.audit import membership_inference
    from dpfair.privacy.record import PrivacyRecord

    check_run_args(args)
    attacks = [a.strip() for a in args.attack.split(",") if a.strip()]
    unknown = [a for a in attacks if a not in ATTACK_NAMES]
    if unknown or not attacks:
        raise ValueError(f"--attack: unknown attack {unknown[0]!r}; choose from {', '.join(ATTACK_NAMES)}" if unknown
                         else f"--attack is empty; choose from {', '.join(ATTACK_NAMES)}")
    if args.shadow < 2 and set(attacks) - {"loss"}:
        raise ValueError(f"--shadow must be >= 2 for the shadow attack and LiRA (16 or more is better), got "
                         f"{args.shadow}; or use --attack loss")
    # the estimators' own progress bars stay off: one bar over the models trained instead
    spec = estimator_spec(argparse.Namespace(**{**vars(args), "quiet": True}))
    (out,) = result_path(args, "membership")
    data, options = load_data(args)
    est = build_estimator(spec, data)
    t0 = time.perf_counter()
    report = membership_inference(est, data.X_train, data.y_train, data.s_train, attacks=attacks,
                                  n_shadow=args.shadow, random_state=args.seed, group_names=data.group_names,
                                  verbose=not args.quiet)
    seconds = time.perf_counter() - t0
    audit = report.to_dict()
    eps, delta = report.target_privacy_spent
    privacy = PrivacyRecord.of(eps, delta, report.target_privacy_unit, data.sensitive,
                               spent=audit["target_privacy_spent"], guarantee=report.target_privacy_guarantee,
                               not_covered=not_covered(args))
    result = {
        **run_record(args, est, data, options, "audit membership"),
        "note": report.note,
        "pool": "the data set's train part; the target trains on a random half of it (the members)",
        "n_pool": audit["n_pool"],
        **privacy.to_json("privacy_spent"),
        "n_shadow": audit["n_shadow"],
        "confidence": audit["confidence"],
        "confidence_intervals": audit["confidence_intervals"],
        "attacks": audit["attacks"],
        "seconds": seconds,
    }
    (out,) = write_result(args, out, result)

    print(f"membership inference against {args.method} on {data.name} (pool: {report.n_pool} training rows, "
          f"half of them members; {report.n_shadow} shadow models)")
    print(report.to_text())
    rows = [("target " + k, v) for k, v in privacy_rows(privacy)]
    rows += [("time", f"{seconds:.1f} s"), ("result", str(out))]
    print_table(rows)
    return 0
