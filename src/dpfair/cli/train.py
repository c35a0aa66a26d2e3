"""``dpfair train``: fit a private fair model, print its test error, fairness and ε, write the result and the model."""

from __future__ import annotations

import contextlib
import time

from dpfair.cli.arguments import (
    add_estimator_arguments,
    add_evaluation_arguments,
    add_output_arguments,
    check_eval_args,
    check_run_args,
)
from dpfair.cli.evaluation import evaluate, evaluation_privacy_rows, evaluation_record, evaluation_rows
from dpfair.cli.output import STARTED, print_table, privacy_rows
from dpfair.cli.results import model_bytes, result_path, write_result
from dpfair.cli.runs import build_estimator, estimator_spec, load_data, not_covered, provenance, run_record, target_text

HELP = "train a model and report error, fairness and the privacy spent"


def add_arguments(p) -> None:
    add_estimator_arguments(p)
    p.add_argument("--reproducible-noise", type=int, default=None, metavar="SEED",
                   help="TESTS ONLY: make the privacy noise reproducible from SEED; voids the guarantee, and the "
                        "result says so")
    add_evaluation_arguments(p)
    add_output_arguments(p, "JSON result file; the model is saved beside it as .pt")


def run(args) -> int:
    from dpfair.privacy import reproducible_noise
    from dpfair.privacy.record import PrivacyRecord

    check_run_args(args)
    check_eval_args(args)
    spec = estimator_spec(args)
    out, model_path = result_path(args, companions=(".pt",))
    data, options = load_data(args)
    est = build_estimator(spec, data)
    noise = contextlib.nullcontext() if args.reproducible_noise is None else reproducible_noise(args.reproducible_noise)
    t0 = time.perf_counter()
    with noise:
        est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    seconds = time.perf_counter() - t0
    evaluation = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, args)
    privacy = PrivacyRecord.of_fit(est, data.sensitive, not_covered=not_covered(args),
                                   noise_multiplier=getattr(est, "noise_multiplier_", None))
    record = run_record(args, est, data, options, "train")
    result = {
        **record,
        "n_train": int(len(data.y_train)),
        "n_test": evaluation["n"],
        "target": est.fairness_target(),
        "test_error": evaluation["error"],
        "fairness": evaluation["fairness"],
        "per_group_accuracy": evaluation["per_group_accuracy"],
        "accuracy_inequality": evaluation["accuracy_inequality"],
        **privacy.to_json("not_covered", "privacy_guarantee", "noise_multiplier", "privacy_ledger"),
        "evaluation": evaluation_record(evaluation),
        "fit_seconds": seconds,
        "model_file": model_path.name,
    }
    out, model_path = write_result(args, out, result, model=model_bytes(est, provenance(record, result["n_train"])),
                                   spent=privacy.spent_text())

    print(f"{args.method} on {data.name} (sensitive: {data.sensitive}, groups: {', '.join(data.group_names)}"
          f"{target_text(est)})")
    rows = evaluation_rows(evaluation) + privacy_rows(privacy) + evaluation_privacy_rows(evaluation, data.sensitive)
    rows += [("fit time", f"{seconds:.1f} s (the command so far: {time.perf_counter() - STARTED:.1f} s with loading, "
                          "evaluation and writing)"), ("result", str(out)), ("model", str(model_path))]
    print_table(rows)
    return 0
