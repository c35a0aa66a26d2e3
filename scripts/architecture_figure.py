"""The picture of dpfair's layers on the architecture page, drawn from ``.importlinter`` (the contract CI checks).

One row per layer, top to bottom as the contract lists them; one box per module or subpackage, its width
growing with its lines of code (counted from ``src/dpfair``). The picture cannot disagree with the contract:
``tests/test_architecture.py`` checks that it names every module of every layer.

    python scripts/architecture_figure.py            # writes docs/figures/layers.svg
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO / ".importlinter"
SOURCE = REPO / "src" / "dpfair"
OUT = REPO / "docs" / "figures" / "layers.svg"


def layers(path: Path = CONTRACT) -> list[list[str]]:
    """The layers of the contract ``dpfair's layers``, top first, each a list of its module names."""
    config = configparser.ConfigParser()
    config.read(path)
    section = next(s for s in config.sections() if config[s].get("type") == "layers")
    rows = [line.strip() for line in config[section]["layers"].splitlines() if line.strip()]
    return [[name.strip() for name in row.split("|")] for row in rows]


def lines_of(name: str) -> int:
    """Lines of the module ``dpfair.<name>`` (a file, or a subpackage's every file)."""
    folder = SOURCE / name
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else [SOURCE / f"{name}.py"]
    return sum(len(f.read_text().splitlines()) for f in files if f.is_file())


def draw(out: Path = OUT) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and checked by the tests
    matplotlib.rcParams["svg.hashsalt"] = "dpfair"
    rows = layers()
    fig, ax = plt.subplots(figsize=(10, 0.62 * len(rows) + 0.4))
    width = 10.0
    for i, row in enumerate(rows):
        y = len(rows) - 1 - i
        sizes = [lines_of(name) ** 0.5 + 15 for name in row]  # √lines, plus room for a small module's name
        total, gap = sum(sizes), 0.08
        x = 0.0
        for name, size in zip(row, sizes):
            w = (width - gap * (len(row) - 1)) * size / total
            ax.add_patch(plt.Rectangle((x, y + 0.08), w, 0.84, facecolor="#dbe8f5" if i % 2 else "#f3f6fa",
                                       edgecolor="#34495e", linewidth=0.8))
            ax.text(x + w / 2, y + 0.5, f"{name}\n{lines_of(name):,} lines", ha="center", va="center",
                    fontsize=7.5)
            x += w + gap
    ax.set_xlim(-0.05, width + 0.05)
    ax.set_ylim(0, len(rows))
    ax.axis("off")
    ax.set_title("dpfair's layers (.importlinter): each imports only from the rows below it", fontsize=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw())
    sys.exit(0)
