"""The paper's figure of each reproduction spec, redrawn from a small synthetic result, and its verdicts."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.experiments.paper_figure import draw, read_models, recover_options, verdicts
from dpfair.experiments.papers import load_papers
from dpfair.experiments.spec import SweepSpec, shipped_specs

FIGURE_SPECS = [n for n in shipped_specs() if SweepSpec.load(n).figure is not None]
NOTIONS = ("accuracy_parity", "demographic_parity", "equal_opportunity", "equalized_odds")


def _rows(spec: SweepSpec, seeds=(0, 1), grid_values: int = 2) -> list[dict]:
    """One row per point of ``spec`` with a seed in ``seeds`` and each grid parameter at its first values."""
    keep = {m: {k: v[:grid_values] for k, v in g.items()} for m, g in spec.grids.items()}
    rng = np.random.default_rng(0)
    out = []
    for p in spec.points():
        params = dict(p.params)
        if p.seed not in seeds or any(params[k] not in v for k, v in keep.get(p.method, {}).items()):
            continue
        row = {"sweep": spec.name, "dataset": p.data.name, "preset": p.data.preset, "method": p.method,
               "notion": p.notion, "epsilon": math.nan if p.epsilon is None else p.epsilon, "seed": p.seed,
               "params": json.dumps(params), "options": dict(p.data.options), "error": rng.uniform(0.1, 0.3)}
        row.update({f"fairness.{n}": rng.uniform(0.0, 0.2) for n in NOTIONS})
        out.append(row)
    return out


def _frame(spec: SweepSpec) -> pd.DataFrame:
    rows = _rows(spec)
    for name in spec.figure.with_specs:
        rows += _rows(SweepSpec.load(name))
    return pd.DataFrame(rows)


def _text(value) -> str:
    return "∞" if isinstance(value, float) and math.isinf(value) else f"{value:g}" if isinstance(value, float) \
        else str(value).replace("_", " ")


@pytest.mark.parametrize("name", FIGURE_SPECS)
def test_each_spec_figure_has_the_papers_panels_and_series(name):
    spec = SweepSpec.load(name)
    fig = spec.figure
    frame = _frame(spec)
    figure = draw(spec, frame)
    titles = [ax.get_title() for ax in figure.axes if ax.has_data()]
    legend = [t.get_text() for lg in figure.legends for t in lg.get_texts()]
    main_rows = frame[frame["method"] != fig.baseline].copy()
    main_rows = main_rows.assign(**{k: [json.loads(p).get(k, dict(o).get(k, dict(fig.defaults).get(k)))
                                        for p, o in zip(main_rows["params"], main_rows["options"])]
                                    for k in {fig.series, *fig.rows, *fig.cols} - set(main_rows.columns)})
    facets = [*fig.rows, *fig.cols]
    panels = {tuple(_text(v) for v in r) for r in main_rows[facets].itertuples(index=False)} if facets else {()}
    # every panel is drawn, once per y metric, its facet values in its title
    assert len(titles) == len(panels) * len(fig.y)
    for panel in panels:
        assert sum(all(v in t for v in panel) for t in titles) >= len(fig.y), (panel, titles)
    # every series has a legend entry, with its number of seeds
    for value in main_rows[fig.series].drop_duplicates():
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if fig.series == "epsilon":
            shown = "ε = ∞" if math.isinf(value) else f"ε = {value:g}"
        assert any(shown in lab and "n = 2 seeds" in lab for lab in legend), (shown, legend)
    if fig.baseline:
        assert any(lab.startswith(f"{fig.baseline} (non-private)") for lab in legend)
    assert fig.source in figure._suptitle.get_text().replace("\n", " ")


def _spec(extra: dict | None = None, figure: dict | None = None) -> SweepSpec:
    raw = {"sweep": {"name": "t", "datasets": [{"name": "bank", "preset": "pf-ld"},
                                               {"name": "bank", "preset": "pf-ld",
                                                "options": {"missing_sensitive": 0.5}}],
                     "methods": ["pf-ld", "erm"], "notions": ["demographic_parity"], "epsilon": [1.0, 2.0],
                     "seeds": [0, 1]},
           "figure": {"paper": "pf-ld", "source": "Figure 5", "title": "t", "kind": "curve", "x": "epsilon",
                      "y": ["accuracy", "violation"], "cols": ["dataset"], "series": "missing_sensitive",
                      "defaults": {"missing_sensitive": 0.0}, "baseline": "erm", "tolerance": 0.02,
                      "tolerance_source": "issue 31", "note": "image only", "fixed": {"primal_clip": 10.0},
                      **(figure or {})}}
    raw["sweep"].update(extra or {})
    return SweepSpec.from_dict(raw, "t.toml")


PUBLISHED = '''
[paper]
key = "pf-ld"
citation = "test"
text = "none.txt"
preset = "pf-ld"
[paper.methods]
CLF = "erm"
DF-LP = "pf-ld"
[[number]]
source = "Table 2"
quote = "q"
dataset = "bank"
groups = 2
notion = "demographic_parity"
method = "CLF"
values = { accuracy = 0.80, violation = 0.30 }
[[number]]
source = "Table 3"
quote = "q"
dataset = "bank"
groups = 3
notion = "demographic_parity"
method = "CLF"
values = { accuracy = 0.50 }
[[number]]
source = "Table 2"
quote = "q"
dataset = "bank"
groups = 2
notion = "demographic_parity"
method = "DF-LP"
epsilon = 1.0
values = { accuracy = 0.90 }
[[number]]
source = "Table 2"
quote = "q"
dataset = "bank"
groups = 2
notion = "demographic_parity"
method = "DF-LP"
epsilon = 2.0
withheld = ["accuracy"]
'''


def _model(method, epsilon, seed, error, violation, options=None, params="{}"):
    return {"sweep": "t", "dataset": "bank", "preset": "pf-ld", "method": method,
            "notion": None if method == "erm" else "demographic_parity", "epsilon": epsilon, "seed": seed,
            "params": params, "options": options or {}, "error": error, "fairness.demographic_parity": violation}


def test_verdicts_judge_like_with_like_within_the_tolerance(tmp_path):
    (tmp_path / "pf-ld.toml").write_text(PUBLISHED)
    papers = load_papers(tmp_path)
    rows = [_model("erm", math.nan, s, e, v) for s, e, v in ((0, 0.19, 0.20), (1, 0.19, 0.22))]  # acc 0.81
    rows += [_model("pf-ld", 1.0, s, 0.20, 0.05) for s in (0, 1)]                              # acc 0.80 < 0.90
    rows += [_model("pf-ld", 2.0, s, 0.20, 0.05) for s in (0, 1)]
    rows += [_model("pf-ld", 1.0, s, 0.10, 0.05, {"missing_sensitive": 0.5}) for s in (0, 1)]  # not Table 2's
    rows += [_model("pf-ld", 1.0, s, 0.10, 0.05, params='{"primal_clip": 0.1}') for s in (0, 1)]  # not C_p = 10
    spec = _spec()
    clip = verdicts(spec, pd.DataFrame(rows[-2:]), papers).set_index(["x", "metric"]).loc[("1", "accuracy")]
    assert clip["verdict"] == "not comparable" and clip["why"] == "image only"
    rows = rows[:-2]
    table = verdicts(_spec(), pd.DataFrame(rows), papers).set_index(["series", "x", "metric"])
    base = table.loc[("erm", "non-private", "accuracy")]
    assert base["verdict"] == "reproduced" and base["published"] == 0.80 and base["n"] == 2
    assert base["ours"] == pytest.approx(0.81) and base["difference"] == pytest.approx(0.01)
    viol = table.loc[("erm", "non-private", "violation (demographic_parity)")]
    assert viol["verdict"] == "better" and viol["difference"] == pytest.approx(-0.09)   # lower violation
    assert viol["why"].endswith("not yet explained by a measurement here")
    explained = _spec(figure={"explain": [{"method": "erm", "metric": "violation", "why": "Measured: X."},
                                          {"method": "erm", "dataset": "adult", "why": "Not this one."}]})
    again = verdicts(explained, pd.DataFrame(rows), papers).set_index(["series", "x", "metric"])
    assert again.loc[("erm", "non-private", "violation (demographic_parity)"), "why"].endswith("; Measured: X.")
    assert viol["ours_sd"] == pytest.approx(np.std([0.20, 0.22], ddof=1))
    worse = table.loc[("missing_sensitive = 0", "1", "accuracy")]
    assert worse["verdict"] == "worse" and worse["published"] == 0.90
    withheld = table.loc[("missing_sensitive = 0", "2", "accuracy")]
    assert withheld["verdict"] == "not comparable" and "withheld" in withheld["why"]
    missing = table.loc[("missing_sensitive = 0.5", "1", "accuracy")]
    assert missing["verdict"] == "not comparable" and missing["why"] == "image only"  # the option is no match
    # the 3-group number matches no 2-group run: counted, not shown
    assert table.attrs["unmatched"] == 1
    assert (table["published"] == 0.50).sum() == 0


@pytest.mark.parametrize("figure, words", [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"kind": "bars"}, "kind must be 'curve'"),
    ({"series": "lam"}, "series 'lam' is not a column"),
    ({"baseline": "pf-ld"}, "baseline 'pf-ld' must be a non-private method"),
    ({"tolerance": 2.0}, "tolerance must be a number in (0, 1)"),
    ({"y": ["auc"]}, "y must list metrics"),
    ({"with": ["nope"]}, "with names 'nope'"),
    ({"paper": "nobody"}, "paper 'nobody' has no published numbers"),
    ({"x_scale": "ln"}, "x_scale must be 'linear' or 'log'"),
    ({"fixed": {"depth": 3}}, "fixed must be a table of the sweep's methods' hyper-parameters"),
    ({"explain": [{"method": "erm"}]}, "explain entry 1 needs method (one of the sweep's) and why"),
    ({"explain": [{"method": "erm", "why": "w", "metric": "auc"}]}, "fix 'metric'"),
])
def test_bad_figure_entries_are_refused_with_one_line(figure, words):
    with pytest.raises(ValueError) as err:
        _spec(figure=figure)
    assert words in str(err.value) and "\n" not in str(err.value) and "[figure]" in str(err.value)


def test_a_figure_without_a_required_key_is_refused():
    raw = {"sweep": {"name": "t", "datasets": ["compas"], "methods": ["erm"]}, "figure": {"paper": "pf-ld"}}
    with pytest.raises(ValueError, match=r"\[figure\] needs 'kind'"):
        SweepSpec.from_dict(raw, "t.toml")


def test_options_come_back_from_points_csv():
    models = pd.DataFrame([_model("pf-ld", 1.0, s, e, v) for s, e, v in
                           ((0, 0.2, 0.1), (1, 0.4, 0.3), (0, 0.3, 0.2), (1, 0.5, 0.0))]).drop(columns="options")
    models["violation"] = models["fairness.demographic_parity"]
    points = pd.DataFrame([
        {"data": "bank (pf-ld), missing_sensitive=0.6", "dataset": "bank", "preset": "pf-ld",
         "notion": "demographic_parity", "method": "pf-ld", "epsilon": 1.0, "params": "{}", "error": 0.4,
         "error_min": 0.3, "error_max": 0.5, "violation": 0.1, "violation_min": 0.0, "violation_max": 0.2,
         "seeds": "[0, 1]"},
        {"data": "bank (pf-ld)", "dataset": "bank", "preset": "pf-ld", "notion": "demographic_parity",
         "method": "pf-ld", "epsilon": 1.0, "params": "{}", "error": 0.3, "error_min": 0.2, "error_max": 0.4,
         "violation": 0.2, "violation_min": 0.1, "violation_max": 0.3, "seeds": "[0, 1]"}])
    out = recover_options(models, points)
    assert list(out["options"]) == [{}, {}, {"missing_sensitive": 0.6}, {"missing_sensitive": 0.6}]


def test_models_csv_carries_the_loader_options(tmp_path):
    """`report --tables` writes each model's loader options, so `reproduce --from models.csv` needs no points.csv."""
    from dpfair.experiments.report import write_tables

    models = pd.DataFrame([_model("pf-ld", 1.0, s, 0.2 + 0.1 * s, 0.1, options=o, params={})
                           for s, o in ((0, None), (1, None), (0, {"missing_sensitive": 0.6}),
                                        (1, {"missing_sensitive": 0.6}))])
    models["violation"] = models["fairness.demographic_parity"]
    write_tables(models, tmp_path)
    (tmp_path / "points.csv").unlink()
    back = read_models(tmp_path / "models.csv")
    assert sorted(map(json.loads, back["options"]), key=len) == [{}, {}, {"missing_sensitive": 0.6},
                                                                  {"missing_sensitive": 0.6}]


