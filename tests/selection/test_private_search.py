"""tune / PrivateSearch: one model out, the whole search on its ledger, clear errors; the search's own contract, on
the closed-form :class:`~tests.selection.stub.StubClassifier` (each real method's end-to-end search:
``test_search_end_to_end.py``, slow)."""

import contextlib
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as upstream
from sklearn.base import clone

from dpfair.algorithms import DPPostProcessingClassifier, ERMClassifier
from dpfair.datasets import make_synthetic
from dpfair.exceptions import BudgetExceededError, LearnedNothingWarning, UtilityWarning
from dpfair.privacy import PrivacyBudget, PrivacyUnit, SecretRandom, calibrate_noise, gaussian_event
from dpfair.selection import PrivateSearch, Repetitions, SelectionScore, cell_counts, split_rows, tune
from dpfair.selection.plan import TOLERANCE
from dpfair.selection.reference import public_reference
from dpfair.utils.capabilities import capabilities
from tests.selection.stub import COUNTS, SUMS, StubClassifier


@pytest.fixture(scope="module")
def data():
    return make_synthetic(1500, label_bias=0.3, feature_bias=1.0, random_state=0)


def _stub(**params):
    return StubClassifier(**{"groups": 2, "classes": 2, "random_state": 0, **params})


def _run_events(ledger):
    """A fit's ledger as the events of one run of the search (:func:`dpfair.selection.plan.search_ledger`)."""
    return [e.event if e.count == 1 else dpa.SelfComposedDpEvent(e.event, e.count) for e in ledger.entries]


def test_tune_returns_the_chosen_model_with_the_searchs_ledger(data):
    X, y, s = data
    grid = {"lam": [0.0, 1.0, 4.0]}
    model = tune(_stub(), grid, X, y, sensitive_features=s, strategy="random_stopping",
                 epsilon=1.0, notion="demographic_parity",
                 validation_size=0.2, random_state=0)
    assert isinstance(model, StubClassifier)
    eps, delta = model.privacy_spent_
    assert (1 - 0.005) * 1.0 <= eps <= 1.0 and delta == pytest.approx(1 / 1500**2)
    assert eps == model.privacy_ledger_.epsilon(delta, "rdp") == model.privacy_ledger_.epsilon(delta, "pld")
    labels = [e.label for e in model.privacy_ledger_.entries]
    assert labels == ["validation counts", "repeated runs of StubClassifier (K ~ geometric, mean 6)"]
    selection = model.selection_
    assert selection["chosen"] in selection["candidates"] and model.lam == selection["chosen"]["lam"]
    assert model.epsilon == selection["per_model_epsilon"] < 0.6  # what the search leaves each model
    assert selection["score"]["reference"].startswith("non-private")  # x and y are public under this unit
    assert math.isfinite(selection["released_score"])
    assert selection["validation"]["rows"] == 300 and selection["validation"]["fit_rows"] == 1200


def test_the_search_spends_its_plan(data):
    """Every entry of the search's ledger is what its public plan says: the counts at counts_share of ε, then the
    repeated runs, each the model's plan at the per-model ε and its score at score_share; ε within the tolerance."""
    X, y, s = data
    epsilon, delta = 2.0, 1 / 1500**2
    search = PrivateSearch(_stub(), {"lam": [0.0, 1.0]}, strategy="random_stopping", epsilon=epsilon,
                           validation_size=0.2, mean_runs=3, reference_error=0.3, random_state=0).fit(X, y, s)
    relation = PrivacyUnit.SENSITIVE.relation
    sigma_counts = calibrate_noise(gaussian_event, 0.05 * epsilon, delta, relation)
    sigma_score = calibrate_noise(gaussian_event, 0.25 * epsilon, delta, relation)
    run_epsilon = search.selection_["per_model_epsilon"]
    fit_rows, _ = split_rows(1500, 0.2, 0)
    # the runs take their group shares from the released counts: planned as public shares
    plan = _stub(epsilon=run_epsilon, delta=delta, group_proportions=[0.5, 0.5]).plan(len(fit_rows), X.shape[1])
    assert [label for label, _ in plan.expected_ledger()] == [SUMS]
    one_run = dpa.ComposedDpEvent(tuple(_run_events(plan.ledger())) + (gaussian_event(sigma_score),))
    counts, runs = search.privacy_ledger_.entries
    assert counts.label == "validation counts" and counts.event == gaussian_event(sigma_counts) and counts.count == 1
    assert runs.event == Repetitions.of("geometric", 3.0).event(one_run) and runs.count == 1
    eps, spent_delta = search.privacy_spent_
    assert spent_delta == delta and (1 - TOLERANCE) * epsilon <= eps <= epsilon
    assert eps == search.privacy_ledger_.epsilon(delta, "rdp")
    # the published noise: the score's bound from the released counts, the counts' from the unit
    released = np.array(search.selection_["validation"]["released_counts"])
    score = SelectionScore("demographic_parity", 0.31, 10.0, released, 300, 2, PrivacyUnit.SENSITIVE, False)
    assert search.selection_["score"]["sensitivity"] == pytest.approx(score.sensitivity)
    assert search.selection_["score"]["noise_std"] == pytest.approx(sigma_score * score.bound)
    assert search.selection_["validation"]["counts_noise_std"] == pytest.approx(sigma_counts * math.sqrt(2) / 2)


