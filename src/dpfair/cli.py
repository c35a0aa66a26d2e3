"""The ``dpfair`` command line: list data sets, train a private fair model, certify or audit it, do privacy arithmetic.

``dpfair train`` with no argument trains the best private fair method the
package has on the embedded ``adult`` data and prints test error, the
fairness violations of every notion, per-group accuracy and its inequality
indices, and the (ε, δ) spent; it writes a JSON result (``--out``) and the
fitted model beside it (same name, ``.pt``).

``dpfair tune`` picks a fair model's hyper-parameters privately (:mod:`dpfair.private_search`): one model
out, with the ε of the whole search.

``dpfair certify`` fits a private model and prints Mangold et al.'s certificate: for
every notion, how far its fairness can lie from the non-private optimum's.

``dpfair audit membership`` builds the same estimator, trains it on a random
half of the data set's train part and runs membership inference attacks
against it (:mod:`dpfair.audit.membership`): an empirical evaluation, not a
guarantee, and its output says so. ``dpfair audit`` proves a lower bound on ε by a distinguishing game
over many fits (:mod:`dpfair.audit.games`), ``dpfair audit release`` the same for one noise primitive,
``dpfair audit measurement`` for the private measurement (many releases of a PrivateMetricFrame); all three
exit with status 1 when the bound is above the claim.
Every failure a user can cause prints one line ``dpfair: error: ...`` and
exits with status 2; nothing already on disk is overwritten unless asked.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import gc
import io
import json
import math
import os
import sys
import tempfile
import time
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np

from dpfair import __version__
from dpfair.utils.capabilities import capabilities

_STARTED = time.perf_counter()  # the command's start, near enough: this module loads first

DEFAULT_METHOD = "dp-fermi"
DEFAULT_DATASET = "adult"
DEFAULT_EPSILON = 1.0

#: ``dpfair audit membership``'s attacks and note (kept here so that ``--help`` imports nothing heavy).
ATTACK_NAMES = ("loss", "shadow", "lira", "lira-offline")
MEMBERSHIP_NOTE = ("Membership inference is an empirical evaluation of one attack, not a privacy guarantee; a low "
                   "AUC does not prove privacy, and the ε printed by training is the guarantee.")


def _parse_value(text: str):
    """``--param`` values: JSON when they parse as JSON (numbers, lists, true/null), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _key_values(items, flag: str) -> dict:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key.replace("-", "_")] = _parse_value(value)
    return out


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None  # JSON has no infinity: ε = ∞ (no privacy) is null
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return repr(value)


#: errno values that mean the disk (or the quota, or the file-size limit) took no more bytes.
_DISK_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is full",
              errno.EFBIG: "the file is larger than the system allows"}


def _write_atomic(out: Path, files, *, overwrite: bool = False, stamped: bool = False,
                  spent: str = "") -> tuple[Path, ...]:
    """Write a command's results as one unit: all of them or none, never replacing a file unless ``overwrite``.

    ``files(out)`` gives ``[(path, bytes), ...]`` for the result ``out`` (a function of the name, so that a
    result can name its model file). Every file is written in full to a temporary file in the same folder
    first; a failure there (a full disk) removes the temporaries and leaves the folder as it was. Then,
    under a lock on the folder, each temporary is hard-linked to its name, which fails if the name exists
    (the existence check at write time: a file another command wrote meanwhile is never replaced), or with
    ``overwrite`` renamed over it (the old file kept aside until the unit is in). A failure part-way removes
    what this unit committed and puts back what it replaced. ``stamped`` (a default name): a name taken
    is not an error, the unit goes to the next free one (``NAME-2``, ``NAME-3``, ...). Returns the paths
    written. Errors are one line naming the file, the reason and what was kept (``spent``: what the run
    cost all the same, e.g. its ε).
    """
    kept = "nothing was written" + (f" ({spent})" if spent else "")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(f"cannot write in {out.parent}: {_why(exc)}; {kept}; choose another --out") from None
    temps: list[str] = []
    try:
        for attempt in range(1, 1000):
            target = out if attempt == 1 else out.with_name(f"{out.stem}-{attempt}{out.suffix}")
            pairs = files(target)
            staged = [(path, _stage(path, data, temps, kept)) for path, data in pairs]
            try:
                with _folder_lock(out.parent):
                    _commit(staged, overwrite and not stamped)
            except FileExistsError as exc:  # os.link names the target second, os.open first
                if stamped:
                    continue
                raise ValueError(f"{exc.filename2 or exc.filename} already exists (written by another command while "
                                 f"this one ran); {kept}; pass --overwrite or choose another --out") from None
            except OSError as exc:
                raise OSError(f"cannot write {exc.filename2 or exc.filename or target}: {_why(exc)}; {kept}; "
                              "choose another --out") from None
            return tuple(path for path, _ in pairs)
        raise ValueError(f"{out.parent} holds 999 results named {out.stem}-N{out.suffix} already; {kept}; "
                         "choose another --out")
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _why(exc: OSError) -> str:
    return _DISK_FULL.get(exc.errno) or exc.strerror or str(exc)


def _stage(path: Path, data: bytes, temps: list, kept: str) -> str:
    """``data`` written in full to a new temporary file beside ``path``; its name is added to ``temps``."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        temps.append(tmp)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it (mkstemp's file is private to its owner)
    except OSError as exc:
        fix = "free some space or choose another --out" if exc.errno in _DISK_FULL else "choose another --out"
        raise OSError(f"cannot write {path}: {_why(exc)}; {kept}; {fix}") from None
    return tmp


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive ``flock`` on ``folder`` while a unit is committed, so that two commands' units never
    interleave (best effort: where the system has no such lock, the per-file checks still hold)."""
    fd = None
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _commit(staged: list[tuple[Path, str]], overwrite: bool) -> None:
    """Give each temporary file its name (see :func:`_write_atomic`); all or none."""
    done: list[tuple[Path, str | None]] = []  # (path, the replaced file kept aside, or None)
    try:
        for path, tmp in staged:
            if overwrite:
                old = None
                if path.exists():
                    old = f"{path.parent}/.{path.name}.{os.getpid()}.{os.urandom(6).hex()}.old"
                    try:
                        os.link(path, old)
                    except OSError:
                        old = None
                os.replace(tmp, path)
                done.append((path, old))
                continue
            try:
                os.link(tmp, path)  # fails if the name exists
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system: claim the name exclusively, then fill it
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                done.append((path, None))
                os.replace(tmp, path)
                continue
            done.append((path, None))
    except BaseException:
        for path, old in reversed(done):
            with contextlib.suppress(OSError):
                if old is None:
                    os.unlink(path)
                else:
                    os.replace(old, path)
        raise
    for _, old in done:
        if old is not None:
            with contextlib.suppress(OSError):
                os.unlink(old)


def _write_result(args, out: Path, result: dict, *, model: bytes | None = None, spent: str = "") -> tuple[Path, ...]:
    """The JSON ``result`` at ``out`` and, given ``model`` (its bytes), the model beside it (``.pt``, named by
    the result's ``model_file``), as one unit (:func:`_write_atomic`); a default ``--out`` takes the next free
    name. Returns ``(out, model_path)`` or ``(out,)`` as written."""
    def files(target: Path) -> list[tuple[Path, bytes]]:
        if model is None:
            return [(target, (json.dumps(_jsonable(result), indent=2) + "\n").encode())]
        model_path = target.with_suffix(".pt")
        text = json.dumps(_jsonable({**result, "model_file": model_path.name}), indent=2) + "\n"
        return [(model_path, model), (target, text.encode())]

    written = _write_atomic(out, files, overwrite=args.overwrite, stamped=args.out is None, spent=spent)
    return written if model is None else (written[1], written[0])


def _model_bytes(est, provenance: dict) -> bytes:
    """The model file's bytes, built in memory so that writing them fails as an ``OSError`` (a full disk) rather
    than inside torch's zip writer."""
    buffer = io.BytesIO()
    est.save(buffer, provenance=provenance)
    return buffer.getvalue()


def _spent(est, what: str = "fit") -> str:
    """What a failed write leaves spent: the ε of the fit (or search) that built ``est`` (empty when ∞)."""
    eps = est.privacy_spent_[0]
    return f"the {what} spent ε = {eps:.6g} all the same" if math.isfinite(eps) else ""


def _result_path(args, kind: str = "", companions: tuple[str, ...] = (), name: str | None = None) -> tuple[Path, ...]:
    """``(out, *companions)``: the JSON result path (``--out``, or a stamped name under ``dpfair-runs/``:
    ``name`` or ``DATASET-METHOD[-kind]-seedSEED``, then the time) and the files written beside it (its name with
    each suffix in ``companions``); none may exist unless ``--overwrite`` (checked again when written:
    :func:`_write_result`). A stamped name is not checked here: a taken one is never replaced, the result goes to
    the next free name when written."""
    if args.out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        tag = f"-{kind}" if kind else ""
        name = name or f"{args.dataset}-{args.method}{tag}-seed{args.seed}"
        out = Path("dpfair-runs") / f"{name}-{stamp}.json"
    else:
        out = Path(args.out)
    return _writable(out, ".json", args.overwrite or args.out is None, companions)


def _writable(out: Path, suffix: str, overwrite: bool, companions: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """``(out, *companions)`` checked before any work: ``out`` ends in ``suffix``, none of the files exists
    unless ``overwrite``, and ``out``'s folder takes a new file (a result that cannot be written must not cost
    a whole fit). The check that counts is at write time (:func:`_write_atomic`): this one only fails early."""
    if out.suffix != suffix:
        raise ValueError(f"--out must name a {suffix} file, got {str(out)!r}")
    paths = (out, *(out.with_suffix(s) for s in companions))
    for p in paths:
        if p.exists() and not overwrite:
            raise ValueError(f"{p} already exists; pass --overwrite or choose another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.parent):
            pass
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot write in {out.parent} ({exc.strerror or exc}); choose another "
                         "--out") from None
    return paths


def _output_paths(args) -> tuple[Path, Path]:
    """``dpfair train``'s result and model paths."""
    return _result_path(args, companions=(".pt",))


def _check_run_args(args) -> None:
    """Checks of the flags ``train`` and ``audit`` share, before anything is loaded or written."""
    if args.epsilon is not None and not args.epsilon > 0:
        raise ValueError(f"--epsilon must be > 0, got {args.epsilon}; smaller epsilon means more privacy")
    if args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")


def _resolve_data_args(args) -> None:
    """Fill ``args.dataset`` of a command that reads data: ``--data FILE`` (a user's table, named after the file)
    or ``--dataset NAME`` (a built-in; :data:`DEFAULT_DATASET` when neither is given), never both."""
    if not hasattr(args, "data"):
        return
    if args.data is None:
        for flag in ("label", "schema", "test_data", "groups"):
            if getattr(args, flag, None) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} goes with --data FILE (your own table); add --data or "
                                 f"drop --{flag.replace('_', '-')}")
        if getattr(args, "infer_schema", False):
            raise ValueError("--infer-schema goes with --data FILE (your own table); add --data or drop it")
        if args.dataset is None and getattr(args, "command", None) != "predict":
            args.dataset = DEFAULT_DATASET
        return
    from dpfair.datasets.tables import table_name

    if args.dataset is not None:
        raise ValueError(f"give --data FILE (your own table) or --dataset NAME (a built-in), not both; got --dataset "
                         f"{args.dataset} and --data {args.data}")
    if args.option:
        raise ValueError("--option sets a built-in data set's loader options; with --data FILE, declare the table "
                         "in --schema instead")
    args.dataset = table_name(args.data)


def _privacy_unit_of(args) -> str:
    """The privacy unit the command's estimator will run under (``--param privacy_unit=...`` or its default)."""
    from dpfair.algorithms import METHODS

    given = getattr(args, "privacy_unit", None) or _key_values(args.param, "--param").get("privacy_unit")
    if given is not None:
        return str(given)
    cls = METHODS.get(getattr(args, "method", None))
    # a hyper-parameter, or the class's one unit (DP-SGD: record); a method that is not private reads as sensitive
    return str(getattr(cls(), "privacy_unit", None) or "sensitive") if cls is not None else "sensitive"


def _load_data(args):
    """``(data, options)``: the data set of ``--dataset``/``--sensitive``/``--option``, split by ``--seed``; or the
    user's table of ``--data`` (:func:`dpfair.datasets.load_table`: ``--label``, ``--sensitive``, ``--schema``,
    ``--test-data``), split by ``--seed`` too."""
    from dpfair.datasets import load_dataset, load_table

    if getattr(args, "data", None) is not None:
        unit = _privacy_unit_of(args)
        if args.schema is None and unit == "record" and not args.infer_schema:
            raise ValueError(f"under privacy_unit=record the schema of {args.data} must be public, not read off its "
                             f"private rows: write one with `dpfair schema {args.data} --label COL --sensitive COL "
                             "--out schema.toml`, review it and pass --schema schema.toml (or --infer-schema to "
                             "accept the leak)")
        if args.schema is not None and args.groups is not None:
            raise ValueError("--groups declares the group list of a schema read off the rows; with --schema, declare "
                             "the groups there and drop --groups")
        data = load_table(args.data, label=args.label, sensitive=_sensitive_list(args.sensitive), schema=args.schema,
                          test_data=args.test_data, random_state=args.seed, privacy_unit=unit,
                          infer_under_record=args.infer_schema, groups=_group_lists(args.groups))
        _naming_groups(data.group_names)
        return data, {}
    options = _key_values(args.option, "--option")
    data = load_dataset(args.dataset, sensitive=args.sensitive, random_state=args.seed,
                        data_home=args.data_home, **options)
    _naming_groups(data.group_names)
    return data, options


