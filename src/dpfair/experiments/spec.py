"""Sweep specifications: a TOML file naming methods × data sets × presets × ε × grids × seeds × notions.

A spec expands into :class:`Point` s, one per model to train; each point has a :attr:`Point.key` (the
SHA-256 of its canonical configuration) that the results store uses to run nothing twice. Format::

    [sweep]
    name = "tiny"
    datasets = ["compas"]              # or tables: {name = "adult", sensitive = "sex", options = {...}}
    methods = ["dp-fermi", "erm"]
    epsilon = [1.0]                    # private methods only; a non-private method runs once per seed
    seeds = [0, 1]                     # the split and the public randomness (the CLI's --seed)
    # optional: presets = ["dp-fermi"], notions = ["demographic_parity"], delta = 1e-5,
    # test_size = 0.25 (default: the preset's split, else 0.25),
    # eval_epsilon = 1.0 (release each model's test figures by group privately; default: exact diagnostics)

    [grid.dp-fermi]                    # a product grid of hyper-parameters, per method
    lam = [0.0, 1.0]

    [params.dp-fermi]                  # fixed hyper-parameters, per method
    epochs = 50

Your own tables: a ``datasets`` entry may name a CSV or Parquet file instead of a built-in data set::

    datasets = [{ name = "loans", data = "loans.csv", schema = "loans.toml" }]
    # optional: test_data = "loans-test.csv" (else the sweep's test_size split, 0.25 by default),
    # sensitive = "group" (must agree with the schema's)

Paths are relative to the spec file. ``schema`` is required: it is the public description of the table
(:class:`~dpfair.datasets.Schema`; ``dpfair schema FILE --label COL --sensitive COL --out FILE`` proposes one to
review), since a sweep runs many fits, often under the record unit, where a schema read off the rows would be a
statistic of private records. The table loads with :func:`~dpfair.datasets.load_table`; ``name`` (no built-in
data set's, each table's own) names it in the store, the reports and the privacy totals; global ``presets`` do
not apply to it. Missing files, an unknown format and a schema that does not parse or declares no label and
sensitive column are refused when the spec is read; columns are matched against the schema when a task loads
the table (a mismatch fails its points with one line).

A table's points carry its version in their key (:attr:`DataSpec.table`): a keyed digest of the file's bytes
(and the test file's) and a digest of the schema, so a changed file or schema trains new points and a store never
holds two versions of a table under one key; a task whose file changed after the spec was read fails instead of
training on other rows. The digest of the rows is an HMAC under a secret kept on this machine
(:func:`table_key_path`), never stored: a plain hash of private rows in a published key would let anyone who
holds all rows but one test each candidate for the last. Privacy totals
(:meth:`~dpfair.experiments.store.ResultsStore.privacy_totals`) compose by data set *name*: every version of a
table stored under one name is assumed to hold the same people (conservative: two versions usually share most
of them), and two names different people, so give tables that share people one name, in separate sweeps.

Notions: a fair method runs once per listed notion it supports (its default when ``notions`` is not
given); a method that targets no notion runs once with ``notion = None``. Every model is evaluated on
every notion (:func:`~dpfair.experiments.evaluate`).

A spec that cannot mean what it says is refused when it is read, with one line naming the key: a list that
trains nothing (no data set, seed or ε; a fair method none of whose notions is listed), a listed notion no
method targets, ε or δ given to a sweep without a private method, a value of the wrong type (``epsilon =
[true]``), a name that is not a plain file name (it names the default store), and every hyper-parameter
point of ``[grid.M]`` × ``[params.M]`` that method M's own
:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters` refuses.

A reproduction spec may describe the paper's figure it reproduces, so that ``dpfair reproduce NAME`` redraws
it in the paper's layout and judges each cell against the paper's numbers
(:mod:`dpfair.experiments.paper_figure`)::

    [figure]
    paper = "pf-ld"                    # the key of its published/*.toml file (the numbers to judge against)
    source = "Figure 5"                # where in the paper
    title = "PF-LD with missing sensitive values, Bank"
    kind = "curve"                     # curve: y over x, one line per series; tradeoff: y against x, one
                                       #   point per hyper-parameter point (a front per series)
    x = "epsilon"                      # curve: a column; tradeoff: a metric
    y = ["accuracy", "violation"]      # metrics: accuracy (1 − error), error, violation (the panel's or the
                                       #   row's notion), fairness.NOTION; one subplot each per panel
    x_scale = "log"                    # or "linear" (default)
    rows = ["dataset"]                 # panel rows and columns: columns of the rows (dataset, preset,
    cols = ["notion"]                  #   method, notion, epsilon, a hyper-parameter, a loader option)
    series = "missing_sensitive"       # one line (curve) or front (tradeoff) per value of this column
    baseline = "erm"                   # optional: a non-private method drawn as the reference line
    tolerance = 0.02                   # |ours − published| within it: reproduced
    tolerance_source = "issue 31"      # where the tolerance comes from
    note = "..."                       # why a cell without a published number cannot be judged
    defaults = {missing_sensitive = 0.0}   # a column's value for rows that do not set it
    with = ["dp-fermi-baselines"]      # optional: shipped specs whose rows the figure draws too
    fixed = {primal_clip = 10.0}       # optional: hyper-parameters the paper's numbers fix; a run with
                                       #   another value (its method's default where unset) matches none

    [[figure.explain]]                 # optional: the measured reason of a gap beyond the tolerance, for
    method = "erm"                     #   the cells of this method (and, where given, data set, notion and
    dataset = "bank"                   #   metric: accuracy, error or violation); cite the measurement
    why = "..."

Every key but ``with``, ``defaults``, ``fixed``, ``explain``, ``rows``, ``cols``, ``baseline`` and ``x_scale`` is
required; a wrong
one is refused with one line naming the key and the fix.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import numbers
import os
import re
import secrets
import tempfile
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dpfair.utils.capabilities import capabilities
from dpfair.utils.validation import check_epsilon

#: The reproduction specs shipped with the package, by name (``dpfair sweep NAME`` runs one).
SPEC_PACKAGE = "dpfair.experiments.specs"

_SWEEP_KEYS = {"name", "datasets", "methods", "epsilon", "seeds", "presets", "notions", "delta", "test_size",
               "description", "eval_epsilon"}
_DATASET_KEYS = {"name", "sensitive", "preset", "options"}
_TABLE_KEYS = {"name", "data", "schema", "test_data", "sensitive"}
_FIGURE_REQUIRED = {"paper", "source", "title", "kind", "x", "y", "series", "tolerance", "tolerance_source", "note"}
_FIGURE_KEYS = _FIGURE_REQUIRED | {"x_scale", "rows", "cols", "baseline", "defaults", "with", "fixed", "explain"}
_EXPLAIN_KEYS = {"method", "dataset", "notion", "metric", "why"}
#: Columns of a model row a figure may facet or draw by (besides hyper-parameters and loader options).
FIGURE_COLUMNS = ("dataset", "preset", "method", "notion", "epsilon")
#: Metrics a figure may draw (besides ``fairness.NOTION``).
FIGURE_METRICS = ("accuracy", "error", "violation")
#: A sweep's name: it names the default store ``dpfair-runs/<name>.sqlite``, so it is a plain file name.
_NAME = re.compile(r"[^\W_][\w.+-]*")


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class DataSpec:
    """One data set of a sweep: its name, sensitive attribute, preset and loader options (all public); for a
    user's table also its files (``data``, ``test_data``: absolute paths), its declared ``schema`` (the
    canonical JSON of :meth:`~dpfair.datasets.Schema.to_dict`) and ``table``, the version that goes into the
    points' keys (see the module's text). ``sha256`` is the plain digest of the files' bytes, which the task
    checks before training; it is never stored or printed."""

    name: str
    sensitive: str | None = None
    preset: str | None = None
    options: tuple = ()  # sorted (key, value) pairs, hashable
    data: str | None = None
    test_data: str | None = None
    schema: str | None = None
    table: tuple = ()  # sorted (key, digest) pairs: {"data": keyed digest of the rows, "schema": sha256}
    sha256: str | None = field(default=None, repr=False)

    def load_kwargs(self, seed: int, test_size: float | None) -> dict:
        """``load_dataset``'s keywords (``load_table``'s for a table); ``test_size`` ``None``: the preset's
        split, else 0.25."""
        if self.data is not None:
            return {"schema": json.loads(self.schema), "sensitive": self.sensitive, "test_data": self.test_data,
                    "test_size": 0.25 if test_size is None else test_size, "random_state": seed}
        extra = {"preset": self.preset} if self.preset is not None else {}
        return dict(sensitive=self.sensitive, random_state=seed, test_size=test_size, **extra, **dict(self.options))

    def files(self) -> list[str]:
        """The table's files (data, then test data), ``[]`` for a built-in data set."""
        return [f for f in (self.data, self.test_data) if f is not None]

    @property
    def label(self) -> str:
        return self.name + (f" ({self.preset})" if self.preset else "")


