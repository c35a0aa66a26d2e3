"""The audit harness catches selection on unreleased scores, and finds nothing on the correct search.

The game: the canary is a validation row at x = 0, where the runs' models (the closed-form stub at λ = 0, whose
noisy centroids of well-separated public rows put the boundary near 0) disagree from run to run about its label,
while every other validation row is far from the boundary and predicted alike by all of them. Group 0 of the
validation part is mostly predicted positive, group 1 mostly negative. Then a run that predicts the canary positive has the larger parity gap when the canary
is in group 0 (world 0) and the smaller when it is in group 1 (world 1): selecting on the exact scores makes the
winner's prediction at the canary reveal the canary's s, whenever both kinds of run were drawn. Released scores
carry noise far larger than the one-person difference, so the correct search's choice does not.
"""

import numpy as np
import pytest

from dpfair.audit.games import audit_epsilon
from dpfair.selection import PrivateSearch, split_rows
from tests.planted import planted_bug
from tests.selection.stub import StubClassifier

pytestmark = [pytest.mark.secret_noise, pytest.mark.slow]


def _game(n=500, validation_size=0.1, random_state=0):
    fit, val = split_rows(n, validation_size, random_state)
    rng = np.random.default_rng(1)
    X, y, s = np.zeros((n, 1)), np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    side = rng.permutation(np.arange(len(fit)) % 2)
    X[fit, 0], y[fit], s[fit] = np.where(side == 1, 3.0, -3.0), side, rng.integers(0, 2, len(fit))
    canary, rest = val[0], val[1:]
    s[rest] = np.arange(len(rest)) % 2
    positive = rng.random(len(rest)) < np.where(s[rest] == 0, 0.8, 0.2)
    X[rest, 0], y[rest] = np.where(positive, 3.0, -3.0), positive
    X[canary, 0], y[canary], s[canary] = 0.0, 1, 0
    return X, y, s, {"kind": "flip s", "row": int(canary), "from_group": 0, "to_group": 1}


def test_selection_on_unreleased_scores_is_caught_and_the_correct_search_is_not():
    X, y, s, canary = _game()
    search = PrivateSearch(StubClassifier(groups=2, classes=2), {"lam": [0.0]},
                           epsilon=1.0, notion="demographic_parity", max_error_increase=1.0, mean_runs=20,
                           strategy="random_stopping", validation_size=0.1, random_state=0)  # the game's split
    correct = audit_epsilon(search, X, y, s, runs=400, canary=canary)
    assert correct.unit == "sensitive" and correct.epsilon_claimed <= 1.0
    assert correct.epsilon_lower_bound <= correct.epsilon_claimed
    with pytest.warns(Warning, match="planted bugs"), planted_bug("unreleased_scores"):
        broken = audit_epsilon(search, X, y, s, runs=400, canary=canary)
    assert broken.epsilon_claimed == correct.epsilon_claimed  # the ledger does not change
    assert broken.epsilon_lower_bound > broken.epsilon_claimed
    assert broken.bound.statistic == "canary margin"


def test_the_constrained_search_is_audited_within_its_claim():
    """λ following the public error: one fit at the whole ε, whose canary bound stays under what it claims."""
    X, y, s, canary = _game()
    search = PrivateSearch(StubClassifier(groups=2, classes=2), {"lam": [1.0, 4.0]},
                           epsilon=1.0, notion="demographic_parity", max_error_increase=0.05, strategy="constrained",
                           random_state=0)
    result = audit_epsilon(search, X, y, s, runs=400, canary=canary)
    assert result.unit == "sensitive" and result.epsilon_claimed <= 1.0
    assert result.epsilon_lower_bound <= result.epsilon_claimed
