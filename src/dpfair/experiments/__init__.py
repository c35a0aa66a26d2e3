"""Experiments: one evaluation of fitted estimators (the CLI, benchmarks, sweeps), grids, sweeps and their store.

:func:`evaluate` scores a fitted estimator; :func:`run_grid` trains and scores a grid of one method;
:class:`SweepSpec` (a TOML file), :func:`run_sweep` and :class:`ResultsStore` run a resumable sweep
into SQLite (``dpfair sweep``); :func:`frontier` draws its Pareto fronts and :func:`render_report` its
HTML report (``dpfair report``).
"""

from dpfair.experiments.evaluate import INEQUALITY_INDICES, evaluate
from dpfair.experiments.frontier import Frontier, frontier
from dpfair.experiments.report import render_report
from dpfair.experiments.runner import GridResult, run_grid
from dpfair.experiments.spec import SweepSpec, shipped_specs
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import SweepSummary, run_sweep

__all__ = ["INEQUALITY_INDICES", "Frontier", "GridResult", "ResultsStore", "SweepSpec", "SweepSummary", "evaluate",
           "frontier", "render_report", "run_grid", "run_sweep", "shipped_specs"]
