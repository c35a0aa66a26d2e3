"""``dpfair report STORE``: one self-contained HTML page of a results store (:mod:`dpfair.experiments.report`)."""

from __future__ import annotations

from pathlib import Path

from dpfair.cli.results import writable

HELP = ("one self-contained HTML page of a results store: trade-offs, fronts, per-group tables, privacy ledgers, the "
        "papers' numbers")


def add_arguments(p) -> None:
    p.add_argument("store", metavar="STORE", help="a results store written by `dpfair sweep`")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--tables", default=None, metavar="DIR",
                   help="also write models.csv, points.csv and best.csv/.md (fronts and lowest violations) into DIR")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")


def run(args) -> int:
    if not Path(args.store).is_file():
        raise ValueError(f"no results store {args.store!r}; run `dpfair sweep SPEC --store {args.store}` first")
    from dpfair.experiments.report import render_report
    from dpfair.experiments.store import ResultsStore

    out, = writable(Path(args.out), ".html", args.overwrite)
    render_report(ResultsStore(args.store), out, tables=args.tables)
    print(f"report: {out}" + ("" if args.tables is None else f"; tables in {args.tables}"))
    return 0
