"""Cost of secure noise (``dpfair.privacy.samplers``) against the plain samplers it replaces.

Times one call producing ``n = 10^6`` draws for:

- ``secure_gaussian`` / ``secure_laplace``: exact discrete Gaussian / Laplace on the
  default power-of-two grid (float64), OS-keyed ChaCha20 coins;
- ``add_secure_gaussian``: the whole secure release of a float32 torch tensor (round the
  sum to the grid, add the noise in float64, cast back);
- the baselines: numpy ``Generator.standard_normal`` and ``Generator.laplace`` (PCG64DXSM,
  float64), ``torch.randn`` (float32 and float64, CPU), and Opacus' secure-mode arithmetic
  ``(Z₁ + Z₂ + Z₃ + Z₄)/2`` with ``torch.normal`` (its CSPRNG, torchcsprng, is not installed
  here, so this row is a lower bound of Opacus' secure-mode cost);
- the raw coins: ``os.urandom`` and the ChaCha20 keystream for the 8·10^6 bytes of 10^6 uint64.

Every method runs ``--repeats`` times, interleaved round-robin (so a change in machine load
hits all methods alike), after one warm-up call each; the table reports the median and the
minimum wall time and the ratio of medians to the matching numpy sampler and to
``torch.randn`` (float32). One process, default thread settings.

Run from the repository root: ``python benchmarks/secure_noise.py`` (``--n``, ``--repeats``,
``--out``). Writes ``results/secure_noise/secure_noise.csv`` and ``secure_noise.md`` and prints
the table.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

from _machine import load_average, machine_info

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpfair.privacy import samplers  # noqa: E402


def methods(n: int) -> dict[str, tuple[str, callable]]:
    """name -> (distribution, zero-argument callable drawing n values)."""
    gen = np.random.Generator(np.random.PCG64DXSM())
    x32 = torch.randn(n, dtype=torch.float32)

    def opacus_style():
        total = torch.zeros(n)
        for _ in range(4):
            total += torch.normal(0.0, 1.0, size=(n,))
        return total / 2

    out = {
        "secure_gaussian": ("gaussian", lambda: samplers.secure_gaussian(n, 1.0)),
        "secure_laplace": ("laplace", lambda: samplers.secure_laplace(n, 1.0)),
        "add_secure_gaussian(float32 tensor)": ("gaussian", lambda: samplers.add_secure_gaussian(x32, 1.0)),
        "numpy standard_normal": ("gaussian", lambda: gen.standard_normal(n)),
        "numpy laplace": ("laplace", lambda: gen.laplace(0.0, 1.0, n)),
        "torch.randn float32": ("gaussian", lambda: torch.randn(n)),
        "torch.randn float64": ("gaussian", lambda: torch.randn(n, dtype=torch.float64)),
        "opacus secure-mode sum of 4 torch.normal": ("gaussian", opacus_style),
        "os.urandom 8e6 bytes": ("coins", lambda: os.urandom(8 * n)),
    }
    if samplers.COIN_SOURCE == "ChaCha20":
        out["ChaCha20 keystream 8e6 bytes"] = ("coins", lambda: samplers.random_bytes(8 * n))
    return out


def measure(n: int, repeats: int) -> list[dict]:
    table = methods(n)
    times = {name: [] for name in table}
    for _, fn in table.values():  # warm-up
        fn()
    for _ in range(repeats):
        for name, (_, fn) in table.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    reference = {"gaussian": med["numpy standard_normal"], "laplace": med["numpy laplace"]}
    rows = []
    for name, (kind, _) in table.items():
        rows.append({
            "method": name,
            "distribution": kind,
            "n": n,
            "median_ms": round(1e3 * med[name], 2),
            "min_ms": round(1e3 * min(times[name]), 2),
            "ratio_vs_numpy": round(med[name] / reference[kind], 2) if kind in reference else "",
            "ratio_vs_torch_randn_f32": round(med[name] / med["torch.randn float32"], 2),
        })
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        "# Secure noise: cost per 10^6 draws",
        "",
        f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs, load average before the run "
        f"{meta['load_before']}, after {meta['load_after']}); Python {meta['python']}, numpy {meta['numpy']}, "
        f"torch {meta['torch']} ({meta['torch_threads']} threads); coins: {meta['coins']}. "
        f"Median and minimum of {meta['repeats']} interleaved runs; ratios are of medians. "
        "`ratio_vs_numpy`: against numpy's sampler of the same distribution (`standard_normal` or `laplace`).",
        "",
        "| method | distribution | median ms | min ms | ratio vs numpy | ratio vs torch.randn f32 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['distribution']} | {r['median_ms']} | {r['min_ms']} | "
                     f"{r['ratio_vs_numpy']} | {r['ratio_vs_torch_randn_f32']} |")
    lines += [
        "",
        "The secure samplers return exact discrete Gaussian / Laplace draws on a power-of-two grid "
        "(`dpfair/privacy/samplers/`; the derivations in the guide, `docs/guide/per_sample_and_sampling.rst`); the Opacus row is only the arithmetic of "
        "its secure mode (four normal draws per value) on torch's default generator, without the "
        "torchcsprng CSPRNG it also needs.",
        "",
    ]
    return "\n".join(lines)


def fit_costs(repeats: int) -> list[dict]:
    """Whole fits with ``secure_mode`` off and on (interleaved): what the exact samplers cost a user."""
    from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier
    from dpfair.datasets import load_dataset

    data = load_dataset("adult", sensitive="sex", random_state=0)
    fits = {
        "DP-SGD, MLP, adult, 2 epochs, batch 256": lambda secure: DPSGDClassifier(
            "mlp", epsilon=1.0, epochs=2, batch_size=256, classes=2, secure_mode=secure).fit(
            data.X_train, data.y_train),
        "DP-FERMI, logistic, adult, 10 epochs, batch 1024": lambda secure: DPFERMIClassifier(
            epsilon=1.0, epochs=10, groups=2, secure_mode=secure).fit(
            data.X_train, data.y_train, sensitive_features=data.s_train),
    }
    times = {(name, secure): [] for name in fits for secure in (False, True)}
    for _ in range(repeats):
        for (name, secure), out in times.items():
            t0 = time.perf_counter()
            fits[name](secure)
            out.append(time.perf_counter() - t0)
    rows = []
    for name in fits:
        plain, secure = (statistics.median(times[name, flag]) for flag in (False, True))
        rows.append({"fit": name, "plain_s": round(plain, 2), "secure_mode_s": round(secure, 2),
                     "ratio": round(secure / plain, 2)})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "secure_noise")
    parser.add_argument("--fit-repeats", type=int, default=3, help="whole fits per configuration")
    args = parser.parse_args(argv)

    load_before = load_average()
    t0 = time.perf_counter()
    rows = measure(args.n, args.repeats)
    wall = time.perf_counter() - t0
    meta = {
        **machine_info(load_before),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "coins": "ChaCha20 (cryptography/OpenSSL) keyed by os.urandom" if samplers.COIN_SOURCE == "ChaCha20"
        else "os.urandom",
        "repeats": args.repeats,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "secure_noise.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    text = markdown(rows, meta)
    fit_rows = fit_costs(args.fit_repeats)
    text += ("\n## Whole fits, secure_mode off and on\n\n"
             f"Median of {args.fit_repeats} interleaved fits each, same run.\n\n"
             "| fit | plain s | secure_mode s | ratio |\n|---|---:|---:|---:|\n"
             + "".join(f"| {r['fit']} | {r['plain_s']} | {r['secure_mode_s']} | {r['ratio']} |\n" for r in fit_rows))
    (args.out / "secure_noise.md").write_text(text)
    print(text)
    print(f"wall time {wall:.1f} s; wrote {args.out / 'secure_noise.csv'} and {args.out / 'secure_noise.md'}")


if __name__ == "__main__":
    main()
