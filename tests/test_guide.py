"""The user guide's pages run (issue 28, "A user guide"): every ``code-block`` of each page, in order, in an empty
folder — the Python blocks in one namespace, the console blocks (``$ dpfair ...``) through the CLI's ``main``.
A page whose code no longer runs, or whose commands fail, fails here."""

from __future__ import annotations

import re
import shlex
import textwrap
import warnings
from pathlib import Path

import pytest

from dpfair.cli import main

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
_BLOCK = re.compile(r"^\.\. code-block:: (\w+)\n\n((?:(?:   .*)?\n)+)", re.M)


def blocks(page: Path) -> list[tuple[str, str]]:
    """``[(language, code), ...]`` of the page's ``.. code-block::`` directives, in order."""
    return [(lang, textwrap.dedent(body).strip() + "\n") for lang, body in _BLOCK.findall(page.read_text())]


@pytest.mark.parametrize("page", sorted(GUIDE.glob("*.rst")), ids=lambda p: p.stem)
def test_every_code_block_of_the_guide_runs(page, tmp_path, monkeypatch, capsys):
    found = blocks(page)
    assert found, f"{page.name} has no code block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"guide_{page.stem}"}
    for i, (lang, code) in enumerate(found):
        if lang == "python":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a page shows warnings to readers; here only errors count
                exec(compile(code, f"{page.name} block {i + 1}", "exec"), namespace)
        elif lang == "console":
            for line in code.splitlines():
                assert line.startswith("$ dpfair "), f"{page.name} block {i + 1}: not a dpfair command: {line}"
                code_ = main(shlex.split(line)[2:])
                assert code_ == 0, f"{page.name} block {i + 1}: `{line}` exited {code_}: {capsys.readouterr().err}"
        else:
            pytest.fail(f"{page.name} block {i + 1}: no runner for code-block language {lang!r}")
