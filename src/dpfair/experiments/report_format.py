"""How the sweep report (:mod:`dpfair.experiments.report`) writes values and tables in HTML.

Every text taken from the store or the papers goes through :func:`escape`; numbers are written to 4 significant
digits (``—`` where missing, ``∞`` where infinite), a seeds' spread as ``mean ± std [min, max]``.
"""

from __future__ import annotations

import html
import math
import re


def escape(value) -> str:
    """Escaped text of any value."""
    return html.escape(str(value), quote=True)


def absent(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value, digits: int = 4) -> str:
    if absent(value):
        return "—"
    value = float(value)
    return "∞" if math.isinf(value) else f"{value:.{digits}g}"


def eps_label(value) -> str:
    return "non-private" if absent(value) or math.isinf(float(value)) else f"ε = {float(value):g}"


def spread_label(mean, std, low, high, n) -> str:
    """``mean ± std [min, max]`` (the seeds' spread); the mean alone for one seed."""
    if int(n) <= 1:
        return number(mean)
    return f"{number(mean)} ± {number(std, 2)} [{number(low)}, {number(high)}]"


def params_label(params) -> str:
    if not isinstance(params, dict) or not params:
        return "—"
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(params.items()))


def html_table(header: list[str] | None, rows: list[list], numeric: set[int] = frozenset()) -> str:
    """An HTML table (no header row where ``header`` is None); cells are escaped unless given as
    ``("html", markup)``."""
    def cell(i, v):
        text = v[1] if isinstance(v, tuple) and v[:1] == ("html",) else escape(v)
        return f'<td class="num">{text}</td>' if i in numeric else f"<td>{text}</td>"
    head = "" if header is None else "<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead>"
    body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table>{head}<tbody>{body}</tbody></table>"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def is_private(epsilon) -> bool:
    return not absent(epsilon) and math.isfinite(float(epsilon))
