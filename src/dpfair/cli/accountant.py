"""``dpfair accountant``: the ε of a noise multiplier, or the noise multiplier of a target ε (DP-SGD's
subsampled Gaussian, PLD or RDP accounting)."""

from __future__ import annotations

import math

HELP = "epsilon for a noise multiplier, or the noise for a target epsilon"


def add_arguments(p) -> None:
    p.add_argument("--noise", type=float, help="noise multiplier σ (gives ε)")
    p.add_argument("--epsilon", type=float, help="target ε (gives σ)")
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--sampling-rate", type=float, help="Poisson sampling rate q")
    p.add_argument("--steps", type=int, help="number of steps")
    p.add_argument("--n", type=int, help="data set size (with --batch-size, instead of --sampling-rate)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--epochs", type=float, help="epochs (instead of --steps)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["record", "sensitive"], default="record",
                   help="privacy unit (default record)")
    p.add_argument("--accountant", choices=["pld", "rdp"], default="pld")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from dpfair.privacy import epsilon_for_noise, noise_for_epsilon
    from dpfair.privacy.record import PrivacyRecord

    if args.sampling_rate is None:
        if args.n is None or args.batch_size is None:
            raise ValueError("give --sampling-rate, or --n and --batch-size")
        for flag, value in (("--n", args.n), ("--batch-size", args.batch_size)):
            if value < 1:
                raise ValueError(f"{flag} must be a positive integer, got {value}")
        args.sampling_rate = min(1.0, args.batch_size / args.n)
    elif not 0.0 < args.sampling_rate <= 1.0:
        raise ValueError(f"--sampling-rate must lie in (0, 1], got {args.sampling_rate:g}; or give --n and "
                         "--batch-size")
    if args.steps is None:
        if args.epochs is None:
            raise ValueError("give --steps, or --epochs")
        if not 0.0 < args.epochs < math.inf:
            raise ValueError(f"--epochs must be a positive number, got {args.epochs:g}")
        args.steps = math.ceil(args.epochs / args.sampling_rate)
    if (args.noise is None) == (args.epsilon is None):
        raise ValueError("give exactly one of --noise (to get epsilon) and --epsilon (to get the noise)")
    common = dict(sampling_probability=args.sampling_rate, steps=args.steps, delta=args.delta,
                  relation=args.unit, accountant=args.accountant)
    protects = PrivacyRecord.of(0.0, args.delta, args.unit).protects  # whom any finite ε of this unit protects
    if args.noise is not None:
        eps = epsilon_for_noise(args.noise, **common)
        print(f"epsilon = {eps:.6g} at delta = {args.delta:g} for {protects} (noise multiplier {args.noise:g}, "
              f"q = {args.sampling_rate:g}, {args.steps} steps, unit {args.unit}, {args.accountant})")
    else:
        sigma = noise_for_epsilon(args.epsilon, **common)
        eps = epsilon_for_noise(sigma, **common)
        print(f"noise multiplier = {sigma:.6g} (epsilon spent {eps:.6g} <= {args.epsilon:g} at delta = "
              f"{args.delta:g} for {protects}; q = {args.sampling_rate:g}, {args.steps} steps, unit {args.unit}, "
              f"{args.accountant})")
    return 0