def test_cli_writes_the_files_and_refuses_to_overwrite(tmp_path, capsys):
    spec = SweepSpec.load("pf-ld-fig4")
    frame = pd.DataFrame(_rows(spec)).drop(columns="options")
    frame["violation"] = frame["fairness.demographic_parity"]
    frame.to_csv(tmp_path / "models.csv", index=False)
    out = tmp_path / "out"
    args = ["reproduce", "pf-ld-fig4", "--from", str(tmp_path / "models.csv"), "--out", str(out)]
    assert main(args) == 0
    assert {p.name for p in out.iterdir()} == {"figure.png", "verdicts.md", "verdicts.csv"}
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(out / "verdicts.csv")
    assert set(table["verdict"]) == {"not comparable"} and len(table) == 2 * 4 * 2  # C_d × ε × 2 metrics
    assert "Figure 4" in (out / "verdicts.md").read_text()
    before = (out / "verdicts.md").read_bytes()
    assert main(args) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert (out / "verdicts.md").read_bytes() == before
    assert main([*args, "--overwrite"]) == 0
    assert main(["reproduce", "pf-ld-fig4", "--out", str(out)]) == 2
    assert "--from models.csv" in capsys.readouterr().err
    assert main(["reproduce", "pf-ld-fig4", "--store", str(tmp_path / "none.sqlite"), "--out", str(out),
                 "--overwrite"]) == 2
    assert "no results store" in capsys.readouterr().err
    assert main(["reproduce", "tiny", "--from", str(tmp_path / "models.csv"), "--out", str(tmp_path / "t")]) == 2
    assert "has no [figure] table" in capsys.readouterr().err and not (tmp_path / "t").exists()
    assert len(read_models(tmp_path / "models.csv")) == len(frame)
