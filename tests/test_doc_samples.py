"""The sample outputs of the README and the user guide are what the commands print now (issue 13, item 11: they
had gone out of date; issue 28 moved most of them from the README to the guide's pages).

``scripts/doc_samples.py --check`` reruns each sample's command and compares the shape of its output (lines,
labels, order; numbers only as numbers, since the privacy noise is fresh on every run) with the page's block.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "doc_samples.py"


@pytest.fixture(scope="module")
def samples():
    spec = importlib.util.spec_from_file_location("doc_samples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_shape_ignores_numbers_and_alignment_but_not_labels(samples):
    a = "  test error      0.1565\n  epsilon spent   0.999155\n  result  dpfair-runs/a-20261124-055716.json\n"
    b = "  test error    0.2\n  epsilon spent 1\n  result dpfair-runs/a-20261125-101010.json"
    assert samples.shape(a) == samples.shape(b) == ["test error #", "epsilon spent #", "result dpfair-runs/<file>"]
    assert samples.shape(a) != samples.shape(a.replace("test error", "test accuracy"))
    assert samples.shape(a) != samples.shape(a + "  delta  1e-9\n")


def test_every_sample_has_a_block_in_its_page(samples):
    found = [name for page in samples.pages() for name in samples.blocks(page)]
    assert sorted(found) == sorted(s.name for s in samples.SAMPLES)
    assert samples.README in samples.pages() and all(p.is_file() for p in samples.pages())


def test_the_quick_samples_match_what_the_commands_print(samples, capsys):
    code = samples.check(slow=False, names=[])
    assert code == 0, capsys.readouterr().out


@pytest.mark.slow
def test_every_sample_matches_what_its_command_prints(samples, capsys):
    code = samples.check(slow=True, names=[])
    assert code == 0, capsys.readouterr().out


def test_shape_ignores_which_attack_statistic_an_audit_found_strongest(samples):
    a = "  epsilon lower bound  0.31\n  attack statistic     released numbers, projected\n  verdict  ok\n"
    b = "  epsilon lower bound  0.2\n  attack statistic     released number 3\n  verdict  ok\n"
    assert samples.shape(a) == samples.shape(b)
    assert samples.shape(a) != samples.shape(a.replace("verdict", "verdicts"))
