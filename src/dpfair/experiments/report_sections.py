"""The sweep report's sections of text and tables (:mod:`dpfair.experiments.report`; the figures' sections are
there): the summary, the store's privacy totals, the failed points and the papers' published numbers beside ours;
and :func:`evaluation_label`, what the page's test figures by group are (released privately, or non-private
diagnostics).
"""

from __future__ import annotations

import time

import pandas as pd

from dpfair.experiments.papers import beside_ours, load_papers, published_numbers
from dpfair.experiments.report_format import absent, eps_label, escape, html_table, is_private, number, params_label, \
    spread_label


def summary_section(frame: pd.DataFrame, store, where: str) -> str:
    def counts(column):
        values = frame[column].map(lambda v: "—" if absent(v) else v) if column in frame.columns else pd.Series()
        return ", ".join(f"{k} ({n})" for k, n in values.value_counts(sort=False).items()) or "—"

    rows = [["source", where], ["models", f"{len(frame)} ({int(frame['epsilon'].map(is_private).sum())} private)"],
            ["sweeps", counts("sweep")], ["data sets", counts("data")], ["methods", counts("method")],
            ["notions targeted", counts("notion")],
            ["ε targets", ", ".join(sorted({eps_label(v) for v in frame['epsilon']})) or "—"],
            ["seeds", ", ".join(str(s) for s in sorted(frame["seed"].dropna().unique())) or "—"]]
    if "commit_hash" in frame.columns:
        rows.append(["commits", ", ".join(f"{str(k)[:12]} ({n})" for k, n in frame["commit_hash"].fillna("unknown")
                                          .value_counts(sort=False).items())])
    if "versions" in frame.columns:
        seen: dict = {}
        for versions in frame["versions"]:
            for package, version in (versions or {}).items():
                seen.setdefault(package, set()).add(str(version))
        rows.append(["package versions", "; ".join(f"{p} {', '.join(sorted(v))}" for p, v in sorted(seen.items()))])
    if "host" in frame.columns:
        rows.append(["hosts", counts("host")])
    if "created" in frame.columns and frame["created"].notna().any():
        first, last = (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) for t in
                       (frame["created"].min(), frame["created"].max()))
        rows.append(["stored", f"{first} to {last}"])
    rows.append(["test figures by group", evaluation_label(frame)])
    if "wall_s" in frame.columns:
        rows.append(["training wall time", f"{frame['wall_s'].sum():.1f} s (sum over models)"])
    if store is not None:
        failures = store.failures()
        rows.append(["failed points", f"{len(failures)} (listed below; retried by the next `dpfair sweep`)"
                     if failures else "none"])
    return "<h2 id=\"summary\">Summary</h2>" + html_table(None, rows)


def evaluation_label(frame: pd.DataFrame) -> str:
    """One sentence on what the test figures by group of ``frame``'s models are: released privately (the sweep's
    ``eval_epsilon``, its ε) or non-private diagnostics of the test people (rows without ``eval_private``, as
    stores written before it, are non-private)."""
    private = frame["eval_private"].fillna(False).astype(bool) if "eval_private" in frame.columns else \
        pd.Series(False, index=frame.index)
    n, k = len(frame), int(private.sum())
    diagnostic = ("non-private diagnostics of the test people: computed from their sensitive attribute without "
                  "noise, counted by no ledger and not covered by any ε on this page")
    if k == 0:
        return f"The test figures by group (violations, per-group accuracies) are {diagnostic}."
    levels = ", ".join(f"{e:g}" for e in sorted(frame.loc[private, "eval_epsilon"].dropna().unique()))
    released = (f"released privately (one PrivateMetricFrame per model at evaluation ε = {levels}, composed into "
                "the privacy totals)")
    if k == n:
        return f"The test figures by group (violations, per-group accuracies) were {released}."
    return (f"The test figures by group (violations, per-group accuracies) of {k} of {n} models were {released}; "
            f"the others' are {diagnostic}.")