def _unit_name(est) -> str | None:
    """The privacy unit an estimator ran under (``"sensitive"``, ``"record"``), ``None`` for a non-private one."""
    unit = getattr(est, "privacy_unit_", None)
    return None if unit is None else getattr(unit, "value", str(unit))


def _protection_of(unit: str | None, attribute: str | None, eps: float, rest: str = "features and label") -> str:
    """Whom an ε under ``unit`` protects, in words (:func:`dpfair.privacy.units.protection`; ``rest``: what else
    a person's row holds, a measurement's "label and prediction")."""
    from dpfair.privacy.units import protection

    return protection(unit, attribute, epsilon=eps, rest=rest)


def _protects(est, attribute: str | None) -> str:
    """Whom ``est``'s ε protects, in words."""
    return _protection_of(_unit_name(est), attribute, est.privacy_spent_[0])


def _privacy_keys(est, attribute: str | None, not_covered: str = "") -> dict:
    """The result JSON's ``privacy_unit`` and ``protects`` (and ``not_covered``: what the ε does not cover)."""
    return {"privacy_unit": _unit_name(est), "protects": _protects(est, attribute),
            **({"not_covered": not_covered} if not_covered else {})}


def _not_covered(args) -> str:
    """What a command's ε does not cover of its inputs: the schema (record unit) or group list (sensitive unit) read
    off the rows of ``--data`` when no ``--schema`` declared it (``""`` when everything was declared)."""
    if getattr(args, "data", None) is None or args.schema is not None:
        return ""
    if _privacy_unit_of(args) == "record":
        return (f"the schema read off the rows of {args.data} (ranges, categories, classes, groups), which the model "
                "file carries: declare one with --schema")
    if args.groups is not None:
        return ""
    return (f"the group list read off the rows of {args.data} (the model file names every group, one person's "
            "included): declare it with --groups A,B,... or --schema")


def _privacy_rows(est, attribute: str | None, not_covered: str = "") -> list[tuple[str, str]]:
    """The printed ε and δ of ``est``'s fit, the ε naming whom it protects."""
    return _privacy_rows_of(*est.privacy_spent_, est.privacy_guarantee_, _protects(est, attribute), not_covered)


def _estimator_spec(args) -> tuple[type, dict]:
    """``(class, hyper-parameters)`` of ``--method`` and the flags that set them, checked before any data is loaded."""
    from dpfair.algorithms import METHODS

    if args.method not in METHODS:
        raise ValueError(f"unknown method {args.method!r}; choose one of {', '.join(METHODS)}")
    cls = METHODS[args.method]
    valid = cls().get_params()
    declared = capabilities(cls)
    params = dict(random_state=args.seed)
    if "verbose" in valid:
        params["verbose"] = not args.quiet
    if "epsilon" in valid:
        params["epsilon"] = DEFAULT_EPSILON if args.epsilon is None else args.epsilon
        params["delta"] = args.delta
    elif args.epsilon is not None and not math.isinf(args.epsilon):
        raise ValueError(f"method {args.method!r} is not private; drop --epsilon or choose a private method")
    if args.notion is not None:
        if not declared.notions:
            raise ValueError(f"method {args.method!r} targets no fairness notion; drop --notion or choose a fair "
                             "method (`dpfair methods` lists each method's notions)")
        if args.notion not in declared.notions:
            raise ValueError(f"method {args.method!r} targets {', '.join(declared.notions)}; --notion {args.notion!r} "
                             "is not one of them")
        if "notion" in valid:
            params["notion"] = args.notion
    for flag, key, value in (("--model", "model", args.model), ("--lam", "lam", args.lam)):
        if value is None:
            continue
        if key not in valid:
            strength = declared.fairness_strength
            hint = f" (its fairness strength is --param {strength}=...)" if key == "lam" and strength else ""
            raise ValueError(f"method {args.method!r} takes no {flag}{hint}; drop it or choose another method")
        params[key] = value
    params.update(_key_values(args.param, "--param"))
    unit = getattr(args, "privacy_unit", None)
    if unit is not None and "privacy_unit" not in valid:  # a method of one unit, or none
        fixed = getattr(cls, "privacy_unit", None)
        if fixed is None:
            raise ValueError(f"method {args.method!r} is not private (it protects no one); drop --privacy-unit or "
                             "choose a private method")
        if str(fixed) != unit:
            raise ValueError(f"method {args.method!r} protects privacy_unit={fixed!s} only; drop --privacy-unit "
                             f"{unit} or choose another method (`dpfair methods`)")
    elif unit is not None:
        if "privacy_unit" in params and str(params["privacy_unit"]) != unit:
            raise ValueError(f"--privacy-unit {unit} but --param privacy_unit={params['privacy_unit']}; give one")
        params["privacy_unit"] = unit
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"method {args.method!r} has no hyper-parameter {unknown[0]!r}; valid: {', '.join(valid)} "
                         f"(`dpfair methods {args.method}` describes them)")
    cls(**params).check_hyperparameters()  # the estimator's own checks of its hyper-parameters, before any data
    return cls, params


def _build_estimator(spec: tuple[type, dict], data):
    """The estimator of ``spec`` given the data set's declared group and label lists (public, never read off
    the private arrays); ``--param groups=...`` / ``classes=...`` override them."""
    from dpfair.experiments.runner import declared_estimator

    return declared_estimator(*spec, data)


def _run_record(args, est, data, options, command: str) -> dict:
    """The keys every result JSON starts with: what ran, on which data, with which public settings (for a user's
    table, its file and public schema too: what ``dpfair predict`` needs to score new rows)."""
    record = {"dpfair_version": __version__, "command": command, "method": args.method,
              "estimator": type(est).__name__, "hyperparameters": est.get_params(), "dataset": data.name,
              "sensitive": data.sensitive, "dataset_options": options, "groups": list(data.group_names),
              "seed": args.seed}
    if getattr(args, "data", None) is not None:
        record |= {"data_file": str(args.data), "schema": data.schema.to_dict()}
    return record


def _provenance(record: dict, n_train: int) -> dict:
    """What a model file records of its run (:data:`PROVENANCE_KEYS`, and a user's table's file and schema)."""
    return _jsonable({k: record[k] for k in PROVENANCE_KEYS} | {k: record[k] for k in ("data_file", "schema")
                                                                if k in record} | {"n_train": n_train})


def _print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


INDEX_LABELS = {"atkinson": "Atkinson index (aversion 1)", "gini": "Gini coefficient",
                "mean_log_deviation": "mean log deviation", "theil": "Theil index (T)"}

#: What a model file written by ``dpfair train`` records of its training (all public; ``dpfair info`` shows it,
#: ``dpfair predict`` reloads the same data set and split from it).
PROVENANCE_KEYS = ("dpfair_version", "command", "method", "dataset", "sensitive", "dataset_options", "groups",
                   "seed")


def _target_text(est) -> str:
    """``"; target: equalized odds, tolerance = 0"`` for a fair method, ``""`` otherwise."""
    target = est.fairness_target()
    if not target:
        return ""
    strength = [f"{'λ' if k == 'lam' else k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}"
                for k, v in target.items() if k != "notion"]
    return "; target: " + ", ".join([target["notion"].replace("_", " "), *strength])


#: The label of the figures by group of an evaluation without ``--eval-epsilon``.
DIAGNOSTIC_LABEL = "non-private diagnostics of the test people (exact; not covered by ε; --eval-epsilon releases them)"


def _evaluation_rows(evaluation: dict) -> list[tuple[str, str]]:
    """The printed lines of :func:`dpfair.experiments.evaluate`'s result: the figures, then what they are (released
    privately: each with its interval, a flagged group marked; else labelled non-private diagnostics)."""
    ev = evaluation.get("evaluation", {})
    private = ev.get("private", False)
    intervals = ev.get("intervals", {}) if private else {}
    flagged = set(ev.get("flags", {}).get("accuracy", [])) if private else set()

    from dpfair.experiments.evaluate import SMALL_TEST_GROUP

    sizes = {} if private else ev.get("group_sizes", {})

    def figure(value, interval=None, flag=False, size=None) -> str:
        text = f"{value:.4f}"
        if interval is not None:
            text += f"  [{interval[0]:.4f}, {interval[1]:.4f}]"
        if size is not None and size < SMALL_TEST_GROUP:
            text += f"  ! {size} test people: too few for a reliable figure"
        return text + ("  (too few people: not confident)" if flag else "")

    rows = [("test error", figure(evaluation["error"], intervals.get("error")))]
    notions = set(ev.get("flags", {}).get("notions", [])) if private else set()
    rows += [(f"{k.replace('_', ' ')} violation", figure(v, intervals.get("fairness", {}).get(k), k in notions))
             for k, v in evaluation["fairness"].items()]
    rows += [(f"accuracy, {g}", figure(a, intervals.get("per_group_accuracy", {}).get(g), g in flagged, sizes.get(g)))
             for g, a in evaluation["per_group_accuracy"].items()]
    rows += [(label, f"{evaluation['accuracy_inequality'][k]:.4f}") for k, label in INDEX_LABELS.items()]
    if private:
        rows += [("figures by group", "released once at the evaluation ε below (PrivateMetricFrame); [95 % interval]")]
    else:
        rows += [("figures by group", DIAGNOSTIC_LABEL)]
    return rows


def _evaluation_privacy_rows(evaluation: dict, attribute: str | None) -> list[tuple[str, str]]:
    """The evaluation's own privacy line (``--eval-epsilon``), printed apart from the fit's ε: the test people are
    not the training people, so each person is covered by one of the two (their ε is the larger, not the sum)."""
    ev = evaluation.get("evaluation", {})
    if not ev.get("private", False):
        return []
    protects = _protection_of(ev["unit"], attribute, ev["epsilon"], rest="label and prediction")
    return [("evaluation", f"ε = {ev['epsilon']:.6g}, δ = {ev['delta']:.3g} for {protects} (the test people, "
                           "disjoint from the training people: each person is covered by one ε, not their sum)")]


def _evaluation_record(evaluation: dict) -> dict:
    """The result JSON's ``evaluation`` key: what the test figures are (and, released privately, their ε, δ,
    unit, ledger, intervals and flags)."""
    ev = dict(evaluation.get("evaluation", {"private": False}))
    if ev.get("private"):
        ev["composition"] = ("the evaluation's ledger covers the test people, the fit's ledger the training people: "
                             "disjoint parts, so each person's ε is that of the one ledger covering them (not the sum)")
    return ev


def _check_eval_args(args) -> None:
    """``--eval-epsilon`` / ``--eval-delta`` checked before any data is loaded."""
    from dpfair.utils.validation import check_epsilon

    if getattr(args, "eval_epsilon", None) is not None:
        check_epsilon(args.eval_epsilon, "--eval-epsilon", budget=True)
    if getattr(args, "eval_delta", None) is not None:
        if getattr(args, "eval_epsilon", None) is None:
            raise ValueError("--eval-delta sets the private evaluation's δ: give --eval-epsilon too, or drop it")
        if not 0.0 < args.eval_delta < 1.0:
            raise ValueError(f"--eval-delta must lie strictly between 0 and 1, got {args.eval_delta:g}; 1/n² of the "
                             "test part is the default")


def _evaluate(est, X, y, s, group_names, args) -> dict:
    """:func:`dpfair.experiments.evaluate` of the command's test rows: released privately at ``--eval-epsilon``
    under the model's privacy unit (the declared groups: ``group_names``), else exact and labelled."""
    from dpfair.experiments import evaluate

    eps = getattr(args, "eval_epsilon", None)
    if eps is None:
        return evaluate(est, X, y, s, group_names)
    unit = getattr(est, "privacy_unit_", None)
    return evaluate(est, X, y, s, group_names, epsilon=eps, delta=getattr(args, "eval_delta", None),
                    privacy_unit="sensitive" if unit is None else unit.value)


def cmd_train(args) -> int:
    from dpfair.privacy import reproducible_noise

    _check_run_args(args)
    _check_eval_args(args)
    spec = _estimator_spec(args)
    out, model_path = _output_paths(args)
    data, options = _load_data(args)
    est = _build_estimator(spec, data)
    noise = contextlib.nullcontext() if args.reproducible_noise is None else reproducible_noise(args.reproducible_noise)
    t0 = time.perf_counter()
    with noise:
        est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    seconds = time.perf_counter() - t0
    evaluation = _evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, args)
    eps, delta = est.privacy_spent_
    record = _run_record(args, est, data, options, "train")
    result = {
        **record,
        "n_train": int(len(data.y_train)),
        "n_test": evaluation["n"],
        "target": est.fairness_target(),
        "test_error": evaluation["error"],
        "fairness": evaluation["fairness"],
        "per_group_accuracy": evaluation["per_group_accuracy"],
        "accuracy_inequality": evaluation["accuracy_inequality"],
        "epsilon": eps,
        "delta": delta,
        **_privacy_keys(est, data.sensitive, _not_covered(args)),
        "privacy_guarantee": est.privacy_guarantee_,
        "noise_multiplier": getattr(est, "noise_multiplier_", None),
        "privacy_ledger": est.privacy_ledger_.to_records(),
        "evaluation": _evaluation_record(evaluation),
        "fit_seconds": seconds,
        "model_file": model_path.name,
    }
    provenance = _provenance(record, result["n_train"])
    out, model_path = _write_result(args, out, result, model=_model_bytes(est, provenance), spent=_spent(est))

    print(f"{args.method} on {data.name} (sensitive: {data.sensitive}, groups: {', '.join(data.group_names)}"
          f"{_target_text(est)})")
    rows = (_evaluation_rows(evaluation) + _privacy_rows(est, data.sensitive, _not_covered(args))
            + _evaluation_privacy_rows(evaluation, data.sensitive))
    rows += [("fit time", f"{seconds:.1f} s (the command so far: {time.perf_counter() - _STARTED:.1f} s with loading, "
                          "evaluation and writing)"), ("result", str(out)), ("model", str(model_path))]
    _print_table(rows)
    return 0


