"""DP-FERMI (Lowy, Gupta, Razaviyayn, *Stochastic Differentially Private and Fair Learning*, ICLR 2023): the
estimator, its batched grids, and Algorithm 1 written once. One module per idea:

- :mod:`~dpfair.algorithms.dpfermi.estimator`: :class:`DPFERMIClassifier` (its privacy argument, calibration and
  plan) and :func:`fit_dpfermi_grid`;
- :mod:`~dpfair.algorithms.dpfermi.grid`: a grid of estimators fitted as one batched loop
  (``DPFERMIClassifier.fit_many``), :class:`~dpfair.algorithms.dpfermi.grid.GridFit` and the joint event;
- :mod:`~dpfair.algorithms.dpfermi.loop`: THE loop of Algorithm 1 (Poisson batches, public minibatches, the
  release, the θ and W updates, λ's adaptation, iterate averaging), for one model or a grid;
- :mod:`~dpfair.algorithms.dpfermi.reference`: the step as the paper states it, one model one row at a time with
  autograd, a backend a small fit can run;
- :mod:`~dpfair.algorithms.dpfermi.batched`: the batched step backends (row layouts, the secret and public sums);
- :mod:`~dpfair.algorithms.dpfermi.models`: the model families of the batched steps and their row products;
- :mod:`~dpfair.algorithms.dpfermi.kernel`: the fused CPU kernel of binary models on one-hot rows;
- :mod:`~dpfair.algorithms.dpfermi.data`: the data, schedule and per-model step parameters they all read.
"""

from dpfair.algorithms.dpfermi.data import COUNTS, LAM_MAX, STEP, FermiData, FermiHyperParameters, FermiSchedule
from dpfair.algorithms.dpfermi.estimator import (
    CALIBRATIONS,
    NOTIONS,
    DPFERMIClassifier,
    auto_batch_size,
    auto_max_grad_norm,
    counts_bound,
    dpfermi_plan,
    effective_noise_multiplier,
    fit_dpfermi_grid,
    noise_scales,
    paper_noise,
)
from dpfair.algorithms.dpfermi.grid import GridFit, fit_grid, grid_points, joint_event

#: The names documented on the package (the rest on their module's entry).
__all__ = ["DPFERMIClassifier", "fit_dpfermi_grid"]
