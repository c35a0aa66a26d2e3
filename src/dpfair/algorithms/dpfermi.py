"""DP-FERMI (Lowy, Gupta, Razaviyayn, *Stochastic Differentially Private and Fair Learning*, ICLR 2023).

Fair ERM with the ERMI regulariser, ``min_θ L(θ) + λ ERMI(ŷ_θ; s)``, written
as ``min_θ max_W (1/n) Σ_i [ℓ_i(θ) + λ ψ̂_i(θ, W)]`` (Theorem C.1, see
:mod:`dpfair.fairness.ermi_minmax`) and solved by Algorithm 1: noisy
stochastic gradient descent in θ, noisy stochastic gradient ascent in W with
projection onto the Frobenius ball of radius ``w_radius``, two step sizes, the
last iterate returned.

Privacy (``privacy_unit="sensitive"``, neighbours differ in one person's s):
each step draws a secret Poisson batch B (rate q) and releases, as ONE
Gaussian event, the sums over B of the parts of the θ- and W-gradients that
carry s: the per-sample gradient of ``2λ u_iᵀF_i(θ)`` (``u_i = W_{s_i}/√p_{s_i}``)
clipped to ``max_grad_norm``, and ``2 P^{-1/2} s_i F_iᵀ``, whose norm is at most
``2/√p_min`` by its closed form. Both are scaled to norm ≤ 1/√2 so that the
pair has norm ≤ 1 and one noise multiplier σ covers it (dp_accounting's
``REPLACE_ONE`` bound: each person's contribution within the bound of 0).
The parts of the gradients that depend on (x, y) only are public; they are
estimated on an independent minibatch, never on B, because adding them over
B would reveal who is in B and void the subsampling argument. The group
proportions ``p`` (per label for equalized odds) are either passed in as
public knowledge or released once as Gaussian-noised counts with a share of
the budget; everything that uses them (``p_min``, the W bound, the default
W radius) is post-processing. All releases compose on one PLD accountant and
σ is calibrated on the whole plan.

``privacy_unit="record"``: neighbours add or remove a record; the whole
per-sample θ-gradient of ``ℓ_i + λψ̂_i`` is clipped, the whole W-gradient is
bounded by ``2·w_radius + 2/√p_min``, and both are released on B.
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from dpfair.algorithms.base import TorchClassifier, poisson_batches
from dpfair.fairness.ermi_minmax import w_gradient_public, w_gradient_sensitive
from dpfair.nn import assign_grads, clipped_gradient_sum
from dpfair.privacy import PrivacyUnit, calibrate_noise, gaussian_event, release_gaussian
from dpfair.validation import check_positive

NOTIONS = ("demographic_parity", "equalized_odds", "equal_opportunity")

#: Released counts below this are raised to it before normalising (post-processing).
_COUNT_FLOOR = 1.0


def fermi_loss(logits, target):
    """Per-sample ``a·CE + λ(−F·wsq + 2 u·F)``; ``target = (y, u, wsq, a, lam)`` (see the module docstring)."""
    y, u, wsq, a, lam = target
    proba = torch.softmax(logits, dim=1)
    ce = F.cross_entropy(logits, y, reduction="none")
    psi = -(proba * wsq).sum(1) + 2.0 * (proba * u).sum(1)
    return (a * ce + lam * psi).sum()


class DPFERMIClassifier(TorchClassifier):
    """Differentially private fair classifier (DP-FERMI).

    Parameters
    ----------
    model : "logistic", "mlp", "cnn" or a ``torch.nn.Module`` returning logits.
    notion : "demographic_parity", "equalized_odds" or "equal_opportunity" (binary labels).
    lam : λ ≥ 0, weight of the ERMI regulariser (0: DP-SGD-like ERM).
    epsilon, delta : target budget (``delta=None``: 1/n²; ``epsilon=inf``: no noise).
    privacy_unit : "sensitive" (DP of s, the paper's setting) or "record".
    group_proportions : public group proportions (k,) — or (l, k) for equalized odds, one row per label —
        used instead of releasing them; ``None`` releases them with ``proportions_budget`` of ε.
    batch_size, epochs : expected Poisson batch size and passes over the data.
    learning_rate, w_learning_rate : step sizes of the θ descent and of the W ascent.
    w_radius : radius of the Frobenius ball W is projected on (``None``: √(l / p_min), which contains W*).
    max_grad_norm : clipping bound of the per-sample θ contributions.
    """

    _private = True
    _requires_sensitive = True

    def __init__(self, model="logistic", *, notion="demographic_parity", lam=1.0, epsilon=1.0, delta=None,
                 privacy_unit="sensitive", group_proportions=None, proportions_budget=0.05, batch_size=1024,
                 epochs=50, learning_rate=0.5, w_learning_rate=0.5, w_radius=None, max_grad_norm=1.0,
                 noise_multiplier=None, accountant="pld", optimizer="sgd", momentum=0.0, model_kwargs=None,
                 device="cpu", random_state=None, verbose=False):
        self.model = model
        self.notion = notion
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.group_proportions = group_proportions
        self.proportions_budget = proportions_budget
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.w_learning_rate = w_learning_rate
        self.w_radius = w_radius
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.optimizer = optimizer
        self.momentum = momentum
        self.model_kwargs = model_kwargs
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ---- structure of the constraint -------------------------------------
    def _cells(self, y: np.ndarray) -> tuple[np.ndarray, int]:
        """Which W each sample uses (−1: none) and how many Ws: 1 (DP, EOp) or l (EO)."""
        if self.notion == "demographic_parity":
            return np.zeros(len(y), dtype=np.int64), 1
        if self.notion == "equalized_odds":
            return y.astype(np.int64), len(self.classes_)
        return np.where(y == 1, 0, -1).astype(np.int64), 1

    def _check_hyperparameters(self):
        if self.notion not in NOTIONS:
            raise ValueError(f"notion must be one of {', '.join(NOTIONS)}, got {self.notion!r}")
        if self.notion == "equal_opportunity" and len(self.classes_) != 2:
            raise ValueError(
                f"notion='equal_opportunity' needs binary labels, got {len(self.classes_)} classes; "
                "use notion='equalized_odds' for multiclass labels"
            )
        check_positive(self.lam, "lam", allow_zero=True)
        check_positive(self.w_learning_rate, "w_learning_rate")
        check_positive(self.max_grad_norm, "max_grad_norm")
        if self.w_radius is not None:
            check_positive(self.w_radius, "w_radius")
        share = check_positive(self.proportions_budget, "proportions_budget")
        if share >= 1:
            raise ValueError(f"proportions_budget must lie in (0, 1), got {share}")

    # ---- group proportions: public or released ---------------------------
    def _public_proportions(self, m: int, k: int) -> np.ndarray:
        p = np.asarray(self.group_proportions, dtype=np.float64)
        want = (k,) if m == 1 else (m, k)
        if p.shape != want:
            raise ValueError(f"group_proportions must have shape {want} for notion={self.notion!r} and "
                             f"{k} groups, got {p.shape}")
        p = p.reshape(m, k)
        if np.any(~np.isfinite(p)) or np.any(p <= 0) or not np.allclose(p.sum(1), 1.0, atol=1e-6):
            raise ValueError("group_proportions must be positive and each row must sum to 1 "
                             f"(got row sums {p.sum(1).round(6).tolist()})")
        return p

    def _counts_event(self, sigma_counts: float) -> dpa.DpEvent:
        return gaussian_event(sigma_counts)

    def _counts_bound(self) -> float:
        # One person's one-hot cell: replace-one moves it between two cells (distance √2, radius √2/2);
        # add/remove changes one cell by 1.
        return math.sqrt(2) / 2 if self.privacy_unit_ is PrivacyUnit.SENSITIVE else 1.0

    def _release_proportions(self, cells, s, m, k, sigma_counts) -> np.ndarray:
        active = cells >= 0
        counts = np.zeros((m, k))
        np.add.at(counts, (cells[active], s[active]), 1.0)
        noisy = release_gaussian(counts, bound=self._counts_bound(), noise_multiplier=sigma_counts,
                                 generator=self._np_rng, ledger=self.privacy_ledger_, label="group counts")
        noisy = np.maximum(noisy, _COUNT_FLOOR)
        return noisy / noisy.sum(1, keepdims=True)

    # ---- privacy plan ------------------------------------------------------
    def _plan(self, noise_multiplier: float) -> dpa.DpEvent:
        steps = dpa.SelfComposedDpEvent(gaussian_event(noise_multiplier, self.sampling_probability_), self.n_steps_)
        if self._sigma_counts is None:
            return steps
        return dpa.ComposedDpEvent([self._counts_event(self._sigma_counts), steps])

    def _calibrate_counts(self) -> float | None:
        if self.group_proportions is not None:
            return None
        if math.isinf(self.epsilon_target_):
            return 0.0
        return calibrate_noise(self._counts_event, self.proportions_budget * self.epsilon_target_,
                               self.delta_, self.privacy_unit_, self.accountant)

    # ---- training ------------------------------------------------------------
    def _fit(self, X, y, s):
        self._validate_training()
        self._check_hyperparameters()
        n, k, l = X.shape[0], len(self.groups_), len(self.classes_)
        cells, m = self._cells(y)
        self.sampling_probability_ = min(1.0, self.batch_size / n)
        self.n_steps_ = math.ceil(self.epochs / self.sampling_probability_)
        self._sigma_counts = self._calibrate_counts()
        self.noise_multiplier_ = self._calibrated_noise()

        if self._sigma_counts is None:
            p = self._public_proportions(m, k)
        else:
            p = self._release_proportions(cells, s, m, k, self._sigma_counts)
        self.group_proportions_ = p
        record = self.privacy_unit_ is PrivacyUnit.RECORD
        self.w_radius_ = float(self.w_radius) if self.w_radius is not None else math.sqrt(l / p.min())
        w_bound = 2.0 / math.sqrt(p.min()) + (2.0 * self.w_radius_ if record else 0.0)
        C = float(self.max_grad_norm)

        dev = self.device_
        self.model_ = self._build_model(l)
        opt = self._make_optimizer(self.model_.parameters())
        Xt, yt, st = self._tensor(X), self._tensor(y, torch.long), self._tensor(s, torch.long)
        ct = self._tensor(cells, torch.long)
        inv_sqrt_p = self._tensor(1.0 / np.sqrt(p))
        W = torch.zeros(m, k, l, device=dev)
        lam = float(self.lam)
        expected = self.sampling_probability_ * n
        steps_per_epoch = max(1, round(1 / self.sampling_probability_))
        public_order = torch.empty(0, dtype=torch.long, device=dev)
        scale_theta, scale_w = math.sqrt(2) * C, math.sqrt(2) * w_bound

        self.model_.train()
        batches = poisson_batches(n, self.sampling_probability_, self.n_steps_, self._torch_rng)
        for step, idx in enumerate(tqdm(batches, total=self.n_steps_, disable=not self.verbose,
                                        desc="DP-FERMI", unit="step")):
            # --- the secret batch: contributions that carry s, released with noise ---
            u, wsq, active = self._per_sample_w_terms(W, inv_sqrt_p, ct[idx], st[idx])
            a = torch.full((len(idx),), 1.0 if record else 0.0, device=dev)
            target = (yt[idx], u, wsq if record else torch.zeros_like(wsq), a, torch.full_like(a, lam))
            theta_sum, _ = clipped_gradient_sum(self.model_, fermi_loss, Xt[idx], target, C)
            with torch.no_grad():
                proba = torch.softmax(self.model_(Xt[idx]), dim=1) if len(idx) else torch.zeros(0, l, device=dev)
                w_sum = self._w_gradient(W, proba, ct[idx], st[idx], inv_sqrt_p, k, public=record,
                                         sensitive=True)
            total = {f"theta.{name}": g / scale_theta for name, g in theta_sum.items()}
            total["W"] = w_sum / scale_w
            noisy = release_gaussian(total, bound=1.0, noise_multiplier=self.noise_multiplier_,
                                     generator=self._torch_rng, ledger=self.privacy_ledger_,
                                     sampling_probability=self.sampling_probability_, label="dp-fermi step")
            grad_theta = {name[6:]: g * scale_theta / expected for name, g in noisy.items() if name != "W"}
            grad_w = noisy["W"] * scale_w / expected

            # --- public parts (sensitive unit): an independent minibatch, no noise needed ---
            if not record:
                if len(public_order) < self.batch_size:
                    public_order = torch.cat([public_order, torch.randperm(n, generator=self._torch_rng,
                                                                           device=dev)])
                pub, public_order = public_order[:self.batch_size], public_order[self.batch_size:]
                _, wsq_pub, _ = self._per_sample_w_terms(W, inv_sqrt_p, ct[pub], st[pub])
                self.model_.zero_grad()
                logits = self.model_(Xt[pub])
                ones = torch.ones(len(pub), device=dev)
                loss = fermi_loss(logits, (yt[pub], torch.zeros_like(wsq_pub), wsq_pub, ones, lam * ones))
                grads = torch.autograd.grad(loss, [p_ for p_ in self.model_.parameters() if p_.requires_grad])
                names = [nm for nm, p_ in self.model_.named_parameters() if p_.requires_grad]
                for nm, g in zip(names, grads):
                    grad_theta[nm] = grad_theta[nm] + g / len(pub)
                with torch.no_grad():
                    grad_w = grad_w + self._w_gradient(W, torch.softmax(logits, 1), ct[pub], st[pub],
                                                       inv_sqrt_p, k, public=True, sensitive=False) / len(pub)

            assign_grads(self.model_, grad_theta)
            opt.step()
            with torch.no_grad():
                W = self._project(W + self.w_learning_rate * grad_w)
            if (step + 1) % steps_per_epoch == 0 or step + 1 == self.n_steps_:
                self.history_.append({"step": step + 1, "w_norm": float(W.norm())})
        self.model_.eval()
        self.W_ = W.cpu().numpy()
        self._finish_privacy()

    def _per_sample_w_terms(self, W, inv_sqrt_p, cells, s):
        """``u_i = W_{c_i, s_i}/√p_{c_i, s_i}`` and ``wsq_i = Σ_r W_{c_i, r, ·}²``; zero for inactive samples."""
        active = cells >= 0
        c = cells.clamp(min=0)
        u = W[c, s] * inv_sqrt_p[c, s][:, None]
        wsq = (W**2).sum(1)[c]
        mask = active[:, None].to(W.dtype)
        return u * mask, wsq * mask, active

    def _w_gradient(self, W, proba, cells, s, inv_sqrt_p, k, public: bool, sensitive: bool):
        """Σ_i over the batch of the chosen parts of ∇_W ψ̂_i, one block per W."""
        out = torch.zeros_like(W)
        for c in range(W.shape[0]):
            rows = cells == c
            if not bool(rows.any()):
                continue
            if public:
                out[c] += w_gradient_public(proba[rows], W[c])
            if sensitive:
                out[c] += w_gradient_sensitive(proba[rows], s[rows], inv_sqrt_p[c], k)
        return out

    def _project(self, W):
        norms = W.flatten(1).norm(dim=1).clamp(min=1e-12)
        return W * torch.clamp(self.w_radius_ / norms, max=1.0)[:, None, None]
