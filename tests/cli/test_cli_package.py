"""The command line as a package (issue 43, "the second redesign step"): one module per command, one privacy record
behind every result's privacy keys, measured notes out of the help text."""

import math
import re
import subprocess
import sys

import pytest

from dpfair.cli import audit
from dpfair.cli.main import COMMANDS, build_parser
from dpfair.privacy.record import KEYS, OPTIONAL, PrivacyRecord


def test_every_command_is_a_module_with_add_arguments_and_run():
    for name, module in COMMANDS.items():
        assert callable(module.add_arguments) and callable(module.run), name
        assert module.HELP, name
    parser = build_parser()
    assert parser.parse_args(["methods"]).func is COMMANDS["methods"].run
    assert parser.parse_args(["audit", "release"]).func is audit.run_release


def test_python_m_dpfair_cli_is_the_command():
    done = subprocess.run([sys.executable, "-m", "dpfair.cli", "--version"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and done.stdout.startswith("dpfair "), done.stderr


def test_the_audit_help_points_to_the_measurements_instead_of_printing_them():
    assert not re.search(r"\d", audit.EPILOG.replace("exit status 1", "").replace("Exit status 1", "")
                         .replace(", 0 otherwise", ""))
    assert "docs/guide/audits.md" in audit.EPILOG and "results/audit/README.md" in audit.EPILOG


def test_the_record_writes_its_keys_in_one_order():
    record = PrivacyRecord.of(0.5, 1e-5, "sensitive", "sex", not_covered="the groups", guarantee="differential "
                              "privacy", ledger=[], noise_multiplier=2.0, per_model_epsilon=0.1, spent={"epsilon": 0.5})
    assert list(record.to_json()) == ["epsilon", "delta", "privacy_unit", "protects"]
    assert list(record.to_json(*reversed(OPTIONAL))) == list(KEYS)
    assert record.protects == "each person's sex; their features and label public"
    assert record.spent_text("search") == "the search spent ε = 0.5 all the same"
    assert "not_covered" not in PrivacyRecord.of(0.5, 1e-5, "record").to_json("not_covered")
    nobody = PrivacyRecord.of(math.inf, 0.0, None)
    assert nobody.protects == "not private: protects no one" and nobody.spent_text() == ""
    with pytest.raises(ValueError, match="no optional key 'sigma'"):
        record.to_json("sigma")
