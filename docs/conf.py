"""Sphinx configuration of dpfair's API reference, built from the docstrings.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``tests/test_docs.py`` does the same
in the test run, so a docstring that breaks the build fails CI). Everything is imported for real (no mocks) and
nothing is fetched from the network.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

import dpfair
from dpfair.algorithms.catalog import PARAMETER_ENTRY as _ENTRY  # one reading of "name : text" entries, shared

project = "dpfair"
author = "dpfair developers"
copyright = "dpfair developers, Apache-2.0"
release = version = dpfair.__version__

# myst_parser: the user guide's pages are Markdown (MyST), as the README is
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# "## Heading" anchors, so that a page can link to another page's section
myst_heading_anchors = 3
exclude_patterns = ["_build"]
templates_path: list[str] = []
html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {"description": "Fair and differentially private machine learning", "page_width": "1100px"}

# The docstrings are numpydoc: "Parameters\n----------" with "name : text" entries (the text often on the
# name's line, as dpfair.algorithms.catalog reads it); Google-style parsing would misread free text.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# A field list of bullets: "**a, b** -- text" (``:param a, b:`` would read "a," as a type).
napoleon_use_param = False
# An "Attributes" section as a field list, not as attribute entries: those would duplicate the dataclass fields
# that ``undoc-members`` documents.
napoleon_use_ivar = True

autodoc_member_order = "bysource"
# undoc-members: public methods and attributes without a docstring are listed too. (Module-level constants
# without a ``#:`` comment are not found by autodoc; the API pages name the exported ones with ``autodata``.)
autodoc_default_options = {"show-inheritance": True, "undoc-members": True}
autodoc_typehints = "signature"
# The docstrings say which argument is which; signatures stay readable without module paths.
python_use_unqualified_type_names = True


class CliHelp(SphinxDirective):
    """``.. dpfair-cli::``: the ``--help`` of ``dpfair`` and of every subcommand, made from
    :func:`dpfair.cli.main.build_parser` at build time, so the page cannot drift from the parser."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from dpfair.cli.main import build_parser

        text = []
        for prog, parser in _walk(build_parser()):
            help_text = "\n".join("   " + line if line else "" for line in parser.format_help().splitlines())
            text += [f"``{prog}``", "-" * (len(prog) + 4), "", ".. code-block:: text", "", help_text, ""]
        return self.parse_text_to_nodes("\n".join(text), allow_section_headings=True)


def _walk(parser: argparse.ArgumentParser):
    """``(prog, parser)`` for ``parser`` and every subparser below it, depth first, each formatted 100 wide."""
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100)
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk(sub)


_FOREIGN_ROLE = re.compile(r":(?:term|ref):`([^`<]*?)\s*(?:<([^`>]*)>)?`")


def _own_docstring(what: str, name: str, obj) -> bool:
    """Whether the docstring autodoc found for ``name`` was written in dpfair: not scikit-learn's (inherited, or
    generated like ``set_fit_request``). ``#:`` comments and ``__doc__`` strings of dpfair's own objects are;
    a member without a ``__doc__`` of its own is when the class it inherits the docstring from is dpfair's."""
    if what in {"attribute", "data"}:
        return name.startswith("dpfair.")
    target = obj.fget if isinstance(obj, property) else obj
    if getattr(target, "__doc__", None) is None and what in {"method", "property"}:
        owner_name, _, member = name.rpartition(".")
        owner = _import(owner_name)
        target = next((vars(c)[member] for c in owner.__mro__[1:]
                       if member in vars(c) and getattr(vars(c)[member], "__doc__", None)), None)
        target = target.fget if isinstance(target, property) else target
    return (getattr(target, "__module__", None) or getattr(target, "__name__", "") or "").startswith("dpfair")


