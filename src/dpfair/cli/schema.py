"""``dpfair schema FILE``: propose a public schema for a table, as TOML to review and declare, and say on stderr what
it proposed for every column and why (:func:`dpfair.datasets.propose_schema`)."""

from __future__ import annotations

import sys
from pathlib import Path

from dpfair.cli.arguments import group_lists, sensitive_list
from dpfair.cli.results import writable, write_text

HELP = "propose a public schema (TOML) for your own table, to review and pass as --schema"
DESCRIPTION = ("Read a CSV or Parquet file and propose its schema: each column's kind, numeric ranges (rounded "
               "outward) and scaling, categories (others map to one level), a rule for every column with gaps, "
               "how numbers are written (separators, currency and percent signs), near-duplicate categories "
               "merged, log1p for heavy tails, identifiers, free text and dates ignored, the label's classes "
               "and the groups; stderr lists every column's proposal and why. It reads the data to do so: "
               "review the result and declare it public before training.")


def add_arguments(p) -> None:
    p.add_argument("file", metavar="FILE", help="a CSV (.csv, .tsv, optionally compressed) or Parquet file")
    p.add_argument("--label", required=True, metavar="COL", help="the column to predict")
    p.add_argument("--sensitive", required=True, metavar="COL[,COL]",
                   help="the column of the sensitive attribute (several, comma-separated: intersectional groups)")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="every group the sensitive column may hold (public; one list per column separated by ';')")
    p.add_argument("--max-categories", type=int, default=50, metavar="N",
                   help="text columns with more values are ignored as identifiers or free text (default 50)")
    p.add_argument("--out", default=None, help="TOML file to write (default: standard output)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")


def run(args) -> int:
    from dpfair.datasets import propose_schema, read_table

    frame = read_table(args.file, raw=True)
    proposal = propose_schema(frame, label=args.label, sensitive=sensitive_list(args.sensitive),
                              name=str(args.file), groups=group_lists(args.groups),
                              max_categories=args.max_categories,
                              source=f"proposed by `dpfair schema` from the rows of {args.file}; reviewed by: ")
    text = proposal.to_toml()
    if args.out is None:
        sys.stdout.write(text)
    else:
        (path,) = writable(Path(args.out), ".toml", args.overwrite)
        write_text(path, text, args.overwrite)
    width = max(len(d.column) for d in proposal.decisions)
    print(f"dpfair: proposed for the {len(frame.columns)} columns of {args.file}:", file=sys.stderr)
    for decision in proposal.decisions:
        print(f"  {decision.column.ljust(width)}  {decision.line()}", file=sys.stderr)
    print(f"dpfair: this schema was read off the {len(frame):,} rows of {args.file} (types, ranges, categories, "
          f"missing cells, classes, groups): review it, widen or edit what the rows should not decide, then pass it "
          f"as --schema to declare it public", file=sys.stderr)
    return 0