#: ``dpfair tune``'s candidates when ``--grid`` is not given, by method.
DEFAULT_GRIDS = {"dp-fermi": {"lam": [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]}}


def _grid(args) -> dict:
    """``--grid KEY=V1,V2,...`` (repeatable) as a dict of value lists, or the method's default grid."""
    if not args.grid:
        if args.method not in DEFAULT_GRIDS:
            from dpfair.algorithms import METHODS

            strength = capabilities(METHODS[args.method]).fairness_strength if args.method in METHODS else None
            hint = f", e.g. --grid {strength}=..." if strength else ""
            raise ValueError(f"method {args.method!r} has no default grid; give the candidates with --grid "
                             f"KEY=V1,V2,...{hint}")
        return DEFAULT_GRIDS[args.method]
    grid = {}
    for item in args.grid:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"--grid takes KEY=V1,V2,..., got {item!r}")
        grid[key.replace("-", "_")] = [_parse_value(v) for v in values.split(",")]
    return grid


def _validation_size_arg(text: str):
    """``--validation-size``: ``auto`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a share in [0, 1), got {text!r}") from None


def cmd_tune(args) -> int:
    from dpfair.private_search import PrivateSearch

    _check_run_args(args)
    _check_eval_args(args)
    if args.lam is not None:
        raise ValueError("--lam fixes λ, which the search tunes: drop it (give the candidates with --grid lam=...)")
    if not args.max_error_increase >= 0:
        raise ValueError(f"--max-error-increase must be >= 0, got {args.max_error_increase}")
    spec = _estimator_spec(args)
    if not capabilities(spec[0]).private:
        raise ValueError(f"method {args.method!r} is not private: every run of a search would spend ε = ∞; choose a "
                         "private method (`dpfair methods`)")
    grid = _grid(args)
    settings = dict(notion=args.notion, max_error_increase=args.max_error_increase,
                    reference_error=args.reference_error, repetitions=_parse_value(args.repetitions),
                    mean_runs=args.mean_runs, strategy=args.strategy.replace("-", "_"),
                    validation_size=args.validation_size, random_state=args.seed)
    # every candidate and setting checked by the search and the estimator themselves, before any data is loaded
    PrivateSearch(spec[0](**spec[1]), grid, epsilon=spec[1]["epsilon"], delta=spec[1]["delta"],
                  **settings).check_hyperparameters()
    out, model_path = _result_path(args, "tune", (".pt",))
    data, options = _load_data(args)
    est = _build_estimator(spec, data)
    search = PrivateSearch(est, grid, epsilon=est.epsilon, delta=est.delta, **settings)
    # no duration is published: a search's time grows with its secret number of runs (the guide's command-line page, "dpfair tune")
    search.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    best = search.best_estimator_
    evaluation = _evaluate(best, data.X_test, data.y_test, data.s_test, data.group_names, args)
    eps, delta = best.privacy_spent_
    record = _run_record(args, best, data, options, "tune")
    result = {
        **record,
        "n_train": int(len(data.y_train)),
        "n_test": evaluation["n"],
        "grid": grid,
        "chosen": search.best_params_,
        "strategy": best.selection_["strategy"],
        "released_scores": ([] if search.released_score_ is None
                            else [{"params": search.best_params_, "score": search.released_score_}]),
        "test_error": evaluation["error"],
        "fairness": evaluation["fairness"],
        "per_group_accuracy": evaluation["per_group_accuracy"],
        "accuracy_inequality": evaluation["accuracy_inequality"],
        "epsilon": eps,
        "delta": delta,
        **_privacy_keys(best, data.sensitive, _not_covered(args)),
        "per_model_epsilon": best.selection_["per_model_epsilon"],
        "privacy_guarantee": best.privacy_guarantee_,
        "privacy_ledger": best.privacy_ledger_.to_records(),
        "evaluation": _evaluation_record(evaluation),
        "selection": best.selection_,
        "model_file": model_path.name,
    }
    provenance = _provenance(record, result["n_train"])
    out, model_path = _write_result(args, out, result, model=_model_bytes(best, provenance),
                                    spent=_spent(best, "search"))

    selection = best.selection_
    print(f"{args.method} on {data.name} (sensitive: {data.sensitive}, groups: {', '.join(data.group_names)}), "
          f"tuned privately over {', '.join(grid)}")
    chosen = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                       for k, v in search.best_params_.items())
    rows = [("chosen", chosen)]
    if search.released_score_ is None:  # the constrained strategy: λ followed the public error, no score released
        rows += [("strategy", "constrained: one fit, λ by the public training error (from "
                              f"{selection['lam_start']:g})")]
    else:
        rows += [("released score", f"{search.released_score_:.4f}")]
    rows += [("error threshold", (f"{selection['score']['threshold']:.4f} (reference "
                                  f"{selection['score']['reference_error']:.4f} + {args.max_error_increase:g})"))]
    rows += _evaluation_rows(evaluation) + _privacy_rows(best, data.sensitive, _not_covered(args))
    rows += [(f"  {e['label'][:60]}", f"×{e['count']}") for e in best.privacy_ledger_.to_records()]
    rows += _evaluation_privacy_rows(evaluation, data.sensitive)
    rows += [("per-model ε", _epsilon_text(selection["per_model_epsilon"], _protects(best, data.sensitive))
              + " (each run's; the search's total above)"), ("result", str(out)),
             ("model", str(model_path))]
    _print_table(rows)
    return 0


def cmd_audit_membership(args) -> int:
    from dpfair.audit import membership_inference

    _check_run_args(args)
    attacks = [a.strip() for a in args.attack.split(",") if a.strip()]
    unknown = [a for a in attacks if a not in ATTACK_NAMES]
    if unknown or not attacks:
        raise ValueError(f"--attack: unknown attack {unknown[0]!r}; choose from {', '.join(ATTACK_NAMES)}" if unknown
                         else f"--attack is empty; choose from {', '.join(ATTACK_NAMES)}")
    if args.shadow < 2 and set(attacks) - {"loss"}:
        raise ValueError(f"--shadow must be >= 2 for the shadow attack and LiRA (16 or more is better), got "
                         f"{args.shadow}; or use --attack loss")
    # the estimators' own progress bars stay off: one bar over the models trained instead
    spec = _estimator_spec(argparse.Namespace(**{**vars(args), "quiet": True}))
    (out,) = _result_path(args, "membership")
    data, options = _load_data(args)
    est = _build_estimator(spec, data)
    t0 = time.perf_counter()
    report = membership_inference(est, data.X_train, data.y_train, data.s_train, attacks=attacks,
                                  n_shadow=args.shadow, random_state=args.seed, group_names=data.group_names,
                                  verbose=not args.quiet)
    seconds = time.perf_counter() - t0
    audit = report.to_dict()
    eps, delta = report.target_privacy_spent
    protects = _protection_of(report.target_privacy_unit, data.sensitive, eps)
    result = {
        **_run_record(args, est, data, options, "audit membership"),
        "note": report.note,
        "pool": "the data set's train part; the target trains on a random half of it (the members)",
        "n_pool": audit["n_pool"],
        "epsilon": eps,
        "delta": delta,
        "privacy_spent": audit["target_privacy_spent"],
        "privacy_unit": report.target_privacy_unit,
        "protects": protects,
        "n_shadow": audit["n_shadow"],
        "confidence": audit["confidence"],
        "confidence_intervals": audit["confidence_intervals"],
        "attacks": audit["attacks"],
        "seconds": seconds,
    }
    (out,) = _write_result(args, out, result)

    print(f"membership inference against {args.method} on {data.name} (pool: {report.n_pool} training rows, "
          f"half of them members; {report.n_shadow} shadow models)")
    print(report.to_text())
    rows = [("target " + k, v) for k, v in _privacy_rows_of(
        eps, delta, report.target_privacy_guarantee, protects, _not_covered(args))]
    rows += [("time", f"{seconds:.1f} s"), ("result", str(out))]
    _print_table(rows)
    return 0


CERTIFICATE_NOTE = ("empirical gaps compare further private draws with the NON-PRIVATE model: a research diagnostic "
                    "that the printed ε does not cover (the certificate alone needs only the released model)")


def cmd_certify(args) -> int:
    from dpfair.bounds import CERTIFIED_NOTIONS, certify, empirical_gaps

    _check_run_args(args)
    if not 0.0 < args.probability < 1.0:
        raise ValueError(f"--probability must be in (0, 1) (the certificate holds with this probability), "
                         f"got {args.probability}")
    if args.draws < 0:
        raise ValueError(f"--draws must be >= 0 (0 skips the empirical comparison), got {args.draws}")
    if args.epsilon is not None and math.isinf(args.epsilon):
        raise ValueError("a certificate bounds what privacy costs fairness; give a finite --epsilon")
    spec = None if args.load is not None else _estimator_spec(args)
    (out,) = _result_path(args, "certificate")
    data, options = _load_data(args)
    t0 = time.perf_counter()
    if args.load is not None:
        from dpfair.algorithms import load_estimator

        est = load_estimator(args.load)
        args.method = _method_name(est)
        _check_model_fits(est, args.load, data)
    else:
        est = _build_estimator(spec, data)
    if "epsilon" not in est.get_params():
        raise ValueError(f"method {args.method!r} is not private; certify a private method (output-perturbation, "
                         "dp-sgd)")
    if args.load is None:
        est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    if args.distance is not None and not 0 < args.distance < math.inf:
        raise ValueError(f"--distance must be a positive number, got {args.distance:g}")
    cert = certify(est, data.X_test, data.y_test, data.s_test, probability=args.probability,
                   feature_norm_bound=args.norm_bound, distance=args.distance)
    empirical = {}
    if args.draws:
        empirical = empirical_gaps(est, data.X_train, data.y_train, data.s_train, data.X_test, data.y_test,
                                   data.s_test, n_draws=args.draws, notions=CERTIFIED_NOTIONS,
                                   verbose=not args.quiet)
    seconds = time.perf_counter() - t0
    eps, delta = est.privacy_spent_
    summary = cert.to_dict()
    result = {
        **_run_record(args, est, data, options, "certify"),
        "n_train": int(len(data.y_train)),
        "n_test": int(len(data.y_test)),
        "epsilon": eps,
        "delta": delta,
        **_privacy_keys(est, data.sensitive, _not_covered(args) if args.load is None else ""),
        "privacy_ledger": est.privacy_ledger_.to_records(),
        **summary,
        "draws": args.draws,
        "model_file": args.load,
        "seconds": seconds,
    }
    if empirical:
        result["empirical_note"] = CERTIFICATE_NOTE
        for notion, gaps in empirical.items():
            result[f"empirical.{notion}"] = float(np.max(gaps))
            result[f"empirical_within_bound.{notion}"] = float(np.mean(gaps <= summary[f"bound.{notion}"]))
    (out,) = _write_result(args, out, result, spent=_spent(est) if args.load is None else "")

    print(f"fairness certificate for {args.method} on {data.name} (sensitive: {data.sensitive}; "
          f"{len(data.y_test):,} test rows; probability {args.probability:g}; ‖h_priv − h*‖ ≤ {cert.distance:.3g})")
    header = ("notion", "|F| of h_priv", "certified", "Chernoff", "Markov") + (
        (f"max gap, {args.draws} draws",) if empirical else ())
    table = [header]
    for notion in CERTIFIED_NOTIONS:
        row = (notion.replace("_", " "), f"{summary[f'fairness.{notion}']:.4f}", f"{summary[f'bound.{notion}']:.4f}",
               f"{summary[f'chernoff.{notion}']:.4f}", f"{summary[f'markov.{notion}']:.4g}")
        table.append(row + ((f"{result[f'empirical.{notion}']:.4f}",) if empirical else ()))
    widths = [max(len(r[c]) for r in table) for c in range(len(header))]
    for r in table:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    if not cert.holds:
        print("  the certificate's assumptions do not hold for this model: " + "; ".join(cert.assumptions))
    if empirical:
        print(f"  ({CERTIFICATE_NOTE})")
    _print_table(_privacy_rows(est, data.sensitive, _not_covered(args) if args.load is None else "")
                 + [("time", f"{seconds:.1f} s"), ("result", str(out))])
    return 0


AUDIT_NOTE = ("An audit gives a statistically valid LOWER bound on ε from one attack: a bound below the claimed ε "
              "does not prove the claim; one above it proves a bug.")


#: What the whole-method game catches, as measured through ``dpfair audit`` (``benchmarks/privacy_audit.py --catch
#: --rate``, ``results/audit/README.md``); printed by ``dpfair audit --help``.
AUDIT_POWER = ("What the game catches (planted bugs, measured through this command at epsilon 1, "
               "results/audit/README.md): a reused seed (every fit sharing its noise) on output-perturbation, "
               "dp-postprocess and dp-sgd at 200 runs, not on dp-fermi (a world's runs train as one batch, each "
               "model drawing its own noise); skipped clipping on dp-sgd at 200 runs; dp-fermi's exact group "
               "proportions at 200 runs. Halved noise only on dp-postprocess's Laplace counts, and not reliably (1 "
               "audit in 10 at 400 runs, 5 in 10 at 1000); never on a Gaussian release (output-perturbation, "
               "dp-sgd, dp-fermi: bound 0 at 1000 runs; even the ideal test needs about 40,000 runs). `dpfair audit "
               "release` audits the noise primitive itself with 400,000 releases and catches halved noise; `dpfair "
               "audit measurement` audits the private measurement (PrivateMetricFrame) and catches its counts "
               "released without noise at 200 releases. Exit status 1 when the lower bound is above the claim, 0 "
               "otherwise.")


def cmd_audit_epsilon(args) -> int:
    from dpfair.audit.games import audit_epsilon, audit_one_run

    _check_run_args(args)
    if args.runs < 4:
        raise ValueError(f"--runs must be >= 4 (hundreds for a meaningful bound), got {args.runs}")
    if not 0.0 < args.confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1), got {args.confidence}")
    args.unit = args.privacy_unit  # the relation audited: the estimator's unit where it has one, else the game's only
    spec = _estimator_spec(argparse.Namespace(**{**vars(args), "quiet": True, "privacy_unit": None}))
    (out,) = _result_path(args, "audit")
    data, options = _load_data(args)
    if args.unit is not None and "privacy_unit" in spec[0]().get_params():  # the audited unit, before the estimator
        spec = (spec[0], {**spec[1], "privacy_unit": args.unit})  # is checked against the data set's s columns
    est = _build_estimator(spec, data)
    X, y, s = data.X_train, data.y_train, data.s_train
    if args.rows and args.rows < len(y):  # any data set is a valid audit: a public random subset is cheaper
        keep = np.sort(np.random.default_rng(args.seed).choice(len(y), size=args.rows, replace=False))
        X, y, s = X[keep], y[keep], s[keep]
    t0 = time.perf_counter()
    if args.one_run:
        if (args.unit or "record") != "record":
            raise ValueError("--one-run audits the record unit (canaries inserted at random); drop --unit sensitive")
        found = audit_one_run(est, X, y, s, canaries=args.canaries,
                              confidence=args.confidence, random_state=args.seed, verbose=not args.quiet)
        summary = {"epsilon_claimed": found["epsilon_claimed"], "epsilon_lower_bound": found["epsilon"],
                   "confidence": args.confidence, "runs": 1, "unit": "record", "audit": "one run",
                   "canaries": found["canaries"], "guesses": found["guesses"], "correct": found["correct"],
                   "delta": found["delta"]}
    else:
        report = audit_epsilon(est, X, y, s, unit=args.unit, runs=args.runs, confidence=args.confidence,
                               random_state=args.seed, n_groups=data.n_groups, verbose=not args.quiet)
        summary = {**report.to_dict(), "audit": "distinguishing game"}
        summary.pop("method")
    seconds = time.perf_counter() - t0
    protects = _protection_of(summary["unit"], data.sensitive, summary["epsilon_claimed"])
    result = {**_run_record(args, est, data, options, "audit"), "note": AUDIT_NOTE, **summary,
              "protects": protects, "rows": int(len(y)), "seconds": seconds}
    (out,) = _write_result(args, out, result)

    return _print_audit(f"privacy audit of {args.method} on {data.name} ({len(y):,} rows; {summary['audit']}, "
                        f"unit {summary['unit']})", summary, args.confidence, seconds, out, protects)


def _print_audit(title: str, summary: dict, confidence: float, seconds: float, out: Path, protects: str) -> int:
    """The table every ε audit prints (the claimed ε naming whom it protects: ``protects``); the exit status: 1
    when the lower bound is above the claim (a bug proved at ``confidence``), else 0."""
    claimed, lower = summary["epsilon_claimed"], summary["epsilon_lower_bound"]
    above = lower > claimed + 1e-12
    print(title)
    rows = [("epsilon claimed", _epsilon_text(claimed, protects)), ("epsilon lower bound", f"{lower:.4g}"),
            ("confidence", f"{confidence:g}"), ("runs", str(summary["runs"]))]
    if "test" in summary:
        rows += [("attack statistic", summary["test"]["statistic"])]
    rows += [("verdict", "LOWER BOUND ABOVE THE CLAIM: a bug" if above else "consistent with the claim"),
             ("time", f"{seconds:.1f} s"), ("result", str(out))]
    _print_table(rows)
    print(f"  ({AUDIT_NOTE})")
    return 1 if above else 0


def cmd_audit_release(args) -> int:
    from dpfair.audit import audit_release

    if not (args.epsilon > 0 and math.isfinite(args.epsilon)):
        raise ValueError(f"--epsilon must be a finite number > 0, got {args.epsilon}")
    if not 0.0 <= args.delta < 1.0:
        raise ValueError(f"--delta must lie in [0, 1), got {args.delta}")
    if args.releases < 4:
        raise ValueError(f"--releases must be >= 4 (hundreds of thousands for a bound near ε), got {args.releases}")
    if not 0.0 < args.confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1), got {args.confidence}")
    mechanism = args.mechanism.replace("-", "_")
    if mechanism == "randomized_response" and args.unit == "record":
        raise ValueError("randomized response protects one person's value (a replace-one change): drop --unit "
                         "record (its unit is sensitive)")
    if args.buckets < 2:
        raise ValueError(f"--buckets must be >= 2, got {args.buckets}")
    (out,) = _result_path(args, name=f"release-{args.mechanism}-audit")
    report = audit_release(mechanism, epsilon=args.epsilon, delta=args.delta, unit=args.unit, runs=args.releases,
                           confidence=args.confidence, accountant=args.accountant, buckets=args.buckets)
    summary = {**report.to_dict(), "audit": "release primitive"}
    summary.pop("method")
    protects = ("one person's value (neighbours replace it)" if summary["unit"] == "sensitive"
                else "one person's contribution (neighbours add or remove it)")
    result = {"dpfair_version": __version__, "command": "audit release", "mechanism": args.mechanism,
              "epsilon_target": args.epsilon, "accountant": args.accountant,
              **({"buckets": args.buckets} if mechanism == "randomized_response" else {}),
              "note": AUDIT_NOTE, **summary, "protects": protects}
    (out,) = _write_result(args, out, result)
    name = args.mechanism.replace("-", " ")
    return _print_audit(f"privacy audit of the {name} release ({summary['runs']:,} releases; release primitive, "
                        f"unit {summary['unit']})", summary, args.confidence, summary["seconds"], out, protects)


def cmd_audit_measurement(args) -> int:
    from sklearn.linear_model import LogisticRegression

    from dpfair.audit.games import MEASUREMENT_METRICS, audit_measurement

    if not args.epsilon > 0:
        raise ValueError(f"--epsilon must be > 0, got {args.epsilon}; smaller epsilon means more privacy")
    if args.delta is not None and not 0.0 < args.delta < 1.0:
        raise ValueError(f"--delta must lie strictly between 0 and 1, got {args.delta}")
    if args.releases < 8:
        raise ValueError(f"--releases must be >= 8 (hundreds for a meaningful bound), got {args.releases}")
    if not 0.0 < args.confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1), got {args.confidence}")
    if args.rows < 0:
        raise ValueError(f"--rows must be >= 0 (0: the whole test part), got {args.rows}")
    metrics = list(MEASUREMENT_METRICS) if args.metrics is None else [m for m in _comma_list(args.metrics) if m]
    (out,) = _result_path(args, name=f"{args.dataset}-measurement-audit-seed{args.seed}")
    data, options = _load_data(args)
    # the table audited: the test part's people, with the predictions of a model the auditor fits on (a public
    # random subset of 5,000 rows of) the train part: any model will do, the guarantee holds for every table;
    # --rows: a public random subset of the people
    rng = np.random.default_rng(args.seed)
    fit = rng.permutation(len(data.y_train))[:5000]
    model = LogisticRegression(max_iter=1000).fit(data.X_train[fit], data.y_train[fit])
    y, s, y_pred = data.y_test, data.s_test, model.predict(data.X_test)
    if args.rows and args.rows < len(y):
        keep = np.sort(rng.choice(len(y), size=args.rows, replace=False))
        y, s, y_pred = y[keep], s[keep], y_pred[keep]
    report = audit_measurement(y, y_pred, s, groups=range(data.n_groups), classes=range(data.n_classes),
                               epsilon=args.epsilon, delta=args.delta, unit=args.unit, releases=args.releases,
                               metrics=metrics, accountant=args.accountant, confidence=args.confidence,
                               random_state=args.seed, verbose=not args.quiet)
    summary = {**report.to_dict(), "audit": "measurement"}
    summary.pop("method")
    canary = dict(summary["canary"])
    for key in ("from_group", "to_group", "group"):  # the public group names beside their codes
        if key in canary:
            canary[f"{key}_name"] = data.group_names[canary[key]]
    summary["canary"] = canary
    result = {"dpfair_version": __version__, "command": "audit measurement", "dataset": data.name,
              "options": options, "sensitive": data.sensitive, "seed": args.seed, "rows": int(len(y)),
              "predictions": "logistic regression fitted on 5,000 rows of the train part (auditor-side, not "
                             "private)",
              "metrics": metrics, "epsilon_target": args.epsilon, "accountant": args.accountant,
              "note": AUDIT_NOTE, **summary}
    result["protects"] = _protection_of(summary["unit"], data.sensitive, summary["epsilon_claimed"],
                                        rest="label and prediction")
    (out,) = _write_result(args, out, result)
    return _print_audit(f"privacy audit of PrivateMetricFrame on {data.name} ({len(y):,} rows, {summary['runs']:,} "
                        f"releases; measurement, unit {summary['unit']})", summary, args.confidence,
                        summary["seconds"], out, result["protects"])


def _epsilon_text(eps: float, protects: str) -> str:
    """``0.997 for each person's sex; …`` — a printed ε with whom it protects (``inf (not private: …)``)."""
    return f"{eps:.6g} for {protects}" if math.isfinite(eps) else f"{eps:.6g} ({protects})"


