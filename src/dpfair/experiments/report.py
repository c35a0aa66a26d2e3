"""One self-contained HTML page of a sweep's results (``dpfair report STORE --out report.html``).

:func:`render_report` reads a results store (or its frame) and writes a single file that needs nothing
else to display: the plots are palette PNG images (:data:`PNG_COLORS` colours at :data:`PNG_DPI` dots per
inch) inlined as base64 ``data:`` URIs, the style sheet is inline,
and there is no script, font or link to fetch. Every text taken from the store or the papers is
HTML-escaped. The page holds:

- a summary: sweeps, data sets, methods, models, commits, package versions, hosts;
- the store's privacy totals: per data set, the ε of every record-level model on its people, and per
  sensitive attribute what all the releases reveal about it
  (:meth:`~dpfair.experiments.store.ResultsStore.privacy_totals`), beside which a model's own ε
  understates what was spent;
- the points whose last attempt failed, with their messages (also when no model is stored yet);
- per data set, notion and ε: the trade-off plot (each method's points at their seed mean with ± one
  standard deviation, its Pareto front joined), the fronts and the lowest violation within each slack
  of the non-private error (:func:`~dpfair.experiments.frontier.frontier`);
- per data set: per-group accuracies (a plot and a table of every point) and the privacy ledger of
  every release group, with the ε curve of one model per method;
- the papers' published numbers beside ours (:mod:`dpfair.experiments.papers`), withheld ones marked.

Privacy: the page shows the store's test scores. A model's test figures by group (violations, per-group
accuracies) read its test people's sensitive attribute: they are labelled non-private diagnostics, which no
ledger counts (the guide's privacy model: the test part), unless the sweep released them privately
(``eval_epsilon``: one PrivateMetricFrame per model, composed into the privacy totals); the page says which
(``evaluation_label``). Old stores' rows are non-private.

Here: the page, its figures and the sections that draw them; the other sections are
:mod:`dpfair.experiments.report_sections`, the rows read and the tables written :mod:`dpfair.experiments.report_tables`,
the HTML of values and tables :mod:`dpfair.experiments.report_format`.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import secrets
import time
from pathlib import Path

import pandas as pd

from dpfair.experiments.frontier import BASE_METHOD, frontier, reference_errors
from dpfair.experiments.report_format import absent, eps_label, escape, html_table, is_private, number, params_label, \
    slug, spread_label
from dpfair.experiments.report_sections import (  # evaluation_label: re-exported, where callers import it
    evaluation_label,
    failures_section,
    published_section,
    summary_section,
    totals_section,
)
from dpfair.experiments.report_tables import (  # MODEL_COLUMNS: re-exported, where callers import it
    MODEL_COLUMNS,  # noqa: F401 - re-exported
    load_results,
    prepare_rows,
    write_file,
    write_result_tables,
)
from dpfair.utils.progress import progress

#: The slacks of the "lowest violation at error ≤ base + slack" tables.
SLACKS = (0.01, 0.03)

#: Accountings in the ε curve of a ledger (one curve per data set and method, at its smallest ε).
CURVE_POINTS = 6

#: At most this many models in a per-group accuracy plot (the non-private reference and the best points).
MAX_GROUP_BARS = 8

#: The figures' resolution (pixels per inch) and the colours of their palette PNG.
PNG_DPI = 90
PNG_COLORS = 64

#: Inches of spare canvas around each figure, cropped away (:func:`_figure`).
_SPARE = 0.8

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em auto;max-width:72em;
color:#1d1d1f;line-height:1.45;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}h3{margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #d0d0d0;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
img{max-width:100%;height:auto;display:block;margin:.5em 0}
details{margin:.4em 0}summary{cursor:pointer}
pre{white-space:pre-wrap;font-size:.85em;background:#f7f7f7;padding:.4em;margin:.2em 0}
.note{color:#555;font-size:.9em}.withheld{color:#8a5a00;font-style:italic}nav li{margin:.1em 0}
"""


# ---- figures ---------------------------------------------------------------------------------------