@dataclass(frozen=True)
class Point:
    """One model of a sweep: what to train on which data, with which public settings."""

    data: DataSpec
    method: str
    notion: str | None
    epsilon: float | None
    delta: float | None
    seed: int
    params: tuple  # sorted (name, value) pairs: the grid point and the fixed parameters
    test_size: float | None = None
    #: The budget of the private evaluation of the model's test part (None: exact, non-private diagnostics).
    eval_epsilon: float | None = None

    def config(self) -> dict:
        """The canonical configuration (what :attr:`key` hashes; ``eval_epsilon`` only when given, so that the
        keys of stores written before it existed stay the same)."""
        config = {"dataset": self.data.name, "sensitive": self.data.sensitive, "preset": self.data.preset,
                  "options": dict(self.data.options), "method": self.method, "notion": self.notion,
                  "epsilon": self.epsilon, "delta": self.delta, "seed": self.seed, "params": dict(self.params),
                  "test_size": self.test_size}
        if self.data.table:  # a user's table: its version (a built-in data set's keys stay as they were)
            config["table"] = dict(self.data.table)
        if self.eval_epsilon is not None:
            config["eval_epsilon"] = self.eval_epsilon
        return config

    @property
    def key(self) -> str:
        return hashlib.sha256(_canonical(self.config()).encode()).hexdigest()

    @property
    def task_key(self) -> tuple:
        """Points with the same task key are trained together (one data load; one batched grid where the
        method has one): the data and split, the method and notion, and the fixed parameters."""
        return (self.data, self.seed, self.test_size, self.method, self.notion, self.eval_epsilon)


