"""``dpfair predict``: score new rows of a file through the schema a model was trained with (``--input``), or
evaluate a saved model on the part of the data set it was trained beside."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from dpfair.cli.arguments import add_evaluation_arguments, check_eval_args, comma_list, flags_given
from dpfair.cli.evaluation import evaluate, evaluate_predicted, evaluation_privacy_rows, evaluation_rows
from dpfair.cli.output import epsilon_text, print_table
from dpfair.cli.results import writable, write_text
from dpfair.cli.runs import check_model_fits, load_data, load_model, method_name, target_text
from dpfair.utils.capabilities import capabilities
from dpfair.utils.files import write_atomic
from dpfair.utils.progress import progress

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
    """``dpfair predict MODEL --input FILE``: score the rows of a file, a folder of files or a glob with the public
    schema the model was trained with (columns by name; a missing or unknown column is one error), copy the
    ``--keep`` columns through, report per column what the schema's rules did to the cells (clipped, sent to other,
    filled, not scored), and evaluate where the file holds labels.  A row whose cell is declared ``missing =
    "drop"`` gets no prediction: its output row says why instead of being left out, so that the output joins the
    input row for row.  The rows are read, scored and written a record batch at a time (:class:`InputScores`), the
    predictions to a temporary file renamed into place once every batch is written."""
    from dpfair.datasets import Schema
    from dpfair.datasets.columnar import open_table

    if provenance.get("schema") is None:
        raise ValueError(f"{args.model} records no table schema (it was trained on a built-in data set, or before "
                         "dpfair stored one): --input scores models trained with --data; use --dataset for a "
                         "built-in data set's parts")
    schema = Schema.from_dict(provenance["schema"], where=f"{args.model}'s schema")
    table = open_table(args.input, raw=True)
    keep = comma_list(args.keep) or []
    absent = [c for c in keep if c not in table.columns]
    if absent:
        raise ValueError(f"--keep {absent[0]!r}: {args.input} has no such column; its columns: "
                         f"{list(table.columns)[:20]}")
    import pandas as pd

    schema.prepare(pd.DataFrame(columns=list(table.columns)), str(args.input), strict=True, keep=keep)
    if est.n_features_in_ != len(schema.feature_names):
        raise ValueError(f"{args.model} was fitted on {est.n_features_in_} features but its schema gives "
                         f"{len(schema.feature_names)} for {args.input}; the model file is damaged: train it again")
    scores = InputScores(est, schema, table, keep, str(args.input), show_progress=not getattr(args, "quiet", False))
    if not scores.has_groups and capabilities(est).predict_needs_sensitive:
        raise ValueError(f"{method_name(est)} reads the group at prediction time: {args.input} needs the column(s) "
                         f"{', '.join(map(repr, schema.sensitive_columns))}")
    unlabelled = (f"--eval-epsilon releases the fairness figures of labelled rows: {args.input} needs a label and a "
                  f"group in every scored row (columns {schema.label!r} and "
                  f"{', '.join(map(repr, schema.sensitive_columns))}); drop --eval-epsilon")
    if args.eval_epsilon is not None and not (scores.has_label and scores.has_groups):
        raise ValueError(unlabelled)  # said before any row is scored
    if out is not None:
        (out,) = write_atomic(out, lambda target: [(target, scores.csv_batches())], overwrite=args.overwrite)
    else:
        for _ in scores.batches():
            pass
    y, s, predicted = scores.labels(), scores.groups(), scores.predicted()
    labelled = None if y is None else y >= 0
    if args.eval_epsilon is not None and (s is None or not labelled.all()):
        raise ValueError(unlabelled)
    classes = np.asarray(schema.classes, dtype=object)
    n_rows, n_left_out = scores.n_rows, scores.n_rows - len(predicted)
    print(f"{method_name(est)} model {args.model} on {args.input} ({n_rows:,} rows{target_text(est)})")
    counts = np.bincount(predicted, minlength=len(classes))
    rows = [("predicted", ", ".join(f"{c}: {n:,}" for c, n in zip(classes, counts)))]
    if n_left_out:
        rows.append(("not scored", f"{n_left_out:,} rows (a cell the schema declares dropped is missing)"))
    # exact counts of these rows; beside --eval-epsilon (whose release treats them as private) they are marked so
    exact = " (exact, not covered by ε)" if args.eval_epsilon is not None else ""
    rows += [(f"cells of {column}", text + exact) for column, text in scores.counts.lines()]
    evaluation = {}
    if y is not None and s is not None and labelled.all():
        evaluation = evaluate_predicted(est, y, predicted, s, list(schema.groups), args)
        rows += [("error" if label == "test error" else label, value) for label, value in evaluation_rows(evaluation)]
    elif y is not None and labelled.any():
        rows += [("error", f"{float(np.mean(predicted[labelled] != y[labelled])):.4f}"
                  + ("" if labelled.all() else f" ({int(labelled.sum()):,} labelled rows)"))]
    rows += model_epsilon_rows(est, schema.attribute) + evaluation_privacy_rows(evaluation, schema.attribute)
    if out is not None:
        rows += [("predictions", str(out))]
    print_table(rows)
    return 0


class InputScores:
    """The rows of an ``--input`` table scored a record batch at a time: each batch's features through the schema,
    its predictions and probabilities, and its output rows; the label and group codes and the predictions of the
    scored rows (small integers) and the cleaning counts are kept for the summary and the evaluation.

    The output's columns are fixed before the first batch (the file's header): ``row``, the ``--keep`` columns,
    the true label where the file has the label column, the prediction, one probability per class, and
    ``not_scored`` where the schema declares a ``missing = "drop"`` rule (empty for a scored row)."""

    def __init__(self, est, schema, table, keep, name: str, show_progress: bool = False):
        self.est, self.schema, self.table, self.keep, self.name = est, schema, table, keep, name
        self.show_progress = show_progress
        self.has_label = schema.label in table.columns
        self.has_groups = all(c in table.columns for c in schema.sensitive_columns)
        self.drop_rules = [c.name for c in schema.columns if c.missing is not None and c.missing.action == "drop"]
        self.columns = list(dict.fromkeys([*schema.names, *keep, *([schema.label] if self.has_label else []),
                                           *(schema.sensitive_columns if self.has_groups else [])]))
        self.n_rows = 0
        self._y, self._s, self._pred = [], [], []
        self.s_complete = self.has_groups
        from dpfair.datasets.cleaning import CleaningCounts

        self.counts = CleaningCounts()

    def batches(self):
        """Each batch's output table (a DataFrame), the batch scored and its codes kept."""
        from dpfair.datasets import store  # its batch size read at the call (tests make it small)

        with progress(self.table.row_count(), desc=f"scoring {self.name}", unit="row",
                      enabled=self.show_progress) as bar:
            for frame in self.table.frames(self.columns, store.CELLS_PER_BATCH):
                yield self._score(frame)
                bar.update(len(frame))

    def _score(self, frame):
        """One batch scored: its output rows (the codes kept)."""
        import pandas as pd

        from dpfair.fairness import predict_with_groups

        schema, est = self.schema, self.est
        classes = np.asarray(schema.classes, dtype=object)
        needs_s = capabilities(est).predict_needs_sensitive
        prepared = schema.prepare(frame, self.name, keep=self.keep)
        X, kept = prepared.X, prepared.kept
        self.counts.merge(prepared.counts)
        s_all = schema.codes(frame, "sensitive", self.name, allow_missing=True) if self.has_groups else None
        s = None if s_all is None else s_all[kept]
        if s is not None and (s < 0).any():
            if needs_s:
                raise ValueError(f"{method_name(est)} reads the group at prediction time: {self.name} has rows "
                                 f"without a group in {schema.attribute!r}; fill them")
            self.s_complete = False
        y_all = schema.codes(frame, "label", self.name, allow_missing=True) if self.has_label else None
        use_s = s if needs_s else None
        predicted = (np.asarray(predict_with_groups(est, X, use_s)).astype(np.int64) if len(X)
                     else np.zeros(0, np.int64))
        proba = predict_with_groups(est, X, use_s, "predict_proba") if len(X) else np.zeros(
            (0, len(est.classes_)))
        if y_all is not None:
            self._y.append(y_all[kept].astype(np.int16))
        if s is not None:
            self._s.append(s.astype(np.int16))
        self._pred.append(predicted.astype(np.int16))
        out = pd.DataFrame({"row": self.n_rows + np.arange(len(frame))})
        for column in self.keep:
            out[column] = frame[column].to_numpy()
        if y_all is not None:
            out[f"{schema.label}_true"] = np.where(y_all >= 0, classes[np.maximum(y_all, 0)], None)
        shown = np.full(len(frame), None, dtype=object)
        shown[kept] = classes[predicted]
        out[f"{schema.label}_pred"] = shown
        for j, c in enumerate(est.classes_):
            column = np.full(len(frame), np.nan)
            column[kept] = proba[:, j]
            out[f"proba_{classes[int(c)]}"] = column
        if self.drop_rules:
            out["not_scored"] = np.where(kept, "", f"missing {' or '.join(self.drop_rules)} (declared drop)")
        self.n_rows += len(frame)
        return out

    def csv_batches(self):
        """The output as CSV text, a batch at a time (the header once)."""
        for i, out in enumerate(self.batches()):
            yield out.to_csv(index=False, header=i == 0).encode()

    def labels(self) -> np.ndarray | None:
        return None if not self.has_label else _joined(self._y)

    def groups(self) -> np.ndarray | None:
        return _joined(self._s) if self.has_groups and self.s_complete else None

    def predicted(self) -> np.ndarray:
        return _joined(self._pred)


def _joined(parts) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