def totals_section(store) -> str:
    head = "<h2 id=\"privacy\">Privacy spent, everything released</h2>"
    if store is None:
        return head + "<p class=\"note\">Privacy totals need the results store (the report was given a frame).</p>"
    totals = store.privacy_totals()
    if totals.empty:
        return head + "<p>No model is stored: nothing was released, and no privacy was spent.</p>"
    rows = []
    for r in totals.to_dict("records"):
        covers = r["covers"] + (" (by group privacy: 2ε)" if r["conversion"] == "group privacy" else "")
        rows.append([r["dataset"], r["protects"], covers, r["models"], r["release_groups"], number(r["epsilon"]),
                     r["private_models"], number(r["private_epsilon"]), number(r["delta"], 3), r["uncovered_models"]])
    return head + (
        "<p>Every stored model was released, and the models of a data set are about the same people whatever "
        "split, seed, preset or sensitive attribute they used. Per data set, ε below composes the models its "
        "row covers (each release group's event once, the groups as independent releases, on the PLD "
        "accountant): the add/remove total every record-level model; each attribute's total the sensitive-unit "
        "models that declared it and every record-level model, converted to replace-one of it (the same events "
        "re-accounted, or by group privacy where that is not possible). These are what the store has spent, "
        "larger than the ε of any one model in the tables below. A sensitive-unit model protects only the "
        "attribute it declared: under any other row it is counted as not bounded. ε is ∞ where a "
        "non-private model (such as the <code>erm</code> reference, or a method at ε = ∞) is among the models "
        "composed; the private models' ε is what publishing only the private ones costs.</p>"
        + html_table(["data set", "protects", "covers", "models", "release groups", "ε", "private models", "their ε",
                       "δ", "not bounded here"], rows, {3, 4, 5, 6, 7, 8, 9}))


def failures_section(store) -> str:
    """The points whose last attempt failed, per message (what the fit refused, read off public quantities)."""
    if store is None:
        return ""
    failures = store.failures()
    head = "<h2 id=\"failures\">Failed points</h2>"
    if not failures:
        return head + "<p class=\"note\">None: every point tried so far was stored.</p>"
    by_message: dict = {}
    for f in failures:
        by_message.setdefault(f["message"], []).append(f)
    one = len(failures) == 1
    its, them = ("its", "it") if one else ("their", "them")
    parts = [head, (f"<p>{len(failures)} point{'' if one else 's'} failed at {its} last attempt and released "
                    f"nothing; the next <code>dpfair sweep</code> of {its} spec tries {them} again.</p>")]
    for message, group in sorted(by_message.items(), key=lambda kv: -len(kv[1])):
        rows = []
        for f in group:
            c = f["config"]
            data = c.get("dataset", "—") + (f" ({c['preset']})" if c.get("preset") else "") + (
                f", s = {c['sensitive']}" if c.get("sensitive") else "")
            rows.append([f["sweep"] or "—", data, c.get("method", "—"), c.get("notion") or "—",
                         eps_label(c.get("epsilon")), c.get("seed", "—"), params_label(c.get("params"))])
        parts.append(f"<details open><summary>{escape(message)} ({len(group)} point{'s' if len(group) > 1 else ''})"
                     "</summary>" + html_table(["sweep", "data set", "method", "notion", "privacy", "seed",
                                                 "hyper-parameters"], rows) + "</details>")
    return "".join(parts)


