"""``dpfair info``: what a saved model is: method, data set, hyper-parameters, the privacy it spent."""

from __future__ import annotations

import json

from dpfair.cli.output import jsonable, print_table, privacy_rows
from dpfair.cli.runs import load_model, method_name, target_text

HELP = "what a saved model is: method, data set, hyper-parameters, privacy spent"


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.pt", help="a model file written by `dpfair train`")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from dpfair.persistence import load_provenance
    from dpfair.privacy.record import PrivacyRecord

    est = load_model(args.model)
    provenance = load_provenance(args.model)
    privacy = PrivacyRecord.of_fit(est, provenance.get("sensitive"))
    info = {"model": str(args.model), "method": method_name(est), "estimator": type(est).__name__,
            "target": est.fairness_target(), "trained_on": provenance, **privacy.to_json("privacy_guarantee"),
            "n_features": int(est.n_features_in_), "classes": est.classes_.tolist(),
            "groups": None if est.groups_ is None else est.groups_.tolist(), "hyperparameters": est.get_params(),
            "privacy_ledger": privacy.ledger}
    if args.json:
        print(json.dumps(jsonable(info), indent=2))
        return 0
    target = target_text(est).removeprefix("; target: ")
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
    rows += privacy_rows(privacy)
    if info["privacy_unit"]:
        rows += [("privacy unit", info["privacy_unit"])]
    rows += [(f"release: {r['label']}", f"{r['count']} × {r['mechanism']}, noise multiplier {r['noise_multiplier']:.4g}"
              + (f", sampling rate {r['sampling_probability']:.4g}" if r["sampling_probability"] < 1 else ""))
             for r in info["privacy_ledger"]]
    print_table(rows)
    return 0
