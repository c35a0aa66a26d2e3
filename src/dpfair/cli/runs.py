"""What the commands that fit or load a model share: the estimator of ``--method`` and its flags, the data of
``--dataset`` or ``--data``, a loaded model file, and the keys every result JSON starts with."""

from __future__ import annotations

import math

from dpfair import __version__
from dpfair.cli.arguments import DEFAULT_EPSILON, group_lists, key_values, sensitive_list
from dpfair.cli.output import jsonable, naming_groups
from dpfair.utils.capabilities import capabilities

#: What a model file written by ``dpfair train`` records of its training (all public; ``dpfair info`` shows it,
#: ``dpfair predict`` reloads the same data set and split from it).
PROVENANCE_KEYS = ("dpfair_version", "command", "method", "dataset", "sensitive", "dataset_options", "groups",
                   "seed")


def privacy_unit_of(args) -> str:
    """The privacy unit the command's estimator will run under (``--param privacy_unit=...`` or its default)."""
    from dpfair.algorithms import METHODS

    given = getattr(args, "privacy_unit", None) or key_values(args.param, "--param").get("privacy_unit")
    if given is not None:
        return str(given)
    cls = METHODS.get(getattr(args, "method", None))
    # a hyper-parameter, or the class's one unit (DP-SGD: record); a method that is not private reads as sensitive
    return str(getattr(cls(), "privacy_unit", None) or "sensitive") if cls is not None else "sensitive"


def load_data(args):
    """``(data, options)``: the data set of ``--dataset``/``--sensitive``/``--option``, split by ``--seed``; or the
    user's table of ``--data`` (:func:`dpfair.datasets.load_table`: ``--label``, ``--sensitive``, ``--schema``,
    ``--test-data``), split by ``--seed`` too."""
    from dpfair.datasets import load_dataset, load_table

    if getattr(args, "data", None) is not None:
        unit = privacy_unit_of(args)
        if args.schema is None and unit == "record" and not args.infer_schema:
            raise ValueError(f"under privacy_unit=record the schema of {args.data} must be public, not read off its "
                             f"private rows: write one with `dpfair schema {args.data} --label COL --sensitive COL "
                             "--out schema.toml`, review it and pass --schema schema.toml (or --infer-schema to "
                             "accept the leak)")
        if args.schema is not None and args.groups is not None:
            raise ValueError("--groups declares the group list of a schema read off the rows; with --schema, declare "
                             "the groups there and drop --groups")
        data = load_table(args.data, label=args.label, sensitive=sensitive_list(args.sensitive), schema=args.schema,
                          test_data=args.test_data, random_state=args.seed, privacy_unit=unit,
                          infer_under_record=args.infer_schema, groups=group_lists(args.groups),
                          where=getattr(args, "store", "auto"), cache_dir=getattr(args, "cache_dir", None),
                          show_progress=not getattr(args, "quiet", True))
        naming_groups(data.group_names)
        return data, {}
    options = key_values(args.option, "--option")
    data = load_dataset(args.dataset, sensitive=args.sensitive, random_state=args.seed,
                        data_home=args.data_home, **options)
    naming_groups(data.group_names)
    return data, options


def not_covered(args) -> str:
    """What a command's ε does not cover of its inputs: the schema (record unit) or group list (sensitive unit) read
    off the rows of ``--data`` when no ``--schema`` declared it (``""`` when everything was declared)."""
    if getattr(args, "data", None) is None or args.schema is not None:
        return ""
    if privacy_unit_of(args) == "record":
        return (f"the schema read off the rows of {args.data} (ranges, categories, classes, groups), which the model "
                "file carries: declare one with --schema")
    if args.groups is not None:
        return ""
    return (f"the group list read off the rows of {args.data} (the model file names every group, one person's "
            "included): declare it with --groups A,B,... or --schema")


def estimator_spec(args) -> tuple[type, dict]:
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
    params.update(key_values(args.param, "--param"))
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


def build_estimator(spec: tuple[type, dict], data):
    """The estimator of ``spec`` given the data set's declared group and label lists (public, never read off
    the private arrays); ``--param groups=...`` / ``classes=...`` override them."""
    from dpfair.experiments.runner import declared_estimator

    return declared_estimator(*spec, data)


def run_record(args, est, data, options, command: str) -> dict:
    """The keys every result JSON starts with: what ran, on which data, with which public settings (for a user's
    table, its file and public schema too: what ``dpfair predict`` needs to score new rows)."""
    record = {"dpfair_version": __version__, "command": command, "method": args.method,
              "estimator": type(est).__name__, "hyperparameters": est.get_params(), "dataset": data.name,
              "sensitive": data.sensitive, "dataset_options": options, "groups": list(data.group_names),
              "seed": args.seed}
    if getattr(args, "data", None) is not None:
        record |= {"data_file": str(args.data), "schema": data.schema.to_dict()}
    return record


def provenance(record: dict, n_train: int) -> dict:
    """What a model file records of its run (:data:`PROVENANCE_KEYS`, and a user's table's file and schema)."""
    return jsonable({k: record[k] for k in PROVENANCE_KEYS} | {k: record[k] for k in ("data_file", "schema")
                                                               if k in record} | {"n_train": n_train})


def target_text(est) -> str:
    """``"; target: equalized odds, tolerance = 0"`` for a fair method, ``""`` otherwise."""
    target = est.fairness_target()
    if not target:
        return ""
    strength = [f"{'λ' if k == 'lam' else k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}"
                for k, v in target.items() if k != "notion"]
    return "; target: " + ", ".join([target["notion"].replace("_", " "), *strength])


def method_name(est) -> str:
    """The ``--method`` name of a model (its class's name where it has none)."""
    from dpfair.algorithms import method_name as name_of

    return name_of(est) or type(est).__name__


def check_model_fits(est, path, data) -> None:
    """A loaded model takes the data set's rows: the same number of features."""
    if est.n_features_in_ != data.n_features:
        raise ValueError(f"{path} was fitted on {est.n_features_in_} features but {data.name} has "
                         f"{data.n_features}; pass the --dataset and --option it was trained with")


def load_model(path):
    """The dpfair estimator saved at ``path``; a saved scikit-learn Pipeline is one line (the CLI reads a model's
    privacy and fairness attributes, which a Pipeline does not have)."""
    from dpfair.persistence import load_estimator

    est = load_estimator(path)
    if not hasattr(est, "privacy_spent_"):
        raise ValueError(f"{path} holds a {type(est).__name__}, not a dpfair model: load it in Python with "
                         "dpfair.persistence.load_estimator (the CLI reads and scores dpfair models)")
    return est
