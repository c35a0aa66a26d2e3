"""The vocabulary of declared hyper-parameter constraints (dpfair.utils.constraints): what each object accepts, how it
says so in one line, and the one-line refusal check_parameters raises (issue 29: "declared parameter constraints
checked in one place")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from dpfair.utils.constraints import (
    Bools,
    HasMethods,
    Instances,
    Interval,
    Listing,
    Options,
    check_parameters,
    describe,
    refusal,
)

POSITIVE = Interval(float, 0, None, closed="neither")
COUNT = Interval(int, 0, None, closed="neither")


@pytest.mark.parametrize("constraint, good, bad", [
    (POSITIVE, [1e-300, 1, 2.5, np.float32(3)], [0, -1.0, math.inf, math.nan, True, "1", None]),
    (Interval(float, 0, None, closed="left"), [0, 0.0, 7], [-1e-12, -math.inf]),
    (Interval(float, 0, 1, closed="neither"), [0.5, 1e-9], [0, 1, 1.5]),
    (Interval(float, 0, 1, closed="right"), [1, 1.0, 0.25], [0, 1.0000001]),
    (Interval(float, 0, 1, closed="left"), [0, 0.999], [1.0]),
    (Interval(float, 0, math.inf, closed="right"), [math.inf, 1e4, 1e-9], [0, -math.inf, math.nan]),
    (COUNT, [1, np.int64(3), 10**12], [0, -2, 1.0, 2.5, True, np.bool_(True)]),
    (Interval(int, 2, None, closed="left"), [2, 3], [1]),
    (Options("auto"), ["auto"], ["Auto", 0, None]),
    (Options("pld", "rdp"), ["pld", "rdp"], ["moments", np.array(["pld", "rdp"])]),
    (Options(0, 1), [0, 1], [False, True]),  # a bool is no option of 0/1
    (Bools(), [True, False, np.bool_(False)], [0, 1, "yes", None]),
    (Instances(dict, "a dict"), [{}], [[], None]),
    (HasMethods("fit", "predict"), [LogisticRegression()], [object(), LogisticRegression, StandardScaler()]),
    (Listing(), [[0, 1], (0, 1), np.arange(3), range(2)], ["ab", b"ab", {"a": 1}, 3, None]),
])
def test_each_constraint_accepts_its_set_and_nothing_else(constraint, good, bad):
    for value in good:
        assert constraint.accepts(value), value
    for value in bad:
        assert not constraint.accepts(value), value


@pytest.mark.parametrize("allowed, text", [
    ([POSITIVE], "a number > 0"),
    ([Interval(float, 0, None, closed="left")], "a number >= 0"),
    ([Interval(float, None, 1, closed="neither")], "a number < 1"),
    ([Interval(float, 0, 1, closed="neither")], "a number strictly between 0 and 1"),
    ([Interval(float, 0, 1, closed="right")], "a number in (0, 1]"),
    ([Interval(float, 1e-12, None, closed="left")], "a number >= 1e-12"),
    ([Interval(float, 0, math.inf, closed="right")], "a number > 0 or inf"),
    ([COUNT], "an integer > 0"),
    ([Options("auto"), COUNT], "'auto' or an integer > 0"),
    ([None, Options("pld", "rdp")], "None or one of 'pld', 'rdp'"),
    ([Bools()], "True or False"),
    ([None, Interval(int, 2, None, closed="left"), Listing()], "None, an integer >= 2 or a list of values"),
])
def test_a_declaration_says_in_one_line_what_it_accepts(allowed, text):
    assert describe(allowed) == text


@pytest.mark.parametrize("value, allowed, message", [
    # a value of the right kind out of bounds: the requirement it misses, then what to give
    (-1.0, [Interval(float, 0, None, closed="left")], "lam must be >= 0, got -1.0; give a number >= 0"),
    (0, [Options("auto"), POSITIVE], "lam must be > 0, got 0; give 'auto' or a number > 0"),
    (1.5, [None, Interval(float, 0, 1, closed="right")], "lam must lie in (0, 1], got 1.5; give None or a number in (0, 1]"),
    (1.0, [Interval(float, 0, 1, closed="neither")],
     "lam must lie strictly between 0 and 1, got 1.0; give a number strictly between 0 and 1"),
    (math.inf, [Interval(float, 0, None, closed="left")], "lam must be a finite number, got inf; give a number >= 0"),
    (math.nan, [POSITIVE], "lam must be a finite number, got nan; give a number > 0"),
    # a value of another kind: what the declaration holds
    (1.5, [COUNT], "lam must be an integer > 0, got 1.5"),
    ("x", [Options("pld", "rdp")], "lam must be one of 'pld', 'rdp', got 'x'"),
    ("yes", [Bools()], "lam must be True or False, got 'yes'"),
    # a note says what the parameter is
    (0.0, [Interval(float, 0, None, closed="neither", note="it is R")],
     "lam must be > 0, got 0.0; give a number > 0 (it is R)"),
])
def test_a_refusal_names_the_parameter_the_value_and_the_fix(value, allowed, message):
    assert refusal("lam", value, allowed) == message


def test_a_valid_value_has_no_refusal():
    assert refusal("lam", 2.0, [POSITIVE]) is None
    assert refusal("lam", None, [None, POSITIVE]) is None


def test_a_long_value_is_shown_on_one_short_line():
    text = refusal("groups", np.zeros((50, 4)), [Interval(int, 2, None, closed="left")])
    assert "\n" not in text and len(text) < 140 and text.startswith("groups must be an integer >= 2, got array(")


def test_check_parameters_reads_a_dict_an_estimator_or_a_dataclass():
    constraints = {"lam": [POSITIVE], "epochs": [COUNT]}
    check_parameters({"lam": 1.0, "epochs": 2, "other": "anything"}, constraints)  # an undeclared name: not checked
    check_parameters({"lam": 1.0}, constraints)  # a declared name the object lacks: skipped
    with pytest.raises(ValueError, match=r"^epochs must be an integer > 0, got 2\.0$"):
        check_parameters({"lam": 1.0, "epochs": 2.0}, constraints)

    class Estimator:
        def get_params(self, deep=True):
            return {"lam": -1.0}

    with pytest.raises(ValueError, match="^lam must be > 0, got -1.0"):
        check_parameters(Estimator(), constraints)

    @dataclass
    class Rule:
        lam: float = 0.0

    with pytest.raises(ValueError, match=r"^Rule\.lam must be > 0, got 0\.0"):
        check_parameters(Rule(), constraints, owner="Rule")


def test_a_declaration_is_made_of_constraints():
    with pytest.raises(TypeError, match="a parameter constraint must be a Constraint or None"):
        check_parameters({"lam": 1.0}, {"lam": ["positive"]})
    with pytest.raises(ValueError, match="kind must be int or float"):
        Interval(complex, 0, 1)
    with pytest.raises(ValueError, match="closed must be"):
        Interval(float, 0, 1, closed="open")


def test_an_integer_too_large_for_a_float_is_refused_in_one_line():
    """``float(10**400)`` overflows: the check reads it as inf, refused by a finite interval like any inf."""
    assert not COUNT.accepts(10 ** 400) and not POSITIVE.accepts(-(10 ** 400))
    with pytest.raises(ValueError, match=r"^n must ") as e:
        check_parameters({"n": 10 ** 400}, {"n": [COUNT]})
    assert "\n" not in str(e.value)
