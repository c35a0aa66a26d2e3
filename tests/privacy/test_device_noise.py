"""Noise drawn on an accelerator: secret, fresh for every fit, the law it claims (needs CUDA; skipped without it)."""

import math
import pickle

import pytest
import torch

from dpfair.privacy import reproducible_noise
from dpfair.privacy.randomness import SecretRandom

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a GPU machine)")

N = 1_000_000


def test_gaussian_and_laplace_draws_stay_on_the_device_with_their_law():
    like = torch.zeros(N, device="cuda")
    secret = SecretRandom()
    gauss, lap = secret.normal(like.shape, like), secret.laplace(like.shape, like)
    assert gauss.device == like.device and lap.device == like.device and gauss.dtype == torch.float32
    # mean within 5 standard errors; the variance's standard error is √(E Z⁴ − 1)/√N (2 for N(0, 1), 20 for Laplace)
    se = 5 / math.sqrt(N)
    assert abs(float(gauss.mean())) < se and abs(float(gauss.var()) - 1.0) < se * math.sqrt(2)
    assert abs(float(lap.mean())) < se * math.sqrt(2) and abs(float(lap.var()) - 2.0) < se * math.sqrt(20)


@pytest.mark.secret_noise
def test_every_secret_generator_has_its_own_device_stream():
    like = torch.zeros(1000, device="cuda")
    a, b = SecretRandom(), SecretRandom()
    first = a.normal(like.shape, like)
    assert not torch.equal(first, b.normal(like.shape, like))
    assert not torch.equal(first, a.normal(like.shape, like))  # the stream moves on
    with pytest.raises(TypeError):
        pickle.dumps(a)


@pytest.mark.filterwarnings("ignore:reproducible_noise is active:dpfair.exceptions.PrivacyLeakWarning")
def test_reproducible_noise_replays_the_device_stream():
    like = torch.zeros(1000, device="cuda")
    draws = []
    for _ in range(2):
        with reproducible_noise(7):
            draws.append(SecretRandom("k").normal(like.shape, like))
    torch.testing.assert_close(draws[0], draws[1], rtol=0, atol=0)