@dataclass(frozen=True)
class FigureSpec:
    """The paper's figure a reproduction spec redraws (its ``[figure]`` table; see the module's text)."""

    paper: str
    source: str
    title: str
    kind: str
    x: str
    y: tuple
    series: str
    tolerance: float
    tolerance_source: str
    note: str
    x_scale: str = "linear"
    rows: tuple = ()
    cols: tuple = ()
    baseline: str | None = None
    defaults: tuple = ()  # sorted (column, value) pairs
    with_specs: tuple = ()
    fixed: tuple = ()  # sorted (hyper-parameter, value) pairs
    explain: tuple = ()  # dicts: method, dataset, notion, metric (None: any) and why


@dataclass
class SweepSpec:
    """A parsed sweep specification (see the module docstring for the TOML format)."""

    name: str
    datasets: list[DataSpec]
    methods: list[str]
    epsilon: list[float] = field(default_factory=lambda: [1.0])
    seeds: list[int] = field(default_factory=lambda: [0])
    notions: list[str] | None = None
    delta: float | None = None
    test_size: float | None = None
    grids: dict[str, dict[str, list]] = field(default_factory=dict)
    params: dict[str, dict] = field(default_factory=dict)
    description: str = ""
    eval_epsilon: float | None = None
    figure: FigureSpec | None = None

    @classmethod
    def from_dict(cls, raw: dict, where: str = "spec", base: str | Path | None = None) -> SweepSpec:
        """Parse and check a spec (the TOML's tables as dicts); every mistake names its key and the fix.
        ``base``: the folder a table's relative paths start from (the spec file's; default the working one)."""
        from dpfair.algorithms import METHODS
        from dpfair.datasets import list_datasets, presets_of

        unknown_tables = sorted(set(raw) - {"sweep", "grid", "params", "figure"})
        if unknown_tables:
            raise ValueError(f"{where}: unknown table [{unknown_tables[0]}]; a spec has [sweep], [grid.METHOD], "
                             "[params.METHOD] and optionally [figure]")
        sweep = raw.get("sweep")
        if not isinstance(sweep, dict):
            raise ValueError(f"{where}: no [sweep] table; it needs at least name, datasets and methods")
        unknown = sorted(set(sweep) - _SWEEP_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} in [sweep]; valid: {', '.join(sorted(_SWEEP_KEYS))}")
        for key in ("name", "datasets", "methods"):
            if key not in sweep:
                raise ValueError(f"{where}: [sweep] needs {key!r}")
        name = sweep["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{where}: [sweep] name must be a plain name (a letter or digit, then letters, digits, "
                             f"'.', '_', '+' or '-': it names the default store dpfair-runs/<name>.sqlite), got {name!r}")
        description = sweep.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"{where}: [sweep] description must be a string, got {description!r}")
        methods = _distinct(_str_list(sweep["methods"], "methods", where), "methods", where)
        for m in methods:
            if m not in METHODS:
                raise ValueError(f"{where}: unknown method {m!r}; valid: {', '.join(METHODS)}")
        private = [m for m in methods if capabilities(METHODS[m]).private]
        presets = sweep.get("presets")
        if presets is not None:
            presets = _distinct(_str_list(presets, "presets", where), "presets", where)
        entries = _as_list(sweep["datasets"])
        if not entries:
            raise ValueError(f"{where}: datasets is empty, so the sweep trains nothing; name at least one data set "
                             f"(valid: {', '.join(list_datasets())})")
        datasets = [d for entry in entries for d in _data_spec(entry, presets, where, Path(base or "."))]
        for d in datasets:
            if d.data is not None:
                if d.name in list_datasets():
                    raise ValueError(f"{where}: data set name {d.name!r} of {d.data} is a built-in data set's; "
                                     "give the table a name of its own")
                if sum(e.name == d.name for e in datasets) > 1:
                    raise ValueError(f"{where}: data set name {d.name!r} is used twice; give each table its own "
                                     "name (the privacy totals count one population per name)")
                continue
            if d.name not in list_datasets():
                raise ValueError(f"{where}: unknown data set {d.name!r}; valid: {', '.join(list_datasets())}")
            if d.preset is not None and d.preset not in presets_of(d.name):
                raise ValueError(f"{where}: data set {d.name!r} has no preset {d.preset!r}; its presets: "
                                 f"{', '.join(presets_of(d.name)) or '(none)'}")
        for key in ("epsilon", "delta"):
            if key in sweep and not private:
                raise ValueError(f"{where}: [sweep] {key} is given but no method of the sweep is private "
                                 f"({', '.join(methods)} run without noise); drop {key} or add a private method")
        epsilon = _distinct(_as_list(sweep.get("epsilon", [1.0])), "epsilon", where)
        if not epsilon:
            raise ValueError(f"{where}: epsilon is empty, so no private model would train; list at least one ε > 0 "
                             "(inf for no privacy)")
        if not all(_is_number(e) for e in epsilon):
            raise ValueError(f"{where}: every epsilon must be a number (inf for no privacy), got {epsilon!r}")
        if not all(e > 0 for e in epsilon):
            raise ValueError(f"{where}: every epsilon must be > 0 (inf for no privacy), got {epsilon!r}")
        epsilon = [float(e) for e in epsilon]
        seeds = _distinct(_as_list(sweep.get("seeds", [0])), "seeds", where)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
            raise ValueError(f"{where}: seeds must be a non-empty list of non-negative integers, got {seeds}")
        notions = sweep.get("notions")
        if notions is not None:
            notions = _distinct(_str_list(notions, "notions", where), "notions", where)
            _check_notions(notions, [METHODS[m] for m in methods], methods, where)
        test_size = sweep.get("test_size")
        if test_size is not None and not (_is_number(test_size) and 0 < test_size < 1):
            raise ValueError(f"{where}: test_size must be a number in (0, 1), got {test_size!r}")
        delta = sweep.get("delta")
        if delta is not None and not (_is_number(delta) and 0 < delta < 1):
            raise ValueError(f"{where}: delta must be in (0, 1), got {delta!r}")
        eval_epsilon = sweep.get("eval_epsilon")
        if eval_epsilon is not None:
            if not _is_number(eval_epsilon):
                raise ValueError(f"{where}: eval_epsilon must be a number (the test figures' budget), got "
                                 f"{eval_epsilon!r}")
            try:
                eval_epsilon = check_epsilon(eval_epsilon, "eval_epsilon", budget=True)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        tables = {}
        for table in ("grid", "params"):
            per_method = raw.get(table, {})
            if not isinstance(per_method, dict):
                raise ValueError(f"{where}: [{table}] must hold one table per method, [{table}.METHOD]")
            for m, values in per_method.items():
                if m not in methods:
                    raise ValueError(f"{where}: [{table}.{m}] names a method the sweep does not run; methods: "
                                     f"{', '.join(methods)}")
                if not isinstance(values, dict):
                    raise ValueError(f"{where}: [{table}.{m}] must be a table of hyper-parameters")
                _check_params(METHODS[m], values, f"{where}: [{table}.{m}]")
                if table == "grid" and not all(isinstance(v, list) and v for v in values.values()):
                    raise ValueError(f"{where}: every entry of [grid.{m}] must be a non-empty list of values")
            tables[table] = per_method
        for m in methods:  # every point of the method's grid, by the method's own checks (they read no data)
            grid, fixed = tables["grid"].get(m, {}), tables["params"].get(m, {})
            both = sorted(set(grid) & set(fixed))
            if both:
                raise ValueError(f"{where}: [grid.{m}] and [params.{m}] both set {both[0]!r}; keep it in one of them")
            for values in itertools.product(*grid.values()):
                point = dict(zip(grid, values))
                try:
                    METHODS[m](**fixed, **point).check_hyperparameters()
                except (TypeError, ValueError) as exc:
                    at = f"[grid.{m}] point {point}" if point else f"[params.{m}]"
                    raise ValueError(f"{where}: {at}: {exc}") from None
        spec = cls(name=name, datasets=datasets, methods=methods, epsilon=epsilon, seeds=seeds,
                   notions=notions, delta=None if delta is None else float(delta),
                   test_size=None if test_size is None else float(test_size), grids=tables["grid"],
                   params=tables["params"], description=description, eval_epsilon=eval_epsilon)
        if "figure" in raw:
            spec.figure = _figure_spec(raw["figure"], spec, where)
        if not spec.points():  # the checks above leave no way to it; kept as the rule they serve
            raise ValueError(f"{where}: the spec trains no model; check its datasets, methods, seeds, epsilon, notions")
        return spec

    @classmethod
    def load(cls, spec: str | Path) -> SweepSpec:
        """Read a spec from a TOML file, or a reproduction spec shipped with dpfair by name (:func:`shipped_specs`)."""
        path = Path(spec)
        if path.suffix != ".toml" and not path.exists():
            names = shipped_specs()
            if str(spec) not in names:
                raise ValueError(f"no spec file {str(spec)!r} and no shipped spec of that name; shipped: "
                                 f"{', '.join(names)}")
            text, where = resources.files(SPEC_PACKAGE).joinpath(f"{spec}.toml").read_text(), f"spec {spec!r}"
        else:
            if not path.is_file():
                raise ValueError(f"spec file {str(path)!r} does not exist; pass a TOML file or a shipped spec "
                                 f"name ({', '.join(shipped_specs())})")
            text, where = path.read_text(), str(path)
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{where} is not valid TOML: {exc}") from None
        return cls.from_dict(raw, where, base=path.resolve().parent if path.is_file() else None)

    def points(self) -> list[Point]:
        """Every model of the sweep, in a stable order."""
        from dpfair.algorithms import METHODS

        out = []
        for data, method, seed in itertools.product(self.datasets, self.methods, self.seeds):
            cls = METHODS[method]
            private = "epsilon" in cls().get_params()
            targets = capabilities(cls).notions
            notions = ([n for n in (self.notions or [cls().get_params().get("notion") or targets[0]])
                        if n in targets] if targets else [None])
            grid = self.grids.get(method, {})
            fixed = self.params.get(method, {})
            for notion, eps in itertools.product(notions, self.epsilon if private else [None]):
                for values in itertools.product(*grid.values()):
                    params = {**fixed, **dict(zip(grid, values))}
                    out.append(Point(data, method, notion, eps, self.delta if private else None, seed,
                                     tuple(sorted(params.items())), self.test_size, self.eval_epsilon))
        return out


