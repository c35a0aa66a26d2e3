"""The papers' published numbers (``published/*.toml``, one file per paper) and the sweep rows that match them.

Each file cites its paper and quotes it: every number, withheld cell and figure comes with the text it was
read from (``quote``, verbatim from the copy in ``../shared/papers/``, which the tests check), so nothing here
is a number the paper does not print. Schema::

    [paper]
    key = "pf-ld"                      # short name
    citation = "Tran, Fioretto, Van Hentenryck. ... AAAI 2021."
    text = "pf-ld_....txt"             # the copy in ../shared/papers/ the quotes come from
    preset = "pf-ld"                   # the data preset (dpfair.datasets) of the paper's set-up
    setting = "..."                    # the set-up in a line (optional)

    [paper.methods]                    # the paper's method names -> dpfair --method (a name or a list)
    CLF = "erm"

    [[number]]                         # a published result (a table cell, a number in the text)
    source = "Table 2"
    quote = "| Bank | Accuracy Parity | acc | 0.8 (0.007) | ..."
    dataset = "bank"                   # dpfair data set name; optional: preset (else the paper's),
    groups = 2                         #   groups (number of sensitive groups), sensitive, epsilon, delta
    notion = "accuracy_parity"         # the fairness notion measured (a list: one entry per notion)
    method = "CLF"                     # the paper's name (a list: one entry per method)
    values = { accuracy = 0.8, violation = 0.041 }   # and spread = {...}: its spread, as the paper gives it
    # or: withheld = ["accuracy", "violation"]       # the copy withholds them on purpose

    [[figure]]                         # a figure whose numbers the text does not give (dataset, notion,
    source = "Figure 2"                #   epsilon and method optional, as lists)
    quote = "..."

    [[claim]]                          # a number the text gives that matches no sweep row (an aggregate)
    source = "Section 4"
    quote = "..."

A number matches the rows of the same data set and preset, method (the paper's name mapped through
``[paper.methods]``), ε (a number without ε matches the non-private rows), number of groups and sensitive
attribute where it names them (a row without a sensitive attribute takes its preset's, which is the
paper's), and notion (a row that targets a notion must target the number's; one that targets none, as
``erm``, is measured on it), and no loader option the paper does not name (rows with missing sensitive
values or another grouping are another set-up; ``n_groups`` gives the number of groups where the rows carry
no per-group figures). Our value is the mean over the seeds of each matching hyper-parameter
point: ``accuracy`` is 1 − error, ``error`` the error, ``violation`` the row's ``fairness.<notion>``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.experiments.frontier import point_ids

#: Metrics a sweep row measures, as a published number names them.
SWEEP_METRICS = ("accuracy", "error", "violation")

_PAPER_KEYS = {"key", "citation", "text", "preset", "setting", "methods"}
_NUMBER_KEYS = {"source", "quote", "dataset", "paper_dataset", "preset", "groups", "sensitive", "notion", "method",
                "epsilon", "delta", "values", "spread", "withheld"}
_FIGURE_KEYS = {"source", "quote", "dataset", "notion", "epsilon", "method"}
_CLAIM_KEYS = {"source", "quote"}


@dataclass(frozen=True)
class Paper:
    """One paper's published numbers, figures and claims (a ``published/*.toml`` file, checked)."""

    key: str
    citation: str
    text: str
    preset: str | None
    setting: str
    methods: dict
    numbers: tuple
    figures: tuple
    claims: tuple
    path: str

    def dpfair_methods(self, name: str) -> tuple[str, ...]:
        """The dpfair methods of the paper's method ``name`` (empty where dpfair has none)."""
        value = self.methods.get(name, ())
        return (value,) if isinstance(value, str) else tuple(value)


def published_folder():
    """The folder of the shipped ``*.toml`` files."""
    return resources.files("dpfair.experiments").joinpath("published")


def load_papers(folder=None) -> list[Paper]:
    """Every paper of ``folder`` (default: the shipped ones), by key; a malformed file names its fault."""
    folder = published_folder() if folder is None else Path(folder)
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    return [_paper(f.name, f.read_text(encoding="utf-8")) for f in files]


def _list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_keys(entry: dict, valid: set, where: str) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a table")
    unknown = set(entry) - valid
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(sorted(unknown))}; valid: {', '.join(sorted(valid))}")
    for key in ("source", "quote"):
        if not (isinstance(entry.get(key), str) and entry[key].strip()):
            raise ValueError(f"{where} needs {key!r} (where in the paper, and its text verbatim)")


