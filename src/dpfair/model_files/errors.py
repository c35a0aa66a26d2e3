"""The two refusals of the model files and the check that raises the second.

:class:`SaveError`: what an estimator holds cannot be saved safely (``save_estimator`` turns it into one
``ValueError`` naming the file and the attribute). :class:`LoadError`: a file is not one this dpfair reads, or names
something off the allow-lists; :func:`dpfair.model_files.load_estimator` turns it into one ``ValueError`` naming the
file. Both are raised before anything of the file is built or written.
"""

from __future__ import annotations

__all__ = ["LoadError", "SaveError", "expect"]


class SaveError(ValueError):
    """What an estimator holds that a model file cannot hold safely."""


class LoadError(ValueError):
    """What makes a file unreadable: not a dpfair model file, malformed, or naming a class off the allow-lists."""


def expect(cond: bool, what: str):
    """Refuse the file (:class:`LoadError` ``what``) unless ``cond``."""
    if not cond:
        raise LoadError(what)