def shipped_specs() -> list[str]:
    """Names of the reproduction specs shipped in :mod:`dpfair.experiments.specs`."""
    return sorted(p.name[:-5] for p in resources.files(SPEC_PACKAGE).iterdir() if p.name.endswith(".toml"))


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _is_number(value) -> bool:
    """A real number and not a bool (TOML's ``true`` is no ε)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _distinct(values: list, key: str, where: str) -> list:
    seen = []
    for v in values:
        if v in seen and not isinstance(v, bool):
            raise ValueError(f"{where}: {key} lists {v!r} twice; list each value once (the store runs a model once)")
        seen.append(v)
    return values


def _check_notions(notions: list[str], classes: list, methods: list[str], where: str) -> None:
    """Every listed notion is a notion, targeted by a method of the sweep; every fair method targets one listed."""
    from dpfair.fairness.notions import get_notion, notion_names

    for notion in notions:
        try:
            get_notion(notion)
        except ValueError:
            raise ValueError(f"{where}: unknown notion {notion!r} in notions; valid: "
                             f"{', '.join(notion_names())}") from None
        if not any(notion in capabilities(cls).notions for cls in classes):
            targets = "; ".join(f"{m}: {', '.join(capabilities(cls).notions) or 'none'}"
                                for m, cls in zip(methods, classes))
            raise ValueError(f"{where}: no method of the sweep targets notion {notion!r} ({targets}); drop it "
                             "(every model is evaluated on every notion anyway)")
    for m, cls in zip(methods, classes):
        targets = capabilities(cls).notions
        if targets and not set(notions) & set(targets):
            raise ValueError(f"{where}: {m} targets {', '.join(targets)}, none of the notions listed, so it would "
                             f"train nothing; add one of them to notions or drop {m}")


def _str_list(value, key: str, where: str) -> list[str]:
    items = _as_list(value)
    if not items or not all(isinstance(v, str) for v in items):
        raise ValueError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
    return items


def _data_spec(entry, presets, where: str, base: Path) -> list[DataSpec]:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or "name" not in entry:
        raise ValueError(f"{where}: each data set is a name or a table with 'name', got {entry!r}")
    if "data" in entry or "schema" in entry or "test_data" in entry:
        return [_table_spec(entry, where, base)]
    unknown = sorted(set(entry) - _DATASET_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} for data set {entry['name']!r}; valid: "
                         f"{', '.join(sorted(_DATASET_KEYS))}")
    for key in ("name", "sensitive", "preset"):
        if key in entry and not isinstance(entry[key], str):
            raise ValueError(f"{where}: data set {key} must be a string, got {entry[key]!r}")
    if not isinstance(entry.get("options", {}), dict):
        raise ValueError(f"{where}: options of data set {entry['name']!r} must be a table of loader options, got "
                         f"{entry['options']!r}")
    options = tuple(sorted((entry.get("options") or {}).items()))
    chosen = [entry["preset"]] if "preset" in entry else (_as_list(presets) if presets is not None else [None])
    return [DataSpec(entry["name"], entry.get("sensitive"), p, options) for p in chosen]


def _table_spec(entry: dict, where: str, base: Path) -> DataSpec:
    """A user's table: its files found and read, its schema parsed and checked, its version digested."""
    from dpfair.datasets import Schema
    from dpfair.datasets.tables import COMPRESSIONS, FORMATS

    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: a data set name must be a non-empty string, got {name!r}")
    at = f"{where}: data set {name!r}"
    unknown = sorted(set(entry) - _TABLE_KEYS)
    if unknown:
        raise ValueError(f"{at}: unknown key {unknown[0]!r} for a table; valid: {', '.join(sorted(_TABLE_KEYS))}")
    for key in ("data", "schema", "test_data", "sensitive"):
        if key in entry and (not isinstance(entry[key], str) or not entry[key]):
            raise ValueError(f"{at}: {key} must be a non-empty string, got {entry[key]!r}")
    if "data" not in entry:
        raise ValueError(f"{at}: a table needs data = \"FILE\" (a CSV or Parquet file, relative to the spec)")
    if "schema" not in entry:
        raise ValueError(f"{at}: schema is required (a sweep's fits may run under the record unit, where a schema "
                         f"read off the rows is private): write one with `dpfair schema {entry['data']} --label COL "
                         "--sensitive COL --out schema.toml`, review it and add schema = \"schema.toml\"")
    paths = {}
    for key in ("data", "test_data"):
        if key in entry:
            path = (base / Path(entry[key]).expanduser()).resolve()
            suffixes = [s.lower() for s in path.suffixes]
            if suffixes and suffixes[-1] in COMPRESSIONS:
                suffixes.pop()
            if not suffixes or suffixes[-1] not in FORMATS:
                raise ValueError(f"{at}: {key} {entry[key]!r} is not a file dpfair reads; use a file ending in "
                                 ".csv, .tsv (optionally compressed, e.g. .csv.gz), .parquet or .pq")
            if not path.is_file():
                raise ValueError(f"{at}: {key} file {str(path)!r} not found; fix the path (relative to the spec)")
            paths[key] = str(path)
    schema_path = (base / Path(entry["schema"]).expanduser()).resolve()
    try:
        schema = Schema.from_toml(schema_path)
    except ValueError as exc:
        raise ValueError(f"{at}: {str(exc).splitlines()[0]}") from None
    for key in ("label", "sensitive"):
        if getattr(schema, key) is None:
            values = "classes" if key == "label" else "groups"
            raise ValueError(f"{at}: the schema {str(schema_path)!r} declares no {key} column; add {key} = \"...\" "
                             f"and its {values} = [...]")
    if entry.get("sensitive", schema.sensitive) != schema.sensitive:
        raise ValueError(f"{at}: sensitive = {entry['sensitive']!r} but the schema declares sensitive = "
                         f"{schema.sensitive!r}; drop it or make them agree")
    declared = json.dumps(schema.to_dict(), sort_keys=True, separators=(",", ":"))
    contents = _files_sha256(paths["data"], paths.get("test_data"))
    rows = hmac.new(_table_key(), bytes.fromhex(contents), hashlib.sha256).hexdigest()
    table = (("data", rows), ("schema", hashlib.sha256(declared.encode()).hexdigest()))
    return DataSpec(name, schema.sensitive, None, (), paths["data"], paths.get("test_data"), declared, table,
                    contents)