def _privacy_rows_of(eps: float, delta: float, guarantee: str | None, protects: str,
                     not_covered: str = "") -> list[tuple[str, str]]:
    """``epsilon spent`` with whom it protects (``protects``: :func:`dpfair.privacy.units.protection`), ``delta``,
    a void guarantee, and what the ε does not cover (``not_covered``: a schema read off the rows)."""
    rows = [("epsilon spent", _epsilon_text(eps, protects)), ("delta", f"{delta:.3g}")]
    if guarantee and guarantee.startswith("void"):
        rows += [("privacy guarantee", guarantee)]
    if not_covered and math.isfinite(eps):
        rows += [("not covered by ε", not_covered)]
    return rows


def cmd_datasets(args) -> int:
    from dpfair.datasets import dataset_info, list_datasets
    from dpfair.utils.progress import progress

    names = [args.name] if args.name else list_datasets()
    infos = []
    with progress(len(names), "data sets", "data set") as bar:  # a first listing loads each one (seconds)
        for n in names:
            infos.append(dataset_info(n, data_home=args.data_home))
            bar.update()
    if args.json:
        print(json.dumps(_jsonable(infos), indent=2))
        return 0
    header = ("name", "on disk", "rows", "feat.", "label=1", "sensitive", "group sizes", "licence")
    table = [header]
    for i in infos:
        sizes = ", ".join(f"{g}: {c}" for g, c in (i["group_sizes"] or {}).items())
        balance = i["label_balance"]
        table.append((
            i["name"], "yes" if i["on_disk"] else ("unreadable" if i.get("error") else "no"),
            "-" if i["rows"] is None else f"{i['rows']:,}",
            "-" if i["features"] is None else str(i["features"]),
            "-" if balance is None else (f"{balance:.3f}" if isinstance(balance, float) else "multiclass"),
            "/".join(i["sensitive_options"]), sizes or "-", i["licence"],
        ))
    widths = [max(len(r[c]) for r in table) for c in range(len(header))]
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    for i in infos:
        if i.get("error"):
            print(f"{i['name']}: {i['error']}")
    return 0


def cmd_accountant(args) -> int:
    from dpfair.privacy import epsilon_for_noise, noise_for_epsilon

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
    protects = _protection_of(args.unit, None, 0.0)
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


def _plain(text: str | None) -> str:
    """reStructuredText markup of a docstring as plain text for the terminal: ``code`` as code, a role
    :x:`~a.b.Name` as Name, :x:`words <target>` as words."""
    import re

    if not text:
        return ""
    text = re.sub(r":[\w:]+:`([^`<]*?)\s*<[^`>]*>`", r"\1", text)
    text = re.sub(r":[\w:]+:`~?([^`]*)`", lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~")
                  else m.group(1), text)
    return text.replace("``", "")


