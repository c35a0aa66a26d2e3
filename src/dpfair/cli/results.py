"""Where a command's results go and how they are written: checked before any work, written as one unit
(:func:`dpfair.utils.files.write_atomic`) after it."""

from __future__ import annotations

import io
import json
import tempfile
from datetime import datetime
from pathlib import Path

from dpfair.cli.output import jsonable
from dpfair.utils.files import write_atomic


def json_bytes(result: dict) -> bytes:
    """A result as the bytes of its JSON file (indented, a newline at the end)."""
    return (json.dumps(jsonable(result), indent=2) + "\n").encode()


def write_result(args, out: Path, result: dict, *, model: bytes | None = None, spent: str = "") -> tuple[Path, ...]:
    """The JSON ``result`` at ``out`` and, given ``model`` (its bytes), the model beside it (``.pt``, named by
    the result's ``model_file``), as one unit (:func:`~dpfair.utils.files.write_atomic`); a default ``--out``
    takes the next free name. Returns ``(out, model_path)`` or ``(out,)`` as written."""
    def files(target: Path) -> list[tuple[Path, bytes]]:
        if model is None:
            return [(target, json_bytes(result))]
        model_path = target.with_suffix(".pt")
        return [(model_path, model), (target, json_bytes({**result, "model_file": model_path.name}))]

    written = write_atomic(out, files, overwrite=args.overwrite, stamped=args.out is None, spent=spent)
    return written if model is None else (written[1], written[0])


def write_text(out: Path, text: str, overwrite: bool) -> Path:
    """``text`` written to ``out`` alone, as a unit (:func:`~dpfair.utils.files.write_atomic`)."""
    (written,) = write_atomic(out, lambda target: [(target, text.encode())], overwrite=overwrite)
    return written


def model_bytes(est, provenance: dict) -> bytes:
    """The model file's bytes, built in memory so that writing them fails as an ``OSError`` (a full disk) rather
    than inside torch's zip writer."""
    buffer = io.BytesIO()
    est.save(buffer, provenance=provenance)
    return buffer.getvalue()


def result_path(args, kind: str = "", companions: tuple[str, ...] = (), name: str | None = None) -> tuple[Path, ...]:
    """``(out, *companions)``: the JSON result path (``--out``, or a stamped name under ``dpfair-runs/``:
    ``name`` or ``DATASET-METHOD[-kind]-seedSEED``, then the time) and the files written beside it (its name with
    each suffix in ``companions``); none may exist unless ``--overwrite`` (checked again when written:
    :func:`write_result`). A stamped name is not checked here: a taken one is never replaced, the result goes to
    the next free name when written."""
    if args.out is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        tag = f"-{kind}" if kind else ""
        name = name or f"{args.dataset}-{args.method}{tag}-seed{args.seed}"
        out = Path("dpfair-runs") / f"{name}-{stamp}.json"
    else:
        out = Path(args.out)
    return writable(out, ".json", args.overwrite or args.out is None, companions)


def writable(out: Path, suffix: str, overwrite: bool, companions: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """``(out, *companions)`` checked before any work: ``out`` ends in ``suffix``, none of the files exists
    unless ``overwrite``, and ``out``'s folder takes a new file (a result that cannot be written must not cost
    a whole fit). The check that counts is at write time (:func:`~dpfair.utils.files.write_atomic`): this one only
    fails early."""
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