def published_section(frame: pd.DataFrame, anchors: dict) -> str:
    """The papers' published numbers beside ours, for the data sets of the store; their figures and claims."""
    papers = load_papers()
    datasets = set(frame["dataset"])
    parts = [("<h2 id=\"papers\">Published numbers beside ours</h2><p class=\"note\">From the papers' text "
              "(<code>dpfair/experiments/published/*.toml</code>, each number with its quote). "
              "<span class=\"withheld\">withheld</span>: the paper's copy holds the number back on purpose, so "
              "that a reproduction is judged blind. Ours: mean ± std [min, max] over seeds of each matching "
              "hyper-parameter point (same data set, preset, method, ε, notion, groups, and no data set option the "
              "paper does not name), one row per point; numbers without a matching run are hidden and "
              "counted.</p>")]
    def covers(paper):  # papers with numbers or figures of the store's data sets first
        return not ({n["dataset"] for n in paper.numbers} | {d for f in paper.figures for d in f.get("dataset", ())}
                    ) & datasets

    for paper in sorted(papers, key=covers):
        numbers = published_numbers([paper])
        numbers = numbers[numbers["dataset"].isin(datasets)]
        figures = [f for f in paper.figures if set(f.get("dataset", ())) & datasets]
        parts.append(f"<h3>{escape(paper.citation)}</h3>")
        if paper.setting:
            parts.append(f"<p class=\"note\">{escape(paper.setting)}</p>")
        if numbers.empty and not figures:
            covered = sorted({n["dataset"] for n in paper.numbers} | {d for f in paper.figures
                                                                        for d in f.get("dataset", ())})
            parts.append(f"<p class=\"note\">No run of its data sets ({escape(', '.join(covered) or 'none named')}) "
                         "in this store.</p>")
        if not numbers.empty:
            rows, unmatched = [], []
            for r in beside_ours(numbers, frame).to_dict("records"):
                published = ("html", '<span class="withheld">withheld</span>') if r["status"] == "withheld" else (
                    f"{number(r['value'])}" + ("" if absent(r["spread"]) else f" ({number(r['spread'])})"))
                method = f"{r['paper_method']} → {r['method'] if not absent(r['method']) else 'none'}"
                if not r["n_seeds"]:  # no run of this set-up: hidden from the table, counted and listed below
                    unmatched.append([r["source"], r["paper_dataset"], "—" if absent(r["notion"]) else r["notion"],
                                      method, eps_label(r["epsilon"]), r["metric"], published, r["note"]])
                    continue
                params = "" if params_label(r["params"]) == "—" else f"; {params_label(r['params'])}"
                ours = (spread_label(r["ours"], r["ours_std"], r["ours_min"], r["ours_max"], r["n_seeds"])
                        + f" ({r['n_seeds']} seed{'s' if r['n_seeds'] > 1 else ''}{params})")
                where = f"{r['paper_dataset']} ({r['preset']})" if not absent(r["preset"]) else r["paper_dataset"]
                quote = ("html", f"<details><summary>{escape(r['source'])}</summary><pre>{escape(r['quote'])}</pre>"
                                 "</details>")
                rows.append([quote, where, "—" if absent(r["notion"]) else r["notion"], method,
                             eps_label(r["epsilon"]), r["metric"], published, ours])
            if rows:
                parts.append(html_table(["source", "data set", "notion", "method (paper → dpfair)", "privacy",
                                         "metric", "published", "ours"], rows))
            if unmatched:
                parts.append(f"<details><summary>{len(unmatched)} published number{'s' if len(unmatched) > 1 else ''}"
                             f" of these data sets with no run of the same set-up in this store (hidden)</summary>"
                             + html_table(["source", "data set", "notion", "method (paper → dpfair)", "privacy",
                                            "metric", "published", "why"], unmatched) + "</details>")
        for f in figures:
            links = [f'<a href="#{escape(a)}">{escape(text)}</a>' for (dataset, notion), found in anchors.items()
                     if dataset in f.get("dataset", ()) and (f.get("notion") in (None, notion))
                     for a, text in found]
            what = ", ".join(x for x in (", ".join(f.get("dataset", ())), f.get("notion", ""),
                                         "ε ∈ {" + ", ".join(f"{e:g}" for e in f["epsilon"]) + "}"
                                         if f.get("epsilon") else "") if x)
            parts.append(f"<details><summary>{escape(f['source'])} ({escape(what)}): numbers only in the figure; ours: "
                         f"{' '.join(links) or 'no matching plot'}</summary><pre>{escape(f['quote'])}</pre></details>")
        for c in paper.claims:
            parts.append(f"<details><summary>{escape(c['source'])}: a claim the sweeps do not measure</summary>"
                         f"<pre>{escape(c['quote'])}</pre></details>")
    return "".join(parts)
