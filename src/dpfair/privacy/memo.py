"""The one memo of accounting results: every ε an accountant computes and every σ a calibration searches.

Why a σ is what it is can be read here alone. Two kinds of entries:

- ``"epsilon"``: ε at δ of one composed event (:func:`~dpfair.privacy.accounting.epsilon_of`);
- ``"calibration"``: the smallest noise multiplier σ whose planned events spend at most a target ε
  (:func:`~dpfair.privacy.calibration.calibrate_noise`), kept with the (σ, ε) points its search
  evaluated, so that :meth:`AccountingMemo.explain` shows why that σ: its ε is at most the target and
  within the tolerance below it.

The key (:class:`MemoKey`) is the computation's public description and nothing else: the composed
events (an event's ``repr`` lists every field exactly; a calibration's description names the planned
events as a function of σ), δ, the neighbouring relation, the accountant (with its Rényi orders where
they are not the default ones), and for a calibration its target ε and search options. Every input that
changes an answer is a field of the key; nothing derived from the data is (plans and σ are public).

One size bound, :data:`MAXSIZE` entries, least recently used first out. Behind the in-memory layer, ε
entries asked for with ``persist`` (the evaluations of a calibration, a function of a public plan) are
read from and written to the on-disk cache of :mod:`dpfair.privacy.accounting_cache`, so a later process
follows the same search path and returns the same σ bit for bit. An answer the accountant did not compute
as the key says (a PLD that fell back to RDP, which depends on this machine's memory) stays in memory.

Beside it, :class:`BoundedMemo`: a small LRU of answers by a hashable public key, for a search over accounting
results that a caller runs many times on one public plan. :data:`PER_MODEL_EPSILON` is one: the per-model ε of a
private selection (:mod:`dpfair.selection`), the largest whose repeat-and-select total spends at most the
search's ε, found by bisection on its public plan (an audit's hundreds of searches of one plan bisect once).

Below the memo, :mod:`dpfair.privacy.subsampled_rdp` keeps its own table of per-order Rényi divergences:
a numeric kernel whose values are not answers to any key here (an RDP composition of a Poisson-sampled
Gaussian under replace-one sums them), reused across the events that share a (σ, q), such as an ε curve's
prefixes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from dpfair.privacy.accounting_cache import read_epsilon, write_epsilon

__all__ = ["KINDS", "MAXSIZE", "MEMO", "PER_MODEL_EPSILON", "PER_MODEL_MAXSIZE", "AccountingMemo", "BoundedMemo",
           "Computed", "MemoKey"]

#: The kinds of entries.
KINDS = ("epsilon", "calibration")

#: Most entries the memo keeps (a sweep's many identical ledgers and plans take one each).
MAXSIZE = 4096

#: Most per-model ε's :data:`PER_MODEL_EPSILON` keeps (one per public plan of a search: method, its settings
#: but the seed, the first candidate, the fit part's shape, ε, δ, the law of the runs, the unit and the σ's).
PER_MODEL_MAXSIZE = 256

_V = TypeVar("_V")


@dataclass(frozen=True)
class MemoKey:
    """What an accounting result is a function of, every field public.

    ``events``: ``repr`` of the composed ``DpEvent`` (``"epsilon"``), or the description of the planned
    events as a function of σ (``"calibration"``). ``relation``: the ``NeighboringRelation``'s name.
    ``accountant``: ``"pld"``, ``"rdp"``, or ``"rdp@<orders>"`` for an RDP accountant on other orders.
    ``target``: a calibration's target ε. ``options``: a calibration's search options, as
    ``(name, value)`` pairs (its relative tolerance and largest σ).
    """

    kind: str
    events: str
    delta: float
    relation: str
    accountant: str
    target: float | None = None
    options: tuple[tuple[str, float], ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "delta", float(self.delta))
        if (self.target is None) != (self.kind == "epsilon"):
            raise ValueError("a calibration's key needs its target epsilon; an epsilon's key has none")


class Computed(NamedTuple):
    """One computed answer. ``exact``: computed as its key says (``False``: kept in memory only).
    ``trail``: a calibration's evaluated ``(σ, ε)`` points, in the order its search visited them."""

    value: float
    exact: bool = True
    trail: tuple[tuple[float, float], ...] = ()