class _Drawers:
    """Figures drawn in worker processes while the report goes on building the next ones and its tables.

    Drawing a figure on the Agg canvas is most of a figure's cost (its artists are built in a fraction of
    it), so :meth:`png` sends the built figure (pickled, without its canvas)
    to a worker and leaves a placeholder that :meth:`fill` replaces by the worker's ``<img>``: the same
    bytes as drawn here. Workers are forked (they inherit the imports) on POSIX when the process may use
    more than one CPU, at most :data:`DRAW_WORKERS`; otherwise, or if the pool cannot start, figures are
    drawn in this process. Nothing but the figures (store data the page shows anyway) reaches a worker.
    """

    def __init__(self):
        import concurrent.futures
        import multiprocessing

        self.futures: list = []
        self.figures: list = []  # (fig, alt) of each future: drawn here if its worker fails
        self.pool = None
        self.mark = secrets.token_hex(8)  # placeholders no text from the store can spell
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
        workers = min(DRAW_WORKERS, cpus - 1)
        # this process's children before the pool: the ones after are its workers (:meth:`_stop_workers`)
        self.children_before = {p.pid for p in multiprocessing.active_children()}
        if workers >= 1 and "fork" in multiprocessing.get_all_start_methods():
            self.pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))

    def png(self, fig, alt: str) -> str:
        """The figure as an inline PNG ``<img>`` (no file, no network): a placeholder that :meth:`fill` replaces
        by a worker's drawing, or, without a pool, drawn here at once."""
        if self.pool is None:
            return _draw(fig, alt)
        try:
            self.futures.append(self.pool.submit(_draw, fig, alt))
            self.figures.append((fig, alt))
        except (OSError, RuntimeError):  # no process could be forked (BrokenProcessPool is a RuntimeError)
            self.close()
            self.pool = None
            return _draw(fig, alt)
        return f"\x00{self.mark} {len(self.futures) - 1}\x00"

    def fill(self, page: str) -> str:
        """``page`` with each placeholder replaced by its figure (waiting for the workers)."""
        images = [self._result(f, *drawn) for f, drawn in zip(self.futures, self.figures)]
        if not images:
            return page
        return re.sub(f"\x00{self.mark} (\\d+)\x00", lambda m: images[int(m.group(1))], page)

    def _result(self, future, fig, alt: str) -> str:
        """The worker's image, or the figure drawn here when the worker died, failed or took over
        :data:`DRAW_TIMEOUT` seconds (the page is the same). A worker that overran is stopped with the others,
        so the figures still queued fail at once and are drawn here too, and closing waits for nobody."""
        import concurrent.futures

        try:
            return future.result(timeout=DRAW_TIMEOUT)
        except concurrent.futures.TimeoutError:
            self._stop_workers()
            return _draw(fig, alt)
        except Exception:  # noqa: BLE001 - a broken pool, a pickling error: draw it in this process instead
            return _draw(fig, alt)

    def _stop_workers(self) -> None:
        """Kill the pool's worker processes (this process's children started since the pool was made)."""
        import multiprocessing

        for child in multiprocessing.active_children():
            if child.pid not in self.children_before:
                child.kill()
                child.join(timeout=5.0)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


#: Seconds a report waits for one figure from its worker before drawing it here instead (bounded time).
DRAW_TIMEOUT = 120.0

#: At most this many processes draw a report's figures (:class:`_Drawers`); the report builds them in its own.
DRAW_WORKERS = 2

