"""ε audits: the conversions are valid, the correct code audits at or below its claim, planted bugs are caught."""

import math

import numpy as np
import pytest
from scipy import stats

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier, ERMClassifier, OutputPerturbationClassifier
from dpfair.audit.epsilon import (
    epsilon_from_rates,
    epsilon_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)
from dpfair.audit.games import audit_epsilon, audit_one_run, audit_release
from dpfair.exceptions import UtilityWarning
from tests.planted import BUGS, active, planted_bug

# The games need the secret generators: the tests' reproducible noise repeats across fits, which is exactly
# the reused-seed bug the audits catch.
pytestmark = pytest.mark.secret_noise


def _small(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    s = (rng.random(n) < 0.3).astype(int)
    y = (X[:, 0] + s > 0.3).astype(int)
    return X, y, s


def test_epsilon_from_rates_is_the_hypothesis_testing_region():
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0
    assert epsilon_from_rates(0.01, 0.5, 0.0) == pytest.approx(math.log(0.5 / 0.01))
    assert epsilon_from_rates(0.2, 0.01, 1e-5) == pytest.approx(math.log((1 - 1e-5 - 0.2) / 0.01))
    assert epsilon_from_rates(0.0, 0.5, 0.0) == math.inf
    # a randomized-response test with ε = 1 sits on the boundary FPR + e^ε FNR = 1
    q = 1 / (1 + math.e)
    assert epsilon_from_rates(q, q, 0.0) == pytest.approx(1.0)


def test_lower_bound_of_identical_worlds_is_zero_and_separated_worlds_reach_the_counting_limit():
    rng = np.random.default_rng(0)
    same = epsilon_lower_bound(rng.normal(size=2000), rng.normal(size=2000), delta=1e-5)
    assert same.epsilon < 0.2
    apart = epsilon_lower_bound(np.zeros(400), np.ones(400), delta=1e-5, confidence=0.95)
    # 200 evaluation runs per world, none wrong: FPR ≤ 1 − 0.025^{1/200}, FNR likewise
    upper = 1 - 0.025 ** (1 / 200)
    assert apart.epsilon == pytest.approx(math.log((1 - 1e-5 - upper) / upper), rel=1e-6)
    assert apart.false_positives == apart.false_negatives == 0


def test_lower_bound_is_valid_for_randomized_response():
    """ε-DP randomized response, many independent audits: the bound exceeds ε in at most ~5 % of them."""
    rng = np.random.default_rng(1)
    eps, runs, trials = 1.0, 400, 200
    keep = math.e / (1 + math.e)
    above = 0
    for _ in range(trials):
        w0 = (rng.random(runs) > keep).astype(float)  # world 0 outputs 1 with prob 1 − keep
        w1 = (rng.random(runs) < keep).astype(float)
        above += epsilon_lower_bound(w0, w1, delta=0.0).epsilon > eps
    assert above <= stats.binom.ppf(0.999, trials, 0.05)


def test_one_run_p_value_and_bound():
    assert one_run_p_value(100, 10, 5, 0.0, 0.0) == pytest.approx(stats.binom.sf(4, 10, 0.5))
    assert one_run_p_value(100, 10, 9, 2.0, 0.0) > one_run_p_value(100, 10, 9, 0.5, 0.0)
    assert one_run_p_value(100, 10, 9, 1.0, 1e-3) > one_run_p_value(100, 10, 9, 1.0, 0.0)
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    perfect = one_run_epsilon_lower_bound(included.astype(float) + 0.01 * rng.random(1000), included, delta=0.0)
    assert perfect["epsilon"] > 2.0 and perfect["correct"] == perfect["total"]
    blind = one_run_epsilon_lower_bound(rng.random(1000), included, delta=0.0)
    assert blind["epsilon"] < 0.5


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
@pytest.mark.parametrize("unit", ["record", "sensitive"])
def test_release_audit_holds_and_catches_halved_noise(mechanism, unit):
    correct = audit_release(mechanism, epsilon=1.0, unit=unit)
    assert correct.epsilon_lower_bound <= correct.epsilon_claimed
    with pytest.warns(Warning, match="planted bugs"), planted_bug("halve_noise"):
        broken = audit_release(mechanism, epsilon=1.0, unit=unit)
    assert broken.epsilon_lower_bound > broken.epsilon_claimed


def test_output_perturbation_audit_holds_and_catches_a_reused_seed():
    X, y, s = _small(300)  # enough rows for a useful model at epsilon=1 (no too-little-data warning)
    est = OutputPerturbationClassifier(epsilon=1.0, classes=2, groups=2)
    correct = audit_epsilon(est, X, y, s, runs=400)
    assert correct.unit == "record" and correct.epsilon_lower_bound <= correct.epsilon_claimed
    with pytest.warns(Warning, match="planted bugs"), planted_bug("reuse_seed"):
        broken = audit_epsilon(est, X, y, s, runs=400)
    assert broken.epsilon_lower_bound > 3.0 > broken.epsilon_claimed


@pytest.mark.slow  # the CLI-level catch runs by default (tests/audit/test_audit_cli.py)
def test_dp_sgd_audit_holds_and_catches_skipped_clipping():
    X, y, s = _small(100)
    est = DPSGDClassifier(epsilon=1.0, epochs=3, batch_size=50, learning_rate=0.5, classes=2, groups=2)
    # an audit wants a small table (one canary moves the output most); each fit says ε = 1 is little for it
    little = "DP-SGD protects whole records at epsilon=1 on 100 rows"
    with pytest.warns(UtilityWarning, match=little):
        correct = audit_epsilon(est, X, y, s, runs=200)
    assert correct.epsilon_lower_bound <= correct.epsilon_claimed
    with pytest.warns(UtilityWarning, match=little), pytest.warns(Warning, match="planted bugs"), \
            planted_bug("skip_clipping"):
        broken = audit_epsilon(est, X, y, s, runs=200)
    assert broken.epsilon_lower_bound > broken.epsilon_claimed


def test_dp_fermi_audit_holds_and_catches_private_proportions():
    X, y, s = _small(5000)  # enough rows that the released group counts (5 % of ε) stay far from empty
    est = DPFERMIClassifier(epsilon=1.0, epochs=2, batch_size=256, classes=2, groups=2)
    correct = audit_epsilon(est, X, y, s, runs=400)
    assert correct.unit == "sensitive" and correct.epsilon_lower_bound <= correct.epsilon_claimed
    assert correct.canary["kind"] == "flip s"
    with pytest.warns(Warning, match="planted bugs"), planted_bug("private_proportions"):
        broken = audit_epsilon(est, X, y, s, runs=400)
    assert broken.epsilon_lower_bound > broken.epsilon_claimed
    assert broken.bound.statistic.startswith("released number")


@pytest.mark.slow  # a minute of fits
def test_a_non_private_model_audits_far_above_two():
    X, y, s = _small(200)
    report = audit_epsilon(ERMClassifier(epochs=2), X, y, s, runs=400)
    assert report.epsilon_claimed == math.inf and report.epsilon_lower_bound > 2.0


def test_one_run_audit_of_a_non_private_model_finds_leakage_and_of_dp_sgd_none():
    """Random labels: a non-private MLP must memorise its canaries (one run finds ε > 1), DP-SGD at ε = 1 cannot."""
    rng = np.random.default_rng(3)
    X, y, s = rng.normal(size=(1500, 20)), rng.integers(0, 2, 1500), rng.integers(0, 2, 1500)
    found = audit_one_run(ERMClassifier(model="mlp", epochs=40, learning_rate=0.01), X, y, s, canaries=1000)
    assert found["epsilon"] > 1.0 and found["epsilon_claimed"] == math.inf
    with pytest.warns(UtilityWarning, match="DP-SGD protects whole records"):  # an MLP at ε = 1 learns nothing
        private = audit_one_run(DPSGDClassifier(model="mlp", epsilon=1.0, epochs=5, classes=2, groups=2), X, y, s,
                                canaries=1000)
    assert private["epsilon"] <= private["epsilon_claimed"]


def test_planted_bugs_are_scoped_and_named():
    assert not active()
    with pytest.warns(Warning), planted_bug("halve_noise"):
        assert "halve_noise" in active() and "reuse_seed" not in active()
    assert not active()
    with pytest.raises(ValueError, match="halve_noise"):
        with planted_bug("typo"):
            pass


def test_each_planted_bug_breaks_its_seam_inside_the_block_only():
    """The seam each bug patches (tests/planted.py) is broken inside the block and restored after it (read
    through its module: a name imported before the block is the original)."""
    import torch

    from dpfair.selection import scores as selection
    from dpfair.algorithms.dpfermi.data import COUNTS
    from dpfair.measurement import frame as frame_module
    from dpfair.nn import per_sample
    from dpfair.privacy import Part, PrivacyLedger, PrivacyPlan, PrivacyUnit, Release, SecretRandom

    def release(name="part"):
        return Release(Part(name), 2.0, SecretRandom(), PrivacyLedger("record"))

    # three runs' predictions on four validation rows: exact parity scores -1, 0, -0.5; released 0.3, 0.1, 0.2
    score = selection.SelectionScore("demographic_parity", threshold=1.0, penalty=0.0, denominators=np.full((1, 2), 2.0),
                           n_val=4, n_classes=2, unit=PrivacyUnit.SENSITIVE, reads_s=False)
    y, s = np.array([1, 1, 0, 0]), np.array([0, 1, 0, 1])
    runs = [np.array([1, 0, 1, 0]), np.array([1, 1, 0, 0]), np.array([1, 1, 1, 0])]

    def seams():
        counts = np.array([30.0, 70.0])
        assert [score.value(y, p, s) for p in runs] == [-1.0, 0.0, -0.5]
        return dict(halve_noise=release().noise_scale(1.5),
                    skip_clipping=float(per_sample.clip_coefficients(torch.tensor([4.0]), 1.0)[0]),
                    private_proportions=np.array_equal(release(COUNTS).noisy_sum(counts), counts),
                    reuse_seed=np.array_equal(SecretRandom("k").normal((3,)), SecretRandom("k").normal((3,))),
                    unreleased_scores=selection.best_released([0.3, 0.1, 0.2]),
                    unnoised_counts=np.array_equal(
                        frame_module.ReleaseSession(PrivacyLedger("record"), plan=PrivacyPlan((Part("table"),)),
                                                    sigmas={"table": 2.0}).release("table").noisy_sum(counts),
                        counts))

    correct = dict(halve_noise=3.0, skip_clipping=0.25, private_proportions=False, reuse_seed=False,
                   unreleased_scores=0, unnoised_counts=False)
    broken = dict(halve_noise=1.5, skip_clipping=1.0, private_proportions=True, reuse_seed=True,
                  unreleased_scores=1, unnoised_counts=True)
    assert seams() == correct
    for bug in BUGS:
        with pytest.warns(Warning, match="planted bugs"), planted_bug(bug):
            assert seams() == {**correct, bug: broken[bug]}, bug
            assert active() == {bug}
        assert seams() == correct, bug
    with pytest.warns(Warning), planted_bug(*BUGS):
        assert seams() == broken
    assert seams() == correct and not active()
