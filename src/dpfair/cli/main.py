"""The ``dpfair`` command's parser, assembled from the command modules, and its dispatch: :func:`main` runs one
command and turns every failure a user can cause into one line ``dpfair: error: ...`` and exit status 2."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import warnings

from dpfair import __version__
from dpfair.cli import (
    accountant,
    audit,
    certify,
    datasets,
    info,
    measure,
    methods,
    predict,
    reproduce,
    report,
    schema,
    sweep,
    train,
    tune,
)
from dpfair.cli.arguments import every_command_takes_quiet, resolve_data_args
from dpfair.cli.output import show_warning

#: The commands, in the order ``dpfair --help`` lists them: each module's ``HELP`` (and ``DESCRIPTION``, ``EPILOG``
#: where it has them), its ``add_arguments(parser)`` and its ``run(args)``.
COMMANDS = {"train": train, "audit": audit, "certify": certify, "tune": tune, "methods": methods, "info": info,
            "predict": predict, "schema": schema, "measure": measure, "datasets": datasets, "sweep": sweep,
            "report": report, "reproduce": reproduce, "accountant": accountant}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``dpfair`` and every command (each command's ``run`` as its ``func`` default)."""
    parser = argparse.ArgumentParser(prog="dpfair", description="Fair and differentially private learning.")
    parser.add_argument("--version", action="version", version=f"dpfair {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None),
                           epilog=getattr(module, "EPILOG", None))
        p.set_defaults(func=module.run)
        module.add_arguments(p)
    every_command_takes_quiet(sub)
    return parser


def main(argv=None) -> int:
    """Run the command of ``argv`` (default ``sys.argv[1:]``); its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    shown = warnings.showwarning  # restored on return: a caller of main() in its own process keeps its own
    warnings.showwarning = show_warning
    silenced = contextlib.nullcontext()
    if getattr(args, "quiet", False):  # every progress bar of the command, the library's included
        from dpfair.utils.progress import quiet

        silenced = quiet()
    try:
        with silenced:
            resolve_data_args(args)
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
    finally:
        warnings.showwarning = shown


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