def _draw(fig, alt: str) -> str:
    """The figure as an inline PNG ``<img>``: drawn once on the Agg canvas, cropped to
    its ink (:func:`_figure` leaves room to spare around it) and stored as a :data:`PNG_COLORS`-colour palette
    image (lines, markers and text on white need no more colours)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3]
    ink = (pixels < 250).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if rows.size:
        pad = round(0.1 * PNG_DPI)  # bbox_inches="tight"'s border
        pixels = pixels[max(rows[0] - pad, 0):rows[-1] + pad + 1, max(cols[0] - pad, 0):cols[-1] + pad + 1]
    # method 2: Pillow's fast octree (Image.Quantize.FASTOCTREE from Pillow 9.1; matplotlib 3.8 allows Pillow 8)
    image = Image.fromarray(np.ascontiguousarray(pixels)).quantize(PNG_COLORS, method=2)
    buf = io.BytesIO()
    image.save(buf, format="png", compress_level=6)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<img alt="{escape(alt)}" width="{image.width}" height="{image.height}" '
            f'src="data:image/png;base64,{data}">')


def _figure(width: float = 6.4, height: float = 4.2, below: float = 0.0):
    """A matplotlib Figure and Axes drawn on the Agg canvas, outside pyplot (no GUI, no global state).

    The axes sit where a ``width`` × ``height`` figure puts them (matplotlib's default margins), on a
    canvas :data:`_SPARE` inches larger on every side (and ``below`` inches more under it, for a legend
    there), so that labels, titles and legends past the usual figure fit; :func:`_draw` crops to the ink.
    One draw, where ``bbox_inches="tight"`` costs two."""
    from matplotlib.figure import Figure

    full_width, full_height = width + 2 * _SPARE, height + 2 * _SPARE + below
    fig = Figure(figsize=(full_width, full_height), dpi=PNG_DPI)
    ax = fig.add_axes(((_SPARE + 0.125 * width) / full_width, (_SPARE + below + 0.11 * height) / full_height,
                       0.775 * width / full_width, 0.77 * height / full_height))
    return fig, ax


# ---- the sections with figures (the others: dpfair.experiments.report_sections) ------------------------

def _tradeoff_plot(curves: pd.DataFrame, references: pd.DataFrame, notion: str, title: str, base: float,
                   drawers: _Drawers) -> str:
    from dpfair.plot import tradeoff

    fig, ax = _figure()
    if not curves.empty:
        tradeoff(curves, x="error", y="violation", hue="method", by="point", spread="std", pareto=True, ax=ax,
                 legend=False)
    column = f"fairness.{notion}"
    if not references.empty and column in references.columns and references[column].notna().any():
        refs = references.assign(reference=references["method"] + " (targets no notion)")
        tradeoff(refs, x="error", y=column, hue="reference", by="point", spread="std", ax=ax, marker="*",
                 markersize=11, linestyle="none", legend=False)
    if math.isfinite(base):
        ax.axvline(base, color="grey", linestyle="--", linewidth=0.8)
        for s in SLACKS:
            ax.axvline(base + s, color="grey", linestyle=":", linewidth=0.8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.set_ylabel(f"{notion.replace('_', ' ')} violation")
    ax.set_title(title, fontsize=10, y=1.0)  # a fixed place: matplotlib's automatic one costs a layout pass
    return drawers.png(fig, f"trade-off: {title}")


def _same_epsilon(eps: float):
    """A test of "the same ε as ``eps``" (NaN, non-private, equals NaN)."""
    if math.isnan(eps):
        return lambda e: math.isnan(e)
    return lambda e: e == eps


def _front_rows(points: pd.DataFrame, y: str, targets: str) -> list[list]:
    return [[r["method"], targets, params_label(r.get("params")),
             ("html", escape(spread_label(r["error"], r["error_std"], r["error_min"], r["error_max"], r["n_seeds"]))),
             ("html", escape(spread_label(r[y], r[f"{y}_std"], r[f"{y}_min"], r[f"{y}_max"], r["n_seeds"]))),
             r["n_seeds"]]
            for r in points.to_dict("records")]


def _panels(rows: pd.DataFrame, references_by_notion: dict) -> list[tuple[str, float]]:
    """The (notion, ε) of each trade-off plot of one data set: every targeted notion (else every notion with
    references) at each ε of its models (else of the untargeted ones)."""
    targeted = rows["notion"].map(lambda n: not absent(n)).astype(bool)
    notions = sorted(rows.loc[targeted, "notion"].unique()) or sorted(references_by_notion)
    panels = []
    for notion in notions:
        source = rows.loc[targeted & rows["notion"].eq(notion), "epsilon"]
        if source.empty:
            source = rows.loc[~targeted, "epsilon"]
        panels += [(notion, eps) for eps in sorted(source.unique(), key=lambda v: (math.isnan(v), v))]
    return panels


def _tradeoffs(rows: pd.DataFrame, data_id: str, fronts, references_by_notion: dict, bar, drawers: _Drawers) -> str:
    """Per notion and ε of one data set: the plot, the Pareto fronts and the lowest violation within slack
    (``bar`` advanced by one step per plot)."""
    targeted = rows[rows["notion"].map(lambda n: not absent(n))]
    untargeted = rows[rows["notion"].map(absent)]
    base = rows["_base"].iloc[0]
    missing = "" if math.isfinite(base) else f" (no {escape(BASE_METHOD)} run of this data set)"
    parts = [(f"<p>Non-private reference ({escape(BASE_METHOD)}): mean error {escape(number(base))}{missing}; the "
              f"plots mark it (dashed) and base + slack for slack = {escape(', '.join(f'{s:g}' for s in SLACKS))} "
              "(dotted).</p>")]
    for notion, eps in _panels(rows, references_by_notion):
        curves_all = targeted[targeted["notion"] == notion]
        same = _same_epsilon(eps)
        # boolean masks as bool: an empty object-dtype mask would select columns, not rows
        curves = curves_all[curves_all["epsilon"].map(same).astype(bool)]
        refs = untargeted[untargeted["epsilon"].map(lambda e, same=same: same(e) or not is_private(e)).astype(bool)]
        anchor = f"{data_id}-{slug(notion)}-{slug(eps_label(eps))}"
        title = f"{rows['data'].iloc[0]} · {notion.replace('_', ' ')} · {eps_label(eps)}"
        parts.append(f'<h3 id="{escape(anchor)}">{escape(notion.replace("_", " "))}, {escape(eps_label(eps))}</h3>')
        parts.append(_tradeoff_plot(curves, refs, notion, title, base, drawers))
        keys = set(curves["point"])
        front = fronts.front[fronts.front["point"].isin(keys)]
        ref_front = references_by_notion.get(notion)
        table = _front_rows(front, "violation", notion)
        if ref_front is not None:
            table += _front_rows(ref_front.front[ref_front.front["point"].isin(set(refs["point"]))],
                                 f"fairness.{notion}", "none")
        parts.append("<p>Pareto-optimal points (mean ± std [min, max] over seeds):</p>"
                     + html_table(["method", "targets", "hyper-parameters", "error", f"{notion} violation", "seeds"],
                                   table, {3, 4, 5}))
        best = fronts.best[fronts.best["data"].eq(rows["data"].iloc[0]) & fronts.best["notion"].eq(notion)
                           & fronts.best["epsilon"].map(same) & fronts.best["method"].isin(set(curves["method"]))]
        best_rows = [[b["method"], f"{b['slack']:g}", number(b["threshold"]),
                      params_label(b.get("params")) if b["feasible"] else "none within the slack",
                      number(b["error"]) if b["feasible"] else "—",
                      number(b["violation"]) if b["feasible"] else "—"]
                     for b in best.to_dict("records")]
        if best_rows:
            parts.append("<p>Lowest violation at error ≤ base + slack (chosen by test scores: a comparison of "
                         "methods, not a private model selection):</p>"
                         + html_table(["method", "slack", "error ≤", "hyper-parameters", "error",
                                        f"{notion} violation"], best_rows, {1, 2, 4, 5}))
        bar.update()
    return "".join(parts)


def _groups(rows: pd.DataFrame, fronts, drawers: _Drawers) -> str:
    """Per-group accuracy: a plot of the reference and each method's best point, and a table of every point."""
    from dpfair.plot import group_accuracy

    if "per_group_accuracy" not in rows.columns:
        return ""
    keys = fronts.best[fronts.best["feasible"] & fronts.best["slack"].eq(SLACKS[0])
                       & fronts.best["data"].eq(rows["data"].iloc[0])]["point"]
    chosen = list(dict.fromkeys([*rows.loc[rows["method"] == BASE_METHOD, "point"], *keys]))[:MAX_GROUP_BARS]
    parts = ["<h3>Accuracy per group</h3>"]
    if chosen:
        fig, ax = _figure(below=0.2 + 0.17 * math.ceil(len(chosen) / 2))  # the legend's rows under the axes
        group_accuracy(rows[rows["point"].isin(chosen)], label="model", ax=ax)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2)
        ax.set_title(f"{rows['data'].iloc[0]}: {BASE_METHOD} and each method's lowest violation within "
                     f"slack {SLACKS[0]:g} (± std over seeds)", fontsize=9, y=1.0)
        parts.append(drawers.png(fig, f"per-group accuracy, {rows['data'].iloc[0]}"))
    accuracy = pd.DataFrame(list(rows["per_group_accuracy"]), index=rows.index).apply(pd.to_numeric,
                                                                                      errors="coerce")
    groups = [str(g) for g in accuracy.columns]
    by_point = accuracy.groupby(rows["point"], sort=False)
    stats = {name: by_point.agg(name) for name in ("mean", "std", "min", "max", "count")}  # std: ddof=1
    points = rows.groupby("point", sort=False)["model"].agg(["first", "size"])
    table = [[points.at[p, "first"], int(points.at[p, "size"])] + [
        spread_label(stats["mean"].at[p, c], stats["std"].at[p, c], stats["min"].at[p, c], stats["max"].at[p, c],
                     stats["count"].at[p, c]) for c in accuracy.columns] for p in points.index]
    parts.append(f"<details><summary>Per-group accuracy of every point ({len(table)})</summary>"
                 + html_table(["model", "seeds", *groups], table, set(range(1, 2 + len(groups)))) + "</details>")
    return "".join(parts)


