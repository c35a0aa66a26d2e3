"""The rows the sweep report reads and the tables it writes (:mod:`dpfair.experiments.report`).

:func:`load_results` reads a results store, its path or its frame; :func:`prepare_rows` adds the report's columns
(a data set's label, a point's id, a model's bar label); :func:`write_result_tables` writes the small tables of
:func:`~dpfair.experiments.report.write_tables` (CSV and Markdown), and :func:`write_file` writes a file as one unit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dpfair.experiments.frontier import point_ids
from dpfair.experiments.report_format import absent, eps_label, params_label
from dpfair.utils.files import WriteError, write_atomic

_REQUIRED = ("dataset", "method", "notion", "epsilon", "seed", "error", "violation")


def load_results(source):
    """``(frame, store or None, description)`` from a store, a store path or a frame; a clear error if a path
    holds no store. A store without models (empty, or holding only failures) gives an empty frame."""
    from dpfair.experiments.store import ResultsStore

    if isinstance(source, pd.DataFrame):
        frame, store, where = source, None, "the given frame"
        if frame.empty and not len(frame.columns):
            frame = pd.DataFrame(columns=list(_REQUIRED))
    else:
        if isinstance(source, ResultsStore):
            store = source
        else:
            path = Path(source)
            if not path.is_file():
                raise ValueError(f"no results store at {str(path)!r}; run `dpfair sweep SPEC.toml --store PATH` "
                                 "first")
            store = ResultsStore(path)
        frame, where = store.frame(), f"the results store {str(store.path)!r}"
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"{where} has no column {', '.join(missing)}; pass a ResultsStore or its frame()")
    return frame, store, where


def data_label(row) -> str:
    """A data set as the report names it: name (preset), its sensitive attribute and options where set."""
    label = str(row["dataset"])
    if not absent(row.get("preset")):
        label += f" ({row['preset']})"
    if not absent(row.get("sensitive")):
        label += f", s = {row['sensitive']}"
    options = row.get("options")
    if isinstance(options, dict) and options:
        label += ", " + ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    return label


def prepare_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with the report's columns: ``data`` (label), ``point`` (id) and ``model`` (a bar label)."""
    out = frame.copy()
    for column in ("preset", "sensitive"):
        if column not in out.columns:
            out[column] = None
    out["data"] = [data_label(r) for r in out.to_dict("records")]
    out["point"] = point_ids(out)
    out["epsilon"] = pd.to_numeric(out["epsilon"], errors="coerce")
    if "params" not in out.columns:
        out["params"] = [{} for _ in range(len(out))]
    out["model"] = [" · ".join(x for x in (r["method"], None if absent(r["notion"]) else r["notion"],
                                           None if absent(r["epsilon"]) else eps_label(r["epsilon"]),
                                           None if params_label(r["params"]) == "—" else params_label(r["params"]))
                                     if x)
                    for r in out.to_dict("records")]
    return out


#: The per-model columns :func:`~dpfair.experiments.report.write_tables` keeps (metrics flattened; the ledgers stay
#: in the store).
MODEL_COLUMNS = ("sweep", "dataset", "preset", "sensitive", "options", "method", "notion", "epsilon", "delta", "seed",
                 "params", "error", "violation", "epsilon_spent", "delta_spent", "wall_s", "fit_s", "commit_hash",
                 "eval_private", "eval_epsilon")


def write_result_tables(rows: pd.DataFrame, fronts, folder: Path) -> list[Path]:
    models = rows[[c for c in MODEL_COLUMNS if c in rows.columns]
                  + sorted(c for c in rows.columns if isinstance(c, str) and c.startswith("fairness."))].copy()
    names = sorted({k for p in models["params"] for k in p} - set(models.columns))
    for name in names:  # one column per hyper-parameter (lam, tolerance, ...), for plotting straight from the CSV
        models[name] = models["params"].map(lambda p, name=name: p.get(name))
    models["params"] = models["params"].map(lambda p: json.dumps(p, sort_keys=True))
    if "options" in models.columns:  # the data sets' loader options, as JSON ({} where none is set)
        models["options"] = models["options"].map(
            lambda o: json.dumps(o if isinstance(o, dict) else {}, sort_keys=True))
    points = fronts.points.drop(columns=[c for c in ("point", "config") if c in fronts.points.columns])
    points = points.map(lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
    best = fronts.best.map(lambda v: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
    written = []
    for name, table in (("models.csv", models), ("points.csv", points), ("best.csv", best)):
        written.append(write_file(folder / name, table.to_csv(index=False, float_format="%.6g")))
    brief = [c for c in ("data", "notion", "method", "epsilon", "slack", "base", "params", "error", "violation",
                         "violation_std", "n_seeds") if c in best.columns]
    written.append(write_file(folder / "best.md", markdown_table(best[brief])))
    return written


def markdown_table(table: pd.DataFrame) -> str:
    """A Markdown table of ``table`` (floats to 4 decimals, ∞ and — for infinite and missing values)."""
    def cell(v) -> str:
        if isinstance(v, float):
            return "—" if math.isnan(v) else "∞" if math.isinf(v) else f"{v:.4f}"
        return "—" if v is None else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + " --- |" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_file(out: Path, text: str) -> Path:
    """Write ``text`` to ``out`` as one unit, replacing it (:func:`dpfair.utils.files.write_atomic`: a temporary
    file beside it, renamed over it)."""
    try:
        write_atomic(out, lambda target: [(target, text.encode("utf-8"))], overwrite=True)
    except WriteError as exc:
        raise ValueError(f"cannot write the report to {str(out)!r} ({exc.reason}); pass "
                         "--out PATH in a writable folder") from None
    return out
