"""The flags several commands share, their value types and their checks, each written once.

Light on purpose: building the parser (``dpfair --help``, a typo) imports nothing heavy, so every check here
that needs the library imports it where it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json

DEFAULT_METHOD = "dp-fermi"
DEFAULT_DATASET = "adult"
DEFAULT_EPSILON = 1.0


def parse_value(text: str):
    """``--param`` values: JSON when they parse as JSON (numbers, lists, true/null), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def key_values(items, flag: str) -> dict:
    """``KEY=VALUE`` items (``--param``, ``--option``) as a dict, dashes in keys read as underscores."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key.replace("-", "_")] = parse_value(value)
    return out


def comma_list(text: str | None) -> list[str] | None:
    """``A,B,C`` as ``["A", "B", "C"]`` (each stripped); ``None`` stays ``None``."""
    return None if text is None else [v.strip() for v in text.split(",")]


def sensitive_list(text: str | None) -> str | list[str] | None:
    """``--sensitive COL`` or ``--sensitive COL1,COL2`` (the intersectional groups of several columns)."""
    columns = comma_list(text)
    return columns if columns is None or len(columns) > 1 else columns[0]


def group_lists(text: str | None):
    """``--groups A,B,C`` (one sensitive column), or one list per column separated by ``;`` (``A,B;F,M``)."""
    if text is None:
        return None
    lists = [comma_list(part) for part in text.split(";")]
    return lists[0] if len(lists) == 1 else lists


def flags_given(pairs) -> list[str]:
    """The flags of ``[(flag, value), ...]`` that were given (their value is not ``None``), in order."""
    return [flag for flag, value in pairs if value is not None]


def check_run_args(args) -> None:
    """Checks of the flags ``train``, ``tune``, ``certify`` and the audits share, before anything is loaded or
    written."""
    if args.epsilon is not None:
        check_positive_epsilon(args.epsilon)
    if args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")


def check_positive_epsilon(epsilon: float) -> None:
    """``--epsilon`` > 0 (``inf`` allowed: no privacy)."""
    if not epsilon > 0:
        raise ValueError(f"--epsilon must be > 0, got {epsilon}; smaller epsilon means more privacy")


def check_open_delta(delta: float | None) -> None:
    """``--delta`` strictly between 0 and 1 when given."""
    if delta is not None and not 0.0 < delta < 1.0:
        raise ValueError(f"--delta must lie strictly between 0 and 1, got {delta}")


def check_confidence(confidence: float) -> None:
    """``--confidence`` in (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1), got {confidence}")


def check_at_least(flag: str, value: int, minimum: int, note: str = "") -> None:
    """``flag``'s ``value`` is at least ``minimum`` (``note``: why, or what more is better)."""
    if value < minimum:
        raise ValueError(f"{flag} must be >= {minimum}{f' ({note})' if note else ''}, got {value}")


def check_eval_args(args) -> None:
    """``--eval-epsilon`` / ``--eval-delta`` checked before any data is loaded."""
    from dpfair.utils.validation import check_epsilon

    if getattr(args, "eval_epsilon", None) is not None:
        check_epsilon(args.eval_epsilon, "--eval-epsilon", budget=True)
    if getattr(args, "eval_delta", None) is not None:
        if getattr(args, "eval_epsilon", None) is None:
            raise ValueError("--eval-delta sets the private evaluation's δ: give --eval-epsilon too, or drop it")
        if not 0.0 < args.eval_delta < 1.0:
            raise ValueError(f"--eval-delta must lie strictly between 0 and 1, got {args.eval_delta:g}; 1/n² of the "
                             "test part is the default")


def resolve_data_args(args) -> None:
    """Fill ``args.dataset`` of a command that reads data: ``--data FILE`` (a user's table, named after the file)
    or ``--dataset NAME`` (a built-in; :data:`DEFAULT_DATASET` when neither is given), never both."""
    if not hasattr(args, "data"):
        return
    if args.data is None:
        for flag in ("label", "schema", "test_data", "groups"):
            if getattr(args, flag, None) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} goes with --data FILE (your own table); add --data or "
                                 f"drop --{flag.replace('_', '-')}")
        if getattr(args, "infer_schema", False):
            raise ValueError("--infer-schema goes with --data FILE (your own table); add --data or drop it")
        if args.dataset is None and getattr(args, "command", None) != "predict":
            args.dataset = DEFAULT_DATASET
        return
    from dpfair.datasets.tables import table_name

    if args.dataset is not None:
        raise ValueError(f"give --data FILE (your own table) or --dataset NAME (a built-in), not both; got --dataset "
                         f"{args.dataset} and --data {args.data}")
    if args.option:
        raise ValueError("--option sets a built-in data set's loader options; with --data FILE, declare the table "
                         "in --schema instead")
    args.dataset = table_name(args.data)


