"""Issue 27, item 8: a sweep spec that cannot mean what it says is refused when read, in one line naming the key.

Before: each spec below trained nothing (or the wrong thing) and `dpfair sweep` exited 0 without a word;
`epsilon = [true]` ran at ε = 1, `name = {a = 1}` became a sweep name, and `../` in a name moved the default store.
"""

from __future__ import annotations

import tomllib

import pytest

from dpfair.cli import main
from dpfair.experiments.spec import SweepSpec

HEAD = "[sweep]\nname = 'x'\ndatasets = ['compas']\n"

CASES = [
    # the review's cases
    (HEAD + "methods = ['dp-fermi']\nnotions = ['demographic_partiy']", "unknown notion 'demographic_partiy'"),
    (HEAD + "methods = ['dp-oracle']\nnotions = ['demographic_parity']",
     "no method of the sweep targets notion 'demographic_parity'"),
    (HEAD + "methods = ['erm']\nseeds = []", "seeds must be a non-empty list"),
    ("[sweep]\nname = 'x'\ndatasets = []\nmethods = ['erm']", "datasets is empty"),
    (HEAD + "methods = ['dp-fermi']\nepsilon = []", "epsilon is empty"),
    (HEAD + "methods = ['dp-fermi']\nepsilon = [true]", "every epsilon must be a number"),
    ("[sweep]\nname = {a = 1}\ndatasets = ['compas']\nmethods = ['erm']", "name must be a plain name"),
    ("[sweep]\nname = '../escaped'\ndatasets = ['compas']\nmethods = ['erm']", "name must be a plain name"),
    # the same kind
    (HEAD + "methods = ['dp-fermi', 'dp-oracle']\nnotions = ['demographic_parity']",
     "dp-oracle targets equalized_odds, none of the notions listed"),
    (HEAD + "methods = ['erm']\nnotions = ['demographic_parity']", "no method of the sweep targets"),
    (HEAD + "methods = ['erm']\nepsilon = [1.0, 2.0]", "epsilon is given but no method of the sweep is private"),
    (HEAD + "methods = ['dp-fermi']\nepsilon = ['1']", "every epsilon must be a number"),
    (HEAD + "methods = ['dp-fermi']\nepsilon = [1.0, 1]", "epsilon lists 1 twice"),
    (HEAD + "methods = ['dp-fermi']\ndelta = '1e-5'", r"delta must be in \(0, 1\)"),
    (HEAD + "methods = ['dp-fermi']\ntest_size = true", r"test_size must be a number in \(0, 1\)"),
    (HEAD + "methods = ['dp-fermi']\npresets = []", "presets must be a non-empty list"),
    ("[sweep]\nname = 'a/b'\ndatasets = ['compas']\nmethods = ['erm']", "name must be a plain name"),
    ("[sweep]\nname = ''\ndatasets = ['compas']\nmethods = ['erm']", "name must be a plain name"),
    ("[sweep]\nname = 'x'\ndescription = 3\ndatasets = ['compas']\nmethods = ['erm']", "description must be a string"),
    ("[sweep]\nname = 'x'\ndatasets = [{name = 'compas', options = 5}]\nmethods = ['erm']",
     "options of data set 'compas' must be a table"),
    (HEAD + "methods = ['dp-fermi']\n[grid.dp-fermi]\nlam = [0.0, 'a']", r"\[grid.dp-fermi\] point \{'lam': 'a'\}"),
    (HEAD + "methods = ['dp-fermi']\n[grid.dp-fermi]\nlam = [-1.0]", "lam must be >= 0"),
    (HEAD + "methods = ['dp-fermi']\n[grid.dp-fermi]\nlam = [inf]", "lam must be a finite number"),
    (HEAD + "methods = ['dp-fermi']\n[params.dp-fermi]\nepochs = 2.5", r"\[params.dp-fermi\]: epochs must be an integer"),
    (HEAD + "methods = ['dp-fermi']\n[params.dp-fermi]\nlam = 1.0\n[grid.dp-fermi]\nlam = [0.0]", "both set 'lam'"),
]


@pytest.mark.parametrize("text, message", CASES)
def test_a_spec_that_trains_nothing_or_the_wrong_thing_is_refused(text, message):
    with pytest.raises(ValueError, match=message) as caught:
        SweepSpec.from_dict(tomllib.loads(text))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", [CASES[i][0] for i in range(8)], ids=["typo-notion", "untargeted-notion", "no-seeds",
                                                                       "no-datasets", "no-epsilon", "epsilon-true",
                                                                       "table-name", "dotdot-name"])
def test_the_cli_refuses_it_in_one_line_and_writes_no_store(tmp_path, monkeypatch, capsys, text):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "spec.toml").write_text(text)
    assert main(["sweep", str(tmp_path / "spec.toml"), "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfair: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.rglob("*.sqlite"))  # no store, in the default folder or beside it


def test_specs_that_mean_something_still_load():
    spec = SweepSpec.from_dict(tomllib.loads(
        HEAD + "methods = ['dp-fermi', 'dp-oracle', 'erm']\nnotions = ['demographic_parity', 'equalized_odds']\n"
               "epsilon = [1, inf]\nseeds = [0, 1]\n[grid.dp-fermi]\nlam = [0.0, 2]\n[params.dp-oracle]\nn_rounds = 3"))
    points = spec.points()
    # dp-fermi: 2 notions × 2 ε × 2 λ × 2 seeds; dp-oracle: equalized odds only × 2 ε × 2 seeds; erm: 2 seeds
    assert len(points) == 16 + 4 + 2
    assert {p.notion for p in points if p.method == "dp-oracle"} == {"equalized_odds"}
    assert SweepSpec.from_dict(tomllib.loads("[sweep]\nname = 'run-2.b_x+y'\ndatasets = ['compas']\n"
                                             "methods = ['erm']")).name == "run-2.b_x+y"