def _import(dotted: str):
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def dpfair_parameters(app, what, name, obj, options, lines: list[str]) -> None:
    """Read dpfair's ``Parameters`` sections as :mod:`dpfair.algorithms.catalog` does, before napoleon.

    dpfair's convention: an entry ``a, b : text`` has its *description* after the colon, continuation lines
    indented, and the section ends at its first blank line (a "Fitted attributes: ..." paragraph may follow).
    napoleon would read the text as a type and the paragraphs after it as more entries, so each such entry is
    rewritten as numpydoc's ``a, b`` + indented description, and the section is closed by a second blank line.
    An entry whose continuation starts with a capital letter is plain numpydoc (``name : type`` then the
    description) and is left alone. Docstrings that dpfair did not write (scikit-learn's, inherited or
    generated, e.g. ``set_fit_request``) keep numpydoc's reading, and their cross-references into scikit-learn's
    own glossary and guide (unresolvable here) become plain text.
    """
    type_doc = getattr(type(obj), "__doc__", None)
    if what in {"data", "attribute"} and isinstance(type_doc, str) and "\n".join(lines).strip() == inspect.cleandoc(
            type_doc):
        lines[:] = []  # a constant without a ``#:`` comment: not the docstring of its type (tuple's, dict's)
        return
    if not _own_docstring(what, name, obj):
        lines[:] = [_FOREIGN_ROLE.sub(lambda m: m.group(1) or m.group(2), line) for line in lines]
        return
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        if not (lines[i].strip() == "Parameters" and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}):
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        out.append(lines[i + 1])
        i += 2
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            match = _ENTRY.match(line[len(indent):]) if not line[len(indent):][:1].isspace() else None
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            continued = following and lines[i + 1][len(indent):][:1].isspace()
            if match and match.group(2) and not (continued and following[0].isupper()):
                out += [indent + match.group(1), indent + "    " + match.group(2)]
            else:
                out.append(line)
            i += 1
        out.append("")  # with the blank line that ends the entries: napoleon's end of section
    lines[:] = out


def resolve_public_path(app, env, node, contnode):
    """``:class:`dpfair.privacy.Release``` (the path users import from; or ``Release`` in ``dpfair.privacy``'s
    docstrings) links to the object documented where it is defined (``dpfair.privacy.mechanisms.Release``)."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py":
        return None
    if not target.startswith("dpfair."):  # relative to the module documented, e.g. a package's re-export
        target = f"{node.get('py:module') or ''}.{target}"
        if not target.startswith("dpfair."):
            return None
    try:
        obj = _import(target)
    except (ImportError, AttributeError):
        return None
    defined = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if defined == target or not defined.startswith("dpfair."):
        return None
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"], defined, node,
                                              contnode)


_PLAIN: dict[str, list[str]] = {}


def keep_plain(app, what, name, obj, options, lines: list[str]) -> None:
    """dpfair's module, attribute, data and property docstrings (``#:`` comments included) are plain reST: keep
    them from napoleon, which reads a first line ``text: more`` as ``type: description`` (``#: share r of each
    step's noise budget (0: none released)`` would render as "none released)", type "share r ... (0"), and a
    module's heading ``Methods`` (:mod:`dpfair.nn.per_sample`) as a numpydoc section of method entries."""
    if what in {"module", "attribute", "data", "property"} and _own_docstring(what, name, obj):
        _PLAIN[name] = list(lines)


def restore_plain(app, what, name, obj, options, lines: list[str]) -> None:
    """After napoleon (see :func:`keep_plain`)."""
    if name in _PLAIN:
        lines[:] = _PLAIN.pop(name)


def setup(app):
    app.add_directive("dpfair-cli", CliHelp)
    # around napoleon's own autodoc-process-docstring handler (priority 500)
    app.connect("autodoc-process-docstring", dpfair_parameters, priority=400)
    app.connect("autodoc-process-docstring", keep_plain, priority=400)
    app.connect("autodoc-process-docstring", restore_plain, priority=600)
    app.connect("missing-reference", resolve_public_path)