def cmd_methods(args) -> int:
    # the classes' facts as stored beside the catalog module: no estimator (torch, scikit-learn) is imported
    from dpfair.algorithms.catalog import read_catalog

    catalog = read_catalog()
    rows = [{k: v for k, v in entry.items() if k != "parameters"} for entry in catalog]
    if args.name is None:
        if args.json:
            print(json.dumps(_jsonable(rows), indent=2))
            return 0
        table = [("method", "estimator", "guarantee", "notions")]
        table += [(r["method"], r["estimator"], r["guarantee"], ", ".join(r["notions"]) or "-") for r in rows]
        widths = [max(len(r[c]) for r in table) for c in range(4)]
        for r in table:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        print("(`dpfair methods METHOD` lists a method's hyper-parameters; set them with --param KEY=VALUE)")
        return 0
    at = next((i for i, r in enumerate(rows) if r["method"] == args.name), None)
    if at is None:
        raise ValueError(f"unknown method {args.name!r}; choose one of {', '.join(r['method'] for r in rows)}")
    row, params = rows[at], catalog[at]["parameters"]
    if args.json:
        shown = [{k: p[k] for k in ("name", "default", "description", "accepts")} for p in params]
        print(json.dumps(_jsonable({**row, "parameters": shown}), indent=2))
        return 0
    print(f"{row['method']}: {_plain(row['summary'])}")
    print(f"  estimator  {row['estimator']}")
    print(f"  guarantee  {row['guarantee']}")
    if row["notions"]:
        strength = f" (strength: {row['fairness_strength']})" if row["fairness_strength"] else ""
        print(f"  notions    {', '.join(row['notions'])}{strength}")
    print("hyper-parameters (--param KEY=VALUE):")
    width = max(len(f"{p['name']}={p['default_repr']}") for p in params)
    for p in params:
        accepts = f" [accepts {p['accepts']}]" if p["accepts"] else ""
        print(f"  {p['name'] + '=' + p['default_repr']:<{width}}  {_plain(p['description']) or '(undocumented)'}"
              f"{accepts}")
    return 0


def _method_name(est) -> str:
    from dpfair.algorithms import method_name

    return method_name(est) or type(est).__name__


def _check_model_fits(est, path, data) -> None:
    """A loaded model takes the data set's rows: the same number of features."""
    if est.n_features_in_ != data.n_features:
        raise ValueError(f"{path} was fitted on {est.n_features_in_} features but {data.name} has "
                         f"{data.n_features}; pass the --dataset and --option it was trained with")


def _load_model(path):
    """The dpfair estimator saved at ``path``; a saved scikit-learn Pipeline is one line (the CLI reads a model's
    privacy and fairness attributes, which a Pipeline does not have)."""
    from dpfair.persistence import load_estimator

    est = load_estimator(path)
    if not hasattr(est, "privacy_spent_"):
        raise ValueError(f"{path} holds a {type(est).__name__}, not a dpfair model: load it in Python with "
                         "dpfair.persistence.load_estimator (the CLI reads and scores dpfair models)")
    return est


def cmd_info(args) -> int:
    from dpfair.persistence import load_provenance

    est = _load_model(args.model)
    provenance = load_provenance(args.model)
    eps, delta = est.privacy_spent_
    info = {"model": str(args.model), "method": _method_name(est), "estimator": type(est).__name__,
            "target": est.fairness_target(), "trained_on": provenance, "epsilon": eps, "delta": delta,
            "privacy_unit": _unit_name(est), "protects": _protects(est, provenance.get("sensitive")),
            "privacy_guarantee": est.privacy_guarantee_, "n_features": int(est.n_features_in_),
            "classes": est.classes_.tolist(), "groups": None if est.groups_ is None else est.groups_.tolist(),
            "hyperparameters": est.get_params(), "privacy_ledger": est.privacy_ledger_.to_records()}
    if args.json:
        print(json.dumps(_jsonable(info), indent=2))
        return 0
    target = _target_text(est).removeprefix("; target: ")
    print(f"{args.model}: {info['method']} ({info['estimator']}){f', target: {target}' if target else ''}")
    rows = []
    if provenance:
        options = ", ".join(f"{k}={v}" for k, v in provenance.get("dataset_options", {}).items())
        rows += [("data set", f"{provenance.get('dataset')}{f' ({options})' if options else ''}, "
                              f"{provenance.get('n_train', '?'):,} training rows, split seed {provenance.get('seed')}"),
                 ("sensitive", f"{provenance.get('sensitive')} (groups: {', '.join(map(str, provenance.get('groups', [])))})"),
                 ("trained by", f"dpfair {provenance.get('dpfair_version')} ({provenance.get('command')})")]
    else:
        rows += [("data set", "not recorded (saved from Python without provenance=)")]
    rows += [("features", str(info["n_features"])), ("classes", ", ".join(map(str, info["classes"])))]
    rows += _privacy_rows(est, provenance.get("sensitive"))
    if info["privacy_unit"]:
        rows += [("privacy unit", info["privacy_unit"])]
    rows += [(f"release: {r['label']}", f"{r['count']} × {r['mechanism']}, noise multiplier {r['noise_multiplier']:.4g}"
              + (f", sampling rate {r['sampling_probability']:.4g}" if r["sampling_probability"] < 1 else ""))
             for r in info["privacy_ledger"]]
    _print_table(rows)
    return 0


def cmd_predict(args) -> int:
    from dpfair.fairness import predict_with_groups
    from dpfair.persistence import load_provenance

    _check_eval_args(args)
    if args.eval_epsilon is not None and args.part == "train":
        raise ValueError("--eval-epsilon releases figures of people apart from the training people; --part train "
                         "re-reads the training people themselves (a use the model's ε does not cover): drop one")
    out = _writable(Path(args.out), ".csv", args.overwrite)[0] if args.out else None
    if args.input is not None:
        given = [f for f, v in (("--dataset", args.dataset), ("--option", args.option), ("--seed", args.seed),
                                ("--sensitive", args.sensitive), ("--part", args.part)) if v is not None]
        if given:
            raise ValueError(f"--input scores the rows of a file; {given[0]} chooses a built-in data set's part: drop "
                             "one of them")
    elif args.keep is not None:
        raise ValueError("--keep copies columns of an --input file into the predictions; add --input FILE or drop it")
    est = _load_model(args.model)
    provenance = load_provenance(args.model)
    if args.input is not None:
        return _predict_input(args, est, provenance, out)
    args.part = args.part or "test"
    from_model = argparse.Namespace(dataset=args.dataset or provenance.get("dataset"),
                                    sensitive=args.sensitive or provenance.get("sensitive"),
                                    seed=provenance.get("seed", 0) if args.seed is None else args.seed,
                                    option=args.option, data_home=args.data_home)
    if from_model.dataset is None:
        raise ValueError(f"{args.model} does not record its data set; pass --dataset (and the --option and --seed "
                         "it was trained with)")
    if args.option is None and provenance.get("dataset") == from_model.dataset:
        from_model.option = [f"{k}={json.dumps(v)}" for k, v in provenance.get("dataset_options", {}).items()]
    data, _ = _load_data(from_model)
    X, y, s = {"test": data.test, "train": data.train}[args.part]
    _check_model_fits(est, args.model, data)
    evaluation = _evaluate(est, X, y, s, data.group_names, args)
    if out is not None:
        import pandas as pd

        proba = predict_with_groups(est, X, s, "predict_proba")
        names = np.asarray(data.group_names, dtype=object)  # the groups by name, as `dpfair measure --groups` takes
        table = pd.DataFrame({"row": np.arange(len(y)), "y_true": y, "y_pred": predict_with_groups(est, X, s),
                              "group": names[s]})
        for j, c in enumerate(est.classes_):
            table[f"proba_{c}"] = proba[:, j]
        text = table.to_csv(index=False)
        (out,) = _write_atomic(out, lambda target: [(target, text.encode())], overwrite=args.overwrite)
    print(f"{_method_name(est)} model {args.model} on the {args.part} part of {data.name} "
          f"({evaluation['n']:,} rows; sensitive: {data.sensitive}{_target_text(est)})")
    rows = _evaluation_rows(evaluation)
    rows[0] = (f"{args.part} error", rows[0][1])
    rows += _model_epsilon_rows(est, data.sensitive) + _evaluation_privacy_rows(evaluation, data.sensitive)
    if out is not None:
        rows += [("predictions", str(out))]
    _print_table(rows)
    return 0


def _model_epsilon_rows(est, attribute: str | None) -> list[tuple[str, str]]:
    """``predict``'s line of the model's ε (its training spent it; scoring rows spends nothing), naming whom it
    protects."""
    return [("epsilon of the model", _epsilon_text(est.privacy_spent_[0], _protects(est, attribute)))]


def _predict_input(args, est, provenance: dict, out: Path | None) -> int:
    """``dpfair predict MODEL --input FILE``: score the rows of a file with the public schema the model was trained
    with (columns by name; a missing or unknown column is one error), copy the ``--keep`` columns through, report
    per column what the schema's rules did to the cells (clipped, sent to other, filled, not scored), and evaluate
    where the file holds labels.  A row whose cell is declared ``missing = "drop"`` gets no prediction: its output
    row says why instead of being left out, so that the output joins the input row for row."""
    from dpfair.datasets import Schema, read_with_schema
    from dpfair.fairness import predict_with_groups

    if provenance.get("schema") is None:
        raise ValueError(f"{args.model} records no table schema (it was trained on a built-in data set, or before "
                         "dpfair stored one): --input scores models trained with --data; use --dataset for a "
                         "built-in data set's parts")
    schema = Schema.from_dict(provenance["schema"], where=f"{args.model}'s schema")
    frame = read_with_schema(args.input, schema)
    keep = _comma_list(args.keep) or []
    absent = [c for c in keep if c not in frame.columns]
    if absent:
        raise ValueError(f"--keep {absent[0]!r}: {args.input} has no such column; its columns: "
                         f"{list(frame.columns)[:20]}")
    prepared = schema.prepare(frame, str(args.input), strict=True, keep=keep)
    X, kept = prepared.X, prepared.kept
    if est.n_features_in_ != X.shape[1]:
        raise ValueError(f"{args.model} was fitted on {est.n_features_in_} features but its schema gives "
                         f"{X.shape[1]} for {args.input}; the model file is damaged: train it again")
    has_groups = all(c in frame.columns for c in schema.sensitive_columns)
    s_all = schema.codes(frame, "sensitive", str(args.input), allow_missing=True) if has_groups else None
    s = None if s_all is None else s_all[kept]
    if s is not None and (s < 0).any():
        if capabilities(est).predict_needs_sensitive:
            raise ValueError(f"{_method_name(est)} reads the group at prediction time: {args.input} has rows without "
                             f"a group in {schema.attribute!r}; fill them")
        s = None
    if s is None and capabilities(est).predict_needs_sensitive:
        raise ValueError(f"{_method_name(est)} reads the group at prediction time: {args.input} needs the column(s) "
                         f"{', '.join(map(repr, schema.sensitive_columns))}")
    y_all = (schema.codes(frame, "label", str(args.input), allow_missing=True) if schema.label in frame.columns
             else None)
    y = None if y_all is None else y_all[kept]
    labelled = None if y is None else y >= 0
    if args.eval_epsilon is not None and (y is None or s is None or not labelled.all()):
        raise ValueError(f"--eval-epsilon releases the fairness figures of labelled rows: {args.input} needs a label "
                         f"and a group in every scored row (columns {schema.label!r} and "
                         f"{', '.join(map(repr, schema.sensitive_columns))}); drop --eval-epsilon")
    classes = np.asarray(schema.classes, dtype=object)
    predicted = np.asarray(predict_with_groups(est, X, s)).astype(np.int64) if len(X) else np.zeros(0, np.int64)
    proba = predict_with_groups(est, X, s, "predict_proba") if len(X) else np.zeros((0, len(est.classes_)))
    if out is not None:
        import pandas as pd

        table = pd.DataFrame({"row": np.arange(len(frame))})
        for column in keep:
            table[column] = frame[column].to_numpy()
        if y_all is not None:
            table[f"{schema.label}_true"] = np.where(y_all >= 0, classes[np.maximum(y_all, 0)], None)
        shown = np.full(len(frame), None, dtype=object)
        shown[kept] = classes[predicted]
        table[f"{schema.label}_pred"] = shown
        for j, c in enumerate(est.classes_):
            column = np.full(len(frame), np.nan)
            column[kept] = proba[:, j]
            table[f"proba_{classes[int(c)]}"] = column
        if not kept.all():
            dropped = [c.name for c in schema.columns if c.missing is not None and c.missing.action == "drop"]
            table["not_scored"] = np.where(kept, "", f"missing {' or '.join(dropped)} (declared drop)")
        text = table.to_csv(index=False)
        (out,) = _write_atomic(out, lambda target: [(target, text.encode())], overwrite=args.overwrite)
    print(f"{_method_name(est)} model {args.model} on {args.input} ({len(frame):,} rows{_target_text(est)})")
    counts = np.bincount(predicted, minlength=len(classes))
    rows = [("predicted", ", ".join(f"{c}: {n:,}" for c, n in zip(classes, counts)))]
    if not kept.all():
        rows.append(("not scored", f"{int((~kept).sum()):,} rows (a cell the schema declares dropped is missing)"))
    # exact counts of these rows; beside --eval-epsilon (whose release treats them as private) they are marked so
    exact = " (exact, not covered by ε)" if args.eval_epsilon is not None else ""
    rows += [(f"cells of {column}", text + exact) for column, text in prepared.counts.lines()]
    evaluation = {}
    if y is not None and s is not None and labelled.all():
        evaluation = _evaluate(est, X, y, s, list(schema.groups), args)
        rows += [("error" if label == "test error" else label, value) for label, value in _evaluation_rows(evaluation)]
    elif y is not None and labelled.any():
        rows += [("error", f"{float(np.mean(predicted[labelled] != y[labelled])):.4f}"
                  + ("" if labelled.all() else f" ({int(labelled.sum()):,} labelled rows)"))]
    rows += _model_epsilon_rows(est, schema.attribute) + _evaluation_privacy_rows(evaluation, schema.attribute)
    if out is not None:
        rows += [("predictions", str(out))]
    _print_table(rows)
    return 0