def _ledgers(rows: pd.DataFrame, drawers: _Drawers) -> str:
    """The privacy ledger of every release group of one data set, and one ε curve per method."""
    from dpfair.plot import privacy_spent
    from dpfair.privacy import PrivacyLedger

    if "ledger" not in rows.columns:
        return ""
    plots = []
    private = rows[rows["epsilon_spent"].map(is_private)] if "epsilon_spent" in rows.columns else rows.iloc[:0]
    for method, g in private.groupby("method", sort=True):
        first = g.sort_values(["epsilon", "seed"]).iloc[0]  # one curve per method (each costs PLD accountings)
        eps = first["epsilon"]
        fig, ax = _figure(5.6, 3.4)
        try:
            privacy_spent(PrivacyLedger.from_json(first["ledger"]), first["delta_spent"], points=CURVE_POINTS, ax=ax)
        except ValueError as exc:  # e.g. a pure ε-DP ledger (δ = 0), which has no (ε, δ) curve to draw
            plots.append(f"<p class=\"note\">{escape(method)}, {escape(eps_label(eps))}: no ε curve "
                         f"({escape(exc)})</p>")
            continue
        ax.set_title(f"{method}, {eps_label(eps)} (seed {first['seed']}): ε = {first['epsilon_spent']:.3g}",
                     fontsize=9, y=1.0)
        plots.append(drawers.png(fig, f"privacy spent, {method} {eps_label(eps)}"))
    by = "release_id" if "release_id" in rows.columns else "point"
    columns = [c for c in (by, "method", "notion", "epsilon", "seed", "params", "epsilon_spent", "delta_spent",
                           "privacy_unit", "ledger") if c in rows.columns]
    releases: dict = {}
    for r in rows[columns].to_dict("records"):
        releases.setdefault(r[by], []).append(r)
    entries_of: dict = {}  # each distinct ledger's entries, read once
    groups = []
    for release in sorted(releases):
        g = releases[release]
        # the models of the group, those with the same seed and privacy spent on one row
        same: dict = {}
        for r in g:
            unit = r.get("privacy_unit") if not absent(r.get("privacy_unit")) else "—"
            key = (r["seed"], number(r.get("epsilon_spent")), number(r.get("delta_spent"), 3), unit)
            short = " · ".join(x for x in (None if absent(r.get("notion")) else r["notion"],
                                           None if params_label(r.get("params")) == "—"
                                           else params_label(r["params"])) if x)
            same.setdefault(key, []).append(short or "—")
        models = [["; ".join(names), *key] for key, names in same.items()]
        entries = []
        for ledger in {json.dumps(r["ledger"], sort_keys=True): r["ledger"] for r in g}.items():
            if ledger[0] not in entries_of:
                entries_of[ledger[0]] = [[e["label"], e["mechanism"], number(e["noise_multiplier"]),
                                          number(e["sampling_probability"]), e["count"]]
                                         for e in PrivacyLedger.from_json(ledger[1]).to_records()]
            entries += entries_of[ledger[0]]
        summary = (f"release group {release}: {g[0]['method']}, {eps_label(g[0]['epsilon'])}, "
                   f"seed {g[0]['seed']}, {len(g)} model{'s' if len(g) > 1 else ''}")
        groups.append(f"<details><summary>{escape(summary)}</summary>"
                      + html_table(["models (notion · hyper-parameters)", "seed", "ε spent (each model)", "δ",
                                     "privacy unit"], models, {1, 2, 3})
                      + html_table(["release", "mechanism", "noise multiplier σ", "sampling rate q", "count"],
                                    entries, {2, 3, 4}) + "</details>")
    return ("<h3>Privacy ledgers</h3><p class=\"note\">Each model's own ledger (the releases of its training, with "
            "their noise and sampling); models trained together (a batched grid) form one release group, whose joint "
            "release the privacy totals count once.</p>" + "".join(plots)
            + f"<details><summary>Ledgers of the {len(groups)} release groups</summary>" + "".join(groups)
            + "</details>")


