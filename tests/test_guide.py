"""The README and the user guide's pages run (issue 28, "A user guide": the manual moved into tested pages).

Every page's code, in order, in an empty folder (where the repository's ``results/`` is visible, since pages read
committed results):

- ``python`` blocks run in one namespace per page;
- ``console`` blocks (``$ dpfair ...``) run through the CLI's ``main`` and must exit 0;
- every ``dpfair ...`` line of a ``bash`` block (commands that take minutes, shown but not run here) must parse:
  a command or option the CLI no longer has fails here. Their outputs are checked by ``tests/test_doc_samples.py``.

A page whose code no longer runs, or whose commands fail, fails here. Pages of minutes are marked ``slow`` below.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import textwrap
import warnings
from pathlib import Path

import pytest

from dpfair.cli import build_parser, main
from dpfair.exceptions import PrivacyLeakWarning, UtilityWarning

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.*")), REPO / "docs" / "architecture.md"]
#: pages whose code takes minutes (whole trade-off grids on adult): run with ``-m slow``
SLOW = {"python.md"}

_RST_BLOCK = re.compile(r"^\.\. code-block:: (\w+)\n\n((?:(?:   .*)?\n)+)", re.M)
_MD_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.DOTALL)


def blocks(page: Path) -> list[tuple[str, str]]:
    """``[(language, code), ...]`` of the page's code blocks, in order (reST ``.. code-block::`` or fenced)."""
    text = page.read_text()
    if page.suffix == ".rst":
        return [(lang, textwrap.dedent(body).strip() + "\n") for lang, body in _RST_BLOCK.findall(text)]
    return [(lang, body) for lang, body in _MD_BLOCK.findall(text)]


def parses(line: str) -> str | None:
    """``None`` if the shell line ``dpfair ...`` parses with the CLI's parser, else what argparse says."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            build_parser().parse_args(shlex.split(line, comments=True)[1:])
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]
    return None


@contextlib.contextmanager
def readers_warnings():
    """A page shows dpfair's warnings to its readers (a small group of the example data, an inferred schema): here
    they do not fail the page; any other warning (a third party's, Python's) still reaches the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UtilityWarning)
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        yield


def _params(pages):
    return [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in SLOW else []) for p in pages]


@pytest.mark.parametrize("page", _params(PAGES))
def test_every_code_block_of_the_page_runs(page, tmp_path, monkeypatch, capsys):
    found = blocks(page)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").symlink_to(REPO / "results")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": f"guide_{page.stem}"}
    for i, (lang, code) in enumerate(found):
        where = f"{page.name} block {i + 1}"
        if lang == "python":
            with readers_warnings():
                exec(compile(code, where, "exec"), namespace)
        elif lang == "console":
            for line in code.splitlines():
                assert line.startswith("$ dpfair "), f"{where}: not a dpfair command: {line}"
                with readers_warnings():
                    code_ = main(shlex.split(line)[2:])
                assert code_ == 0, f"{where}: `{line}` exited {code_}: {capsys.readouterr().err}"
        elif lang == "bash":
            for line in code.splitlines():
                if line.startswith("dpfair "):
                    assert parses(line) is None, f"{where}: `{line}` does not parse: {parses(line)}"


def test_a_bash_line_with_an_unknown_option_is_caught():
    assert parses("dpfair train --dataset adult --epsilon 1  # a comment") is None
    assert "unrecognized arguments" in parses("dpfair train --no-such-option 1")
    assert "invalid choice" in parses("dpfair trian")


def test_every_page_is_in_the_docs_site():
    index = (REPO / "docs" / "index.rst").read_text()
    for page in PAGES[1:]:
        assert str(page.relative_to(REPO / "docs").with_suffix("")) in index, f"{page.name} is in no toctree"
