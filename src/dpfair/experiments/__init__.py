"""Experiments: evaluating fitted estimators the same way everywhere (the CLI, benchmarks, sweeps)."""

from dpfair.experiments.evaluate import INEQUALITY_INDICES, evaluate, predict

__all__ = ["INEQUALITY_INDICES", "evaluate", "predict"]
