"""The paper's figure, redrawn from our runs in the paper's layout, and a verdict for every cell of it.

A reproduction spec's ``[figure]`` table (:class:`~dpfair.experiments.spec.FigureSpec`) says what the paper
draws: panels (``rows`` × ``cols``, columns of the model rows), the x axis, the y metrics (one subplot each per
panel), the series and the non-private baseline. :func:`draw` draws our runs that way, each point the mean over
the seeds with a bar of one standard deviation (``ddof = 1``; ``n`` stated in the legend), the published
values overlaid where the paper's text gives them, and one verdict line per panel.

:func:`verdicts` judges each cell (panel × series × x × metric) against the paper's published numbers
(:mod:`dpfair.experiments.papers`), matched like with like: data set, preset, method, notion, ε, the number of
groups, and no loader option the paper does not name (a run with missing sensitive values is not the paper's
Table 2 set-up). With ``d = ours − published`` and the figure's tolerance ``t``:

* reproduced: ``|d| ≤ t``;
* better / worse: ``|d| > t`` and ours is more / less accurate (for accuracy) or lower / higher (for error and
  violation);
* not comparable: the paper withholds the value in our copy, or gives the figure as an image only (the
  figure's ``note``), or no published number is of the same set-up.

Model rows come from a results store (:meth:`~dpfair.experiments.store.ResultsStore.frame`) or a committed
``models.csv`` (:func:`read_models`); a ``models.csv`` written without the data sets' loader options gets them
back from the ``points.csv`` beside it (:func:`recover_options`).
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.experiments.papers import SWEEP_METRICS, load_papers, matching_rows, published_numbers

#: Verdicts, in the order the tables count them.
VERDICTS = ("reproduced", "better", "worse", "not comparable")
#: Columns of :func:`verdicts`.
VERDICT_COLUMNS = ("panel", "series", "x", "metric", "ours", "ours_sd", "n", "published", "published_spread",
                   "source", "difference", "verdict", "why")
#: Columns that a baseline row (a non-private method, measured on every notion) does not split panels by.
_BROADCAST = ("method", "notion", "epsilon")
_LOWER_IS_BETTER = ("error", "violation")


def _absent(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _json(value):
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        return json.loads(value)
    return {}


def _sort_key(value):
    if _absent(value):
        return (0, 0.0, "")
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def _text(value) -> str:
    if _absent(value):
        return "—"
    if isinstance(value, (float, np.floating)):
        return "∞" if math.isinf(value) else f"{value:g}"
    return str(value)


# ---- rows ---------------------------------------------------------------------------------------------

def read_models(path, points=None) -> pd.DataFrame:
    """A committed ``models.csv`` as model rows; its loader options from ``points`` (default: the
    ``points.csv`` beside it, when there is one) where the file has no ``options`` column."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no models file {str(path)!r}; pass a models.csv written by `dpfair report --tables`")
    frame = pd.read_csv(path)
    missing = [c for c in ("dataset", "method", "error", "seed") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} has no column {missing[0]!r}; pass a models.csv written by `dpfair report --tables`")
    if "options" not in frame.columns:
        points = path.with_name("points.csv") if points is None else Path(points)
        if points.is_file():
            frame = recover_options(frame, pd.read_csv(points))
    return frame


def _label_options(label: str) -> dict:
    """The loader options of a report's data label (``"bank (pf-ld), missing_sensitive=0.6"``)."""
    out = {}
    for part in str(label).split(", ")[1:]:
        match = re.fullmatch(r"(\w+)=(.+)", part)
        if match:
            try:
                out[match[1]] = json.loads(match[2])
            except ValueError:
                out[match[1]] = match[2]
    return out


