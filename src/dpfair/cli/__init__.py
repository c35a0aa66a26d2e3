"""The ``dpfair`` command line: list data sets, train a private fair model, certify or audit it, do privacy arithmetic.

``dpfair train`` with no argument trains the best private fair method the
package has on the embedded ``adult`` data and prints test error, the
fairness violations of every notion, per-group accuracy and its inequality
indices, and the (ε, δ) spent; it writes a JSON result (``--out``) and the
fitted model beside it (same name, ``.pt``).

One module per command (:mod:`~dpfair.cli.train`, :mod:`~dpfair.cli.tune`, :mod:`~dpfair.cli.certify`,
:mod:`~dpfair.cli.audit` and its subcommands, ...), each with ``add_arguments(parser)`` and ``run(args)``;
:mod:`~dpfair.cli.main` assembles the parser from them and dispatches. Beside them: the shared flags and checks
(:mod:`~dpfair.cli.arguments`), printing (:mod:`~dpfair.cli.output`), result paths and writing
(:mod:`~dpfair.cli.results`, on :mod:`dpfair.utils.files`), the estimator, data and model of a run
(:mod:`~dpfair.cli.runs`) and the evaluation on the test rows (:mod:`~dpfair.cli.evaluation`). Every result's
privacy keys come from one :class:`dpfair.privacy.record.PrivacyRecord`.

Every failure a user can cause prints one line ``dpfair: error: ...`` and
exits with status 2; nothing already on disk is overwritten unless asked.
Building the parser imports nothing heavy (no torch, no scikit-learn): ``--help`` and a typo answer at once.
"""

from dpfair.cli.main import build_parser, console_main, main

__all__ = ["build_parser", "console_main", "main"]
