"""Experiments: one evaluation of fitted estimators (the CLI, benchmarks, sweeps), grids, sweeps and their store.

:func:`evaluate` scores a fitted estimator; :func:`run_grid` trains and scores a grid of one method;
:class:`SweepSpec` (a TOML file), :func:`run_sweep` and :class:`ResultsStore` run a resumable sweep
into SQLite (``dpfair sweep``); :func:`frontier` draws its Pareto fronts and :func:`render_report` its
HTML report (``dpfair report``).

The names of the runner, sweep, spec, store and report are imported on first use (``from dpfair.experiments
import run_sweep``), so that importing the report and the store (``dpfair report``) does not load torch; the
functions named like their modules (``evaluate``, ``frontier``) are imported here, so that the name is the function.
"""

from dpfair.experiments.evaluate import INEQUALITY_INDICES, evaluate
from dpfair.experiments.frontier import Frontier, frontier
from dpfair.utils.lazy_exports import lazy_exports

__all__ = ["INEQUALITY_INDICES", "Frontier", "GridResult", "ResultsStore", "SweepSpec", "SweepSummary", "evaluate",
           "frontier", "render_report", "run_grid", "run_sweep", "shipped_specs"]

#: The module of each name.
_LAZY = {"render_report": "report", "GridResult": "runner", "run_grid": "runner", "SweepSpec": "spec",
         "shipped_specs": "spec", "ResultsStore": "store", "SweepSummary": "sweep", "run_sweep": "sweep"}


__getattr__, __dir__ = lazy_exports(__name__, {k: f"{__name__}.{v}" for k, v in _LAZY.items()}, globals())
