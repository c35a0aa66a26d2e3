"""The TOML form of a :class:`~dpfair.datasets.schema.Schema`: the text ``Schema.to_toml`` writes for a user to
review, edit and declare, and the reading of the schema file or text ``Schema.from_toml`` parses.

A small writer of its own for strings, numbers, booleans, lists and inline tables (no TOML writer needed).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path


def toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else toml_value(key)


def toml_value(value) -> str:
    """A TOML literal for a string, number, boolean, list or inline table of them (no TOML writer needed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


def toml_text(data: dict, notes: dict[str, str] | None = None) -> str:
    """A schema's :meth:`~dpfair.datasets.schema.Schema.to_dict` form as TOML text.  ``notes`` (column → text)
    become comments above each column's table and the ignore list (why a proposer chose what it did)."""
    notes = notes or {}
    data = dict(data)
    columns = data.pop("columns")
    lines = ["# dpfair schema: every value below is treated as a public fact, not computed from private rows.",
             "# Numeric columns are clipped to [lo, hi] (transformed if declared) and mapped to (x - center) /",
             "# scale; categorical ones are one-hot over categories (other = true: one more level for any other",
             "# value); missing = \"error\" | \"drop\" | {fill = VALUE, indicator = true}. Once reviewed, say who",
             "# declared it in source.", ""]
    for key, value in data.items():
        if key == "ignore":
            lines += [f"# {c}: {notes[c]}" for c in value if c in notes]
        for target in ("label", "sensitive"):
            if key == target and isinstance(value, str) and value in notes:
                lines.append(f"# {value}: {notes[value]}")
        lines.append(f"{key} = {toml_value(value)}")
    for column in columns:
        lines += [""] + ([f"# {notes[column['name']]}"] if column["name"] in notes else []) + ["[[columns]]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in column.items() if value is not None]
    return "\n".join(lines) + "\n"


def read_toml(source) -> tuple[dict, str]:
    """``(data, where)``: the parsed TOML of a schema (a :class:`~pathlib.Path`, a file name, or the text itself: a
    string with a newline or an ``=``) and what an error about it names (the file, or ``"schema"``)."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and "=" not in source):
        where = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"schema file {where!r} not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the schema file {where!r}: {exc}") from None
    elif isinstance(source, str):
        where, text = "schema", source
    else:
        raise ValueError(f"from_toml takes a path or TOML text, got {type(source).__name__}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML: {exc}") from None
    return data, where
