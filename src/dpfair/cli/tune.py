"""``dpfair tune``: pick a fair model's hyper-parameters privately (:mod:`dpfair.selection`): one model out,
with the ε of the whole search."""

from __future__ import annotations

import argparse

from dpfair.cli.arguments import (
    add_estimator_arguments,
    add_evaluation_arguments,
    add_output_arguments,
    check_eval_args,
    check_run_args,
    parse_value,
)
from dpfair.cli.evaluation import evaluate, evaluation_privacy_rows, evaluation_record, evaluation_rows
from dpfair.cli.output import epsilon_text, print_table, privacy_rows
from dpfair.cli.results import model_bytes, result_path, write_result
from dpfair.cli.runs import build_estimator, estimator_spec, load_data, not_covered, provenance, run_record
from dpfair.utils.capabilities import capabilities

HELP = "pick a fair model's hyper-parameters privately: one model, and the ε of the whole search"
DESCRIPTION = ("Private selection (random stopping, Liu & Talwar; Papernot & Steinke): a secret number of runs, "
               "each training a random candidate of --grid on part of the train set and releasing its noisy "
               "score on the rest (the fairness violation, penalised beyond error <= reference + "
               "--max-error-increase); the best released score wins. For dp-fermi under the sensitive unit "
               "with a grid of lam alone (--strategy auto's choice), one fit instead, its lam following the "
               "public training error to the constraint at no privacy cost. --epsilon is the budget of the "
               "whole search, and the printed ledger lists its parts.")

#: ``dpfair tune``'s candidates when ``--grid`` is not given, by method.
DEFAULT_GRIDS = {"dp-fermi": {"lam": [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]}}


def validation_size(text: str):
    """``--validation-size``: ``auto`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a share in [0, 1), got {text!r}") from None


def add_arguments(p) -> None:
    add_estimator_arguments(p)
    p.add_argument("--max-error-increase", type=float, default=0.01,
                   help="X in the constraint error <= reference + X (default 0.01)")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...",
                   help="candidate values of a hyper-parameter (repeatable; their product is the candidate set; "
                        "default for dp-fermi: lam=0,0.5,1,2,4,8)")
    p.add_argument("--reference-error", type=float, default=None,
                   help="a public proxy of the non-private error (default: the non-private model's on public (x, y) "
                        "under the sensitive unit, a private estimate under the record unit)")
    p.add_argument("--strategy", choices=["auto", "constrained", "random-stopping"], default="auto",
                   help="constrained: one dp-fermi fit whose lam follows the public error constraint (sensitive "
                        "unit, a lam grid); random-stopping: the candidates of --grid; auto (default): constrained "
                        "where it applies")
    p.add_argument("--repetitions", default="geometric",
                   help="law of the secret number of runs: geometric (default), logarithmic, poisson, or a shape")
    p.add_argument("--mean-runs", type=float, default=None, help="its mean (default: twice the candidates)")
    p.add_argument("--validation-size", type=validation_size, default="auto",
                   help="share of the train part held out to score the runs; 0 scores the fitted rows (default auto: "
                        "0 for a logistic model, else 0.2)")
    add_evaluation_arguments(p)
    add_output_arguments(p, "JSON result file; the model is saved beside it as .pt")


def grid_of(args) -> dict:
    """``--grid KEY=V1,V2,...`` (repeatable) as a dict of value lists, or the method's default grid."""
    if not args.grid:
        if args.method not in DEFAULT_GRIDS:
            from dpfair.algorithms import METHODS

            strength = capabilities(METHODS[args.method]).fairness_strength if args.method in METHODS else None
            hint = f", e.g. --grid {strength}=..." if strength else ""
            raise ValueError(f"method {args.method!r} has no default grid; give the candidates with --grid "
                             f"KEY=V1,V2,...{hint}")
        return DEFAULT_GRIDS[args.method]
    grid = {}
    for item in args.grid:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"--grid takes KEY=V1,V2,..., got {item!r}")
        grid[key.replace("-", "_")] = [parse_value(v) for v in values.split(",")]
    return grid