def recover_options(models: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """``models`` with an ``options`` column rebuilt from ``points`` (a ``points.csv``: per hyper-parameter point
    its data label, seeds and the seeds' error and violation mean, min and max).

    Each point's rows are the ones of its configuration and seeds whose errors and violations have the point's
    means, minima and maxima; the first fit is taken for each point in turn. Rows that agree in
    error and violation to every printed digit are interchangeable for every figure drawn from these columns.
    Raises ``ValueError`` where no assignment fits (the two files are not of one store)."""
    if "data" not in points.columns or not len(models) or not any(map(_label_options, points["data"])):
        return models.assign(options=[{} for _ in range(len(models))])  # no point has a loader option
    key_columns = [c for c in ("dataset", "preset", "method", "notion", "epsilon", "params") if c in models.columns]

    def key(row) -> tuple:
        return tuple(json.dumps(_json(row[c]), sort_keys=True) if c == "params" else _text(row[c])
                     for c in key_columns)

    model_keys = [key(r) for r in models.to_dict("records")]
    options = [None] * len(models)
    by_key: dict[tuple, list[int]] = {}
    for i, k in enumerate(model_keys):
        by_key.setdefault(k, []).append(i)
    free = set(range(len(models)))
    for p in points.to_dict("records"):
        seeds = json.loads(p["seeds"]) if isinstance(p.get("seeds"), str) else [p.get("seeds")]
        choices = []
        for seed in seeds:
            choices.append([i for i in by_key.get(key(p), []) if int(models["seed"].iloc[i]) == int(seed)
                            and _within(models.iloc[i], p)])
        found = None
        for combo in itertools.product(*choices):
            if len(set(combo)) == len(combo) and set(combo) <= free and _fits(models.iloc[list(combo)], p):
                found = combo
                break
        if found is None:
            raise ValueError(f"points.csv row {p['data']!r} ({', '.join(map(str, key(p)[2:5]))}) matches no rows of "
                             "models.csv; pass the points.csv written with it")
        free -= set(found)
        for i in found:
            options[i] = _label_options(p["data"])
    if free:
        raise ValueError(f"{len(free)} rows of models.csv belong to no row of points.csv; pass the points.csv "
                         "written with it")
    return models.assign(options=options)


def _within(row, point) -> bool:
    return all(_absent(point.get(f"{m}_min")) or _absent(row[m])
               or point[f"{m}_min"] - 1e-6 <= row[m] <= point[f"{m}_max"] + 1e-6 for m in ("error", "violation"))


def _fits(rows: pd.DataFrame, point) -> bool:
    for m in ("error", "violation"):
        values = pd.to_numeric(rows[m], errors="coerce")
        if _absent(point.get(m)) or values.isna().all():
            continue
        if not (math.isclose(values.mean(), point[m], rel_tol=1e-4, abs_tol=1e-6)
                and math.isclose(values.min(), point[f"{m}_min"], rel_tol=1e-4, abs_tol=1e-6)
                and math.isclose(values.max(), point[f"{m}_max"], rel_tol=1e-4, abs_tol=1e-6)):
            return False
    return True


def figure_rows(spec, frame: pd.DataFrame) -> pd.DataFrame:
    """The model rows of ``spec`` and its companions (``with``) in ``frame``, with a column per hyper-parameter
    and loader option (the figure's defaults where a row sets none), ``accuracy`` (1 − error) and ``epsilon``
    numeric (NaN: non-private)."""
    fig = _figure(spec)
    rows = frame
    if "sweep" in rows.columns:
        rows = rows[rows["sweep"].isin([spec.name, *fig.with_specs])]
    rows = rows.copy().reset_index(drop=True)
    rows["params"] = [_json(p) for p in rows["params"]] if "params" in rows.columns else [{} for _ in range(len(rows))]
    rows["options"] = ([_json(o) for o in rows["options"]] if "options" in rows.columns
                       else [{} for _ in range(len(rows))])
    for column in ("preset", "notion"):
        if column not in rows.columns:
            rows[column] = None
    rows["notion"] = rows["notion"].map(lambda v: None if _absent(v) else v)
    defaults = dict(fig.defaults)
    knobs = ({k for p in rows["params"] for k in p} | {k for o in rows["options"] for k in o} | set(defaults)
             | {c for c in (fig.series, *fig.rows, *fig.cols, fig.x) if c not in rows.columns})
    for k in sorted(knobs):
        rows[k] = [p.get(k, o.get(k, defaults.get(k))) for p, o in zip(rows["params"], rows["options"])]
    rows["epsilon"] = pd.to_numeric(rows["epsilon"], errors="coerce") if "epsilon" in rows.columns else math.nan
    rows["error"] = pd.to_numeric(rows["error"], errors="coerce")
    rows["accuracy"] = 1.0 - rows["error"]
    return rows


def _figure(spec):
    if getattr(spec, "figure", None) is None:
        raise ValueError(f"spec {spec.name!r} has no [figure] table; add one (see dpfair.experiments.spec) to redraw "
                         "the paper's figure")
    return spec.figure


# ---- cells --------------------------------------------------------------------------------------------

def _panels(fig, rows: pd.DataFrame) -> list[tuple]:
    """The panels: every (row facet, column facet) combination of the non-baseline rows, sorted."""
    main = rows[rows["method"] != fig.baseline] if fig.baseline else rows
    facets = [*fig.rows, *fig.cols]
    if not facets:
        return [()]
    keys = {tuple(map(_text, r)): tuple(r) for r in main[facets].itertuples(index=False)}
    return sorted(keys.values(), key=lambda k: [_sort_key(v) for v in k])


def _in_panel(fig, rows: pd.DataFrame, panel: tuple) -> pd.Series:
    """Which rows a panel draws: its own, and the baseline's that agree on every facet a baseline has."""
    facets = [*fig.rows, *fig.cols]
    mask = pd.Series(True, index=rows.index)
    base = rows["method"].eq(fig.baseline) if fig.baseline else pd.Series(False, index=rows.index)
    for column, value in zip(facets, panel):
        same = rows[column].map(lambda v, value=value: _text(v) == _text(value))
        loose = base & (rows[column].map(_absent) | (column in _BROADCAST))
        mask &= same | loose
    return mask


def _panel_label(fig, panel: tuple) -> str:
    parts = []
    for column, value in zip([*fig.rows, *fig.cols], panel):
        if column == "epsilon":
            parts.append("ε = " + _text(value))
        elif column in ("dataset", "method", "notion", "preset"):
            parts.append(_text(value).replace("_", " "))
        else:
            parts.append(f"{column} = {_text(value)}")
    return " · ".join(parts) or "all"


def _notion(fig, panel: tuple, rows: pd.DataFrame):
    facets = [*fig.rows, *fig.cols]
    if "notion" in facets:
        return panel[facets.index("notion")]
    notions = {n for n in rows["notion"] if not _absent(n)}
    return notions.pop() if len(notions) == 1 else None


def _values(rows: pd.DataFrame, metric: str, notion) -> pd.Series:
    if metric in ("accuracy", "error"):
        return rows[metric]
    column = f"fairness.{notion}" if metric == "violation" else metric
    if column not in rows.columns or (metric == "violation" and _absent(notion)):
        return pd.Series(math.nan, index=rows.index)
    return pd.to_numeric(rows[column], errors="coerce")


def _metric_notion(metric: str, notion):
    return metric[len("fairness."):] if metric.startswith("fairness.") else notion if metric == "violation" else None


def _series_label(fig, value, method: str, paper) -> str:
    if fig.series == "method":
        names = [k for k, v in (paper.methods.items() if paper else []) if value in ((v,) if isinstance(v, str) else v)]
        return f"{value} ({', '.join(names)})" if names else str(value)
    if fig.series == "epsilon":
        return "ε = ∞ (non-private)" if _absent(value) or math.isinf(value) else f"ε = {_text(value)}"
    return f"{fig.series} = {_text(value)}" if not _absent(value) else method


def _point_label(params: dict, fig) -> str:
    shown = {k: v for k, v in sorted(params.items()) if k != fig.series}
    return ", ".join(f"{k}={_text(v)}" for k, v in shown.items()) or "—"


def cells(spec, frame: pd.DataFrame, paper=None) -> list[dict]:
    """Every drawn cell: panel, series (label), x (value, or a hyper-parameter point's label for a trade-off),
    metric, the seeds' values and the index of its rows. The baseline's cells have ``baseline = True``."""
    fig = _figure(spec)
    rows = figure_rows(spec, frame)
    out = []
    metrics = list(fig.y) + ([fig.x] if fig.kind == "tradeoff" else [])
    for panel in _panels(fig, rows):
        here = rows[_in_panel(fig, rows, panel)]
        notion = _notion(fig, panel, here)
        base = here["method"].eq(fig.baseline) if fig.baseline else pd.Series(False, index=here.index)
        groups = []
        if base.any():
            groups.append((True, fig.baseline, "non-private", None, here[base]))
        main = here[~base]
        if fig.kind == "curve":
            by = [fig.series, fig.x]
        else:
            main = main.assign(_point=[json.dumps(p, sort_keys=True, default=str) for p in main["params"]])
            by = [fig.series, "_point"]
        keyed = main.assign(_s=main[by[0]].map(_text), _x=main[by[1]].map(_text))
        for (_, _), g in keyed.groupby(["_s", "_x"], sort=False):
            s_value, x_value = g[by[0]].iloc[0], g[by[1]].iloc[0]
            x = x_value if fig.kind == "curve" else _point_label(g["params"].iloc[0], fig)
            groups.append((False, _series_label(fig, s_value, g["method"].iloc[0], paper), x, s_value, g))
        for is_base, series, x, s_value, g in groups:
            for metric in metrics:
                values = _values(g, metric, notion).dropna()
                out.append({"panel": panel, "panel_label": _panel_label(fig, panel), "series": series,
                            "series_value": s_value, "x": x, "metric": metric,
                            "notion": _metric_notion(metric, notion), "values": values.to_numpy(),
                            "index": g.index, "baseline": is_base})
    return out


# ---- verdicts -----------------------------------------------------------------------------------------

def _paper(fig, papers=None):
    for paper in (load_papers() if papers is None else papers):
        if paper.key == fig.paper:
            return paper
    raise ValueError(f"no published numbers for paper {fig.paper!r}; fix [figure] paper")


def _like_with_like(number: dict, rows: pd.DataFrame, fixed: tuple = ()) -> pd.Series:
    """:func:`~dpfair.experiments.papers.matching_rows` (data set, preset, method, notion, ε, groups, no loader
    option the paper does not name), and the hyper-parameters the paper fixes (the figure's ``fixed``; a row
    that does not set one has its method's default)."""
    from dpfair.algorithms import METHODS

    mask = matching_rows(number, rows)
    for knob, value in fixed:
        def agrees(row, knob=knob, value=value) -> bool:
            params = METHODS[row["method"]]().get_params() if row["method"] in METHODS else {}
            return knob not in params or row["params"].get(knob, params[knob]) == value
        mask &= rows[["method", "params"]].apply(agrees, axis=1).astype(bool)
    return mask


def _explains(entry: dict, cell: dict, rows: pd.DataFrame) -> bool:
    """Whether a ``[[figure.explain]]`` entry is about ``cell``: its method, and data set, notion, metric where
    the entry names them."""
    here = rows.loc[cell["index"]]
    return (set(here["method"]) == {entry["method"]}
            and (entry["dataset"] is None or set(here["dataset"]) == {entry["dataset"]})
            and (entry["notion"] is None or cell["notion"] == entry["notion"])
            and (entry["metric"] is None or _base_metric(cell["metric"]) == entry["metric"]))


def _judge(metric: str, ours: float, published: float, tolerance: float) -> str:
    difference = ours - published
    if abs(difference) <= tolerance:
        return "reproduced"
    higher_better = metric == "accuracy"
    return "better" if (difference > 0) == higher_better else "worse"


def _base_metric(metric: str) -> str:
    return "violation" if metric.startswith("fairness.") else metric


def verdicts(spec, frame: pd.DataFrame, papers=None) -> pd.DataFrame:
    """The verdict table: one row per cell of :func:`cells` (see the module's text), columns
    :data:`VERDICT_COLUMNS`; ``ours`` the seeds' mean, ``ours_sd`` their standard deviation (``ddof = 1``), ``n``
    the number of seeds. ``attrs["unmatched"]``: the paper's published values no cell matches (counted, not
    listed as rows)."""
    fig = _figure(spec)
    paper = _paper(fig, papers)
    rows = figure_rows(spec, frame)
    numbers = published_numbers([paper])
    numbers = numbers[numbers["metric"].isin(SWEEP_METRICS)].reset_index(drop=True)
    candidates = numbers[numbers["dataset"].isin(set(rows["dataset"])) & numbers["method"].isin(set(rows["method"]))]
    records = numbers.to_dict("records")
    masks = {j: _like_with_like(records[j], rows, fig.fixed).to_numpy() for j in candidates.index}
    used = set()
    out = []
    for cell in cells(spec, frame, paper):
        values = cell["values"]
        ours = float(values.mean()) if len(values) else math.nan
        sd = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        record = {"panel": cell["panel_label"], "series": cell["series"], "x": _text(cell["x"]),
                  "metric": cell["metric"] if cell["metric"] != "violation" else f"violation ({cell['notion']})",
                  "ours": ours, "ours_sd": sd, "n": len(values), "published": math.nan,
                  "published_spread": math.nan, "source": "", "difference": math.nan,
                  "verdict": "not comparable", "why": fig.note}
        where = np.asarray(cell["index"])
        matches = [j for j, mask in masks.items()
                   if records[j]["metric"] == _base_metric(cell["metric"])
                   and (records[j]["metric"] != "violation" or records[j]["notion"] == cell["notion"])
                   and bool(mask[where].all())]
        reported = [j for j in matches if numbers.loc[j, "status"] == "reported"]
        used.update(matches)
        if reported:
            n = numbers.loc[reported[0]]
            record.update(published=float(n["value"]), published_spread=float(n["spread"]),
                          source=f"{n['source']} ({n['paper_method']})")
            if len(values):
                difference = ours - float(n["value"])
                verdict = _judge(_base_metric(cell["metric"]), ours, float(n["value"]), fig.tolerance)
                reasons = [e["why"] for e in fig.explain if _explains(e, cell, rows)]
                why = (f"ours − published = {difference:+.3f}, within ±{fig.tolerance:g}" if verdict == "reproduced"
                       else f"ours − published = {difference:+.3f}, beyond ±{fig.tolerance:g}; "
                            + (" ".join(reasons) if reasons else "not yet explained by a measurement here"))
                record.update(difference=difference, verdict=verdict, why=why)
            else:
                record["why"] = "no value of ours for this metric"
        elif matches:
            n = numbers.loc[matches[0]]
            record.update(source=f"{n['source']} ({n['paper_method']})",
                          why=f"the paper's value ({n['source']}, {n['paper_method']}) is withheld in our copy")
        out.append(record)
    table = pd.DataFrame(out, columns=list(VERDICT_COLUMNS))
    unmatched = numbers.drop(index=sorted(used))
    table.attrs["unmatched"] = int((unmatched["status"] == "reported").sum())
    table.attrs["unmatched_withheld"] = int((unmatched["status"] == "withheld").sum())
    return table


def panel_verdicts(table: pd.DataFrame) -> dict[str, str]:
    """One line per panel: how many published values are reproduced, better, worse; else why none compares."""
    out = {}
    for panel, g in table.groupby("panel", sort=False):
        judged = g[g["verdict"] != "not comparable"]
        if len(judged):
            counts = judged["verdict"].value_counts()
            line = f"reproduced {counts.get('reproduced', 0)} of {len(judged)} published values"
            extra = [f"{counts[v]} {v}" for v in ("better", "worse") if counts.get(v, 0)]
            line += f" ({', '.join(extra)})" if extra else ""
            rest = g[g["verdict"] == "not comparable"]
            if len(rest):
                line += f"; {len(rest)} cells not comparable"
        else:
            whys = list(dict.fromkeys(g["why"]))
            line = "not comparable: " + "; ".join(whys)
        out[panel] = line
    return out


# ---- drawing ------------------------------------------------------------------------------------------

_METRIC_NAMES = {"accuracy": "accuracy", "error": "error", "violation": "violation"}


def _metric_name(metric: str, notion) -> str:
    if metric.startswith("fairness."):
        return metric[len("fairness."):].replace("_", " ") + " violation"
    if metric == "violation" and not _absent(notion):
        return f"{notion.replace('_', ' ')} violation"
    return _METRIC_NAMES.get(metric, metric)


def draw(spec, frame: pd.DataFrame, papers=None, table: pd.DataFrame | None = None):
    """The paper's figure from our runs (a matplotlib ``Figure``): one subplot per panel and y metric, a line
    (curve) or front (trade-off) per series with mean ± sd bars, the baseline dashed, the published values as
    red crosses (dotted lines for a non-private value), each panel's verdict below its first subplot."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is left as it is

    fig_spec = _figure(spec)
    paper = _paper(fig_spec, papers)
    table = verdicts(spec, frame, [paper]) if table is None else table
    lines = panel_verdicts(table)
    all_cells = cells(spec, frame, paper)
    rows = figure_rows(spec, frame)
    panels = _panels(fig_spec, rows)
    n_rows_facet = len(fig_spec.rows)
    row_keys = list(dict.fromkeys(p[:n_rows_facet] for p in panels))
    col_keys = list(dict.fromkeys(p[n_rows_facet:] for p in panels))
    ys = list(fig_spec.y)
    ncols, nrows = len(col_keys) * len(ys), len(row_keys)
    width = max(3.1 * ncols, 9.0)
    n_legend = len({c["series"] for c in all_cells}) + 2  # the series, the baseline, a published line
    legend_h = 0.22 * math.ceil(n_legend / 3) + 0.2
    height = 0.75 + nrows * 2.0 + (nrows - 1) * 1.45 + 1.1 + legend_h  # inches: title, axes, gaps, legend
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(nrows, ncols, squeeze=False)
    series_order = list(dict.fromkeys(c["series"] for c in all_cells if not c["baseline"]))
    colors = {s: f"C{i % 10}" for i, s in enumerate(series_order)}
    published = table.set_index(["panel", "series", "x", "metric"])
    for panel in panels:
        r, c0 = row_keys.index(panel[:n_rows_facet]), col_keys.index(panel[n_rows_facet:]) * len(ys)
        label = _panel_label(fig_spec, panel)
        here = [c for c in all_cells if c["panel"] == panel]
        for k, metric in enumerate(ys):
            ax = axes[r, c0 + k]
            notion = next((c["notion"] for c in here if c["metric"] == metric), None)
            title = label if fig_spec.kind == "tradeoff" and len(ys) == 1 else f"{label}\n{_metric_name(metric, notion)}"
            ax.set_title(title, fontsize=8)
            if fig_spec.kind == "tradeoff":
                ax.set_ylabel(_metric_name(metric, notion), fontsize=7)
            ax.tick_params(labelsize=7)
            if fig_spec.kind == "curve":
                _draw_curve(ax, fig_spec, here, metric, colors, published, label)
            else:
                _draw_tradeoff(ax, fig_spec, here, metric, colors)
            if k == 0:
                ax.annotate("\n".join(textwrap.wrap("verdict: " + lines[label], 52 if len(ys) == 1 else 64)),
                            (0.0, 0.0), xycoords="axes fraction", xytext=(0, -26), textcoords="offset points",
                            fontsize=6, va="top", color="0.25")
    for ax in axes.flat:
        if not ax.has_data():
            ax.set_axis_off()
    handles = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    figure.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(3, len(handles) or 1),
                  fontsize=7, frameon=False)
    figure.suptitle(textwrap.fill(f"{fig_spec.title} — redrawn from our runs (the paper's {fig_spec.source}); "
                                  "points: mean ± sd over seeds", int(width * 15)), fontsize=9, y=1 - 0.12 / height, va="top")
    figure.subplots_adjust(left=0.55 / width, right=1 - 0.15 / width, top=1 - 0.75 / height,
                           bottom=(1.1 + legend_h) / height, hspace=1.45 / 2.0, wspace=0.32)
    return figure


def _n_text(cells_: list[dict]) -> str:
    ns = sorted({len(c["values"]) for c in cells_})
    return "n = " + "–".join(map(str, [ns[0], ns[-1]] if len(ns) > 1 else ns)) + (" seed" if ns == [1] else " seeds")


def _draw_curve(ax, fig, here, metric, colors, published, label) -> None:
    mine = [c for c in here if c["metric"] == metric]
    for series in dict.fromkeys(c["series"] for c in mine if not c["baseline"]):
        pts = sorted((c for c in mine if c["series"] == series and not c["baseline"]
                      and not _absent(c["x"]) and np.isfinite(float(c["x"])) and len(c["values"])),
                     key=lambda c: float(c["x"]))
        if not pts:
            continue
        xs = [float(c["x"]) for c in pts]
        ax.errorbar(xs, [c["values"].mean() for c in pts],
                    yerr=[c["values"].std(ddof=1) if len(c["values"]) > 1 else 0.0 for c in pts],
                    marker="o", ms=3, lw=1, capsize=2, color=colors[series], label=f"{series}, {_n_text(pts)}")
    for c in mine:
        if c["baseline"] and len(c["values"]):
            mean, sd = c["values"].mean(), c["values"].std(ddof=1) if len(c["values"]) > 1 else 0.0
            ax.axhline(mean, color="0.3", ls="--", lw=1, label=f"{c['series']} (non-private), {_n_text([c])}")
            ax.axhspan(mean - sd, mean + sd, color="0.5", alpha=0.15, lw=0)
    for c in mine:
        key = (label, c["series"], _text(c["x"]),
               c["metric"] if c["metric"] != "violation" else f"violation ({c['notion']})")
        if key not in published.index:
            continue
        value = published.loc[key]
        value = value.iloc[0] if isinstance(value, pd.DataFrame) else value
        if _absent(value["published"]):
            continue
        if c["baseline"]:
            ax.axhline(value["published"], color="C3", ls=":", lw=1.2,
                       label=f"published non-private ({value['source']})")
        else:
            ax.errorbar([float(c["x"])], [value["published"]], yerr=[0 if _absent(value["published_spread"])
                                                                       else value["published_spread"]],
                        marker="X", color="C3", ls="none", label=f"published ({value['source']})")
    if fig.x_scale == "log":
        ax.set_xscale("log")
    ticks = sorted({float(c["x"]) for c in mine if not c["baseline"] and not _absent(c["x"]) and np.isfinite(float(c["x"]))})
    if ticks:
        ax.set_xticks(ticks, [_text(x) for x in ticks])
        ax.minorticks_off()
    ax.set_xlabel("ε" if fig.x == "epsilon" else fig.x, fontsize=7)


def _draw_tradeoff(ax, fig, here, metric, colors) -> None:
    xs = {(c["series"], c["x"]): c for c in here if c["metric"] == fig.x}
    for series in dict.fromkeys(c["series"] for c in here):
        pts = []
        for c in here:
            if c["series"] != series or c["metric"] != metric or not len(c["values"]):
                continue
            cx = xs.get((series, c["x"]))
            if cx is None or not len(cx["values"]):
                continue
            pts.append((cx["values"].mean(), c["values"].mean(),
                        cx["values"].std(ddof=1) if len(cx["values"]) > 1 else 0.0,
                        c["values"].std(ddof=1) if len(c["values"]) > 1 else 0.0, c))
        if not pts:
            continue
        pts.sort(key=lambda p: p[0])
        base = pts[0][4]["baseline"]
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], xerr=[p[2] for p in pts], yerr=[p[3] for p in pts],
                    marker="*" if base else "o", ms=7 if base else 3, lw=0 if base else 0.8, elinewidth=0.6,
                    capsize=1.5, color="0.2" if base else colors.get(series),
                    label=(f"{series} (non-private)" if base else series) + f", {_n_text([p[4] for p in pts])}")
    notion = next((c["notion"] for c in here if c["metric"] == fig.x), None)
    ax.set_xlabel(_metric_name(fig.x, notion), fontsize=7)


# ---- files --------------------------------------------------------------------------------------------

def _markdown(spec, table: pd.DataFrame, command: str) -> str:
    fig = _figure(spec)
    judged = table[table["verdict"] != "not comparable"]
    counts = judged["verdict"].value_counts()
    lines = [f"# {fig.title}: verdicts", "",
             f"The paper's {fig.source} ({fig.paper}), redrawn from our runs in `figure.png`: each cell is the mean "
             "± sd over seeds (n stated) of sweep `" + spec.name + "`" +
             (f" (with {', '.join(fig.with_specs)})" if fig.with_specs else "") + ".",
             f"Tolerance: {fig.tolerance:g} absolute ({fig.tolerance_source}).", "",
             f"Command: `{command}`", "",
             (f"**{counts.get('reproduced', 0)} of {len(judged)} published values reproduced within tolerance** "
              f"({counts.get('better', 0)} better, {counts.get('worse', 0)} worse); " if len(judged) else
              "**No published value to compare with**; ") +
             f"{len(table) - len(judged)} cells not comparable. Published values of the paper that no run of this "
             f"spec matches like with like (hidden): {table.attrs.get('unmatched', 0)} reported, "
             f"{table.attrs.get('unmatched_withheld', 0)} withheld.", "", "## Per panel", ""]
    lines += [f"- **{panel}**: {line}" for panel, line in panel_verdicts(table).items()]
    lines += ["", "## Cells with a published value", ""]
    shown = table[table["source"] != ""]
    if len(shown):
        lines.append("| panel | series | x | metric | ours (mean ± sd, n) | published | difference | verdict | why |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for r in shown.to_dict("records"):
            ours = "—" if _absent(r["ours"]) else (f"{r['ours']:.3f} ± {r['ours_sd']:.3f} (n = {r['n']})"
                                                   if not _absent(r["ours_sd"]) else f"{r['ours']:.3f} (n = {r['n']})")
            pub = "withheld" if _absent(r["published"]) else (
                f"{r['published']:.3f}" + ("" if _absent(r["published_spread"]) else f" ({r['published_spread']:.3f})"))
            diff = "—" if _absent(r["difference"]) else f"{r['difference']:+.3f}"
            lines.append(f"| {r['panel']} | {r['series']} | {r['x']} | {r['metric']} | {ours} | {pub} "
                         f"({r['source']}) | {diff} | {r['verdict']} | {r['why']} |")
    else:
        lines.append(f"None: {fig.note}.")
    lines += ["", f"Every cell, with its verdict, is in `verdicts.csv` ({len(table)} rows).", ""]
    return "\n".join(lines)


def _palette_png(figure, dpi: int) -> bytes:
    """The figure as a 64-colour palette PNG (lines, markers and text on white need no more; a third of the
    bytes of a full-colour one)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    figure.set_dpi(dpi)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[..., :3])
    out = io.BytesIO()
    Image.fromarray(pixels).quantize(64, method=Image.Quantize.FASTOCTREE).save(out, format="png", optimize=True)
    return out.getvalue()


def reproduction_files(spec, frame: pd.DataFrame, *, command: str = "", dpi: int = 80,
                       papers=None) -> dict[str, bytes]:
    """``figure.png``, ``verdicts.md`` and ``verdicts.csv`` of ``spec`` from the model rows ``frame``, as bytes
    (the caller writes them, as one unit)."""
    table = verdicts(spec, frame, papers)
    if not len(table):
        raise ValueError(f"no model rows of sweep {spec.name!r} in the given results; run `dpfair sweep {spec.name}` "
                         "first, or pass its models.csv")
    figure = draw(spec, frame, papers, table=table)
    return {"figure.png": _palette_png(figure, dpi),
            "verdicts.md": _markdown(spec, table, command).encode(),
            "verdicts.csv": table.to_csv(index=False, float_format="%.6g").encode()}
