"""The figure of the measurement guide: how wide the demographic-parity interval is, against ε and n.

Public inputs only: :func:`dpfair.measurement.plan.plan_measurement` forecasts the 95 % half-width of
the difference of two groups' selection rates (each rate ½: the widest sampling variance) for n = 1,000, 10,000
and 100,000 rows, split 50/50 and 90/10 between the groups, sensitive unit, δ = 1/n², against ε; the dotted
lines are the sampling alone (ε = ∞). No data is read.

    python scripts/measurement_width_figure.py       # writes docs/figures/measurement_width.png
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "figures" / "measurement_width.png"
SIZES = (1_000, 10_000, 100_000)
SPLITS = ((0.5, 0.5), (0.9, 0.1))
EPSILONS = np.geomspace(0.05, 10.0, 14)


def widths(n: int, shares) -> tuple[list[float], float]:
    """The forecast half-widths at each ε of :data:`EPSILONS`, and the sampling's alone."""
    from dpfair.measurement.plan import plan_measurement

    out = []
    for eps in EPSILONS:
        forecast = plan_measurement("selection_rate", epsilon=float(eps), n=n, group_shares=list(shares))
        out.append(float(forecast.widths.loc[("selection_rate", "difference"), "half_width"]))
    row = forecast.widths.loc[("selection_rate", "difference")]
    return out, float(np.sqrt(row["half_width"] ** 2 - row["noise"] ** 2))


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.4), sharey=True)
    colours = ("#1b6ca8", "#d1495b", "#2e8b57")
    for ax, shares in zip(axes, SPLITS):
        for n, colour in zip(SIZES, colours):
            w, sampling = widths(n, shares)
            ax.plot(EPSILONS, w, color=colour, marker="o", markersize=3, label=f"n = {n:,}")
            ax.axhline(sampling, color=colour, linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε (sensitive unit, δ = 1/n²)")
        ax.set_title(f"groups {int(100 * shares[0])} % / {int(100 * shares[1])} %", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("95 % half-width of the\ndemographic-parity difference")
    axes[0].legend(fontsize=8)
    fig.suptitle("Forecast interval width (dotted: sampling alone)", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB").quantize(colors=64)  # a palette PNG: a few tens of kB
    OUT.parent.mkdir(parents=True, exist_ok=True)
    image.save(OUT, optimize=True)
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
