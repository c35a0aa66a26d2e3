"""Experiments: evaluating fitted estimators the same way everywhere (the CLI, benchmarks, sweeps)."""

from dpfair.experiments.evaluate import INEQUALITY_INDICES, evaluate

__all__ = ["INEQUALITY_INDICES", "evaluate"]
