"""Fairness benchmark data sets, split and preprocessed, with a sensitive attribute.

``load_dataset(name)`` returns a :class:`Dataset` with ``X`` (float), ``y`` (int64 labels ``0..l-1``) and ``s``
(int64 groups ``0..k-1``) for a train and a test part; ``list_datasets()`` gives the names and
``dataset_info(name)`` a summary.  Sex is coded female = 0, male = 1 in every data set.

Raw files are read, in this order, from an explicit ``path``; from the data home ``<home>/<folder>/<file>``
(``data_home=`` if given, else ``$DPFAIR_DATA``, then ``~/.cache/dpfair``); from a gzip copy embedded in the
package (adult and compas only); or are downloaded from their source into the data home.  Every file's sha256
(or the MD5 its source publishes) is checked; see :func:`data_home` and the loaders' docstrings for each data
set's provenance and definitions.

``load_dataset(name, preset=...)`` loads a data set as a paper's experiments do (``dp-fermi``: adult, credit,
parkinsons; ``pf-ld``: adult, compas, bank; ``fairdp``: adult, dutch; ``jagielski``: communities; ``mangold``:
celeba, acs_income): its rows, features, encoding, label, groups and, where the paper states it, its test fraction.
``dataset_info(name)["presets"]`` lists a data set's presets.

A user's own table (CSV or Parquet) loads with ``load_table(path, schema=...)`` through a public :class:`Schema`
(:class:`Column` s, label and classes, sensitive column and groups; ``Schema.from_toml`` reads one, ``to_toml``
writes one, ``transform`` scores new rows); ``infer_schema`` proposes one from the rows, with a
``PrivacyLeakWarning``.  See :mod:`dpfair.datasets.tables`.
"""

from dpfair.datasets._acs import load_acs_income
from dpfair.datasets._celeba import load_celeba
from dpfair.datasets._files import data_home
from dpfair.datasets._messy import make_messy_loans
from dpfair.datasets._mnist import load_mnist, load_mnist_unbalanced
from dpfair.datasets._presets import presets_of
from dpfair.datasets._registry import dataset_info, list_datasets, load_dataset
from dpfair.datasets._synthetic import load_synthetic, make_synthetic
from dpfair.datasets._tabular import (
    load_adult,
    load_bank,
    load_communities,
    load_compas,
    load_credit,
    load_dutch,
    load_german,
    load_parkinsons,
)
from dpfair.datasets.base import Column, Dataset, Schema
from dpfair.datasets.tables import infer_schema, load_table, propose_schema, read_table, read_with_schema

__all__ = [
    "Column",
    "Dataset",
    "Schema",
    "data_home",
    "dataset_info",
    "infer_schema",
    "list_datasets",
    "propose_schema",
    "load_acs_income",
    "load_adult",
    "load_bank",
    "load_celeba",
    "load_communities",
    "load_compas",
    "load_credit",
    "load_dataset",
    "load_dutch",
    "load_german",
    "load_mnist",
    "load_mnist_unbalanced",
    "load_parkinsons",
    "load_synthetic",
    "load_table",
    "make_messy_loans",
    "make_synthetic",
    "presets_of",
    "read_table",
    "read_with_schema",
]
