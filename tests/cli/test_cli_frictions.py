"""Issue 28, item 4: the CLI around a user's work. Before: `--quiet` was refused by predict, info, datasets,
methods and report although the README says every command takes it; `dpfair certify --load` told the user to
"pass distance=", which the CLI had no flag for; `dpfair methods dp-sgd` printed raw reStructuredText markup;
`dpfair-runs/` was written into the working folder and not ignored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpfair.cli import build_parser, main

COMMANDS = [["train"], ["tune"], ["audit"], ["audit", "membership"], ["audit", "release"], ["certify"], ["predict"],
            ["info"], ["datasets"], ["methods"], ["report"], ["sweep"], ["accountant"], ["schema"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_takes_quiet(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*command, "--help"])
    assert exit_.value.code == 0
    assert "--quiet" in capsys.readouterr().out


def test_quiet_methods_prints_the_table(capsys):
    assert main(["methods", "--quiet"]) == 0
    assert "dp-fermi" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["dp-sgd", "dp-fermi", "output-perturbation", "pf-ld"])
def test_method_help_is_plain_text(name, capsys):
    assert main(["methods", name]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and not re.search(r":\w+:`", out), out


def test_certify_takes_a_distance(tmp_path, capsys):
    argv = ["certify", "--dataset", "synthetic", "--draws", "0", "--quiet", "--epsilon", "2"]
    assert main([*argv, "--out", str(tmp_path / "a.json")]) == 0
    assert main([*argv, "--distance", "0.5", "--out", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "≤ 0.5)" in out
    assert main([*argv, "--distance", "-1", "--out", str(tmp_path / "c.json")]) == 2
    assert "--distance must be a positive number" in capsys.readouterr().err


def test_the_default_output_folder_is_ignored():
    root = Path(__file__).resolve().parents[2]
    assert "dpfair-runs/" in (root / ".gitignore").read_text().split()
