"""Private model selection (the search behind ``dpfair tune``): the fairest model within an error budget, with the
search itself on the ledger.

:func:`tune` (and the estimator behind it, :class:`PrivateSearch`) picks a method's hyper-parameters privately
by random stopping, or DP-FERMI's λ by its public error constraint, and prints ε of the whole procedure. One
module per idea:

- :mod:`~dpfair.selection.search`: :class:`PrivateSearch` and :func:`tune`, the mechanism and its phases;
- :mod:`~dpfair.selection.settings`: the values each setting accepts (declared constraints) and the rules
  checked before any data is read;
- :mod:`~dpfair.selection.state`: :class:`SearchState`, what the phases hand each other, and the public split
  of the rows (:func:`split_rows`);
- :mod:`~dpfair.selection.scores`: the selection score (:class:`SelectionScore`), its sensitivity, the released
  counts it divides by (:func:`cell_counts`) and the choice of the winner (:func:`best_released`);
- :mod:`~dpfair.selection.repetitions`: the law of the number of runs (:class:`Repetitions`) and its event;
- :mod:`~dpfair.selection.plan`: the search's public plan, the per-model ε that spends the total;
- :mod:`~dpfair.selection.reference`: the reference error of the constraint "error ≤ reference + X".
"""

from dpfair.selection.repetitions import REPETITIONS, Repetitions
from dpfair.selection.scores import SelectionScore, best_released, cell_counts
from dpfair.selection.search import PrivateSearch, tune
from dpfair.selection.settings import RESERVED, STRATEGIES
from dpfair.selection.state import SearchState, split_rows

__all__ = ["REPETITIONS", "RESERVED", "STRATEGIES", "PrivateSearch", "Repetitions", "SearchState", "SelectionScore",
           "best_released", "cell_counts", "split_rows", "tune"]
