"""Every estimator declares what each of its hyper-parameters accepts (``parameter_constraints``), and
``check_hyperparameters`` checks the declarations in one place (issue 29: "98 check_positive calls with 45
hand-written messages instead of declared parameter constraints").

Fast: each check constructs an estimator and runs ``check_hyperparameters``, which reads no data and fits nothing.
"""

from __future__ import annotations

import math

import pytest

from dpfair.algorithms import METHODS
from dpfair.algorithms.clipping import CLIPPING_RULES
from dpfair.utils.constraints import parameter_values, refusal

#: Values of many kinds, among which each declaration must refuse at least one.
CANDIDATES = (None, True, False, -1, 0, 1, 2, 1.5, -0.5, 0.5, 1e-16, math.inf, -math.inf, math.nan, "auto",
              "not-an-option", [0, 1], {"a": 1}, object())


@pytest.mark.parametrize("method", METHODS)
def test_every_hyperparameter_of_every_method_is_declared_and_its_default_accepted(method):
    cls = METHODS[method]
    params = cls().get_params(deep=False)
    missing = sorted(set(params) - set(cls.parameter_constraints))
    assert not missing, f"{cls.__name__} declares no constraint for {missing}"
    for name, value in params.items():
        assert refusal(name, value, cls.parameter_constraints[name]) is None, (name, value)
    cls().check_hyperparameters()


@pytest.mark.parametrize("method, name", [(m, n) for m, cls in METHODS.items() for n in cls().get_params(deep=False)])
def test_each_declaration_refuses_a_bad_value_with_one_line_naming_the_parameter(method, name):
    cls = METHODS[method]
    allowed = cls.parameter_constraints[name]
    bad = [value for value in CANDIDATES if refusal(name, value, allowed) is not None]
    assert bad, f"{cls.__name__}.{name} accepts every candidate value: declare what it accepts"
    for value in bad:
        with pytest.raises(ValueError) as refused:
            cls(**{name: value}).check_hyperparameters()
        message = str(refused.value)
        assert message == refusal(name, value, allowed), (value, message)
        assert message.startswith(f"{name} must ") and "\n" not in message


@pytest.mark.parametrize("rule", CLIPPING_RULES)
def test_every_setting_of_every_clipping_rule_is_declared_and_checked(rule):
    cls = CLIPPING_RULES[rule]
    settings = parameter_values(cls())
    assert set(settings) <= set(cls.parameter_constraints), cls.__name__
    cls().check()
    for name in settings:
        bad = [v for v in CANDIDATES if refusal(name, v, cls.parameter_constraints[name]) is not None]
        assert bad, f"{cls.__name__}.{name} accepts every candidate value"
        with pytest.raises(ValueError, match=rf"^{cls.__name__}\.{name} must "):
            cls(**{name: bad[0]}).check()
