"""``dpfair certify``: fit (or load) a private model and print Mangold et al.'s certificate: for every notion, how far
its fairness can lie from the non-private optimum's."""

from __future__ import annotations

import math
import time

import numpy as np

from dpfair.cli.arguments import add_estimator_arguments, add_output_arguments, check_at_least, check_run_args
from dpfair.cli.output import print_columns, print_table, privacy_rows
from dpfair.cli.results import result_path, write_result
from dpfair.cli.runs import (
    build_estimator,
    check_model_fits,
    estimator_spec,
    load_data,
    method_name,
    not_covered,
    run_record,
)

HELP = "certify how much privacy can cost fairness (Mangold et al.'s bounds)"
DESCRIPTION = ("Fit a private model and print, for every fairness notion, a bound on |Fair(h_priv) − "
               "Fair(h*)| (h* the non-private optimum) holding with the given probability over the privacy "
               "noise, its Chernoff and Markov variants, and the gaps of further private draws.")

CERTIFICATE_NOTE = ("empirical gaps compare further private draws with the NON-PRIVATE model: a research diagnostic "
                    "that the printed ε does not cover (the certificate alone needs only the released model)")


def add_arguments(p) -> None:
    add_estimator_arguments(p)
    p.set_defaults(method="output-perturbation")
    p.add_argument("--probability", type=float, default=0.99, help="probability 1 − ζ of the bound (default 0.99)")
    p.add_argument("--draws", type=int, default=100,
                   help="further private models compared with the non-private one (default 100; 0: none)")
    p.add_argument("--load", default=None, metavar="MODEL.pt",
                   help="certify a saved model (from `dpfair train`) instead of fitting one; evaluated on the "
                        "test part of --dataset, which must be the split it was trained beside (same --seed)")
    p.add_argument("--norm-bound", type=float, default=None,
                   help="DP-SGD only: a public bound on every row's norm (the loss's Lipschitz constant)")
    p.add_argument("--distance", type=float, default=None,
                   help="a bound on ‖h_priv − h*‖ holding with --probability, for a model whose distance no lemma "
                        "gives (default: from the method, Lemma 4.1 or 4.2)")
    add_output_arguments(p)


def run(args) -> int:
    from dpfair.bounds import CERTIFIED_NOTIONS, certify, empirical_gaps
    from dpfair.privacy.record import PrivacyRecord

    check_run_args(args)
    if not 0.0 < args.probability < 1.0:
        raise ValueError(f"--probability must be in (0, 1) (the certificate holds with this probability), "
                         f"got {args.probability}")
    check_at_least("--draws", args.draws, 0, "0 skips the empirical comparison")
    if args.epsilon is not None and math.isinf(args.epsilon):
        raise ValueError("a certificate bounds what privacy costs fairness; give a finite --epsilon")
    spec = None if args.load is not None else estimator_spec(args)
    (out,) = result_path(args, "certificate")
    data, options = load_data(args)
    t0 = time.perf_counter()
    if args.load is not None:
        from dpfair.algorithms import load_estimator

        est = load_estimator(args.load)
        args.method = method_name(est)
        check_model_fits(est, args.load, data)
    else:
        est = build_estimator(spec, data)
    if "epsilon" not in est.get_params():
        raise ValueError(f"method {args.method!r} is not private; certify a private method (output-perturbation, "
                         "dp-sgd)")
    if args.load is None:
        est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    if args.distance is not None and not 0 < args.distance < math.inf:
        raise ValueError(f"--distance must be a positive number, got {args.distance:g}")
    cert = certify(est, data.X_test, data.y_test, data.s_test, probability=args.probability,
                   feature_norm_bound=args.norm_bound, distance=args.distance)
    empirical = {}
    if args.draws:
        empirical = empirical_gaps(est, data.X_train, data.y_train, data.s_train, data.X_test, data.y_test,
                                   data.s_test, n_draws=args.draws, notions=CERTIFIED_NOTIONS,
                                   verbose=not args.quiet)
    seconds = time.perf_counter() - t0
    privacy = PrivacyRecord.of_fit(est, data.sensitive, not_covered=not_covered(args) if args.load is None else "")
    summary = cert.to_dict()
    result = {
        **run_record(args, est, data, options, "certify"),
        "n_train": int(len(data.y_train)),
        "n_test": int(len(data.y_test)),
        **privacy.to_json("not_covered", "privacy_ledger"),
        **summary,
        "draws": args.draws,
        "model_file": args.load,
        "seconds": seconds,
    }
    if empirical:
        result["empirical_note"] = CERTIFICATE_NOTE
        for notion, gaps in empirical.items():
            result[f"empirical.{notion}"] = float(np.max(gaps))
            result[f"empirical_within_bound.{notion}"] = float(np.mean(gaps <= summary[f"bound.{notion}"]))
    (out,) = write_result(args, out, result, spent=privacy.spent_text() if args.load is None else "")

    print(f"fairness certificate for {args.method} on {data.name} (sensitive: {data.sensitive}; "
          f"{len(data.y_test):,} test rows; probability {args.probability:g}; ‖h_priv − h*‖ ≤ {cert.distance:.3g})")
    header = ("notion", "|F| of h_priv", "certified", "Chernoff", "Markov") + (
        (f"max gap, {args.draws} draws",) if empirical else ())
    table = [header]
    for notion in CERTIFIED_NOTIONS:
        row = (notion.replace("_", " "), f"{summary[f'fairness.{notion}']:.4f}", f"{summary[f'bound.{notion}']:.4f}",
               f"{summary[f'chernoff.{notion}']:.4f}", f"{summary[f'markov.{notion}']:.4g}")
        table.append(row + ((f"{result[f'empirical.{notion}']:.4f}",) if empirical else ()))
    print_columns(table, indent="  ")
    if not cert.holds:
        print("  the certificate's assumptions do not hold for this model: " + "; ".join(cert.assumptions))
    if empirical:
        print(f"  ({CERTIFICATE_NOTE})")
    print_table(privacy_rows(privacy) + [("time", f"{seconds:.1f} s"), ("result", str(out))])
    return 0
