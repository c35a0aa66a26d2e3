"""Algorithm 1 of DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023): THE loop, for one model or a grid in lockstep.

One loop serves the estimator (one model) and the grids (hundreds of models at once, laid out ``(S, G)``: ``S``
seed groups of ``G`` models, see :mod:`.batched`). It owns everything but the step's sums, whatever the backend:

1. a secret Poisson batch ``B_t`` (rate ``q``) per seed group, from that group's
   :class:`~dpfair.privacy.SecretRandom` (:func:`poisson_batch`), and (sensitive unit) a public minibatch of ``b``
   rows per seed group, from epochs of a shuffled order (:class:`PublicBatches`);
2. the backend's sums on them (:mod:`.batched` for grids, :mod:`dpfair.algorithms.dpfermi.reference` for one model one row at a time),
   released through one batched :class:`~dpfair.privacy.Release` with Gaussian noise of standard deviation
   ``noise_theta`` and ``noise_w`` (one Gaussian event per model and step on that model's ledger; every model
   draws its own noise);
3. ``θ ← θ − η_θ (noisy_θ + public_θ·qn/b)/(q n)``, ``W ← Π_{‖W‖_F ≤ R}(W + η_w (noisy_W + public_W·qn/b)/(q n))``
   (:func:`step`);
4. optionally, θ averaged over the last steps (tail averaging, post-processing); after each expected epoch the
   models with a target error adapt λ (:func:`adapt_lambda`, post-processing of released iterates and public
   (x, y)).

Every secret draw goes through the given samplers and the release, in the same order whatever the backend; a
backend decides only how rows are stored and summed and where side jobs run. The fused kernel's thread count is an
argument (``threads``), read once by the caller; no backend changes PyTorch's global thread count.
"""

from __future__ import annotations

import numpy as np
import torch

from dpfair.algorithms.dpfermi.batched import BatchedTorch, FusedKernel, Prefetching
from dpfair.algorithms.dpfermi.data import LAM_MAX, FermiData, FermiModels, FermiSchedule
from dpfair.algorithms.dpfermi.models import LinearModels
from dpfair.algorithms.dpfermi.reference import Reference
from dpfair.nn import padded_size, pads
from dpfair.utils.progress import SILENT, Progress