def table_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (read in blocks). A digest of private rows: kept in memory, never published."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tables_sha256(data: DataSpec) -> str | None:
    """What :attr:`DataSpec.sha256` holds for ``data``'s files as they are now (``None`` for a built-in data set):
    a task compares the two before it trains."""
    return None if data.data is None else _files_sha256(data.data, data.test_data)


def _files_sha256(data: str, test_data: str | None) -> str:
    contents = hashlib.sha256()
    for key, path in (("data", data), ("test_data", test_data)):
        contents.update(f"{key}:".encode())
        if path is not None:
            contents.update(table_sha256(path).encode())
    return contents.hexdigest()


def table_key_path() -> Path:
    """Where the secret of the tables' keyed digests lives: ``table-key`` in ``$DPFAIR_CACHE_DIR`` when set and
    not empty, else in ``~/.cache/dpfair``. It is made (32 random bytes, readable by its owner alone) at first
    use; without it the same table gets a new key, so its points train again. Never publish it: with it, a
    table's key is a plain hash of its rows again."""
    from dpfair.utils.cache_folder import cache_dir, default_cache_dir

    return (cache_dir() or default_cache_dir()) / "table-key"


def _table_key() -> bytes:
    path = table_key_path()
    try:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".table-key.")
            try:
                os.write(fd, secrets.token_hex(32).encode())
                os.close(fd)
                try:
                    os.link(tmp, path)  # atomic: a sweep starting at the same time reads the one that won
                except FileExistsError:
                    pass
            finally:
                os.unlink(tmp)
        key = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read or make the secret key of the tables' digests at {path} ({exc}); delete a "
                         "damaged file, or set DPFAIR_CACHE_DIR to a writable folder") from None
    if len(key) < 16:
        raise ValueError(f"the secret key at {path} is too short; delete it (a new one is made; tables' points "
                         "then train again)")
    return key