def test_the_repeated_run_is_the_models_own_plan_and_its_score(data):
    X, y, s = data
    search = PrivateSearch(_stub(), {"lam": [0.0, 2.0]}, strategy="random_stopping", epsilon=2.0, validation_size=0.2,
                           random_state=1).fit(X, y, s)
    run = search.privacy_ledger_.entries[-1].event
    assert run.mean == pytest.approx(4.0) and run.shape == 1.0
    fit_rows, _ = split_rows(1500, 0.2, 1)
    alone = clone(search.best_estimator_).fit(X[fit_rows], y[fit_rows], sensitive_features=s[fit_rows])
    assert list(run.event.events[:-1]) == _run_events(alone.privacy_ledger_)
    assert isinstance(run.event.events[-1], dpa.GaussianDpEvent)  # the score's release


@pytest.mark.parametrize("k", [1, 4])
def test_a_search_fits_and_scores_exactly_the_runs_it_drew(data, release_spy, monkeypatch, k):
    """K runs drawn: K models fitted (each one release of its sums), K scores released, one winner."""
    X, y, s = data
    draw = Repetitions.draw
    monkeypatch.setattr(Repetitions, "draw", lambda self, secret: (draw(self, secret), k)[1])
    search = PrivateSearch(_stub(), {"lam": [0.0, 1.0, 4.0]}, strategy="random_stopping", epsilon=2.0,
                           reference_error=0.3, random_state=0).fit(X, y, s)
    assert release_spy.calls[SUMS] == k and release_spy.calls["selection score"] == k
    assert release_spy.calls[COUNTS] == 0  # every run takes its shares from the search's counts
    assert release_spy.calls["validation counts"] == 1 and search.best_params_ in search.selection_["candidates"]


@pytest.mark.parametrize("error_budget,chosen", [(1.0, 100.0), (0.0, 0.0)])
def test_without_noise_the_search_picks_the_best_exact_score(data, error_budget, chosen):
    """In the noise-free limit (huge ε) the winner is the candidate of the best exact score: the fairest (largest λ)
    when the error is free, the most accurate (λ = 0) when every point of error costs the penalty."""
    X, y, s = data
    grid = {"lam": [0.0, 1.0, 100.0]}
    search = PrivateSearch(_stub(), grid, strategy="random_stopping", epsilon=100.0, validation_size=0.0,
                           reference_error=0.0, max_error_increase=error_budget, repetitions="poisson",
                           mean_runs=12, random_state=0).fit(X, y, s)  # each candidate run: P = 1 - e^-4
    counts = cell_counts("demographic_parity", y, s, 2, 2)
    exact = SelectionScore("demographic_parity", error_budget, 10.0, counts, 1500, 2, PrivacyUnit.SENSITIVE, False)
    scores = {lam: exact.value(y, _stub(lam=lam, epsilon=math.inf).fit(X, y, s).predict(X), s) for lam in grid["lam"]}
    assert max(scores, key=scores.get) == chosen and len(set(scores.values())) == 3
    assert search.best_params_ == {"lam": chosen}
    assert search.released_score_ == pytest.approx(scores[chosen], abs=0.02)
    assert search.privacy_spent_[0] <= 100.0