def _paper(name: str, text: str) -> Paper:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"published/{name} is not valid TOML: {exc}") from None
    unknown = set(raw) - {"paper", "number", "figure", "claim"}
    if unknown:
        raise ValueError(f"published/{name}: unknown table {', '.join(sorted(unknown))}; "
                         "valid: paper, number, figure, claim")
    head = raw.get("paper")
    if not isinstance(head, dict) or set(head) - _PAPER_KEYS or not all(
            isinstance(head.get(k), str) for k in ("key", "citation", "text")):
        raise ValueError(f"published/{name}: [paper] needs key, citation and text (valid keys: "
                         f"{', '.join(sorted(_PAPER_KEYS))})")
    methods = head.get("methods", {})
    numbers = []
    for i, entry in enumerate(raw.get("number", [])):
        where = f"published/{name}: number {i + 1} ({entry.get('source', '?')})"
        _check_keys(entry, _NUMBER_KEYS, where)
        if not isinstance(entry.get("dataset"), str) or "method" not in entry:
            raise ValueError(f"{where} needs dataset and method")
        values, withheld = entry.get("values", {}), entry.get("withheld", [])
        if bool(values) == bool(withheld):
            raise ValueError(f"{where} needs either values (the published numbers) or withheld (their names)")
        for metric, value in {**values, **entry.get("spread", {})}.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{where}: {metric} must be a number, got {value!r}")
        for method in _list(entry["method"]):
            for notion in _list(entry.get("notion")):
                numbers.append({**entry, "method": method, "notion": notion})
    figures, claims = [], []
    for kind, valid, out in (("figure", _FIGURE_KEYS, figures), ("claim", _CLAIM_KEYS, claims)):
        for i, entry in enumerate(raw.get(kind, [])):
            _check_keys(entry, valid, f"published/{name}: {kind} {i + 1}")
            out.append(dict(entry))
    return Paper(head["key"], head["citation"], head["text"], head.get("preset"), head.get("setting", ""),
                 dict(methods), tuple(numbers), tuple(figures), tuple(claims), name)


def published_numbers(papers: list[Paper]) -> pd.DataFrame:
    """One row per published (or withheld) number: which paper, where, what it measures and its value.

    Columns: paper, source, quote, paper_dataset, dataset, preset, groups, sensitive, notion,
    paper_method, method (dpfair's, ``None`` where there is none; one row per method where a name maps
    to several), epsilon (NaN: non-private), delta, metric, value (NaN if withheld), spread, status
    (``"reported"`` or ``"withheld"``).
    """
    rows = []
    for paper in papers:
        for entry in paper.numbers:
            ours = paper.dpfair_methods(entry["method"]) or (None,)
            metrics = [(m, v, "reported") for m, v in entry.get("values", {}).items()]
            metrics += [(m, math.nan, "withheld") for m in entry.get("withheld", [])]
            for method in ours:
                for metric, value, status in metrics:
                    rows.append({
                        "paper": paper.key, "source": entry["source"], "quote": entry["quote"].strip("\n"),
                        "paper_dataset": entry.get("paper_dataset", entry["dataset"]), "dataset": entry["dataset"],
                        "preset": entry.get("preset", paper.preset), "groups": entry.get("groups"),
                        "sensitive": entry.get("sensitive"), "notion": entry.get("notion"),
                        "paper_method": entry["method"], "method": method,
                        "epsilon": float(entry.get("epsilon", math.nan)), "delta": entry.get("delta"),
                        "metric": metric, "value": value, "spread": entry.get("spread", {}).get(metric, math.nan),
                        "status": status})
    return pd.DataFrame(rows, columns=["paper", "source", "quote", "paper_dataset", "dataset", "preset", "groups",
                                       "sensitive", "notion", "paper_method", "method", "epsilon", "delta", "metric",
                                       "value", "spread", "status"])


