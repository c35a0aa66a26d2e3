"""Small groups on the command line (issue 41, item 5): the fit's warning names the group by its declared name
(the fit knows it by code), and a non-private test figure of fewer than 30 people carries its count and a flag."""

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main


# the command prints each warning as one line on stderr, which the test reads (the schema's read from the rows too)
@pytest.mark.filterwarnings("default::dpfair.exceptions.SmallGroupWarning",
                            "default:infer_schema read the rows:dpfair.exceptions.PrivacyLeakWarning")
def test_a_tiny_group_is_named_and_its_test_figure_flagged(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 2000
    group = np.where(np.arange(n) < 40, "Pacific Islander", rng.choice(["a", "b"], size=n))
    x = rng.normal(size=n)
    path = tmp_path / "own.csv"
    pd.DataFrame({"x": x, "g": group, "y": (x + rng.normal(size=n) > 0).astype(int)}).to_csv(path, index=False)
    code = main(["train", "--data", str(path), "--label", "y", "--sensitive", "g", "--groups",
                 "a,b,Pacific Islander", "--method", "dp-postprocess", "--quiet", "--out", str(tmp_path / "r.json")])
    out = capsys.readouterr()
    assert code == 0, out.err
    warning = next(line for line in out.err.splitlines() if "SmallGroupWarning" in line)
    assert "'Pacific Islander' about" in warning and "'2'" not in warning
    row = next(line for line in out.out.splitlines() if "accuracy, Pacific Islander" in line)
    tested = int(row.split("!")[1].split()[0])
    assert 0 < tested < 30 and "test people: too few for a reliable figure" in row
    assert "!" not in next(line for line in out.out.splitlines() if line.strip().startswith("accuracy, a "))
