"""``dpfair predict``: score new rows of a file through the schema a model was trained with (``--input``), or
evaluate a saved model on the part of the data set it was trained beside."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from dpfair.cli.arguments import add_evaluation_arguments, check_eval_args, comma_list, flags_given
from dpfair.cli.evaluation import evaluate, evaluation_privacy_rows, evaluation_rows
from dpfair.cli.output import epsilon_text, print_table
from dpfair.cli.results import writable, write_text
from dpfair.cli.runs import check_model_fits, load_data, load_model, method_name, target_text
from dpfair.utils.capabilities import capabilities

HELP = "score new rows of a file (--input), or evaluate a saved model on a data set's test part"
DESCRIPTION = ("Load a model written by `dpfair train` (safely: no code from the file runs). With --input, score "
               "the rows of a CSV or Parquet file through the schema stored in the model (columns by name). "
               "Otherwise rebuild the data set and split it was trained beside (as recorded in the model; "
               "--dataset, --option and --seed override) and print error and fairness on the chosen part. "
               "--out writes per-row predictions and class probabilities.")


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.pt", help="a model file written by `dpfair train`")
    p.add_argument("--dataset", default=None, help="data set (default: the one the model records)")
    p.add_argument("--sensitive", default=None, help="sensitive attribute (default: the one the model records)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="data set option (default: the ones the model records)")
    p.add_argument("--seed", type=int, default=None, help="split seed (default: the one the model records)")
    p.add_argument("--input", default=None, metavar="FILE",
                   help="score the rows of this CSV or Parquet file instead of a data set's part (a model trained "
                        "with --data: its schema matches the columns by name); labels, where present, are evaluated")
    p.add_argument("--part", choices=["test", "train"], default=None,
                   help="rows to evaluate (default test; train re-reads the private training rows, a use the "
                        "model's ε does not cover)")
    p.add_argument("--out", default=None, help="CSV of per-row predictions and class probabilities")
    p.add_argument("--keep", default=None, metavar="COL,...",
                   help="with --input: columns copied into --out beside each prediction (an applicant ID, to join by)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")
    add_evaluation_arguments(p)


def run(args) -> int:
    from dpfair.fairness import predict_with_groups
    from dpfair.persistence import load_provenance

    check_eval_args(args)
    if args.eval_epsilon is not None and args.part == "train":
        raise ValueError("--eval-epsilon releases figures of people apart from the training people; --part train "
                         "re-reads the training people themselves (a use the model's ε does not cover): drop one")
    out = writable(Path(args.out), ".csv", args.overwrite)[0] if args.out else None
    if args.input is not None:
        given = flags_given((("--dataset", args.dataset), ("--option", args.option), ("--seed", args.seed),
                             ("--sensitive", args.sensitive), ("--part", args.part)))
        if given:
            raise ValueError(f"--input scores the rows of a file; {given[0]} chooses a built-in data set's part: drop "
                             "one of them")
    elif args.keep is not None:
        raise ValueError("--keep copies columns of an --input file into the predictions; add --input FILE or drop it")
    est = load_model(args.model)
    provenance = load_provenance(args.model)
    if args.input is not None:
        return predict_input(args, est, provenance, out)
    args.part = args.part or "test"
    from_model = argparse.Namespace(dataset=args.dataset or provenance.get("dataset"),
                                    sensitive=args.sensitive or provenance.get("sensitive"),
                                    seed=provenance.get("seed", 0) if args.seed is None else args.seed,
                                    option=args.option, data_home=args.data_home)
    if from_model.dataset is None:
        raise ValueError(f"{args.model} does not record its data set; pass --dataset (and the --option and --seed "
                         "it was trained with)")
    if args.option is None and provenance.get("dataset") == from_model.dataset:
        from_model.option = [f"{k}={json.dumps(v)}" for k, v in provenance.get("dataset_options", {}).items()]
    data, _ = load_data(from_model)
    X, y, s = {"test": data.test, "train": data.train}[args.part]
    check_model_fits(est, args.model, data)
    evaluation = evaluate(est, X, y, s, data.group_names, args)
    if out is not None:
        import pandas as pd

        proba = predict_with_groups(est, X, s, "predict_proba")
        names = np.asarray(data.group_names, dtype=object)  # the groups by name, as `dpfair measure --groups` takes
        table = pd.DataFrame({"row": np.arange(len(y)), "y_true": y, "y_pred": predict_with_groups(est, X, s),
                              "group": names[s]})
        for j, c in enumerate(est.classes_):
            table[f"proba_{c}"] = proba[:, j]
        text = table.to_csv(index=False)
        out = write_text(out, text, args.overwrite)
    print(f"{method_name(est)} model {args.model} on the {args.part} part of {data.name} "
          f"({evaluation['n']:,} rows; sensitive: {data.sensitive}{target_text(est)})")
    rows = evaluation_rows(evaluation)
    rows[0] = (f"{args.part} error", rows[0][1])
    rows += model_epsilon_rows(est, data.sensitive) + evaluation_privacy_rows(evaluation, data.sensitive)
    if out is not None:
        rows += [("predictions", str(out))]
    print_table(rows)
    return 0


def model_epsilon_rows(est, attribute: str | None) -> list[tuple[str, str]]:
    """``predict``'s line of the model's ε (its training spent it; scoring rows spends nothing), naming whom it
    protects."""
    from dpfair.privacy.record import PrivacyRecord

    privacy = PrivacyRecord.of_fit(est, attribute)
    return [("epsilon of the model", epsilon_text(privacy.epsilon, privacy.protects))]


def predict_input(args, est, provenance: dict, out: Path | None) -> int:
    """``dpfair predict MODEL --input FILE``: score the rows of a file with the public schema the model was trained
    with (columns by name; a missing or unknown column is one error), copy the ``--keep`` columns through, report
    per column what the schema's rules did to the cells (clipped, sent to other, filled, not scored), and evaluate
    where the file holds labels.  A row whose cell is declared ``missing = "drop"`` gets no prediction: its output
    row says why instead of being left out, so that the output joins the input row for row."""
    from dpfair.datasets import Schema, read_with_schema
    from dpfair.fairness import predict_with_groups

    if provenance.get("schema") is None:
        raise ValueError(f"{args.model} records no table schema (it was trained on a built-in data set, or before "
                         "dpfair stored one): --input scores models trained with --data; use --dataset for a "
                         "built-in data set's parts")
    schema = Schema.from_dict(provenance["schema"], where=f"{args.model}'s schema")
    frame = read_with_schema(args.input, schema)
    keep = comma_list(args.keep) or []
    absent = [c for c in keep if c not in frame.columns]
    if absent:
        raise ValueError(f"--keep {absent[0]!r}: {args.input} has no such column; its columns: "
                         f"{list(frame.columns)[:20]}")
    prepared = schema.prepare(frame, str(args.input), strict=True, keep=keep)
    X, kept = prepared.X, prepared.kept
    if est.n_features_in_ != X.shape[1]:
        raise ValueError(f"{args.model} was fitted on {est.n_features_in_} features but its schema gives "
                         f"{X.shape[1]} for {args.input}; the model file is damaged: train it again")
    has_groups = all(c in frame.columns for c in schema.sensitive_columns)
    s_all = schema.codes(frame, "sensitive", str(args.input), allow_missing=True) if has_groups else None
    s = None if s_all is None else s_all[kept]
    if s is not None and (s < 0).any():
        if capabilities(est).predict_needs_sensitive:
            raise ValueError(f"{method_name(est)} reads the group at prediction time: {args.input} has rows without "
                             f"a group in {schema.attribute!r}; fill them")
        s = None
    if s is None and capabilities(est).predict_needs_sensitive:
        raise ValueError(f"{method_name(est)} reads the group at prediction time: {args.input} needs the column(s) "
                         f"{', '.join(map(repr, schema.sensitive_columns))}")
    y_all = (schema.codes(frame, "label", str(args.input), allow_missing=True) if schema.label in frame.columns
             else None)
    y = None if y_all is None else y_all[kept]
    labelled = None if y is None else y >= 0
    if args.eval_epsilon is not None and (y is None or s is None or not labelled.all()):
        raise ValueError(f"--eval-epsilon releases the fairness figures of labelled rows: {args.input} needs a label "
                         f"and a group in every scored row (columns {schema.label!r} and "
                         f"{', '.join(map(repr, schema.sensitive_columns))}); drop --eval-epsilon")
    classes = np.asarray(schema.classes, dtype=object)
    predicted = np.asarray(predict_with_groups(est, X, s)).astype(np.int64) if len(X) else np.zeros(0, np.int64)
    proba = predict_with_groups(est, X, s, "predict_proba") if len(X) else np.zeros((0, len(est.classes_)))
    if out is not None:
        import pandas as pd

        table = pd.DataFrame({"row": np.arange(len(frame))})
        for column in keep:
            table[column] = frame[column].to_numpy()
        if y_all is not None:
            table[f"{schema.label}_true"] = np.where(y_all >= 0, classes[np.maximum(y_all, 0)], None)
        shown = np.full(len(frame), None, dtype=object)
        shown[kept] = classes[predicted]
        table[f"{schema.label}_pred"] = shown
        for j, c in enumerate(est.classes_):
            column = np.full(len(frame), np.nan)
            column[kept] = proba[:, j]
            table[f"proba_{classes[int(c)]}"] = column
        if not kept.all():
            dropped = [c.name for c in schema.columns if c.missing is not None and c.missing.action == "drop"]
            table["not_scored"] = np.where(kept, "", f"missing {' or '.join(dropped)} (declared drop)")
        text = table.to_csv(index=False)
        out = write_text(out, text, args.overwrite)
    print(f"{method_name(est)} model {args.model} on {args.input} ({len(frame):,} rows{target_text(est)})")
    counts = np.bincount(predicted, minlength=len(classes))
    rows = [("predicted", ", ".join(f"{c}: {n:,}" for c, n in zip(classes, counts)))]
    if not kept.all():
        rows.append(("not scored", f"{int((~kept).sum()):,} rows (a cell the schema declares dropped is missing)"))
    # exact counts of these rows; beside --eval-epsilon (whose release treats them as private) they are marked so
    exact = " (exact, not covered by ε)" if args.eval_epsilon is not None else ""
    rows += [(f"cells of {column}", text + exact) for column, text in prepared.counts.lines()]
    evaluation = {}
    if y is not None and s is not None and labelled.all():
        evaluation = evaluate(est, X, y, s, list(schema.groups), args)
        rows += [("error" if label == "test error" else label, value) for label, value in evaluation_rows(evaluation)]
    elif y is not None and labelled.any():
        rows += [("error", f"{float(np.mean(predicted[labelled] != y[labelled])):.4f}"
                  + ("" if labelled.all() else f" ({int(labelled.sum()):,} labelled rows)"))]
    rows += model_epsilon_rows(est, schema.attribute) + evaluation_privacy_rows(evaluation, schema.attribute)
    if out is not None:
        rows += [("predictions", str(out))]
    print_table(rows)
    return 0