# ---- the page --------------------------------------------------------------------------------------

#: The groups of the report's fronts: one curve per data set, notion, method and ε.
FRONT_BY = ("data", "dataset", "preset", "notion", "method", "epsilon")


def render_report(store_or_frame, out_path, *, title: str | None = None, tables=None, verbose: bool = True) -> Path:
    """Write the HTML report of a sweep's results to ``out_path`` and return its path.

    ``store_or_frame``: a :class:`~dpfair.experiments.store.ResultsStore`, the path of one, or its
    :meth:`~dpfair.experiments.store.ResultsStore.frame` (then without the privacy totals, which need the
    store). One self-contained file (inline PNG images and style, no script or external resource), written
    to a temporary file beside ``out_path`` and renamed over it, so a reader never sees half a report.
    A missing store raises ``ValueError`` ("run dpfair sweep first"); an empty store, or one holding only
    failures, gives a page that says so and lists the failures. ``tables``: a folder to
    write :func:`write_tables`' tables into as well, from the same reading of the store.

    The figures are drawn in a forked worker process while the page goes on being built, where this process
    may use more than one CPU (:class:`_Drawers`); the page is the same byte for byte.

    ``verbose``: show a progress bar on stderr (:mod:`dpfair.utils.progress`; ``dpfair --quiet`` silences it): the
    fronts, then per data set each trade-off plot, the per-group accuracies and the ledgers (with their ε
    curves), then the summary with the privacy totals and the published numbers, one step each. It prints
    counts of steps and the time taken, nothing read from the store.
    """
    out = Path(out_path)
    if out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; pass a file path such as {str(out / 'report.html')!r}")
    frame, store, where = load_results(store_or_frame)
    rows = prepare_rows(frame)
    drawers = _Drawers()
    try:
        with progress(_steps(rows), "report", "step", enabled=verbose) as bar:
            page = drawers.fill(_page(rows, store, where, title, tables, bar, drawers))
    finally:
        drawers.close()
    return write_file(out, page)