def run(args) -> int:
    from dpfair.selection import PrivateSearch
    from dpfair.privacy.record import PrivacyRecord

    check_run_args(args)
    check_eval_args(args)
    if args.lam is not None:
        raise ValueError("--lam fixes λ, which the search tunes: drop it (give the candidates with --grid lam=...)")
    if not args.max_error_increase >= 0:
        raise ValueError(f"--max-error-increase must be >= 0, got {args.max_error_increase}")
    spec = estimator_spec(args)
    if not capabilities(spec[0]).private:
        raise ValueError(f"method {args.method!r} is not private: every run of a search would spend ε = ∞; choose a "
                         "private method (`dpfair methods`)")
    grid = grid_of(args)
    settings = dict(notion=args.notion, max_error_increase=args.max_error_increase,
                    reference_error=args.reference_error, repetitions=parse_value(args.repetitions),
                    mean_runs=args.mean_runs, strategy=args.strategy.replace("-", "_"),
                    validation_size=args.validation_size, random_state=args.seed)
    # every candidate and setting checked by the search and the estimator themselves, before any data is loaded
    PrivateSearch(spec[0](**spec[1]), grid, epsilon=spec[1]["epsilon"], delta=spec[1]["delta"],
                  **settings).check_hyperparameters()
    out, model_path = result_path(args, "tune", (".pt",))
    data, options = load_data(args)
    est = build_estimator(spec, data)
    search = PrivateSearch(est, grid, epsilon=est.epsilon, delta=est.delta, **settings)
    # no duration is published: a search's time grows with its secret number of runs (the guide's command-line page, "dpfair tune")
    search.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    best = search.best_estimator_
    selection = best.selection_
    evaluation = evaluate(best, data.X_test, data.y_test, data.s_test, data.group_names, args)
    privacy = PrivacyRecord.of_fit(best, data.sensitive, not_covered=not_covered(args),
                                   per_model_epsilon=selection["per_model_epsilon"])
    record = run_record(args, best, data, options, "tune")
    result = {
        **record,
        "n_train": int(len(data.y_train)),
        "n_test": evaluation["n"],
        "grid": grid,
        "chosen": search.best_params_,
        "strategy": selection["strategy"],
        "released_scores": ([] if search.released_score_ is None
                            else [{"params": search.best_params_, "score": search.released_score_}]),
        "test_error": evaluation["error"],
        "fairness": evaluation["fairness"],
        "per_group_accuracy": evaluation["per_group_accuracy"],
        "accuracy_inequality": evaluation["accuracy_inequality"],
        **privacy.to_json("not_covered", "per_model_epsilon", "privacy_guarantee", "privacy_ledger"),
        "evaluation": evaluation_record(evaluation),
        "selection": selection,
        "model_file": model_path.name,
    }
    out, model_path = write_result(args, out, result, model=model_bytes(best, provenance(record, result["n_train"])),
                                   spent=privacy.spent_text("search"))

    print(f"{args.method} on {data.name} (sensitive: {data.sensitive}, groups: {', '.join(data.group_names)}), "
          f"tuned privately over {', '.join(grid)}")
    chosen = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                       for k, v in search.best_params_.items())
    rows = [("chosen", chosen)]
    if search.released_score_ is None:  # the constrained strategy: λ followed the public error, no score released
        rows += [("strategy", "constrained: one fit, λ by the public training error (from "
                              f"{selection['lam_start']:g})")]
    else:
        rows += [("released score", f"{search.released_score_:.4f}")]
    rows += [("error threshold", (f"{selection['score']['threshold']:.4f} (reference "
                                  f"{selection['score']['reference_error']:.4f} + {args.max_error_increase:g})"))]
    rows += evaluation_rows(evaluation) + privacy_rows(privacy)
    rows += [(f"  {e['label'][:60]}", f"×{e['count']}") for e in privacy.ledger]
    rows += evaluation_privacy_rows(evaluation, data.sensitive)
    rows += [("per-model ε", epsilon_text(selection["per_model_epsilon"], privacy.protects)
              + " (each run's; the search's total above)"), ("result", str(out)),
             ("model", str(model_path))]
    print_table(rows)
    return 0
