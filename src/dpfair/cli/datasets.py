"""``dpfair datasets``: the data sets, whether they are on disk, their sizes, groups and licences."""

from __future__ import annotations

import json

from dpfair.cli.output import jsonable, print_columns

HELP = "list the data sets and whether they are on disk"


def add_arguments(p) -> None:
    p.add_argument("name", nargs="?", default=None, help="one data set only")
    p.add_argument("--data-home", default=None)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from dpfair.datasets import dataset_info, list_datasets
    from dpfair.utils.progress import progress

    names = [args.name] if args.name else list_datasets()
    infos = []
    with progress(len(names), "data sets", "data set") as bar:  # a first listing loads each one (seconds)
        for n in names:
            infos.append(dataset_info(n, data_home=args.data_home))
            bar.update()
    if args.json:
        print(json.dumps(jsonable(infos), indent=2))
        return 0
    header = ("name", "on disk", "rows", "feat.", "label=1", "sensitive", "group sizes", "licence")
    table = [header]
    for i in infos:
        sizes = ", ".join(f"{g}: {c}" for g, c in (i["group_sizes"] or {}).items())
        balance = i["label_balance"]
        table.append((
            i["name"], "yes" if i["on_disk"] else ("unreadable" if i.get("error") else "no"),
            "-" if i["rows"] is None else f"{i['rows']:,}",
            "-" if i["features"] is None else str(i["features"]),
            "-" if balance is None else (f"{balance:.3f}" if isinstance(balance, float) else "multiclass"),
            "/".join(i["sensitive_options"]), sizes or "-", i["licence"],
        ))
    print_columns(table)
    for i in infos:
        if i.get("error"):
            print(f"{i['name']}: {i['error']}")
    return 0