def _reference_notions(rows: pd.DataFrame) -> list[str]:
    """The notions whose violations the models that target none have (their reference fronts)."""
    untargeted = rows["notion"].map(absent).astype(bool)
    return [n for n in sorted({c.split(".", 1)[1] for c in rows.columns
                               if isinstance(c, str) and c.startswith("fairness.")})
            if rows.loc[untargeted, f"fairness.{n}"].notna().any()]


def _steps(rows: pd.DataFrame) -> int:
    """The report's progress steps: the fronts; per data set one per trade-off plot, the per-group accuracies and
    the ledgers; the summary with the privacy totals; the published numbers."""
    references = dict.fromkeys(_reference_notions(rows))
    return 3 + sum(len(_panels(g, references)) + 2 for _, g in rows.groupby("data", sort=True))


def _page(rows: pd.DataFrame, store, where: str, title: str | None, tables, bar, drawers: _Drawers) -> str:
    """The report's HTML (see :func:`render_report`), advancing ``bar`` by one step per section; its figures are
    drawn by ``drawers``."""
    fronts = frontier(rows, by=FRONT_BY, slack=SLACKS)
    if tables is not None:
        write_result_tables(rows, fronts, Path(tables))
    bases = reference_errors(rows)
    rows["_base"] = [bases.get((d, None if absent(p) else p), math.nan)
                     for d, p in zip(rows["dataset"], rows["preset"] if "preset" in rows else [None] * len(rows))]
    notions = sorted({c.split(".", 1)[1] for c in rows.columns if isinstance(c, str) and c.startswith("fairness.")})
    untargeted = rows[rows["notion"].map(absent)]
    references = {n: frontier(untargeted, by=("data", "method", "epsilon"), y=f"fairness.{n}", base=0.0)
                  for n in _reference_notions(rows)}
    by_data = list(rows.groupby("data", sort=True))
    bar.update()

    sections, nav, anchors = [], [], {}
    for i, (data, g) in enumerate(by_data):
        data_id = f"data-{i}-{slug(data)}"
        nav.append(f'<li><a href="#{escape(data_id)}">{escape(data)}</a> ({len(g)} models)</li>')
        body = _tradeoffs(g, data_id, fronts, references, bar, drawers)
        for anchor, text in re.findall(r'<h3 id="([^"]+)">([^<]+)</h3>', body):
            notion = next((n for n in notions if anchor.startswith(f"{data_id}-{slug(n)}-")), None)
            anchors.setdefault((g["dataset"].iloc[0], notion), []).append((anchor, f"{data}: {html.unescape(text)}"))
        groups = _groups(g, fronts, drawers)
        bar.update()
        sections.append(f'<h2 id="{escape(data_id)}">{escape(data)}</h2>' + body + groups + _ledgers(g, drawers))
        bar.update()
    summary, totals, failures = summary_section(rows, store, where), totals_section(store), failures_section(store)
    bar.update()
    published = published_section(rows, anchors)
    bar.update()

    sweeps = sorted({str(s) for s in rows["sweep"].dropna()}) if "sweep" in rows.columns else []
    title = title or f"dpfair report: {', '.join(sweeps) or 'results'}"
    from dpfair import __version__

    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        (f"<p class=\"note\">Written by dpfair {escape(__version__)} on "
         f"{escape(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))} from {escape(where)}. "
         f"{escape(evaluation_label(rows))}</p>"),
        "<nav><ul><li><a href=\"#summary\">Summary</a></li><li><a href=\"#privacy\">Privacy spent</a></li>",
        "" if store is None else "<li><a href=\"#failures\">Failed points</a></li>",
        *nav, "<li><a href=\"#papers\">Published numbers</a></li></ul></nav>",
        summary, totals, failures,
        *(sections or [(f"<p>{escape(where[:1].upper() + where[1:])} holds no models yet: run <code>dpfair sweep "
                        "SPEC.toml --store PATH</code> to train them.</p>")]), published,
        "</body></html>"])


def write_tables(store_or_frame, folder) -> list[Path]:
    """Write a store's results as small tables into ``folder``: ``models.csv`` (one row per model, its data set's
    loader options as JSON, every notion's violation, a column per hyper-parameter), ``points.csv`` (each
    hyper-parameter point averaged over its seeds, with the spread and the Pareto flag) and ``best.csv`` /
    ``best.md`` (the lowest violation within each slack of the non-private error), for committing beside a report.
    Returns the paths written."""
    rows = prepare_rows(load_results(store_or_frame)[0])
    return write_result_tables(rows, frontier(rows, by=FRONT_BY, slack=SLACKS), Path(folder))
