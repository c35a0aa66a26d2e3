"""Where and under what load a benchmark ran: the header every result table of benchmarks/ starts from."""

from __future__ import annotations

import datetime as dt
import os
import platform


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as the tables print them."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def machine_info(load_before: str) -> dict:
    """Date, machine, CPU count, the load before (``load_before``, from :func:`load_average`) and now, Python."""
    return {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()} {platform.platform()}",
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": load_average(),
        "python": platform.python_version(),
    }
