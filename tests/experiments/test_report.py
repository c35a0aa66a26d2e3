"""dpfair report: one self-contained HTML page of a results store, checked as HTML and in headless Chromium.

The store comes from the issue's tiny sweep (6 models on compas, a few seconds); the papers' published
numbers are checked against the text of the papers in ../shared/papers.
"""

from __future__ import annotations

import base64
import html.parser
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dpfair.experiments.papers import beside_ours, load_papers, published_numbers
from dpfair.experiments.report import render_report
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import run_sweep

PAPERS = Path(__file__).resolve().parents[2].parent / "shared" / "papers"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory, shared_data) -> ResultsStore:
    import torch

    store = ResultsStore(tmp_path_factory.mktemp("store") / "tiny.sqlite")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny sweep's batches are small: more threads only contend on a busy machine
    try:
        summary = run_sweep(SweepSpec.load("tiny"), store, workers=1, verbose=False)
    finally:
        torch.set_num_threads(threads)
    assert summary.trained == 6 and not summary.failed
    return store


@pytest.fixture(scope="module")
def report(store, tmp_path_factory) -> Path:
    return render_report(store, tmp_path_factory.mktemp("report") / "report.html")


class _Page(html.parser.HTMLParser):
    """The tags, attributes and ids of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if "id" in attrs:
            self.ids.add(attrs["id"])


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_the_report_is_one_page_that_needs_nothing_else(store, report):
    text = report.read_text(encoding="utf-8")
    page = _parse(text)
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    images = [a["src"] for t, a in page.tags if t == "img"]
    # one trade-off plot (compas, demographic parity, ε = 1), one per-group plot, one ε curve (dp-fermi at ε = 1)
    assert len(images) == 3
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert links and all(h.startswith("#") and h[1:] in page.ids for h in links)  # in-page anchors only
    assert not re.search(r"(?:src|href)=\"(?:https?:|//)", text)

    frame = store.frame()
    for needle in ("Summary", "Privacy spent, everything released", "demographic parity, ε = 1",
                   "Pareto-optimal points", "Lowest violation at error ≤ base + slack", "Accuracy per group",
                   "Privacy ledgers", "dp-fermi step", "Published numbers beside ours", "withheld",
                   frame["commit_hash"].iloc[0][:12], "African-American"):
        assert needle in text, needle
    # the store's privacy totals: the composed ε of everything released, not one model's
    totals = store.privacy_totals()
    private = totals[totals["sensitive"].notna()]["private_epsilon"].item()  # race: DP-FERMI's; ERM makes it ∞
    assert f"<td class=\"num\">{private:.4g}</td>" in text and private > frame["epsilon_spent"].min()
    for sentence in totals["covers"]:
        assert html.escape(sentence) in text
    # the release groups: two batched DP-FERMI grids (one per seed) and two ERM fits
    assert text.count("<summary>release group ") == 4


#: The largest figure a report may inline. Each is a 64-colour palette PNG (6 bits a pixel at most) cropped from a
#: canvas of at most (6.4 + 2·0.8) × (4.2 + 2·0.8 + 0.9) inches at 90 dpi, 720 × 603 pixels: ≤ 318 kB before
#: deflate, which shrinks lines and text on a white ground at least fourfold. The old full-colour PNGs were
#: 30 to 70 kB; the bound is well under what one of them took.
MAX_FIGURE_BYTES = 80_000


def test_the_figures_are_small_palette_pngs_and_the_page_is_small(report):
    import struct

    text = report.read_text(encoding="utf-8")
    page = _parse(text)
    images = [a for t, a in page.tags if t == "img"]
    assert images
    for attrs in images:
        png = base64.b64decode(attrs["src"].split(",", 1)[1])
        width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
        assert colour == 3 and depth <= 8, (attrs["alt"], colour, depth)  # indexed colour: a palette image
        assert (width, height) == (int(attrs["width"]), int(attrs["height"]))  # the page reserves their room
        assert len(png) <= MAX_FIGURE_BYTES, (attrs["alt"], len(png))
        assert width <= 720 and height <= 603  # at most the canvas: cropped, never scaled up
    assert len(text.encode()) < 3 * MAX_FIGURE_BYTES + 120_000  # three figures and the tables of six models


def test_the_report_shows_its_progress_unless_quiet(store, tmp_path, capsys):
    from dpfair.utils.progress import quiet

    render_report(store, tmp_path / "r.html")
    err = capsys.readouterr().err
    # the fronts, one trade-off plot (compas, demographic parity, ε = 1), the per-group accuracies, the ledgers,
    # the summary with the privacy totals, the published numbers
    assert "report" in err and "6/6" in err, err
    assert "African-American" not in err and "compas" not in err  # counts and time only, nothing from the store
    with quiet():
        render_report(store, tmp_path / "q.html")
    assert capsys.readouterr().err == ""
    render_report(store, tmp_path / "v.html", verbose=False)
    assert capsys.readouterr().err == ""


def test_figures_drawn_by_workers_make_the_same_page(store, tmp_path, monkeypatch):
    """The worker processes that draw the figures change nothing: the page equals one drawn in this process."""
    from dpfair.experiments import report as report_module

    def page(path):
        text = render_report(store, path, verbose=False).read_text(encoding="utf-8")
        return re.sub(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", "", text)  # the time it was written

    drawn_by_workers = page(tmp_path / "workers.html")
    monkeypatch.setattr(report_module, "DRAW_WORKERS", 0)
    assert page(tmp_path / "here.html") == drawn_by_workers
    assert "\x00" not in drawn_by_workers  # every placeholder filled


class _StuckInAWorker:
    """A figure drawer that never returns in a forked worker (a module-level function: the pool pickles it by
    name) and draws normally in the test's process."""
    parent = None
    draw = None

    @staticmethod
    def draw_or_hang(fig, alt):
        import os
        import time

        while os.getpid() != _StuckInAWorker.parent:
            time.sleep(1.0)
        return _StuckInAWorker.draw(fig, alt)


