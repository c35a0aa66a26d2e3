"""The per-model ε of a private search is bisected once per public plan and kept in a bounded memo
(:data:`dpfair.privacy.memo.PER_MODEL_EPSILON`, a :class:`~dpfair.privacy.memo.BoundedMemo`), not in an unbounded
module dict (issue 43, item 6)."""

import pytest

from dpfair.datasets import make_synthetic
from dpfair.privacy.memo import PER_MODEL_EPSILON, PER_MODEL_MAXSIZE, BoundedMemo
from dpfair.selection import PrivateSearch
from tests.selection.stub import StubClassifier


def test_the_bounded_memo_keeps_the_most_recently_used_answers():
    memo, computed = BoundedMemo(2), []

    def compute(value):
        computed.append(value)
        return value

    assert memo.lookup("a", lambda: compute(1)) == 1
    assert memo.lookup("b", lambda: compute(2)) == 2
    assert memo.lookup("a", lambda: compute(99)) == 1  # kept, and now the most recently used
    assert memo.lookup("c", lambda: compute(3)) == 3  # evicts b, the least recently used
    assert computed == [1, 2, 3] and memo.keys() == ["a", "c"] and "b" not in memo and len(memo) == 2
    assert memo.get("b") is None and memo.get("a") == 1

    def refuse():
        raise ValueError("no answer")

    with pytest.raises(ValueError, match="no answer"):
        memo.lookup("d", refuse)
    assert "d" not in memo  # a computation that raises stores nothing
    memo.clear()
    assert len(memo) == 0
    for size in (0, 1.5, True):
        with pytest.raises(ValueError, match="maxsize must be an integer >= 1"):
            BoundedMemo(size)


def test_a_search_bisects_its_per_model_epsilon_once_per_public_plan():
    X, y, s = make_synthetic(300, random_state=0)
    stub = StubClassifier(groups=2, classes=2, random_state=0)
    assert PER_MODEL_EPSILON.maxsize == PER_MODEL_MAXSIZE
    before = set(PER_MODEL_EPSILON.keys())
    first = PrivateSearch(stub, {"lam": [0.0, 1.0]}, strategy="random_stopping", epsilon=1.5, validation_size=0.0,
                          reference_error=0.3, random_state=0).fit(X, y, s)
    added = set(PER_MODEL_EPSILON.keys()) - before
    assert len(added) == 1
    run_epsilon, ledger = PER_MODEL_EPSILON.get(added.pop())
    assert run_epsilon == first.selection_["per_model_epsilon"]
    assert ledger.epsilon(first.privacy_spent_[1], "rdp") == pytest.approx(first.privacy_spent_[0])
    # another seed is the same public plan: no new bisection, the same per-model ε
    second = PrivateSearch(stub, {"lam": [0.0, 1.0]}, strategy="random_stopping", epsilon=1.5, validation_size=0.0,
                           reference_error=0.3, random_state=1).fit(X, y, s)
    assert len(set(PER_MODEL_EPSILON.keys()) - before) == 1
    assert second.selection_["per_model_epsilon"] == run_epsilon