def add_estimator_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that choose the data and build the estimator, shared by ``train``, ``tune``, ``certify`` and the
    audits of a method."""
    p.add_argument("--dataset", default=None,
                   help=f"built-in data set name (see `dpfair datasets`; default {DEFAULT_DATASET})")
    add_table_arguments(p)
    p.add_argument("--sensitive", default=None,
                   help="sensitive attribute (default: the data set's); with --data, the column that holds it "
                        "(several, comma-separated: their intersectional groups)")
    p.add_argument("--method", default=DEFAULT_METHOD,
                   help="training method: dp-fermi (default; certify: output-perturbation), dp-sgd, erm, pf-ld, "
                        "dp-postprocess, dp-oracle, private-demographics, output-perturbation, reductions, threshold "
                        "(`dpfair methods` describes them)")
    p.add_argument("--notion", default=None,
                   help="fairness notion of a fair method, one of those it targets (`dpfair methods`): "
                        "demographic_parity, equalized_odds, equal_opportunity, accuracy_parity (default: the "
                        "method's)")
    p.add_argument("--lam", type=float, default=None, help="DP-FERMI's fairness weight λ ≥ 0")
    p.add_argument("--model", default=None, help="logistic, mlp or cnn (default: the method's)")
    p.add_argument("--epsilon", type=float, default=None,
                   help=f"privacy budget ε of a private method (default {DEFAULT_EPSILON:g}; inf: no privacy)")
    p.add_argument("--delta", type=float, default=None, help="privacy budget δ (default 1/n²)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the PUBLIC randomness: the split, initialisation, public minibatch order "
                        "(the privacy noise is always secret and fresh)")
    p.add_argument("--privacy-unit", "--unit", dest="privacy_unit", choices=["sensitive", "record"], default=None,
                   help="whom ε protects: each person's sensitive attribute, their features and label public "
                        "(sensitive), or each person's whole record (record); default: the method's (`dpfair "
                        "methods`); an audit audits this relation")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="estimator hyper-parameter")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="data set option, e.g. n_groups=3")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")


def add_table_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a user's own table (:func:`dpfair.datasets.load_table`)."""
    p.add_argument("--data", default=None, metavar="FILE",
                   help="your own table instead of --dataset: a CSV (.csv, .tsv, optionally compressed) or Parquet "
                        "file, a folder of them (a partitioned data set) or a glob; with --label and --sensitive, or "
                        "a --schema that declares them")
    p.add_argument("--label", default=None, metavar="COL", help="with --data: the column to predict")
    p.add_argument("--schema", default=None, metavar="FILE",
                   help="with --data: the table's public schema (TOML; `dpfair schema FILE` proposes one): "
                        "features, ranges, categories, label classes, groups")
    p.add_argument("--test-data", default=None, metavar="FILE",
                   help="with --data: a second file of test rows (default: a split of --data by --seed)")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="with --data and no --schema: every group the sensitive column may hold (public), so that "
                        "the group list is not read off the rows (the ε does not cover a list read off them); with "
                        "several sensitive columns, one list per column separated by ';'")
    p.add_argument("--store", default="auto", choices=["auto", "memory", "disk"],
                   help="with --data: where the float32 features are kept: in memory, in a file memory-mapped from "
                        "--cache-dir (tables larger than memory), or auto (memory while they take at most half the "
                        "memory available); default auto")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="with --data: the folder of feature stores on disk (default: stores/ in $DPFAIR_CACHE_DIR or "
                        "~/.cache/dpfair); a later run on the same table and schema reuses its store")
    p.add_argument("--infer-schema", action="store_true",
                   help="with --data and no --schema under privacy_unit=record: infer the schema from the private "
                        "rows anyway (its ranges and categories then leak outside ε; refused without this flag)")


def add_output_arguments(p: argparse.ArgumentParser, out_help: str = "JSON result file") -> None:
    """``--out``, ``--overwrite`` and ``--quiet``: the flags of every command that writes a result."""
    p.add_argument("--out", default=None, help=out_help)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_evaluation_arguments(p: argparse.ArgumentParser) -> None:
    """``--eval-epsilon`` / ``--eval-delta``: release the test part's figures by group privately."""
    p.add_argument("--eval-epsilon", type=float, default=None, metavar="E",
                   help="release the test part's fairness figures (violations, per-group accuracy, inequality) once "
                        "through a PrivateMetricFrame at this ε, on a ledger of their own (the test people); without "
                        "it they are exact: non-private diagnostics, not covered by --epsilon")
    p.add_argument("--eval-delta", type=float, default=None, metavar="D",
                   help="δ of the private evaluation (default 1/n² of the test part)")


def add_dataset_arguments(p: argparse.ArgumentParser) -> None:
    """``--dataset``, ``--sensitive``, ``--option`` and ``--data-home`` of a command that reads a built-in data set
    only (``audit measurement``)."""
    p.add_argument("--dataset", default=DEFAULT_DATASET,
                   help=f"built-in data set name (see `dpfair datasets`; default {DEFAULT_DATASET})")
    p.add_argument("--sensitive", default=None, help="sensitive attribute (default: the data set's)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="data set option, e.g. n_groups=3")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")


def every_command_takes_quiet(subcommands) -> None:
    """``--quiet`` on every subcommand of ``subcommands`` (an action of ``add_subparsers``; the guide says every
    command takes it): where one has none, it is added (silencing its progress bars and notes, as elsewhere)."""
    for command in subcommands.choices.values():
        with contextlib.suppress(argparse.ArgumentError):  # it has one already
            command.add_argument("--quiet", action="store_true", help="no progress bar")