def poisson_batch(n: int, samplers, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One secret Poisson sample per seed group (``samplers``: their ``(SecretRandom, q)``), padded.

    Returns ``idx (S, B)`` and ``valid (S, B)`` (padding rows point at row 0); ``valid`` is ``None`` when
    every row is valid. ``B`` is the largest sample's size, at least 1, and on an accelerator rounded up to
    :func:`~dpfair.nn.padded_size` of the expected one (a handful of shapes rather than one per step).
    """
    samples = [secret.poisson_sample(n, q) for secret, q in samplers]
    lengths = [len(x) for x in samples]
    width = max(max(lengths), 1)
    if pads(device):
        width = padded_size(width, samplers[0][1] * n)
    if len(samples) == 1 and lengths[0] == width:
        return torch.from_numpy(samples[0])[None].to(device), None
    idx = np.zeros((len(samples), width), dtype=np.int64)
    for row, x in enumerate(samples):
        idx[row, :len(x)] = x
    valid = torch.arange(width, device=device) < torch.tensor(lengths, device=device)[:, None]
    return torch.from_numpy(idx).to(device), valid


class PublicBatches:
    """Public minibatches of fixed size ``b`` from shuffled epochs, one order per seed group (public generators)."""

    def __init__(self, n: int, size: int, generators, device):
        self.n, self.size, self.generators, self.device = n, size, generators, device
        self.order = torch.empty(len(generators), 0, dtype=torch.long, device=device)

    def next(self) -> torch.Tensor:
        if self.order.shape[1] < self.size:
            fresh = torch.stack([torch.randperm(self.n, generator=g, device=self.device) for g in self.generators])
            self.order = torch.cat([self.order, fresh], dim=1)
        batch, self.order = self.order[:, :self.size], self.order[:, self.size:]
        return batch


def adapt_lambda(models, X1: torch.Tensor, y: torch.Tensor, hp: FermiModels) -> None:
    """``λ ← min(λ·exp(clamp(rate·(target − error), ±1)), LAM_MAX)`` for the models with a target error, in place
    (``hp.lam``).

    The error is the current iterate's on the training rows ``X1`` (:meth:`LinearModels.features` of ``X``)
    with labels ``y``: a dual step on the constraint "training error ≤ target" of the Lagrangian whose
    multiplier λ weighs the fairness term, multiplicative so that λ stays positive, at most a factor e an
    epoch and at most :data:`LAM_MAX` (a target no λ reaches would otherwise overflow it). It reads the
    released iterate and ``(x, y)`` only, never s: under the sensitive unit (x and y public) it is
    post-processing, and the steps after it, whose sensitivity does not depend on λ, are accounted as before.
    """
    adaptive = ~torch.isnan(hp.target_error)
    step = torch.exp((hp.lam_rate * (hp.target_error - models.errors(X1, y))).clamp(-1.0, 1.0))
    hp.lam.copy_(torch.where(adaptive, (hp.lam * step).clamp(max=LAM_MAX), hp.lam))


#: The step backends by name (tests and benchmarks pick one; a fit takes :func:`default_backend`'s).
BACKENDS = {backend.name: backend for backend in (BatchedTorch(), FusedKernel(), Prefetching(), Reference())}


def default_backend(models, data: FermiData, schedule: FermiSchedule):
    """The fastest backend that applies: :class:`~.batched.Prefetching` for binary logistic models on public sparse
    rows (the sensitive unit on a CPU, one-hot encoded tables), else :class:`~.batched.BatchedTorch`."""
    binary = isinstance(models, LinearModels) and models.L == 1
    if binary and not schedule.record and data.X.device.type == "cpu":
        return BACKENDS[Prefetching.name]  # whether the rows are sparse is decided by their layout
    return BACKENDS[BatchedTorch.name]


def step(backend, models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, W: torch.Tensor, rows,
         fetched, release) -> None:
    """One iteration of Algorithm 1 (lines 4-6) for every model, in place: ``models``' θ and ``W (S, G, m, k, l)``.

    ``fetched``: the step's ``(idx, valid, taken, pub, taken_pub)`` (:func:`train`'s fetch: the secret batch, its
    gathered rows, the public minibatch and its rows); ``backend``: the sums on them; ``release``: the step's
    :class:`~dpfair.privacy.Release` (its ``noisy_sum`` adds the secret noise, drawn beside the public part where
    the backend has a second thread).
    """
    idx, valid, taken, pub, taken_pub = fetched
    expected = schedule.sampling_probability * data.X.shape[0]  # q·n, the expected |B|: the sums are divided by it
    scales = [hp.noise_theta[..., None], hp.noise_w[..., None, None, None]]
    theta_sum, w_sum = backend.secret_sums(models, data, schedule, hp, W, idx, valid, rows, taken)
    if schedule.record:
        grad_theta, grad_w = release.noisy_sum([theta_sum, w_sum], scale=scales)
    else:  # the release (its noise draw) beside the public part, in a second thread when the backend has one
        noisy = backend.beside(rows, release.noisy_sum, [theta_sum, w_sum], scale=scales)
        theta_pub, w_pub = backend.public_sums(models, hp, W, pub, rows, taken_pub)
        grad_theta, grad_w = noisy()
        grad_theta += theta_pub.mul_(expected / pub.shape[1])
        grad_w += w_pub.mul_(expected / pub.shape[1])
    grad_theta /= expected
    grad_w /= expected
    models.step(grad_theta.mul_(hp.learning_rate[..., None]))  # line 5: descent in θ
    W += grad_w.mul_(hp.w_learning_rate[..., None, None, None])  # line 6: ascent in W, then Π_W onto each ball
    W *= (hp.w_radius[..., None] / W.flatten(3).norm(dim=-1).clamp_min_(1e-12)).clamp_(max=1.0)[..., None, None]


def train(models, data: FermiData, schedule: FermiSchedule, hp: FermiModels, samplers, release,
          public_generators, on_epoch=None, bar: Progress = SILENT, backend=None,
          threads: int | None = None) -> torch.Tensor:
    """Run Algorithm 1 for every model; returns the last ``W (S, G, m, k, l)`` (W starts at 0, line 1).

    ``samplers``: one secret generator per seed group (its Poisson batches); ``release``: the batched
    :class:`~dpfair.privacy.Release` of the step (one ledger per model) that draws every model's noise;
    ``public_generators``: one public torch generator per seed group (its public minibatch order).
    After each (expected) epoch of steps the models with a target error adapt their λ (:func:`adapt_lambda`,
    in ``hp.lam``), then ``on_epoch(step, W)`` is called; ``bar`` (:mod:`dpfair.utils.progress`) advances by one
    per step. ``backend``: a step backend or its name in :data:`BACKENDS` (``None``: :func:`default_backend`);
    ``threads``: the fused kernel's threads (``None``: ``torch.get_num_threads()``, read here once). ``models``
    ends holding the returned θ: the average of the iterates from ``schedule.average_from`` on, else the last.
    """
    if backend is None:
        backend = default_backend(models, data, schedule)
    elif isinstance(backend, str):
        backend = BACKENDS[backend]
    threads = torch.get_num_threads() if threads is None else int(threads)
    dev = data.X.device
    n = data.X.shape[0]
    q = schedule.sampling_probability
    record = schedule.record
    W = torch.zeros(hp.lam.shape[0], hp.lam.shape[1], data.n_cells, data.n_groups, data.n_classes, device=dev)
    public = None if record else PublicBatches(n, schedule.public_batch, public_generators, dev)
    rows = backend.layout(data, models, public=not record, threads=threads)
    steps_per_epoch = max(1, round(1 / q))
    batch_sources = [(secret, q) for secret in samplers]
    average_from, average = schedule.average_from, None
    X1 = None if hp.target_error is None else models.features(data.X)
    if X1 is not None and record:
        raise ValueError("a target error reads the training error, which is private under the record unit; adapt λ "
                         "only under the sensitive unit")

    def fetch():
        """A step's rows: its Poisson batch and public minibatch, drawn in step order, and gathered."""
        idx, valid = poisson_batch(n, batch_sources, dev)
        pub = None if record else public.next()
        return (idx, valid, backend.take(rows, idx, public=False), pub,
                None if record else backend.take(rows, pub, public=True))

    with backend.running(models, rows):
        batch = backend.beside(rows, fetch)
        for t in range(schedule.n_steps):
            fetched = batch()
            if t + 1 < schedule.n_steps:  # the next step's rows, fetched beside this step (the same draws)
                batch = backend.beside(rows, fetch)
            step(backend, models, data, schedule, hp, W, rows, fetched, release)
            if average_from is not None and t >= average_from:
                count = t - average_from + 1
                current = models.flat()
                average = current if count == 1 else average.add_(current.sub_(average).div_(count))
            bar.update()
            if (t + 1) % steps_per_epoch == 0 or t + 1 == schedule.n_steps:
                if X1 is not None:
                    adapt_lambda(models, X1, data.y, hp)
                if on_epoch is not None:
                    release.flush()
                    on_epoch(t + 1, W)
    release.flush()
    if average is not None:
        models.load(average)
    return W