class _Entry(NamedTuple):
    computed: Computed
    source: str  # "computed" or "disk"


class AccountingMemo:
    """Accounting results by :class:`MemoKey`: an in-memory LRU of at most ``maxsize`` entries, with the
    on-disk cache behind it for ε entries looked up with ``persist`` (module docstring)."""

    def __init__(self, maxsize: int = MAXSIZE):
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self._entries: OrderedDict[MemoKey, _Entry] = OrderedDict()
        # fits on threads share the memo (a budget's GridSearchCV, n_jobs threads): the dictionary's reads,
        # reorderings and evictions hold the lock; a computation runs outside it
        self._lock = threading.Lock()

    def lookup(self, key: MemoKey, compute: Callable[[], Computed], *, persist: bool = False) -> float:
        """The answer of ``key``: from memory, else (``persist``, ε only) from disk, else ``compute()``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry.computed.value
        persist = persist and key.kind == "epsilon"
        stored = read_epsilon(key.events, key.delta, key.relation, key.accountant) if persist else None
        if stored is not None:
            entry = _Entry(Computed(stored), "disk")
        else:
            entry = _Entry(compute(), "computed")
            if persist and entry.computed.exact:
                write_epsilon(key.events, key.delta, key.relation, key.accountant, entry.computed.value)
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return entry.computed.value

    def get(self, key: MemoKey) -> Computed | None:
        """The entry of ``key`` in memory, or ``None``."""
        entry = self._entries.get(key)
        return None if entry is None else entry.computed

    def keys(self, kind: str | None = None) -> list[MemoKey]:
        """The keys in memory (of one kind), least recently used first."""
        return [k for k in self._entries if kind is None or k.kind == kind]

    def explain(self, key: MemoKey) -> str:
        """Why the answer of ``key`` is what it is: the key's fields, the value, where it came from, and for a
        calibration the (σ, ε) points its search evaluated (the last one at or below the target is the σ)."""
        entry = self._entries.get(key)
        if entry is None:
            raise KeyError(f"no entry for {key}; compute it first")
        value, exact, trail = entry.computed
        where = f"under {key.relation} on the {key.accountant} accountant at delta={key.delta!r}"
        if key.kind == "epsilon":
            how = entry.source if exact else "computed on RDP (the PLD could not be built)"
            return f"epsilon={value!r} of {key.events} {where} ({how})"
        options = ", ".join(f"{name}={v!r}" for name, v in key.options)
        lines = [(f"sigma={value!r}: the smallest noise multiplier found with epsilon <= {key.target!r} for "
                  f"{key.events} {where} ({options})")]
        lines += [f"  sigma={s!r} -> epsilon={e!r}{'  (chosen)' if s == value else ''}" for s, e in trail]
        return "\n".join(lines)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


#: The process's memo, which every accounting in dpfair goes through.
MEMO = AccountingMemo()


class BoundedMemo(Generic[_V]):
    """Answers by key: an in-memory LRU of at most ``maxsize`` entries, the least recently used evicted first.

    For a computation on public inputs only (its key names every one of them; nothing derived from the data), so
    that a later caller with the same key gets the same answer without computing it again. Fits on threads may
    share one: the reads, reorderings and evictions hold a lock, a computation runs outside it (two threads
    asking for one missing key may both compute it; the answers are equal, one is kept). An answer whose
    computation raises is not stored.
    """

    def __init__(self, maxsize: int):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be an integer >= 1, got {maxsize!r}")
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, _V] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, key: Hashable, compute: Callable[[], _V]) -> _V:
        """The answer of ``key``: from memory (it becomes the most recently used), else ``compute()``, kept."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value

    def get(self, key: Hashable, default=None):
        """The answer of ``key`` in memory (its recency unchanged), or ``default``."""
        with self._lock:
            return self._entries.get(key, default)

    def keys(self) -> list:
        """The keys in memory, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


#: The per-model ε of a private selection by its public plan: ``(ε of one run, the search's planned ledger)``
#: (:func:`dpfair.selection.plan.per_model_epsilon`), at most :data:`PER_MODEL_MAXSIZE` plans.
PER_MODEL_EPSILON: BoundedMemo = BoundedMemo(PER_MODEL_MAXSIZE)