#: ``dpfair measure``'s column headers, by metric.
MEASURE_HEADERS = {"count": "count", "selection_rate": "selection rate", "true_positive_rate": "TPR",
                   "false_positive_rate": "FPR", "true_negative_rate": "TNR", "false_negative_rate": "FNR",
                   "accuracy": "accuracy", "error": "error"}


def _comma_list(text: str | None) -> list[str] | None:
    return None if text is None else [v.strip() for v in text.split(",")]


def _sensitive_list(text: str | None) -> str | list[str] | None:
    """``--sensitive COL`` or ``--sensitive COL1,COL2`` (the intersectional groups of several columns)."""
    columns = _comma_list(text)
    return columns if columns is None or len(columns) > 1 else columns[0]


def _group_lists(text: str | None):
    """``--groups A,B,C`` (one sensitive column), or one list per column separated by ``;`` (``A,B;F,M``)."""
    if text is None:
        return None
    lists = [_comma_list(part) for part in text.split(";")]
    return lists[0] if len(lists) == 1 else lists


def _figure(value, interval=None, count: bool = False) -> str:
    """``0.123 [0.101, 0.145]`` (``—`` where a value is undefined); counts as whole numbers."""
    if value is None or not math.isfinite(value):
        return "—"
    text = f"{value:,.0f}" if count else f"{value:.3f}"
    if interval is not None and None not in interval:
        lo, hi = interval
        text += f" [{lo:,.0f}, {hi:,.0f}]" if count else f" [{lo:.3f}, {hi:.3f}]"
    return text


def _measurement_table(record: dict) -> list[list[str]]:
    """The printed table of a measurement: a row per group (flagged figures marked ``!``), then everyone, the
    between-groups difference and ratio."""
    metrics = record["metrics"]
    table = [["group", *(MEASURE_HEADERS[m] for m in metrics)]]
    for g, figures in record["by_group"].items():
        table.append([g, *(_figure(figures[m]["value"], figures[m]["interval"], m == "count")
                           + (" !" if figures[m]["flagged"] else "") for m in metrics)])
    agg = record["aggregates"]
    table.append(["everyone", *(_figure(agg[m]["overall"], agg[m]["overall_interval"], m == "count")
                                for m in metrics)])
    def marked(m, text):  # a between-groups figure that includes a flagged group
        return text + (" !" if agg[m]["flagged_groups"] else "")

    table.append(["difference", *("" if m == "count" else marked(m, _figure(agg[m]["difference"],
                                                                          agg[m]["difference_interval"]))
                                  for m in metrics)])
    table.append(["ratio", *("" if m == "count" else marked(m, _figure(agg[m]["ratio"])) for m in metrics)])
    if any(agg[m]["flagged_groups"] for m in metrics if m != "count"):
        table.append(["difference, unflagged groups",
                      *("" if m == "count" else _figure(agg[m]["difference_unflagged"]) for m in metrics)])
    return table


def cmd_measure(args) -> int:
    """``dpfair measure``: the private fairness figures of a file of predictions (:mod:`dpfair.measurement`)."""
    from dpfair.measurement import DEFAULT_METRICS, measure_file, measurement_record

    if not args.epsilon > 0:
        raise ValueError(f"--epsilon must be > 0 (inf: exact figures, no privacy), got {args.epsilon}")
    if args.delta is not None and not 0 < args.delta < 1:
        raise ValueError(f"--delta must lie strictly between 0 and 1, got {args.delta}")
    if (args.predictions is None) == (args.model is None):
        raise ValueError("name the rows once: --predictions FILE (labels, predictions and groups in columns), or "
                         "--model M --data FILE (the model predicts first)")
    source = args.predictions if args.model is None else args.model_data
    if args.model is not None:
        given = [f for f, v in (("--label", args.label), ("--prediction", args.prediction),
                                ("--sensitive", args.sensitive), ("--groups", args.groups),
                                ("--classes", args.classes)) if v is not None]
        if args.model_data is None:
            raise ValueError("--model needs --data FILE: the rows to predict and measure, in the model's schema")
        if given:
            raise ValueError(f"--model reads the columns, groups and classes from the model's schema; drop {given[0]}")
    else:
        missing = [f for f, v in (("--label", args.label), ("--prediction", args.prediction),
                                  ("--sensitive", args.sensitive)) if v is None]
        if missing:
            raise ValueError(f"--predictions needs {missing[0]} COL (the column of each person's "
                             f"{ {'--label': 'true label', '--prediction': 'prediction', '--sensitive': 'group'}[missing[0]] })")
        if args.model_data is not None:
            raise ValueError("--data goes with --model (rows to predict); with --predictions, drop --data")
    (out,) = _result_path(args, name=f"measure-{Path(source).name.split('.')[0]}")
    options = dict(epsilon=args.epsilon, delta=args.delta, privacy_unit=args.unit, confidence=args.confidence,
                   n_bootstrap=args.bootstrap, random_state=args.seed, intervals=args.intervals,
                   metrics=_comma_list(args.metrics) or DEFAULT_METRICS, positive=args.positive,
                   secure_mode=args.secure)
    if args.model is None:
        frame = measure_file(args.predictions, label=args.label, prediction=args.prediction,
                             sensitive=_sensitive_list(args.sensitive), groups=_group_lists(args.groups),
                             classes=_comma_list(args.classes), **options)
        columns = {"label": args.label, "prediction": args.prediction,
                   "sensitive": " × ".join(_comma_list(args.sensitive))}
    else:
        frame, columns = _measure_model(args, options)
    record = measurement_record(frame, columns["sensitive"])
    result = {"dpfair_version": __version__, "command": "measure", "source": str(source),
              "model": None if args.model is None else str(args.model), "columns": columns,
              "n": int(frame.n_), "seed": args.seed, **record}
    spent = f"the measurement spent ε = {record['epsilon']:.6g} all the same" if math.isfinite(record["epsilon"]) else ""
    (out,) = _write_atomic(out, lambda target: [(target, (json.dumps(_jsonable(result), indent=2) + "\n").encode())],
                           overwrite=args.overwrite, stamped=args.out is None, spent=spent)

    eps, delta = record["epsilon"], record["delta"]
    print(f"{source}: {result['n']:,} rows; groups of {columns['sensitive']}: {', '.join(record['groups'])}; "
          f"positive class {record['positive_class']!r}")
    if math.isfinite(eps):
        drawn = " (exact, on a grid, secure mode)" if record["secure_mode"] else ""
        print(f"released with ε = {eps:.4g}, δ = {delta:.3g} for {record['protects']}; "
              f"{record['mechanism'].capitalize()} noise"
              f"{drawn}, std {frame.noise_std_:.3g} per count; intervals: {100 * frame.confidence:g} % "
              + ("(privacy noise and sampling: the population's value)" if frame.sampling
                 else "(privacy noise: the exact value on these rows)"))
    else:
        print("exact figures (epsilon = inf): NOT private, every figure reads the groups exactly")
    table = _measurement_table(record)
    widths = [max(len(row[j]) for row in table) for j in range(len(table[0]))]
    for row in table:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    rows = []
    for key, name in (("demographic_parity_difference", "demographic parity difference"),
                      ("equalized_odds_difference", "equalized odds difference")):
        if key in record:
            figure = record[key]
            rows.append((name, _figure(figure["value"], figure["interval"])
                         + (f" !  (unflagged groups: {_figure(figure['value_unflagged'])})"
                            if figure["flagged_groups"] else "")))
    flagged = sorted({g for g, figures in record["by_group"].items() for f in figures.values() if f["flagged"]})
    if flagged:
        rows.append(("! too few people", f"{', '.join(flagged)}: not a confident figure at this ε (raise --epsilon "
                                         "or merge small groups); a difference marked ! includes them"))
    rows.append(("result", str(out)))
    _print_table(rows)
    return 0


def _measure_model(args, options: dict):
    """``dpfair measure --model M --data FILE``: the model predicts the rows of FILE (read through its schema),
    then they are measured with the schema's public group and class lists."""
    from dpfair.measurement import measure_rows, predictions_of_model
    from dpfair.persistence import load_provenance

    est = _load_model(args.model)
    provenance = load_provenance(args.model)
    if provenance.get("schema") is None:
        raise ValueError(f"{args.model} records no table schema (trained on a built-in data set): predict its rows "
                         "with `dpfair predict --out FILE` and measure them with --predictions FILE")
    rows, groups, classes = predictions_of_model(est, provenance["schema"], args.model_data)
    frame = measure_rows(rows, groups=groups, classes=classes, **options)
    from dpfair.datasets import Schema

    schema = Schema.from_dict(provenance["schema"], where=f"{args.model}'s schema")
    return frame, {"label": schema.label, "prediction": f"{_method_name(est)} model {args.model}",
                   "sensitive": schema.attribute}


def cmd_schema(args) -> int:
    """``dpfair schema FILE``: propose a public schema for a table, as TOML to review and declare, and say on stderr
    what it proposed for every column and why (:func:`dpfair.datasets.propose_schema`)."""
    from dpfair.datasets import propose_schema, read_table

    frame = read_table(args.file, raw=True)
    proposal = propose_schema(frame, label=args.label, sensitive=_sensitive_list(args.sensitive),
                              name=str(args.file), groups=_group_lists(args.groups),
                              max_categories=args.max_categories,
                              source=f"proposed by `dpfair schema` from the rows of {args.file}; reviewed by: ")
    text = proposal.to_toml()
    if args.out is None:
        sys.stdout.write(text)
    else:
        (path,) = _writable(Path(args.out), ".toml", args.overwrite)
        _write_atomic(path, lambda target: [(target, text.encode())], overwrite=args.overwrite)
    width = max(len(d.column) for d in proposal.decisions)
    print(f"dpfair: proposed for the {len(frame.columns)} columns of {args.file}:", file=sys.stderr)
    for decision in proposal.decisions:
        print(f"  {decision.column.ljust(width)}  {decision.line()}", file=sys.stderr)
    print(f"dpfair: this schema was read off the {len(frame):,} rows of {args.file} (types, ranges, categories, "
          f"missing cells, classes, groups): review it, widen or edit what the rows should not decide, then pass it "
          f"as --schema to declare it public", file=sys.stderr)
    return 0


def _add_estimator_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that choose the data and build the estimator, shared by ``train`` and ``audit``."""
    p.add_argument("--dataset", default=None,
                   help=f"built-in data set name (see `dpfair datasets`; default {DEFAULT_DATASET})")
    _add_table_arguments(p)
    p.add_argument("--sensitive", default=None,
                   help="sensitive attribute (default: the data set's); with --data, the column that holds it "
                        "(several, comma-separated: their intersectional groups)")
    p.add_argument("--method", default=DEFAULT_METHOD,
                   help="training method: dp-fermi (default; certify: output-perturbation), dp-sgd, erm, pf-ld, "
                        "dp-postprocess, dp-oracle, private-demographics, output-perturbation, reductions, threshold "
                        "(`dpfair methods` describes them)")
    p.add_argument("--notion", default=None,
                   help="fairness notion of a fair method, one of those it targets (`dpfair methods`): "
                        "demographic_parity, equalized_odds, equal_opportunity, accuracy_parity (default: the "
                        "method's)")
    p.add_argument("--lam", type=float, default=None, help="DP-FERMI's fairness weight λ ≥ 0")
    p.add_argument("--model", default=None, help="logistic, mlp or cnn (default: the method's)")
    p.add_argument("--epsilon", type=float, default=None,
                   help=f"privacy budget ε of a private method (default {DEFAULT_EPSILON:g}; inf: no privacy)")
    p.add_argument("--delta", type=float, default=None, help="privacy budget δ (default 1/n²)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the PUBLIC randomness: the split, initialisation, public minibatch order "
                        "(the privacy noise is always secret and fresh)")
    p.add_argument("--privacy-unit", "--unit", dest="privacy_unit", choices=["sensitive", "record"], default=None,
                   help="whom ε protects: each person's sensitive attribute, their features and label public "
                        "(sensitive), or each person's whole record (record); default: the method's (`dpfair "
                        "methods`); an audit audits this relation")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="estimator hyper-parameter")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="data set option, e.g. n_groups=3")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")


def _add_table_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a user's own table (:func:`dpfair.datasets.load_table`)."""
    p.add_argument("--data", default=None, metavar="FILE",
                   help="your own table instead of --dataset: a CSV (.csv, .tsv, optionally compressed) or Parquet "
                        "file; with --label and --sensitive, or a --schema that declares them")
    p.add_argument("--label", default=None, metavar="COL", help="with --data: the column to predict")
    p.add_argument("--schema", default=None, metavar="FILE",
                   help="with --data: the table's public schema (TOML; `dpfair schema FILE` proposes one): "
                        "features, ranges, categories, label classes, groups")
    p.add_argument("--test-data", default=None, metavar="FILE",
                   help="with --data: a second file of test rows (default: a split of --data by --seed)")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="with --data and no --schema: every group the sensitive column may hold (public), so that "
                        "the group list is not read off the rows (the ε does not cover a list read off them); with "
                        "several sensitive columns, one list per column separated by ';'")
    p.add_argument("--infer-schema", action="store_true",
                   help="with --data and no --schema under privacy_unit=record: infer the schema from the private "
                        "rows anyway (its ranges and categories then leak outside ε; refused without this flag)")


