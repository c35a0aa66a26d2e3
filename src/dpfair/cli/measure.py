"""``dpfair measure``: the private fairness figures of any model's predictions (:mod:`dpfair.measurement`): the
counts group × label × prediction released once, every group's rates with intervals that include the noise."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

from dpfair import __version__
from dpfair.cli.arguments import (
    add_output_arguments,
    check_open_delta,
    comma_list,
    flags_given,
    group_lists,
    sensitive_list,
)
from dpfair.cli.output import print_columns, print_table
from dpfair.cli.results import result_path, write_result
from dpfair.cli.runs import load_model, method_name

HELP = "private fairness figures of any model's predictions: per-group rates with intervals"
DESCRIPTION = ("Release the counts group × label × prediction of a file of predictions once, with Laplace "
               "or Gaussian noise (whichever is smaller at the budget) on a ledger "
               "(dpfair.measurement.frame), and print every group's rates, the differences and ratios between "
               "groups, and the difference of each fairness notion whose rates are measured (demographic parity, "
               "equalized odds, ...), each with an interval that includes the noise; a group too small for the "
               "budget is flagged. The group and class lists are public: declare them. Writes the figures and the "
               "ledger as JSON.")

#: ``dpfair measure``'s column headers, by metric.
MEASURE_HEADERS = {"count": "count", "selection_rate": "selection rate", "true_positive_rate": "TPR",
                   "false_positive_rate": "FPR", "true_negative_rate": "TNR", "false_negative_rate": "FNR",
                   "accuracy": "accuracy", "error": "error"}


def add_arguments(p) -> None:
    p.add_argument("--predictions", default=None, metavar="FILE|DIR|GLOB",
                   help="a CSV or Parquet file with one row per person: true label, prediction and group columns; "
                        "or a folder of such files (a partitioned data set, key=value folders are columns), or a "
                        "glob such as 'exports/*.parquet'; read a batch of rows at a time")
    p.add_argument("--label", default=None, metavar="COL", help="the column of the true labels")
    p.add_argument("--prediction", default=None, metavar="COL", help="the column of the model's predictions")
    p.add_argument("--sensitive", default=None, metavar="COL[,COL]",
                   help="the column of each person's group (several, comma-separated: their intersections; then "
                        "--groups lists each column's groups, separated by ';')")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="every group the column may hold (public; required at a finite --epsilon)")
    p.add_argument("--classes", default=None, metavar="NEG,POS",
                   help="the labels (public; default 0,1); the last is the positive class unless --positive")
    p.add_argument("--positive", default=None, metavar="LABEL", help="the positive class of the rates")
    p.add_argument("--model", default=None, metavar="MODEL.pt",
                   help="instead of --predictions: a model trained with `dpfair train --data` predicts --data first")
    p.add_argument("--data", dest="model_data", default=None, metavar="FILE",
                   help="with --model: the rows to predict, in its schema")
    p.add_argument("--epsilon", type=float, required=True, help="the measurement's budget ε (inf: exact, not private)")
    p.add_argument("--delta", type=float, default=None, help="its δ (default 1/n²)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default="sensitive",
                   help="protect each person's group (default) or each person's whole row")
    p.add_argument("--metrics", default=None, metavar="M1,M2,...",
                   help="figures to release (default count,selection_rate,true_positive_rate,false_positive_rate,"
                        "accuracy; also true_negative_rate, false_negative_rate, error)")
    p.add_argument("--intervals", choices=["population", "rows"], default="population",
                   help="what the intervals cover: the population's value (noise and sampling; default) or the exact "
                        "value on these rows (noise only)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' level (default 0.95)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates of the intervals (default 1000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the intervals' bootstrap (public randomness; the privacy noise is always fresh)")
    p.add_argument("--secure", action="store_true",
                   help="draw the noise exactly on a grid from the OS's CSPRNG, not in floating point (whose low bits "
                        "can betray a small count); slightly more noise")
    p.add_argument("--backend", choices=["local", "dask"], default="local",
                   help="count the rows in this process (default) or on a Dask cluster (--scheduler, or a local one "
                        "on loopback); the release happens once, here")
    p.add_argument("--scheduler", "--address", dest="scheduler", default=None, metavar="ADDRESS",
                   help="with --backend dask: a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (its workers must "
                        "reach the files at the same paths)")
    p.add_argument("--workers", type=int, default=None,
                   help="with --backend dask and no --scheduler: worker processes of the local cluster")
    p.add_argument("--batch-rows", type=int, default=None, metavar="N",
                   help="rows read at a time (default 1,048,576): memory is bounded by one batch")
    add_output_arguments(p)


def figure(value, interval=None, count: bool = False) -> str:
    """``0.123 [0.101, 0.145]`` (``—`` where a value is undefined); counts as whole numbers."""
    if value is None or not math.isfinite(value):
        return "—"
    text = f"{value:,.0f}" if count else f"{value:.3f}"
    if interval is not None and None not in interval:
        lo, hi = interval
        text += f" [{lo:,.0f}, {hi:,.0f}]" if count else f" [{lo:.3f}, {hi:.3f}]"
    return text


def measurement_table(record: dict) -> list[list[str]]:
    """The printed table of a measurement: a row per group (flagged figures marked ``!``), then everyone, the
    between-groups difference and ratio."""
    metrics = record["metrics"]
    table = [["group", *(MEASURE_HEADERS[m] for m in metrics)]]
    for g, figures in record["by_group"].items():
        table.append([g, *(figure(figures[m]["value"], figures[m]["interval"], m == "count")
                           + (" !" if figures[m]["flagged"] else "") for m in metrics)])
    agg = record["aggregates"]
    table.append(["everyone", *(figure(agg[m]["overall"], agg[m]["overall_interval"], m == "count")
                                for m in metrics)])
    def marked(m, text):  # a between-groups figure that includes a flagged group
        return text + (" !" if agg[m]["flagged_groups"] else "")

    table.append(["difference", *("" if m == "count" else marked(m, figure(agg[m]["difference"],
                                                                         agg[m]["difference_interval"]))
                                  for m in metrics)])
    table.append(["ratio", *("" if m == "count" else marked(m, figure(agg[m]["ratio"])) for m in metrics)])
    if any(agg[m]["flagged_groups"] for m in metrics if m != "count"):
        table.append(["difference, unflagged groups",
                      *("" if m == "count" else figure(agg[m]["difference_unflagged"]) for m in metrics)])
    return table


def run(args) -> int:
    """``dpfair measure``: the private fairness figures of a file of predictions (:mod:`dpfair.measurement`)."""
    from dpfair.measurement.files import DEFAULT_METRICS, measure_file, measurement_record
    from dpfair.privacy.record import PrivacyRecord

    if not args.epsilon > 0:
        raise ValueError(f"--epsilon must be > 0 (inf: exact figures, no privacy), got {args.epsilon}")
    check_open_delta(args.delta)
    if (args.predictions is None) == (args.model is None):
        raise ValueError("name the rows once: --predictions FILE (labels, predictions and groups in columns), or "
                         "--model M --data FILE (the model predicts first)")
    source = args.predictions if args.model is None else args.model_data
    if args.model is not None:
        given = flags_given((("--label", args.label), ("--prediction", args.prediction),
                             ("--sensitive", args.sensitive), ("--groups", args.groups), ("--classes", args.classes)))
        if args.model_data is None:
            raise ValueError("--model needs --data FILE: the rows to predict and measure, in the model's schema")
        if given:
            raise ValueError(f"--model reads the columns, groups and classes from the model's schema; drop {given[0]}")
    else:
        missing = [f for f, v in (("--label", args.label), ("--prediction", args.prediction),
                                  ("--sensitive", args.sensitive)) if v is None]
        if missing:
            raise ValueError(f"--predictions needs {missing[0]} COL (the column of each person's "
                             f"{ {'--label': 'true label', '--prediction': 'prediction', '--sensitive': 'group'}[missing[0]] })")
        if args.model_data is not None:
            raise ValueError("--data goes with --model (rows to predict); with --predictions, drop --data")
    if args.backend != "dask" and (args.scheduler is not None or args.workers is not None):
        raise ValueError(f"{'--scheduler' if args.scheduler is not None else '--workers'} goes with --backend dask")
    if args.backend == "dask" and args.model is not None:
        raise ValueError("--backend dask counts a --predictions table; with --model, predict first (`dpfair predict "
                         "--out FILE`) and measure FILE")
    if args.batch_rows is not None and args.batch_rows < 1:
        raise ValueError(f"--batch-rows must be a positive integer, got {args.batch_rows}")
    (out,) = result_path(args, name=f"measure-{source_name(source)}")
    options = dict(epsilon=args.epsilon, delta=args.delta, privacy_unit=args.unit, confidence=args.confidence,
                   n_bootstrap=args.bootstrap, random_state=args.seed, intervals=args.intervals,
                   metrics=comma_list(args.metrics) or DEFAULT_METRICS, positive=args.positive,
                   secure_mode=args.secure)
    if args.model is None:
        with counting_backend(args) as client:
            frame = measure_file(args.predictions, label=args.label, prediction=args.prediction,
                                 sensitive=sensitive_list(args.sensitive), groups=group_lists(args.groups),
                                 classes=comma_list(args.classes), client=client,
                                 **({} if args.batch_rows is None else {"batch_rows": args.batch_rows}), **options)
        columns = {"label": args.label, "prediction": args.prediction,
                   "sensitive": " × ".join(comma_list(args.sensitive))}
    else:
        frame, columns = measure_model(args, options)
    record = measurement_record(frame, columns["sensitive"])
    result = {"dpfair_version": __version__, "command": "measure", "source": str(source),
              "model": None if args.model is None else str(args.model), "columns": columns,
              "n": int(frame.n_), "seed": args.seed, **record}
    privacy = PrivacyRecord.of(record["epsilon"], record["delta"], record.get("privacy_unit"))
    (out,) = write_result(args, out, result, spent=privacy.spent_text("measurement"))

    eps, delta = record["epsilon"], record["delta"]
    print(f"{source}: {result['n']:,} rows; groups of {columns['sensitive']}: {', '.join(record['groups'])}; "
          f"positive class {record['positive_class']!r}")
    if math.isfinite(eps):
        drawn = " (exact, on a grid, secure mode)" if record["secure_mode"] else ""
        print(f"released with ε = {eps:.4g}, δ = {delta:.3g} for {record['protects']}; "
              f"{record['mechanism'].capitalize()} noise"
              f"{drawn}, std {frame.noise_std_:.3g} per count; intervals: {100 * frame.confidence:g} % "
              + ("(privacy noise and sampling: the population's value)" if frame.sampling
                 else "(privacy noise: the exact value on these rows)"))
    else:
        print("exact figures (epsilon = inf): NOT private, every figure reads the groups exactly")
    table = measurement_table(record)
    print_columns(table, indent="  ")
    rows = []
    for notion, shown in record["notions"].items():  # every registered notion whose rates were measured
        rows.append((f"{notion.replace('_', ' ')} difference", figure(shown["value"], shown["interval"])
                     + (f" !  (unflagged groups: {figure(shown['value_unflagged'])})"
                        if shown["flagged_groups"] else "")))
    flagged = sorted({g for g, figures in record["by_group"].items() for f in figures.values() if f["flagged"]})
    if flagged:
        rows.append(("! too few people", f"{', '.join(flagged)}: not a confident figure at this ε (raise --epsilon "
                                         "or merge small groups); a difference marked ! includes them"))
    rows.append(("result", str(out)))
    print_table(rows)
    return 0


def source_name(source) -> str:
    """A result file's name part for a table: a file's name less its suffixes, a folder's name, ``table`` for a
    glob."""
    import re

    name = Path(str(source).rstrip("/")).name.split(".")[0]
    return re.sub(r"[^\w-]", "", name) or "table"


@contextlib.contextmanager
def counting_backend(args):
    """The Dask client that counts the rows (``--backend dask``), or ``None`` (this process counts them)."""
    if args.backend != "dask":
        yield None
        return
    from dpfair.experiments.dask_backend import DaskBackend

    with DaskBackend(workers=args.workers, address=args.scheduler) as backend:
        yield backend.client


def measure_model(args, options: dict):
    """``dpfair measure --model M --data FILE``: the model predicts the rows of FILE (read through its schema),
    then they are measured with the schema's public group and class lists."""
    from dpfair.measurement.files import measure_counts, model_counts
    from dpfair.persistence import load_provenance

    est = load_model(args.model)
    provenance = load_provenance(args.model)
    if provenance.get("schema") is None:
        raise ValueError(f"{args.model} records no table schema (trained on a built-in data set): predict its rows "
                         "with `dpfair predict --out FILE` and measure them with --predictions FILE")
    table = model_counts(est, provenance["schema"], args.model_data, show_progress=not args.quiet,
                         **({} if args.batch_rows is None else {"batch_rows": args.batch_rows}))
    frame = measure_counts(table, **options)
    from dpfair.datasets import Schema

    schema = Schema.from_dict(provenance["schema"], where=f"{args.model}'s schema")
    return frame, {"label": schema.label, "prediction": f"{method_name(est)} model {args.model}",
                   "sensitive": schema.attribute}
