"""Releases never exceed their declared sensitivity on random neighbours (Hypothesis)."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpfair.nn import clipped_gradient_sum, make_model
from dpfair.privacy import max_neighbour_distance

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
finite = st.floats(-50, 50, allow_nan=False, width=32)


def _loss(logits, y):
    return torch.nn.functional.cross_entropy(logits, y, reduction="sum")


@SETTINGS
@given(arrays(np.float32, st.tuples(st.integers(2, 12), st.just(4)), elements=finite),
       st.floats(0.1, 5.0), st.integers(0, 2**16))
def test_the_clipped_sum_moves_at_most_the_bound_when_a_record_comes_or_goes(X, clip, seed):
    """Add/remove one example: the clipped gradient sum changes by at most C (its own clipped gradient)."""
    model = make_model("logistic", 4, 2, seed=seed)
    y = torch.as_tensor(np.arange(len(X)) % 2)
    Xt = torch.as_tensor(X)
    full, _ = clipped_gradient_sum(model, _loss, Xt, y, clip, "vmap")
    for i in range(len(X)):
        keep = torch.as_tensor(np.delete(np.arange(len(X)), i))
        part, _ = clipped_gradient_sum(model, _loss, Xt[keep], y[keep], clip, "vmap")
        moved = torch.cat([(full[k] - part[k]).reshape(-1) for k in full]).norm()
        assert float(moved) <= clip * (1 + 1e-4) + 1e-5


@SETTINGS
@given(st.integers(2, 4), st.lists(st.integers(0, 3), min_size=3, max_size=30))
def test_group_counts_move_by_one_person_at_most(k, groups):
    """Under the sensitive unit the (label × group) count table moves by at most √2 in L2 (one row leaves a
    cell, enters another) — the bound DP-FERMI's and PF-LD's count releases are calibrated on."""
    s = np.array(groups) % k
    y = np.arange(len(s)) % 2

    def counts(X, y_, s_):
        table = np.zeros((2, k))
        np.add.at(table, (y_, s_), 1.0)
        return table

    assert max_neighbour_distance(counts, np.zeros((len(s), 1)), y, s, "sensitive", n_groups=k) <= np.sqrt(2) + 1e-12