def _add_output_arguments(p: argparse.ArgumentParser, out_help: str = "JSON result file") -> None:
    """``--out``, ``--overwrite`` and ``--quiet``: the flags of every command that writes a result."""
    p.add_argument("--out", default=None, help=out_help)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_evaluation_arguments(p: argparse.ArgumentParser) -> None:
    """``--eval-epsilon`` / ``--eval-delta``: release the test part's figures by group privately."""
    p.add_argument("--eval-epsilon", type=float, default=None, metavar="E",
                   help="release the test part's fairness figures (violations, per-group accuracy, inequality) once "
                        "through a PrivateMetricFrame at this ε, on a ledger of their own (the test people); without "
                        "it they are exact: non-private diagnostics, not covered by --epsilon")
    p.add_argument("--eval-delta", type=float, default=None, metavar="D",
                   help="δ of the private evaluation (default 1/n² of the test part)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpfair", description="Fair and differentially private learning.")
    parser.add_argument("--version", action="version", version=f"dpfair {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train a model and report error, fairness and the privacy spent")
    _add_estimator_arguments(p)
    p.add_argument("--reproducible-noise", type=int, default=None, metavar="SEED",
                   help="TESTS ONLY: make the privacy noise reproducible from SEED; voids the guarantee, and the "
                        "result says so")
    _add_evaluation_arguments(p)
    _add_output_arguments(p, "JSON result file; the model is saved beside it as .pt")
    p.set_defaults(func=cmd_train)

    audit = sub.add_parser(
        "audit", help="empirical privacy audits of a method: an ε lower bound, or membership inference",
        description="Without a subcommand: run the method many times on neighbouring data sets (a canary's s "
                    "flipped, or a canary record added), attack the outputs, and turn the attack's success into "
                    "a lower bound on ε at the stated confidence. " + AUDIT_NOTE,
        epilog=AUDIT_POWER)
    _add_estimator_arguments(audit)
    audit.add_argument("--runs", type=int, default=400, help="fits (half per world; default 400)")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    audit.add_argument("--rows", type=int, default=5000,
                       help="audit on a public random subset of the train part of this many rows (default 5000; "
                            "0: all): a guarantee holds for every data set, and smaller ones train faster")
    audit.add_argument("--one-run", action="store_true",
                       help="Steinke et al.'s one-run audit with --canaries inserted at random (record unit)")
    audit.add_argument("--canaries", type=int, default=1000, help="canaries of --one-run (default 1000)")
    _add_output_arguments(audit)
    audit.set_defaults(func=cmd_audit_epsilon)
    audit_sub = audit.add_subparsers(dest="audit_command", required=False)
    p = audit_sub.add_parser(
        "membership", help="membership inference attacks (loss, shadow models, LiRA) against a trained model",
        description="Train the method on a random half of the data set's train part and attack it: "
                    "AUC, advantage and TPR at low FPR, overall and per group. " + MEMBERSHIP_NOTE)
    _add_estimator_arguments(p)
    p.add_argument("--attack", default=",".join(ATTACK_NAMES), metavar="A,B,...",
                   help=f"attacks, comma-separated: {', '.join(ATTACK_NAMES)} (default: all)")
    p.add_argument("--shadow", type=int, default=16, metavar="N",
                   help="shadow models for the shadow attack and LiRA (default 16; each trains the method once)")
    _add_output_arguments(p)
    p.set_defaults(func=cmd_audit_membership)
    p = audit_sub.add_parser(
        "release", help="audit a noise primitive (Gaussian, Laplace, randomized response): an ε lower bound",
        description="Calibrate one release of --mechanism to --epsilon as every method's releases are, run it "
                    "--releases times on two neighbours at the worst-case distance (a canary at the bound, or one "
                    "person's value changed), and turn the best test into a lower bound on ε as the method audit "
                    "does. With hundreds of thousands of releases the bound nears the primitive's ε, so halved "
                    "noise is caught here where the whole-method game cannot see it. Exit status 1 when the bound "
                    "is above the claim. " + AUDIT_NOTE)
    p.add_argument("--mechanism", choices=["gaussian", "laplace", "randomized-response"], default="gaussian",
                   help="the primitive (default gaussian)")
    p.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                   help=f"the ε it is calibrated to (default {DEFAULT_EPSILON:g})")
    p.add_argument("--delta", type=float, default=1e-5, help="δ of the calibration and of the bound (default 1e-5)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default=None,
                   help="neighbouring relation (default: record for gaussian and laplace, sensitive for "
                        "randomized-response, which protects one person's value)")
    p.add_argument("--releases", type=int, default=400_000, help="releases (half per world; default 400000)")
    p.add_argument("--buckets", type=int, default=2, help="values of randomized-response (default 2)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--accountant", choices=["pld", "rdp"], default="pld",
                   help="the accountant that calibrates the noise and states the claim (default pld)")
    _add_output_arguments(p)
    p.set_defaults(func=cmd_audit_release)
    p = audit_sub.add_parser(
        "measurement", help="audit the private measurement (PrivateMetricFrame) itself: an ε lower bound",
        description="Release the table group × label × prediction of the data set's test part (predictions of a "
                    "logistic regression fitted on 5,000 rows of its train part) --releases times through PrivateMetricFrame at "
                    "--epsilon, on the table and on its neighbour (a canary person's group moved from the smallest "
                    "group to the largest, or a canary person added), attack what each frame publishes (its "
                    "released table, per-group figures and differences), and turn the best test into a lower "
                    "bound on ε as the method audit does. Counts released without noise are caught at a few "
                    "hundred releases. Exit status 1 when the bound is above the claim. " + AUDIT_NOTE)
    p.add_argument("--dataset", default=DEFAULT_DATASET,
                   help=f"built-in data set name (see `dpfair datasets`; default {DEFAULT_DATASET})")
    p.add_argument("--sensitive", default=None, help="sensitive attribute (default: the data set's)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="data set option, e.g. n_groups=3")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the PUBLIC randomness: the split, the --rows subset, the frames' bootstrap (the "
                        "privacy noise is always secret and fresh)")
    p.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON,
                   help=f"the budget of each release (default {DEFAULT_EPSILON:g})")
    p.add_argument("--delta", type=float, default=None, help="δ of each release (default 1/n²)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default="sensitive",
                   help="neighbouring relation, the frame's privacy unit (default sensitive)")
    p.add_argument("--releases", type=int, default=200, help="releases (half per world; default 200)")
    p.add_argument("--rows", type=int, default=0,
                   help="audit on a public random subset of the test part of this many rows (default 0: all)")
    p.add_argument("--metrics", default=None, metavar="M,M,...",
                   help="the figures each frame computes, comma-separated (default count, selection_rate, "
                        "true_positive_rate, false_positive_rate, accuracy)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--accountant", choices=["pld", "rdp"], default="pld",
                   help="the accountant that calibrates the noise and states the claim (default pld)")
    _add_output_arguments(p)
    p.set_defaults(func=cmd_audit_measurement)

    p = sub.add_parser(
        "certify", help="certify how much privacy can cost fairness (Mangold et al.'s bounds)",
        description="Fit a private model and print, for every fairness notion, a bound on |Fair(h_priv) − "
                    "Fair(h*)| (h* the non-private optimum) holding with the given probability over the privacy "
                    "noise, its Chernoff and Markov variants, and the gaps of further private draws.")
    _add_estimator_arguments(p)
    p.set_defaults(method="output-perturbation")
    p.add_argument("--probability", type=float, default=0.99, help="probability 1 − ζ of the bound (default 0.99)")
    p.add_argument("--draws", type=int, default=100,
                   help="further private models compared with the non-private one (default 100; 0: none)")
    p.add_argument("--load", default=None, metavar="MODEL.pt",
                   help="certify a saved model (from `dpfair train`) instead of fitting one; evaluated on the "
                        "test part of --dataset, which must be the split it was trained beside (same --seed)")
    p.add_argument("--norm-bound", type=float, default=None,
                   help="DP-SGD only: a public bound on every row's norm (the loss's Lipschitz constant)")
    p.add_argument("--distance", type=float, default=None,
                   help="a bound on ‖h_priv − h*‖ holding with --probability, for a model whose distance no lemma "
                        "gives (default: from the method, Lemma 4.1 or 4.2)")
    _add_output_arguments(p)
    p.set_defaults(func=cmd_certify)

    p = sub.add_parser(
        "tune", help="pick a fair model's hyper-parameters privately: one model, and the ε of the whole search",
        description="Private selection (random stopping, Liu & Talwar; Papernot & Steinke): a secret number of runs, "
                    "each training a random candidate of --grid on part of the train set and releasing its noisy "
                    "score on the rest (the fairness violation, penalised beyond error <= reference + "
                    "--max-error-increase); the best released score wins. For dp-fermi under the sensitive unit "
                    "with a grid of lam alone (--strategy auto's choice), one fit instead, its lam following the "
                    "public training error to the constraint at no privacy cost. --epsilon is the budget of the "
                    "whole search, and the printed ledger lists its parts.")
    _add_estimator_arguments(p)
    p.add_argument("--max-error-increase", type=float, default=0.01,
                   help="X in the constraint error <= reference + X (default 0.01)")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...",
                   help="candidate values of a hyper-parameter (repeatable; their product is the candidate set; "
                        "default for dp-fermi: lam=0,0.5,1,2,4,8)")
    p.add_argument("--reference-error", type=float, default=None,
                   help="a public proxy of the non-private error (default: the non-private model's on public (x, y) "
                        "under the sensitive unit, a private estimate under the record unit)")
    p.add_argument("--strategy", choices=["auto", "constrained", "random-stopping"], default="auto",
                   help="constrained: one dp-fermi fit whose lam follows the public error constraint (sensitive "
                        "unit, a lam grid); random-stopping: the candidates of --grid; auto (default): constrained "
                        "where it applies")
    p.add_argument("--repetitions", default="geometric",
                   help="law of the secret number of runs: geometric (default), logarithmic, poisson, or a shape")
    p.add_argument("--mean-runs", type=float, default=None, help="its mean (default: twice the candidates)")
    p.add_argument("--validation-size", type=_validation_size_arg, default="auto",
                   help="share of the train part held out to score the runs; 0 scores the fitted rows (default auto: "
                        "0 for a logistic model, else 0.2)")
    _add_evaluation_arguments(p)
    _add_output_arguments(p, "JSON result file; the model is saved beside it as .pt")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("methods", help="list the methods (guarantee, notions), or one method's hyper-parameters")
    p.add_argument("name", nargs="?", default=None, help="one method: its hyper-parameters with defaults")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("info", help="what a saved model is: method, data set, hyper-parameters, privacy spent")
    p.add_argument("model", metavar="MODEL.pt", help="a model file written by `dpfair train`")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "predict", help="score new rows of a file (--input), or evaluate a saved model on a data set's test part",
        description="Load a model written by `dpfair train` (safely: no code from the file runs). With --input, score "
                    "the rows of a CSV or Parquet file through the schema stored in the model (columns by name). "
                    "Otherwise rebuild the data set and split it was trained beside (as recorded in the model; "
                    "--dataset, --option and --seed override) and print error and fairness on the chosen part. "
                    "--out writes per-row predictions and class probabilities.")
    p.add_argument("model", metavar="MODEL.pt", help="a model file written by `dpfair train`")
    p.add_argument("--dataset", default=None, help="data set (default: the one the model records)")
    p.add_argument("--sensitive", default=None, help="sensitive attribute (default: the one the model records)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="data set option (default: the ones the model records)")
    p.add_argument("--seed", type=int, default=None, help="split seed (default: the one the model records)")
    p.add_argument("--input", default=None, metavar="FILE",
                   help="score the rows of this CSV or Parquet file instead of a data set's part (a model trained "
                        "with --data: its schema matches the columns by name); labels, where present, are evaluated")
    p.add_argument("--part", choices=["test", "train"], default=None,
                   help="rows to evaluate (default test; train re-reads the private training rows, a use the "
                        "model's ε does not cover)")
    p.add_argument("--out", default=None, help="CSV of per-row predictions and class probabilities")
    p.add_argument("--keep", default=None, metavar="COL,...",
                   help="with --input: columns copied into --out beside each prediction (an applicant ID, to join by)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--data-home", default=None, help="folder of raw data files (default $DPFAIR_DATA)")
    _add_evaluation_arguments(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser(
        "schema", help="propose a public schema (TOML) for your own table, to review and pass as --schema",
        description="Read a CSV or Parquet file and propose its schema: each column's kind, numeric ranges (rounded "
                    "outward) and scaling, categories (others map to one level), a rule for every column with gaps, "
                    "how numbers are written (separators, currency and percent signs), near-duplicate categories "
                    "merged, log1p for heavy tails, identifiers, free text and dates ignored, the label's classes "
                    "and the groups; stderr lists every column's proposal and why. It reads the data to do so: "
                    "review the result and declare it public before training.")
    p.add_argument("file", metavar="FILE", help="a CSV (.csv, .tsv, optionally compressed) or Parquet file")
    p.add_argument("--label", required=True, metavar="COL", help="the column to predict")
    p.add_argument("--sensitive", required=True, metavar="COL[,COL]",
                   help="the column of the sensitive attribute (several, comma-separated: intersectional groups)")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="every group the sensitive column may hold (public; one list per column separated by ';')")
    p.add_argument("--max-categories", type=int, default=50, metavar="N",
                   help="text columns with more values are ignored as identifiers or free text (default 50)")
    p.add_argument("--out", default=None, help="TOML file to write (default: standard output)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser(
        "measure", help="private fairness figures of any model's predictions: per-group rates with intervals",
        description="Release the counts group × label × prediction of a file of predictions once, with Laplace "
                    "or Gaussian noise (whichever is smaller at the budget) on a ledger "
                    "(dpfair.fairness.private_metric_frame), and print every group's rates, the "
                    "differences and ratios between groups, demographic parity and equalized odds, each with an "
                    "interval that includes the noise; a group too small for the budget is flagged. The group and "
                    "class lists are public: declare them. Writes the figures and the ledger as JSON.")
    p.add_argument("--predictions", default=None, metavar="FILE",
                   help="a CSV or Parquet file with one row per person: true label, prediction and group columns")
    p.add_argument("--label", default=None, metavar="COL", help="the column of the true labels")
    p.add_argument("--prediction", default=None, metavar="COL", help="the column of the model's predictions")
    p.add_argument("--sensitive", default=None, metavar="COL[,COL]",
                   help="the column of each person's group (several, comma-separated: their intersections; then "
                        "--groups lists each column's groups, separated by ';')")
    p.add_argument("--groups", default=None, metavar="A,B,...",
                   help="every group the column may hold (public; required at a finite --epsilon)")
    p.add_argument("--classes", default=None, metavar="NEG,POS",
                   help="the labels (public; default 0,1); the last is the positive class unless --positive")
    p.add_argument("--positive", default=None, metavar="LABEL", help="the positive class of the rates")
    p.add_argument("--model", default=None, metavar="MODEL.pt",
                   help="instead of --predictions: a model trained with `dpfair train --data` predicts --data first")
    p.add_argument("--data", dest="model_data", default=None, metavar="FILE",
                   help="with --model: the rows to predict, in its schema")
    p.add_argument("--epsilon", type=float, required=True, help="the measurement's budget ε (inf: exact, not private)")
    p.add_argument("--delta", type=float, default=None, help="its δ (default 1/n²)")
    p.add_argument("--privacy-unit", "--unit", dest="unit", choices=["sensitive", "record"], default="sensitive",
                   help="protect each person's group (default) or each person's whole row")
    p.add_argument("--metrics", default=None, metavar="M1,M2,...",
                   help="figures to release (default count,selection_rate,true_positive_rate,false_positive_rate,"
                        "accuracy; also true_negative_rate, false_negative_rate, error)")
    p.add_argument("--intervals", choices=["population", "rows"], default="population",
                   help="what the intervals cover: the population's value (noise and sampling; default) or the exact "
                        "value on these rows (noise only)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' level (default 0.95)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates of the intervals (default 1000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the intervals' bootstrap (public randomness; the privacy noise is always fresh)")
    p.add_argument("--secure", action="store_true",
                   help="draw the noise exactly on a grid from the OS's CSPRNG, not in floating point (whose low bits "
                        "can betray a small count); slightly more noise")
    _add_output_arguments(p)
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("datasets", help="list the data sets and whether they are on disk")
    p.add_argument("name", nargs="?", default=None, help="one data set only")
    p.add_argument("--data-home", default=None)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser(
        "sweep", help="train a grid of methods × data sets × ε × hyper-parameters × seeds into a results store",
        description="Run the sweep of a TOML spec (or a reproduction spec shipped with dpfair, by name) and store "
                    "one row per model in SQLite. Resumable: run it again after a crash or Ctrl-C and only the "
                    "models not stored yet are trained. Prints the composed ε of every model released per data set.")
    p.add_argument("spec", metavar="SPEC", help="a .toml sweep spec, or a shipped spec's name")
    p.add_argument("--backend", choices=["local", "dask"], default="local",
                   help="local processes (default) or a Dask cluster (--address, or a local one on loopback)")
    p.add_argument("--store", default=None, metavar="PATH",
                   help="SQLite results store (default dpfair-runs/<sweep name>.sqlite)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--address", default=None, help="a Dask scheduler's address (with --backend dask)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("report", help="one self-contained HTML page of a results store: trade-offs, fronts, "
                                      "per-group tables, privacy ledgers, the papers' numbers")
    p.add_argument("store", metavar="STORE", help="a results store written by `dpfair sweep`")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--tables", default=None, metavar="DIR",
                   help="also write models.csv, points.csv and best.csv/.md (fronts and lowest violations) into DIR")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("reproduce", help="redraw a reproduction spec's paper figure from its runs, with a verdict "
                                         "per cell against the paper's numbers",
                       description="Draw the figure the paper draws (the spec's [figure] table: panels, axes, "
                                   "series) from a results store or committed models.csv files, the published "
                                   "values overlaid, and judge every cell: reproduced, better, worse or not "
                                   "comparable (and why). Writes DIR/figure.png, DIR/verdicts.md and "
                                   "DIR/verdicts.csv as one unit.")
    p.add_argument("spec", metavar="SPEC", help="a shipped reproduction spec's name, or a .toml spec with [figure]")
    p.add_argument("--from", dest="models", action="append", default=None, metavar="CSV",
                   help="a models.csv (`dpfair report --tables`); repeat it for the specs of the figure's `with`")
    p.add_argument("--store", default=None, metavar="PATH", help="a results store written by `dpfair sweep`")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write figure.png and verdicts.md/.csv in")
    p.add_argument("--overwrite", action="store_true", help="replace existing files in --out")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("accountant", help="epsilon for a noise multiplier, or the noise for a target epsilon")
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
    p.set_defaults(func=cmd_accountant)
    _every_command_takes_quiet(sub, audit_sub)
    return parser