@pytest.mark.parametrize("notion", ["demographic_parity", "equalized_odds"])
def test_runs_take_their_group_proportions_from_the_released_counts(data, notion):
    X, y, s = data
    search = PrivateSearch(_stub(), {"lam": [0.0, 2.0]}, strategy="random_stopping",
                           epsilon=2.0, notion=notion, validation_size=0.0,
                           random_state=1).fit(X, y, s)
    best = search.best_estimator_
    counts = np.array(search.selection_["validation"]["released_counts"])
    shares = counts / counts.sum(axis=1, keepdims=True)
    assert np.allclose(best.group_proportions, shares[0] if notion == "demographic_parity" else shares)
    assert search.selection_["validation"]["rows"] == search.selection_["validation"]["fit_rows"] == 1500
    run = search.privacy_ledger_.entries[-1].event.event  # one run: the model's plan and its score's release
    alone = clone(best).fit(X, y, sensitive_features=s)  # all rows fitted and scored; public proportions
    assert [e.label for e in alone.privacy_ledger_.entries] == [SUMS]  # no run releases counts of its own
    assert list(run.events[:-1]) == _run_events(alone.privacy_ledger_)
    # user-given public proportions are kept
    given = PrivateSearch(_stub(group_proportions=[0.5, 0.5]), {"lam": [0.0]}, strategy="random_stopping",
                          epsilon=2.0, validation_size=0.0,
                          random_state=1).fit(X, y, s)
    assert given.best_estimator_.group_proportions == [0.5, 0.5]


@pytest.mark.parametrize("model, rows", [("logistic", 1500), ("mlp", 300)])
def test_auto_validation_holds_out_a_fifth_unless_the_model_is_linear(data, model, rows):
    X, y, s = data
    search = PrivateSearch(_stub(model=model), {"lam": [1.0]}, strategy="random_stopping",
                           epsilon=2.0, reference_error=0.3, random_state=0).fit(X, y, s)
    assert search.selection_["validation"]["rows"] == rows
    assert search.selection_["validation"]["fit_rows"] == (1500 if rows == 1500 else 1200)


def test_the_search_is_charged_to_a_budget_before_it_releases(data, release_spy):
    X, y, s = data
    budget = PrivacyBudget(epsilon=1.5, delta=1 / 1500**2)
    model = tune(_stub(), {"lam": [0.0, 1.0]}, X, y, sensitive_features=s, strategy="random_stopping",
                 epsilon=1.0, budget=budget,
                 random_state=0)
    assert budget.spent()[0] == pytest.approx(model.privacy_spent_[0], rel=1e-9)
    assert [e.label for e in budget.ledger().entries] == [e.label for e in model.privacy_ledger_.entries]
    released = sum(release_spy.calls.values())
    with pytest.raises(BudgetExceededError, match="refused before releasing anything"):
        tune(_stub(), {"lam": [0.0, 1.0]}, X, y, sensitive_features=s, strategy="random_stopping",
             epsilon=1.0, budget=budget, random_state=0)
    assert budget.spent()[0] == pytest.approx(model.privacy_spent_[0], rel=1e-9)
    assert sum(release_spy.calls.values()) == released  # the refused search released nothing
    # an estimator attached to a budget draws the search from it
    attached = PrivacyBudget(epsilon=0.5, delta=1 / 1500**2).attach(_stub())
    with pytest.raises(BudgetExceededError):
        tune(attached, {"lam": [0.0, 1.0]}, X, y, sensitive_features=s, strategy="random_stopping",
             epsilon=1.0, random_state=0)
    assert sum(release_spy.calls.values()) == released


def test_the_constrained_search_is_one_fit_charged_to_a_budget_before_it_releases(data):
    X, y, s = data
    budget = PrivacyBudget(epsilon=1.2, delta=1 / 1500**2)  # one fit at ε = 1, not two (composed: about 1.4)
    search = PrivateSearch(_stub(), {"lam": [0.0, 1.0]}, epsilon=1.0, budget=budget, random_state=0).fit(X, y, s)
    model = search.best_estimator_
    assert search.selection_["strategy"] == "constrained" and search.released_score_ is None
    assert model.target_error == pytest.approx(search.selection_["score"]["threshold"])
    assert [e.label for e in model.privacy_ledger_.entries] == [COUNTS, SUMS]  # the fit's own
    assert budget.spent()[0] == pytest.approx(model.privacy_spent_[0], rel=1e-9)
    assert search.privacy_spent_ == model.privacy_spent_ and 0.99 <= model.privacy_spent_[0] <= 1.0
    assert search.best_params_ == {"lam": model.lam_} and model.lam_ == model.history_[-1]["lam"]
    assert search.selection_["lam_start"] == 1.0 and search.selection_["lam_path"][-1] == model.lam_
    with pytest.raises(BudgetExceededError, match="refused before releasing anything"):
        PrivateSearch(_stub(), {"lam": [0.0, 1.0]}, epsilon=1.0, budget=budget, random_state=0).fit(X, y, s)
    assert budget.spent()[0] == pytest.approx(model.privacy_spent_[0], rel=1e-9)


#: the record unit's reference model: DP-SGD on a small share of the search's ε, which its fit says is too little
#: for the data (its released error is a loose threshold, by design)
REFERENCE_TOO_SMALL = "DP-SGD protects whole records at epsilon=0.1 on"


