"""Issue 42: a messy lender's export trained as the schema proposal stands, against scikit-learn's logistic regression.

The table is :func:`dpfair.datasets.make_messy_loans` (30,000 rows: an ID, a date, case variants, thousands
separators, currency signs, a zip code, gaps in six columns, free text, a 40-person group). The schema is the
proposal of :func:`dpfair.datasets.propose_schema`, accepted as it stands (gaps filled with indicators, log1p on
income, identifiers and text ignored). Each private model and a non-private ``LogisticRegression`` get the same
declared features; the table gives each one's test error over seeds, the gap to LR, and the proposal's and the
load's time and peak memory. It also writes the same table as Parquet and checks that the proposal is the same.

Writes `results/messy_table/messy_table.csv` and `.md`. About a minute on one core:
`python benchmarks/messy_table.py`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import load_average, machine_info  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "results" / "messy_table")
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegression

    from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier
    from dpfair.datasets import load_table, make_messy_loans, propose_schema

    load = load_average()
    folder = Path(tempfile.mkdtemp())
    table = make_messy_loans(args.rows, random_state=0)
    table.to_csv(folder / "loans.csv", index=False)
    table.to_parquet(folder / "loans.parquet", index=False)
    start = time.perf_counter()
    proposal = propose_schema(folder / "loans.csv", label="approved", sensitive="ethnicity")
    propose_s = time.perf_counter() - start
    parquet = propose_schema(folder / "loans.parquet", label="approved", sensitive="ethnicity")
    same = ({**proposal.schema.to_dict(), "source": ""} == {**parquet.schema.to_dict(), "source": ""})
    (folder / "loans.toml").write_text(proposal.to_toml())
    start = time.perf_counter()
    data = load_table(folder / "loans.csv", schema=folder / "loans.toml", privacy_unit="record")
    load_s = time.perf_counter() - start
    lr = 1 - LogisticRegression(max_iter=5000).fit(data.X_train, data.y_train).score(data.X_test, data.y_test)
    models = {
        "DP-FERMI (λ = 0), ε = 1, record unit": lambda seed: DPFERMIClassifier(
            epsilon=1.0, lam=0.0, privacy_unit="record", groups=len(data.group_names), classes=2,
            random_state=seed),
        "DP-FERMI (λ = 1, demographic parity), ε = 1, record unit": lambda seed: DPFERMIClassifier(
            epsilon=1.0, lam=1.0, privacy_unit="record", groups=len(data.group_names), classes=2,
            random_state=seed),
        "DP-SGD logistic, ε = 1": lambda seed: DPSGDClassifier(epsilon=1.0, random_state=seed),
    }
    rows = [{"model": "scikit-learn LogisticRegression (not private)", "error": lr, "error_std": 0.0,
             "gap_to_lr": 0.0, "seeds": 1}]
    for name, build in models.items():
        errors = []
        for seed in range(args.seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = build(seed).fit(data.X_train, data.y_train, sensitive_features=data.s_train)
            errors.append(1 - model.score(data.X_test, data.y_test))
        rows.append({"model": name, "error": float(np.mean(errors)), "error_std": float(np.std(errors)),
                     "gap_to_lr": float(np.mean(errors) - lr), "seeds": args.seeds})
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "messy_table.csv", index=False)
    info = machine_info(load)
    ignored = ", ".join(f"{d.column} ({d.proposal[9:]})" for d in proposal.decisions if d.role == "ignored")
    text = [f"# A messy export trained as the proposal stands ({args.rows:,} rows)", "",
            f"`python benchmarks/messy_table.py` · {info['date']} · {info['machine']} · {info['cpus']} CPUs · load "
            f"{info['load_before']} → {info['load_after']} · Python {info['python']}", "",
            f"- {data.X_train.shape[0]:,} train / {data.X_test.shape[0]:,} test rows, {data.X_train.shape[1]} features "
            f"from {len(proposal.schema.columns)} columns; ignored: {ignored}.",
            f"- proposal {propose_s:.2f} s, load through the schema {load_s:.2f} s, peak resident memory "
            f"{peak_mib():.0f} MiB; the CSV and the Parquet copy give the same schema: {same}.", "",
            "| model | test error | std over seeds | gap to LR | seeds |", "|---|---:|---:|---:|---:|"]
    text += [f"| {r['model']} | {r['error']:.4f} | {r['error_std']:.4f} | {r['gap_to_lr']:+.4f} | {r['seeds']} |"
             for r in rows]
    (args.out / "messy_table.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
