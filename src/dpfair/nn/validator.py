"""Check a user's module for layers that break per-example privacy, and fix them (as Opacus's ``ModuleValidator``).

Per-example clipping bounds one person's influence only when the loss of example ``i`` depends on
example ``i`` alone and the model keeps no state learnt from the batch without noise. Two kinds of
layer break that:

- any ``_BatchNorm`` (``BatchNorm1d/2d/3d``, ``SyncBatchNorm``, the lazy variants) that normalises with
  the batch's statistics: in training mode, or always when it has no running statistics
  (``track_running_stats=False``). Fix: GroupNorm over the same channels (per example, so each gradient
  is again that example's own), or eval mode with frozen running statistics;
- an ``InstanceNorm`` that tracks running statistics in training mode (they would be learnt from the
  private batch without noise). Fix: ``track_running_stats=False``.

:func:`validate_module` lists every such layer; :func:`fix_module` returns a fixed copy;
:func:`~dpfair.nn.per_sample.check_batch_independence`, which every private method runs before
training, raises on the first with the fix.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm, _LazyNormBase
from torch.nn.modules.instancenorm import _InstanceNorm

#: the largest number of GroupNorm groups :func:`fix_module` uses (Opacus's choice, made to divide the channels)
MAX_GROUPS = 32


@dataclass(frozen=True)
class ModuleProblem:
    """One layer that breaks per-example privacy: where it is, what is wrong, and how to fix it."""

    name: str
    module_type: str
    problem: str
    fix: str

    @property
    def message(self) -> str:
        return f"{self.name or 'the model'} ({self.module_type}) {self.problem}; {self.fix}"


_BATCH_STATISTICS = ("so it normalises with the statistics of the batch: each example's gradient depends on the "
                     "other examples and per-example clipping bounds nothing, so training cannot be "
                     "differentially private")


def validate_module(module: nn.Module) -> list[ModuleProblem]:
    """Every layer of ``module`` that makes one example's gradient depend on others (``[]``: none)."""
    problems = []
    for name, m in module.named_modules():
        kind = type(m).__name__
        if isinstance(m, _BatchNorm) and (m.running_mean is None or m.training):
            why = ("has no running statistics (track_running_stats=False)" if m.running_mean is None
                   else "is in training mode")
            fix = ("replace it with GroupNorm or LayerNorm (dpfair.nn.fix_module puts GroupNorm in its place, as "
                   "Opacus's ModuleValidator.fix does)" + ("" if m.running_mean is None else
                                  ", or put it in eval mode (module.eval()) with frozen running statistics"))
            problems.append(ModuleProblem(name, kind, f"{why}, {_BATCH_STATISTICS}", fix))
        elif isinstance(m, _InstanceNorm) and m.training and m.track_running_stats:
            problems.append(ModuleProblem(
                name, kind, "tracks running statistics in training mode: they are learnt from the private batch "
                            "without noise, so the trained model would not be differentially private",
                "use track_running_stats=False (dpfair.nn.fix_module does) or put it in eval mode with frozen "
                "statistics"))
    return problems


def fix_module(module: nn.Module) -> nn.Module:
    """A copy of ``module`` with every layer :func:`validate_module` flags replaced; ``module`` is not changed.

    A flagged BatchNorm over C channels becomes a GroupNorm over them, keeping its affine weight and bias:
    ``GroupNorm(gcd(C, 32), C)`` for BatchNorm2d/3d (Opacus's groups, made to divide C), and
    ``GroupNorm(1, C)`` for BatchNorm1d, whose input is often ``(N, C)``: one group per example, i.e. a
    LayerNorm over the features with BatchNorm's per-feature scale and shift (more groups would hold a
    single value each). An InstanceNorm that tracks running statistics is rebuilt without them. Lazy
    BatchNorm layers must have seen an input first (their channel count is unknown until then).
    """
    flagged = {p.name for p in validate_module(module)}
    for name in flagged:
        layer = module.get_submodule(name) if name else module
        if isinstance(layer, _LazyNormBase) and layer.has_uninitialized_params():
            raise ValueError(f"{name or 'the model'} ({type(layer).__name__}) has not seen an input yet, so its "
                             "number of channels is unknown; run one forward pass first, or build the model with "
                             "GroupNorm")
    fixed = copy.deepcopy(module)
    for name in sorted(flagged, key=len, reverse=True):
        old = fixed.get_submodule(name) if name else fixed
        new = _replacement(old)
        if not name:
            return new
        parent_name, _, child = name.rpartition(".")
        setattr(fixed.get_submodule(parent_name) if parent_name else fixed, child, new)
    return fixed


def _replacement(layer: nn.Module) -> nn.Module:
    if isinstance(layer, _BatchNorm):
        channels = layer.num_features
        groups = 1 if isinstance(layer, nn.BatchNorm1d) else math.gcd(channels, MAX_GROUPS)
        norm = nn.GroupNorm(groups, channels, eps=layer.eps, affine=layer.affine)
        if layer.affine:
            with torch.no_grad():
                norm.weight.copy_(layer.weight)
                norm.bias.copy_(layer.bias)
        return norm.to(device=next(layer.parameters(), torch.empty(0)).device).train(layer.training)
    norm = type(layer)(layer.num_features, eps=layer.eps, momentum=layer.momentum, affine=layer.affine,
                       track_running_stats=False)
    if layer.affine:
        norm.load_state_dict({"weight": layer.weight, "bias": layer.bias})
    return norm.train(layer.training)