def _check_params(cls, values: dict, where: str) -> None:
    valid = cls().get_params()
    for key in values:
        if key in ("epsilon", "delta", "random_state", "notion"):
            raise ValueError(f"{where}: {key!r} is set by the sweep ([sweep] epsilon / delta / seeds / notions), "
                             "not per method")
        if key not in valid:
            raise ValueError(f"{where}: {cls.__name__} has no hyper-parameter {key!r}; valid: {', '.join(valid)}")


def _figure_spec(raw, spec: SweepSpec, where: str) -> FigureSpec:
    """The ``[figure]`` table, checked against the spec: its columns are the sweep's (a hyper-parameter of its
    grids or params, a loader option of its data sets), its metrics known, its baseline a method it runs."""
    from dpfair.algorithms import METHODS
    from dpfair.fairness.notions import notion_names

    at = f"{where}: [figure]"
    if not isinstance(raw, dict):
        raise ValueError(f"{at} must be a table of keys (see dpfair.experiments.spec)")
    unknown = sorted(set(raw) - _FIGURE_KEYS)
    if unknown:
        raise ValueError(f"{at}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(_FIGURE_KEYS))}")
    missing = sorted(_FIGURE_REQUIRED - set(raw))
    if missing:
        raise ValueError(f"{at} needs {missing[0]!r} (required: {', '.join(sorted(_FIGURE_REQUIRED))})")
    for key in ("paper", "source", "title", "kind", "x", "series", "tolerance_source", "note", "x_scale", "baseline"):
        if key in raw and not (isinstance(raw[key], str) and raw[key].strip()):
            raise ValueError(f"{at}: {key} must be a non-empty string, got {raw[key]!r}")
    if raw["kind"] not in ("curve", "tradeoff"):
        raise ValueError(f"{at}: kind must be 'curve' (y over x per series) or 'tradeoff' (y against x), got "
                         f"{raw['kind']!r}")
    if raw.get("x_scale", "linear") not in ("linear", "log"):
        raise ValueError(f"{at}: x_scale must be 'linear' or 'log', got {raw['x_scale']!r}")
    tolerance = raw["tolerance"]
    if not (_is_number(tolerance) and 0 < tolerance < 1):
        raise ValueError(f"{at}: tolerance must be a number in (0, 1) (an absolute difference), got {tolerance!r}")
    from dpfair.experiments.papers import load_papers

    papers = [p.key for p in load_papers()]
    if raw["paper"] not in papers:
        raise ValueError(f"{at}: paper {raw['paper']!r} has no published numbers; valid: {', '.join(papers)}")
    notions = notion_names()
    metrics = set(FIGURE_METRICS) | {f"fairness.{n}" for n in notions}
    y = _as_list(raw["y"])
    if not y or not all(isinstance(m, str) and m in metrics for m in y):
        raise ValueError(f"{at}: y must list metrics among {', '.join(FIGURE_METRICS)}, fairness.NOTION; got "
                         f"{raw['y']!r}")
    knobs = ({k for grid in spec.grids.values() for k in grid} | {k for p in spec.params.values() for k in p}
             | {k for d in spec.datasets for k, _ in d.options})
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ValueError(f"{at}: defaults must be a table, column = value, got {defaults!r}")
    columns = set(FIGURE_COLUMNS) | knobs | set(defaults)
    for key in ("rows", "cols"):
        value = _as_list(raw.get(key, []))
        if not all(isinstance(c, str) for c in value):
            raise ValueError(f"{at}: {key} must be a list of column names, got {raw[key]!r}")
    for key, value in [("series", raw["series"]), *[(k, c) for k in ("rows", "cols") for c in _as_list(raw.get(k, []))],
                       *[("defaults", c) for c in defaults], *([("x", raw["x"])] if raw["kind"] == "curve" else [])]:
        if value not in columns or (key == "defaults" and value not in knobs):
            valid = sorted(knobs) if key == "defaults" else sorted(columns)
            raise ValueError(f"{at}: {key} {value!r} is not a column of this sweep's rows; valid: {', '.join(valid)}")
    if raw["kind"] == "tradeoff" and raw["x"] not in metrics:
        raise ValueError(f"{at}: a tradeoff's x is a metric ({', '.join(FIGURE_METRICS)}, fairness.NOTION), got "
                         f"{raw['x']!r}")
    baseline = raw.get("baseline")
    if baseline is not None and (baseline not in spec.methods or capabilities(METHODS[baseline]).private):
        raise ValueError(f"{at}: baseline {baseline!r} must be a non-private method the sweep runs; its methods: "
                         f"{', '.join(spec.methods)}")
    fixed = raw.get("fixed", {})
    valid = {k for m in spec.methods for k in METHODS[m]().get_params()}
    if not isinstance(fixed, dict) or not all(k in valid for k in fixed):
        bad = next((k for k in fixed if k not in valid), fixed) if isinstance(fixed, dict) else fixed
        raise ValueError(f"{at}: fixed must be a table of the sweep's methods' hyper-parameters, got {bad!r}")
    explain = raw.get("explain", [])
    if not isinstance(explain, list):
        raise ValueError(f"{at}: explain must be an array of tables, [[figure.explain]], got {explain!r}")
    for i, entry in enumerate(explain):
        bad = (sorted(set(entry) - _EXPLAIN_KEYS)
               + [k for k in ("method", "why") if not (isinstance(entry.get(k), str) and entry[k].strip())]
               + [k for k in ("dataset", "notion", "metric") if k in entry and not isinstance(entry[k], str)]
               if isinstance(entry, dict) else ["the entry"])
        if not bad and entry.get("metric", "accuracy") not in FIGURE_METRICS:
            bad = ["metric"]
        if not bad and entry["method"] not in spec.methods:
            bad = ["method"]
        if bad:
            raise ValueError(f"{at}: explain entry {i + 1} needs method (one of the sweep's) and why, and may set "
                             f"dataset, notion and metric ({', '.join(FIGURE_METRICS)}); fix {bad[0]!r}")
    companions = _as_list(raw.get("with", []))
    shipped = shipped_specs()
    for name in companions:
        if name not in shipped or name == spec.name:
            raise ValueError(f"{at}: with names {name!r}, not another shipped spec; valid: "
                             f"{', '.join(n for n in shipped if n != spec.name)}")
    return FigureSpec(raw["paper"], raw["source"], raw["title"], raw["kind"], raw["x"], tuple(y), raw["series"],
                      float(tolerance), raw["tolerance_source"], raw["note"], raw.get("x_scale", "linear"),
                      tuple(_as_list(raw.get("rows", []))), tuple(_as_list(raw.get("cols", []))), baseline,
                      tuple(sorted(defaults.items())), tuple(companions), tuple(sorted(fixed.items())),
                      tuple({k: entry.get(k) for k in sorted(_EXPLAIN_KEYS)} for entry in explain))
