"""``dpfair methods``: the methods (guarantee, notions), or one method's hyper-parameters, from the catalog stored
beside :mod:`dpfair.algorithms.catalog` (no estimator, torch or scikit-learn is imported)."""

from __future__ import annotations

import json

from dpfair.cli.output import jsonable, print_columns

HELP = "list the methods (guarantee, notions), or one method's hyper-parameters"


def add_arguments(p) -> None:
    p.add_argument("name", nargs="?", default=None, help="one method: its hyper-parameters with defaults")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def plain(text: str | None) -> str:
    """reStructuredText markup of a docstring as plain text for the terminal: ``code`` as code, a role
    :x:`~a.b.Name` as Name, :x:`words <target>` as words."""
    import re

    if not text:
        return ""
    text = re.sub(r":[\w:]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", text)
    text = re.sub(r":[\w:]+:`~?([^`]*)`", lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~")
                  else m.group(1), text)
    return text.replace("``", "")


def run(args) -> int:
    # the classes' facts as stored beside the catalog module: no estimator (torch, scikit-learn) is imported
    from dpfair.algorithms.catalog import read_catalog

    catalog = read_catalog()
    rows = [{k: v for k, v in entry.items() if k != "parameters"} for entry in catalog]
    if args.name is None:
        if args.json:
            print(json.dumps(jsonable(rows), indent=2))
            return 0
        table = [("method", "estimator", "guarantee", "notions")]
        table += [(r["method"], r["estimator"], r["guarantee"], ", ".join(r["notions"]) or "-") for r in rows]
        print_columns(table)
        print("(`dpfair methods METHOD` lists a method's hyper-parameters; set them with --param KEY=VALUE)")
        return 0
    at = next((i for i, r in enumerate(rows) if r["method"] == args.name), None)
    if at is None:
        raise ValueError(f"unknown method {args.name!r}; choose one of {', '.join(r['method'] for r in rows)}")
    row, params = rows[at], catalog[at]["parameters"]
    if args.json:
        shown = [{k: p[k] for k in ("name", "default", "description", "accepts")} for p in params]
        print(json.dumps(jsonable({**row, "parameters": shown}), indent=2))
        return 0
    print(f"{row['method']}: {plain(row['summary'])}")
    print(f"  estimator  {row['estimator']}")
    print(f"  guarantee  {row['guarantee']}")
    if row["notions"]:
        strength = f" (strength: {row['fairness_strength']})" if row["fairness_strength"] else ""
        print(f"  notions    {', '.join(row['notions'])}{strength}")
    print("hyper-parameters (--param KEY=VALUE):")
    width = max(len(f"{p['name']}={p['default_repr']}") for p in params)
    for p in params:
        accepts = f" [accepts {p['accepts']}]" if p["accepts"] else ""
        print(f"  {p['name'] + '=' + p['default_repr']:<{width}}  {plain(p['description']) or '(undocumented)'}"
              f"{accepts}")
    return 0