def _absent(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def matching_rows(number: pd.Series | dict, frame: pd.DataFrame) -> pd.Series:
    """Which rows of ``frame`` (a store frame) a published number matches (see the module docstring)."""
    n = pd.Series(number)
    mask = pd.Series(True, index=frame.index)
    if _absent(n["method"]):
        return ~mask
    mask &= frame["dataset"] == n["dataset"]
    mask &= frame["method"] == n["method"]
    preset = frame["preset"] if "preset" in frame.columns else pd.Series(None, index=frame.index, dtype=object)
    mask &= preset.map(lambda p: None if _absent(p) else p) == (None if _absent(n["preset"]) else n["preset"])
    eps = pd.to_numeric(frame["epsilon"], errors="coerce")
    if _absent(n["epsilon"]):
        mask &= ~np.isfinite(eps)
    else:
        mask &= np.isclose(eps.fillna(np.inf), float(n["epsilon"]))
    if not _absent(n["notion"]) and "notion" in frame.columns:
        mask &= frame["notion"].map(_absent) | (frame["notion"] == n["notion"])
    if not _absent(n.get("groups")) and "per_group_accuracy" in frame.columns:
        mask &= frame["per_group_accuracy"].map(len) == int(n["groups"])
    if "options" in frame.columns:  # a loader option other than the grouping: a set-up the paper does not name
        options = frame["options"].map(lambda o: o if isinstance(o, dict) else {})
        mask &= options.map(lambda o: not {k for k in o if k != "n_groups"})
        if not _absent(n.get("groups")) and "per_group_accuracy" not in frame.columns:
            mask &= options.map(lambda o: int(o.get("n_groups", 2)) == int(n["groups"]))
    if not _absent(n.get("sensitive")) and "sensitive" in frame.columns:
        mask &= frame["sensitive"].map(_absent) | (frame["sensitive"] == n["sensitive"])
    return mask


def _measure(rows: pd.DataFrame, metric: str, notion) -> pd.Series | None:
    if metric == "accuracy":
        return 1.0 - pd.to_numeric(rows["error"], errors="coerce")
    if metric == "error":
        return pd.to_numeric(rows["error"], errors="coerce")
    if metric == "violation" and not _absent(notion) and f"fairness.{notion}" in rows.columns:
        return pd.to_numeric(rows[f"fairness.{notion}"], errors="coerce")
    return None


def _needs(number: pd.Series) -> str:
    """The run a published number needs, in the words of a sweep spec."""
    parts = [f"data set {number['dataset']}", f"preset {number['preset']}" if not _absent(number["preset"]) else "",
             f"sensitive {number['sensitive']}" if not _absent(number.get("sensitive")) else "",
             f"{int(number['groups'])} groups" if not _absent(number.get("groups")) else "",
             f"method {number['method']}",
             "non-private" if _absent(number["epsilon"]) else f"epsilon {float(number['epsilon']):g}"]
    return ", ".join(p for p in parts if p)


def beside_ours(numbers: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The published ``numbers`` (:func:`published_numbers`) with our matching results beside them.

    One row per number and matching hyper-parameter point of ``frame`` (one row with ``n_seeds = 0``
    where no row matches), adding: params, ours (the seeds' mean), ours_std (``ddof=1``), ours_min,
    ours_max, n_seeds and note (why there is no value of ours).
    """
    out = []
    ids = point_ids(frame) if len(frame) else pd.Series(dtype=object)
    for _, number in numbers.iterrows():
        base = number.to_dict()
        empty = {"params": None, "ours": math.nan, "ours_std": math.nan, "ours_min": math.nan, "ours_max": math.nan,
                 "n_seeds": 0}
        if _absent(number["method"]):
            out.append({**base, **empty, "note": "dpfair has no such method"})
            continue
        if number["metric"] not in SWEEP_METRICS:
            out.append({**base, **empty, "note": "not measured by sweeps"})
            continue
        rows = frame[matching_rows(number, frame)] if len(frame) else frame
        if rows.empty:
            out.append({**base, **empty, "note": f"no matching run (needs {_needs(number)})"})
            continue
        values = _measure(rows, number["metric"], number["notion"])
        for idx in rows.groupby(ids[rows.index], sort=False).groups.values():
            v = values[idx]
            params = rows.loc[idx[0], "params"] if "params" in rows.columns else None
            out.append({**base, "params": params, "ours": v.mean(), "ours_std": v.std(ddof=1), "ours_min": v.min(),
                        "ours_max": v.max(), "n_seeds": len(v), "note": ""})
    columns = [*numbers.columns, "params", "ours", "ours_std", "ours_min", "ours_max", "n_seeds", "note"]
    return pd.DataFrame(out, columns=columns)