def test_under_the_record_unit_the_reference_error_is_released(data):
    """x and y private: the reference error is a DP-SGD model's, its fit and its error on the search's ledger."""
    X, y, s = data
    with pytest.warns(UtilityWarning, match=REFERENCE_TOO_SMALL):
        search = PrivateSearch(_stub(privacy_unit="record"), {"lam": [0.0, 1.0]}, epsilon=2.0, mean_runs=2,
                               random_state=0).fit(X, y, s)
    model = search.best_estimator_
    assert search.selection_["strategy"] == "random_stopping"  # the constrained strategy needs public x and y
    assert type(model) is StubClassifier and search.best_params_ in [{"lam": 0.0}, {"lam": 1.0}]
    assert model.privacy_spent_[0] <= 2.0 and search.privacy_spent_ == model.privacy_spent_
    labels = [e.label for e in model.privacy_ledger_.entries]
    assert any(label.startswith("reference model") for label in labels) and "reference error" in labels
    assert labels[0] == "validation counts" and labels[-1].startswith("repeated runs")
    assert model.selection_["score"]["reference"].startswith("DP-SGD")
    assert search.predict(X[:5]).shape == (5,) and not capabilities(search).predict_needs_sensitive


def test_a_public_reference_error_is_used_as_given(data):
    X, y, s = data
    search = PrivateSearch(_stub(privacy_unit="record"), {"lam": [0.1]}, epsilon=2.0, notion="demographic_parity",
                           reference_error=0.2, mean_runs=1, random_state=0).fit(X, y, s)
    assert search.selection_["score"]["reference_error"] == 0.2
    assert [e.label for e in search.privacy_ledger_.entries][0] == "validation counts"
    assert len(search.privacy_ledger_.entries) == 2