def test_a_stuck_figure_worker_costs_at_most_the_timeout(store, tmp_path, monkeypatch):
    """A worker that never returns its figure: the report waits :data:`DRAW_TIMEOUT` for it, stops the workers,
    draws every figure in its own process, and leaves no worker behind; the page is the one drawn here."""
    import multiprocessing
    import os

    from dpfair.experiments import report as report_module

    def page(path):
        text = render_report(store, path, verbose=False).read_text(encoding="utf-8")
        return re.sub(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", "", text)

    monkeypatch.setattr(report_module, "DRAW_WORKERS", 0)
    drawn_here = page(tmp_path / "here.html")
    monkeypatch.setattr(report_module, "DRAW_WORKERS", 2)
    monkeypatch.setattr(report_module, "DRAW_TIMEOUT", 0.5)
    monkeypatch.setattr(_StuckInAWorker, "parent", os.getpid())
    monkeypatch.setattr(_StuckInAWorker, "draw", staticmethod(report_module._draw))
    monkeypatch.setattr(report_module, "_draw", _StuckInAWorker.draw_or_hang)
    before = {p.pid for p in multiprocessing.active_children()}
    assert page(tmp_path / "stuck.html") == drawn_here
    assert not [p for p in multiprocessing.active_children() if p.pid not in before]


#: Packages `dpfair report` has no use for: it reads stored ledgers and scores, and trains and predicts nothing.
UNNEEDED = ("torch", "sklearn", "fairlearn", "numba")


def test_the_report_command_imports_neither_torch_nor_sklearn(store, tmp_path):
    """`dpfair report` in a fresh interpreter, figures, tables and privacy totals included, loads none of
    :data:`UNNEEDED` (torch alone took about 5 s of a 15 s report); then the names it left unloaded still import."""
    import json
    import subprocess
    import sys

    out = tmp_path / "r.html"
    script = ("import json, sys\nfrom dpfair.cli import main\n"
              f"code = main(['report', {str(store.path)!r}, '--quiet', '--out', {str(out)!r}, '--tables', "
              f"{str(tmp_path / 'tables')!r}])\n"
              f"print(json.dumps([code, sorted(m for m in {UNNEEDED!r} if m in sys.modules)]))\n"
              "from dpfair.privacy import PrivacyBudget, PrivacyPlan, Release, SecretRandom, neighbours\n"
              "from dpfair.experiments import evaluate, frontier, run_sweep, SweepSpec\n"
              "from dpfair.fairness import error_scorer, predict_with_groups\n"
              "assert callable(evaluate) and callable(frontier)  # the functions, not their modules\n"
              "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    code, loaded = json.loads(done.stdout.splitlines()[-2])
    assert code == 0 and out.is_file() and (tmp_path / "tables" / "best.md").is_file()
    assert loaded == [], f"dpfair report imported {loaded}"
    assert done.stdout.splitlines()[-1] == "True"  # the lazy names did load their modules


def test_published_numbers_beside_ours(report):
    text = report.read_text(encoding="utf-8")
    # PF-LD's non-private baseline on compas is printed (0.683 (0.011)); our tiny sweep is not its set-up
    assert "0.683 (0.011)" in text
    assert "no matching run (needs data set compas, preset pf-ld, sensitive sex, 2 groups, method erm" in text
    # numbers without a run of the same set-up are hidden from the table and counted
    assert re.search(r"\d+ published numbers of these data sets with no run of the same set-up in this store "
                     r"\(hidden\)", text)
    assert "Z → none" in text and "dpfair has no such method" in text


def test_text_from_the_store_is_escaped(store, tmp_path):
    frame = store.frame()
    frame["sweep"] = "<script>alert(1)</script>"
    frame["host"] = '"><img src=x onerror=alert(2)>'
    text = render_report(frame, tmp_path / "r.html", title="a <b>bold</b> title").read_text(encoding="utf-8")
    assert "<script>" not in text and "<img src=x" not in text and "<b>bold" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "a &lt;b&gt;bold&lt;/b&gt; title" in text
    assert "Privacy totals need the results store" in text  # a frame has no releases to compose


def test_a_missing_store_says_to_run_a_sweep_first_and_an_empty_one_is_rendered(tmp_path):
    missing = tmp_path / "none.sqlite"
    with pytest.raises(ValueError, match=r"no results store at .*none\.sqlite.*run `dpfair sweep"):
        render_report(missing, tmp_path / "r.html")
    assert not missing.exists()  # not created by asking
    with pytest.raises(ValueError, match="is a folder; pass a file path"):
        render_report(pd.DataFrame(), tmp_path)
    assert list(tmp_path.iterdir()) == []  # no report, no temporary file
    # an empty store (and an empty frame) is a page that says so (tests/experiments/test_store_integrity.py)
    text = render_report(ResultsStore(tmp_path / "empty.sqlite").create(), tmp_path / "r.html").read_text()
    assert "holds no models yet" in text and "nothing was released" in text
    assert "holds no models yet" in render_report(pd.DataFrame(), tmp_path / "f.html").read_text()


def test_the_report_replaces_an_old_one_whole(store, tmp_path):
    out = tmp_path / "deep" / "report.html"
    out.parent.mkdir()
    out.write_text("old")
    assert render_report(store, out) == out
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]


# ---- the papers' published numbers ---------------------------------------------------------------

def _normal(text: str) -> str:
    return " ".join(text.split())


def test_every_published_number_is_quoted_from_its_paper():
    from dpfair.algorithms import METHODS
    from dpfair.datasets import list_datasets

    if not PAPERS.is_dir():
        pytest.skip(f"the papers' text ({PAPERS}) is not here")
    papers = load_papers()
    assert {p.key for p in papers} == {"dp-fermi", "pf-ld", "jagielski", "fairdp", "mangold"}
    for paper in papers:
        text = _normal((PAPERS / paper.text).read_text(encoding="utf-8"))
        for entry in (*paper.numbers, *paper.figures, *paper.claims):
            assert _normal(entry["quote"]) in text, (paper.key, entry["source"], entry["quote"][:60])
        for entry in paper.numbers:
            for metric, value in {**entry.get("values", {}), **entry.get("spread", {})}.items():
                assert f"{value:g}" in entry["quote"], (paper.key, entry["source"], metric, value)
            if "withheld" in entry:
                assert "[withheld]" in entry["quote"]
        for entry in (*paper.numbers, *paper.figures):
            for dataset in [entry["dataset"]] if isinstance(entry.get("dataset"), str) else entry.get("dataset", []):
                assert dataset in list_datasets(), (paper.key, dataset)
        for names in paper.methods.values():
            assert set([names] if isinstance(names, str) else names) <= set(METHODS), (paper.key, names)
    numbers = published_numbers(papers)
    reported = numbers[numbers["status"] == "reported"]
    # PF-LD's Table 2 prints its non-private baseline only (5 data sets × 3 notions × accuracy and violation)
    assert set(reported["paper"]) == {"pf-ld"} and len(reported) == 30 and set(reported["method"]) == {"erm"}
    assert reported["epsilon"].isna().all()


def _rows(method, errors, violations, *, preset="pf-ld", epsilon=math.nan, notion=None, groups=2, options=None):
    names = ["Female", "Male", "Other", "x", "y"][:groups]
    return [{"dataset": "compas", "preset": preset, "sensitive": None, "method": method, "notion": notion,
             "options": dict(options or {}),
             "epsilon": epsilon, "seed": seed, "params": {"lam": 1.0} if method == "pf-ld" else {},
             "error": e, "fairness.demographic_parity": v, "per_group_accuracy": dict.fromkeys(names, 1 - e)}
            for seed, (e, v) in enumerate(zip(errors, violations, strict=True))]


def test_published_numbers_match_rows_by_data_set_preset_method_epsilon_and_notion():
    numbers = published_numbers([p for p in load_papers() if p.key == "pf-ld"])
    compas_dp = numbers[(numbers["dataset"] == "compas") & (numbers["notion"] == "demographic_parity")]
    frame = pd.DataFrame(
        _rows("erm", [0.30, 0.32], [0.10, 0.20])
        + _rows("erm", [0.5], [0.5], preset=None)  # another set-up: not the paper's
        + _rows("erm", [0.5], [0.5], groups=3)  # three groups: not PF-LD's compas
        + _rows("erm", [0.5], [0.5], options={"missing_sensitive": 0.4})  # a set-up the paper does not name
        + _rows("pf-ld", [0.35, 0.37, 0.39], [0.02, 0.04, 0.06], epsilon=1.0, notion="demographic_parity")
        + _rows("pf-ld", [0.5], [0.5], epsilon=3.0, notion="demographic_parity")  # another ε
        + _rows("pf-ld", [0.5], [0.5], epsilon=1.0, notion="equalized_odds"))  # targets another notion
    out = beside_ours(compas_dp, frame).set_index(["paper_method", "method", "metric"])
    clf = out.loc[("CLF", "erm", "accuracy")]
    assert clf["value"] == 0.683 and clf["spread"] == 0.011 and clf["n_seeds"] == 2
    assert clf["ours"] == pytest.approx(0.69) and clf["ours_std"] == pytest.approx(0.02 / math.sqrt(2))
    assert out.loc[("CLF", "erm", "violation"), "ours"] == pytest.approx(0.15)
    dflp = out.loc[("DF-LP", "pf-ld", "violation")]
    assert dflp["status"] == "withheld" and math.isnan(dflp["value"]) and dflp["n_seeds"] == 3
    assert dflp["ours"] == pytest.approx(0.04) and (dflp["ours_min"], dflp["ours_max"]) == pytest.approx((0.02, 0.06))
    assert dflp["params"] == {"lam": 1.0}
    assert out.loc[("M", "private-demographics", "accuracy"), "note"].startswith("no matching run (needs data set "
                                                                                 "compas, preset pf-ld")


def test_a_malformed_published_file_names_its_fault(tmp_path):
    head = '[paper]\nkey = "x"\ncitation = "X"\ntext = "x.txt"\n'
    cases = {
        '[[number]]\nsource = "T1"\ndataset = "compas"\nmethod = "A"\nvalues = { accuracy = 0.5 }\n':
            "number 1 \\(T1\\) needs 'quote'",
        '[[number]]\nsource = "T1"\nquote = "q"\ndataset = "compas"\nmethod = "A"\n':
            "needs either values .* or withheld",
        '[[number]]\nsource = "T1"\nquote = "q"\ndataset = "compas"\nmethod = "A"\nvalue = 0.5\n':
            "unknown key value",
        '[[table]]\nsource = "T1"\n': "unknown table table",
    }
    for body, message in cases.items():
        (tmp_path / "bad.toml").write_text(head + body)
        with pytest.raises(ValueError, match=f"published/bad.toml: .*{message}"):
            load_papers(tmp_path)


# ---- in a real browser ---------------------------------------------------------------------------

_BROWSER = "needs Debian's Chromium and its driver (apt-get install -y chromium chromium-driver) and selenium " \
           "(pip install 'selenium>=4.11')"


def _chromium():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(_BROWSER)
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip(_BROWSER)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,2400"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the system driver, named explicitly: Selenium Manager downloads nothing
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def test_the_report_renders_in_headless_chromium(report, tmp_path):
    browser = _chromium()
    try:
        browser.get(report.as_uri())
        assert browser.title.startswith("dpfair report: tiny")
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        assert len(images) == 3 and all(done and w > 0 and h > 0 for done, w, h in images), images
        # nothing was fetched: the page is the one file
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        shot = tmp_path / "report.png"
        assert browser.save_screenshot(str(shot))
    finally:
        browser.quit()
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size[0] >= 1000
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, tables and a plot, not a blank page