def _every_command_takes_quiet(*subcommands) -> None:
    """``--quiet`` on every subcommand (the guide says every command takes it): where one has none, it is
    added (silencing its progress bars and notes, as elsewhere). ``subcommands``: the actions of
    ``add_subparsers``."""
    for action in subcommands:
        for command in action.choices.values():
            with contextlib.suppress(argparse.ArgumentError):  # it has one already
                command.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_sweep(args) -> int:
    from dpfair.experiments.spec import SweepSpec
    from dpfair.experiments.store import ResultsStore
    from dpfair.experiments.sweep import run_sweep

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {args.workers}")
    spec = SweepSpec.load(args.spec)
    store = ResultsStore(args.store or Path("dpfair-runs") / f"{spec.name}.sqlite")
    print(f"sweep {spec.name}: {len(spec.points())} models into {store.path} ({args.backend} backend)")
    try:
        summary = run_sweep(spec, store, backend=args.backend, workers=args.workers, address=args.address,
                            verbose=not args.quiet)
    except KeyboardInterrupt:
        print(f"dpfair: interrupted; {len(store.done_keys())} models are stored in {store.path}; run the same "
              "command again to train the rest", file=sys.stderr)
        return 130
    rows = [("models in the spec", str(summary.points)), ("already stored", str(summary.skipped)),
            ("trained now", str(summary.trained))]
    if summary.elsewhere:
        rows.append(("stored by another sweep", f"{summary.elsewhere} (ran on the same store meanwhile)"))
    rows += [(f"failed ({n})", message) for message, n in summary.failed.items()]
    by_category: dict = {}
    for line, n in summary.warnings.items():
        by_category.setdefault(line.split(":", 1)[0], []).append((line, n))
    for category, lines in sorted(by_category.items()):
        # every privacy warning in full; a kind whose messages differ only in their numbers, once with a count
        shown = lines if category != "UtilityWarning" else [(lines[0][0], sum(n for _, n in lines))]
        rows += [(f"warning ({n} tasks)", line) for line, n in shown]
    for total in summary.privacy_totals.itertuples():
        value = f"{total.epsilon:.4f} at δ = {total.delta:.3g}"
        if math.isinf(total.epsilon):
            value = f"∞ ({total.models - total.private_models} non-private models)"
            if total.private_models:
                value += f"; the {total.private_models} private ones: {total.private_epsilon:.4f}"
        value += f"; {total.models} models, {total.covers}"
        if total.conversion == "group privacy":
            value += " (by group privacy: 2ε)"
        if total.uncovered_models:
            value += (f"; not bounded here: {total.uncovered_models} sensitive-unit models, which protect only the "
                      "attribute they declared")
        rows.append((f"ε on {total.dataset}, {total.protects}", value))
    _print_table(rows)
    return 1 if summary.failed else 0


def cmd_report(args) -> int:
    if not Path(args.store).is_file():
        raise ValueError(f"no results store {args.store!r}; run `dpfair sweep SPEC --store {args.store}` first")
    from dpfair.experiments.report import render_report
    from dpfair.experiments.store import ResultsStore

    out, = _writable(Path(args.out), ".html", args.overwrite)
    render_report(ResultsStore(args.store), out, tables=args.tables)
    print(f"report: {out}" + ("" if args.tables is None else f"; tables in {args.tables}"))
    return 0


def cmd_reproduce(args) -> int:
    from dpfair.experiments.paper_figure import read_models, reproduction_files
    from dpfair.experiments.spec import SweepSpec

    if (args.models is None) == (args.store is None):
        raise ValueError("pass the runs with --from models.csv (repeatable) or --store PATH, one of the two")
    spec = SweepSpec.load(args.spec)
    if spec.figure is None:
        raise ValueError(f"spec {args.spec!r} has no [figure] table; add one (see `dpfair.experiments.spec`)")
    out = Path(args.out)
    names = ("figure.png", "verdicts.md", "verdicts.csv")
    _writable(out / names[0], ".png", args.overwrite)  # fails early; _write_atomic checks again at write time
    for name in names[1:]:
        if (out / name).exists() and not args.overwrite:
            raise ValueError(f"{out / name} already exists; pass --overwrite or choose another --out")
    if args.store is not None:
        if not Path(args.store).is_file():
            raise ValueError(f"no results store {args.store!r}; run `dpfair sweep {args.spec} --store {args.store}` "
                             "first")
        from dpfair.experiments.store import ResultsStore

        frame = ResultsStore(args.store).frame()
    else:
        import pandas as pd

        frame = pd.concat([read_models(m) for m in args.models], ignore_index=True)
    command = "dpfair reproduce " + " ".join([args.spec, *[f"--from {m}" for m in args.models or []],
                                              *([f"--store {args.store}"] if args.store else []), f"--out {out}"])
    files = reproduction_files(spec, frame, command=command)
    written = _write_atomic(out / names[0], lambda target: [(out / name, files[name]) for name in names],
                            overwrite=args.overwrite)
    print(f"{spec.name}: " + ", ".join(str(w) for w in written))
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None, group_names=None) -> None:
    """Warnings on the command line: one line naming the warning, no source path (a group by its declared name,
    ``group_names``, where the fit knew it by code: :func:`_naming_groups`)."""
    from dpfair.exceptions import SmallGroupWarning

    text = message.naming(group_names) if isinstance(message, SmallGroupWarning) else str(message)
    print(f"dpfair: {category.__name__}: {text.strip().splitlines()[0]}", file=file or sys.stderr)


def _naming_groups(group_names) -> None:
    """From now on this command's warnings name coded groups (the fits' ``0..k-1``) by the data set's declared
    ``group_names``."""
    warnings.showwarning = functools.partial(_show_warning, group_names=list(group_names))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    silenced = contextlib.nullcontext()
    if getattr(args, "quiet", False):  # every progress bar of the command, the library's included
        from dpfair.utils.progress import quiet

        silenced = quiet()
    try:
        with silenced:
            _resolve_data_args(args)
            return args.func(args)
    except BrokenPipeError:  # `dpfair methods | head`: the reader left; nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, FileNotFoundError, KeyError, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"dpfair: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpfair: interrupted; nothing was written", file=sys.stderr)
        return 130


def console_main(argv=None) -> int:
    """The ``dpfair`` command: :func:`main`, then every object moved out of the garbage collector's sight.

    Python's last collections at exit would traverse every object torch and the command built (the
    ``exit`` column of results/speed/dpfermi_single_model_before.md against dpfermi_single_model.md);
    ``gc.freeze()`` skips that, and the process's memory goes back
    to the system anyway. Only the command does this: :func:`main` called in a program leaves the
    collector as it was.
    """
    code = main(argv)
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console_main())