def test_the_public_reference_is_the_non_private_models_error_on_unseen_rows():
    """Without a held-out part the reference is ERM's cross-validated error, not its (optimistic) training error."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 60))  # many features for the rows: ERM fits noise
    y = (X[:, 0] + rng.normal(scale=1.5, size=240) > 0).astype(int)
    s = rng.integers(0, 2, size=240)
    rows = np.arange(240)
    error, source = public_reference(_stub(), X, y, rows, rows, 0)
    erm = ERMClassifier(random_state=0).fit(X, y)
    assert error > np.mean(erm.predict(X) != y) + 0.05 and "5-fold cross-validated" in source
    assert public_reference(_stub(), X, y, rows, rows, 0)[0] == error  # a public, seeded split
    fit, val = rows[:180], rows[180:]
    held_out, source = public_reference(_stub(), X, y, fit, val, 0)
    erm = ERMClassifier(random_state=0).fit(X[fit], y[fit])
    assert held_out == np.mean(erm.predict(X[val]) != y[val]) and source.endswith("validation part")
    with pytest.warns(LearnedNothingWarning, match="learned nothing"):  # 60 features of noise on 240 rows
        search = PrivateSearch(_stub(), {"lam": [1.0]}, epsilon=1.0, random_state=0).fit(X, y, s)
    assert search.selection_["score"]["reference_error"] == error
    assert search.selection_["score"]["threshold"] == pytest.approx(error + 0.01)


@pytest.mark.parametrize("repetitions,mean", [("geometric", 6.0), ("logarithmic", 6.0), ("poisson", 6.0), (0.5, 4.0)])
def test_the_number_of_runs_follows_the_law_the_accountant_is_given(repetitions, mean):
    law = Repetitions.of(repetitions, mean)
    assert law.mean == pytest.approx(mean, rel=1e-9)
    draws = np.array([law.draw(SecretRandom(("runs", i))) for i in range(4000)])
    poisson = repetitions == "poisson"
    assert draws.min() >= (0 if poisson else 1)
    # the sample mean within 5 standard errors of the law's mean
    assert abs(draws.mean() - law.mean) <= 5 * draws.std() / math.sqrt(len(draws))
    if not poisson:  # dp_accounting recovers γ from the mean at most as large as the γ sampled: its bound holds
        assert upstream._gamma_truncated_negative_binomial(law.shape, law.mean) <= law.gamma * (1 + 1e-12)


@pytest.mark.parametrize("change,match", [
    (dict(epsilon=0), "epsilon must be > 0"),
    (dict(param_grid={"lam": []}), "param_grid must be a dict of value lists"),
    (dict(param_grid=[]), "holds no candidate"),
    (dict(param_grid={"epsilon": [1.0, 2.0]}), "may not set 'epsilon'"),
    (dict(param_grid={"speed": [1]}), "no hyper-parameter 'speed'"),
    (dict(param_grid={"rounds": [1, 2]}), "spend differently per run"),
    (dict(estimator=ERMClassifier()), "needs a private dpfair estimator"),
    (dict(notion="equal_opportunity"), "targets demographic_parity, equalized_odds"),
    (dict(estimator=DPPostProcessingClassifier(), param_grid={"tolerance": [0.0]}), "targets equalized_odds"),
    (dict(notion="fairest"), "notion must be one of"),
    (dict(validation_size=1.5), "validation_size must lie in"),
    (dict(repetitions="sometimes"), "repetitions must be one of"),
    (dict(max_error_increase=-0.1), "max_error_increase must be >= 0"),
    (dict(reference_error=1.5), "reference_error must lie in"),
    (dict(score_share=1.0), "score_share must lie in"),
])
def test_bad_input_gets_a_clear_error(data, release_spy, change, match):
    X, y, s = data
    params = dict(estimator=_stub(), param_grid={"lam": [0.0, 1.0]}, notion="demographic_parity",
                  strategy="random_stopping", random_state=0)
    params.update(change)
    with pytest.raises(ValueError, match=match):
        PrivateSearch(**params).fit(X, y, s)
    assert sum(release_spy.calls.values()) == 0  # refused before any release


def test_bad_data_gets_a_clear_error(data, release_spy):
    X, y, s = data
    search = PrivateSearch(_stub(), {"lam": [0.0]})
    with pytest.raises(ValueError, match="y has 1499 entries but X has 1500 rows"):
        search.fit(X, y[:-1], s)
    with pytest.raises(ValueError, match="sensitive_features=s"):
        search.fit(X, y)
    with pytest.raises(ValueError, match="spent before any training"):
        PrivateSearch(_stub(), {"lam": [0.0]}, strategy="random_stopping",
                      counts_share=0.9, score_share=0.9).fit(X, y, s)
    # a per-model ε the method refuses is refused before the search releases anything
    budget = PrivacyBudget(epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="is too small for the stub"):
        PrivateSearch(_stub(min_epsilon=0.04), {"lam": [0.0]}, strategy="random_stopping",
                      epsilon=0.1, delta=1e-6, mean_runs=10, budget=budget).fit(X, y, s)
    assert budget.spent()[0] == 0.0 and sum(release_spy.calls.values()) == 0


@pytest.mark.parametrize("unit", ["sensitive", "record"])
def test_every_secret_draw_of_a_search_goes_through_a_release(data, unit, release_spy):
    """The number of runs, each run's candidate and seed, the counts and every score: drawn inside releases, and
    the search's ledger holds what its releases recorded (one repeat-and-select release, one counts release)."""
    X, y, s = data
    search = PrivateSearch(_stub(privacy_unit=unit), {"lam": [0.0, 1.0]}, strategy="random_stopping", epsilon=2.0,
                           notion="demographic_parity", validation_size=0.2, mean_runs=3, random_state=0)
    with pytest.warns(UtilityWarning, match=REFERENCE_TOO_SMALL) if unit == "record" else contextlib.nullcontext():
        search.fit(X[:800], y[:800], s[:800])
    assert release_spy.outside_draws == 0 and set(release_spy.calls) <= set(release_spy.sessions)
    assert release_spy.calls["selection score"] >= 1 and release_spy.calls["validation counts"] == 1
    assert release_spy.calls[SUMS] == release_spy.calls["selection score"]  # one model fitted per score
    labels = [e.label for e in search.privacy_ledger_.entries]
    assert labels[0] == "validation counts" and labels[-1].startswith("repeated runs")
    assert release_spy.calls[labels[-1]] == 1
    if unit == "record":  # the private reference model and its released error, on the path too
        assert release_spy.calls["reference error"] == 1 and "reference error" in labels


@pytest.mark.secret_noise
def test_under_secure_mode_the_winners_seed_comes_from_the_os_csprng(data, monkeypatch):
    """A published seed is never an output of the generator that draws the noise (issue 26)."""
    import secrets

    drawn = []
    randbelow = secrets.randbelow

    def spy(n):
        drawn.append(randbelow(n))
        return drawn[-1]

    monkeypatch.setattr(secrets, "randbelow", spy)
    X, y, s = data
    search = PrivateSearch(_stub(secure_mode=True), {"lam": [0.0, 1.0]}, mean_runs=2, strategy="random_stopping",
                           notion="demographic_parity", epsilon=2.0, validation_size=0.2, reference_error=0.3,
                           random_state=0)
    search.fit(X[:600], y[:600], s[:600])
    assert search.best_estimator_.random_state in drawn
