"""The TRIAGE of an event (schema v1): why a process does not progress (``HangVerdict``, with the wait-for
graph's edges) or what happened to one that ended (``CrashSummary``).  Pure: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from . import jsonkeys
from .framemodel import Op, TfFunction
from .jsonkeys import Json
from .poolsummary import Pool
from .record import FrozenRecord, Record

__all__ = ["Wait", "HangVerdict", "CrashSummary", "Triage", "triage_from_json"]

# the key tables' words (``core/jsonkeys.py``)
_always = jsonkeys.always
_is_set = jsonkeys.is_set
_as_list = jsonkeys.as_list
_k = jsonkeys.k
_optional = jsonkeys.optional
_build = jsonkeys.build
_truthy = jsonkeys.truthy
_write = jsonkeys.write


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Wait(FrozenRecord):
    """One edge of the wait-for graph (``analysis/waitgraph.py``; WAIT of a hang verdict's ``waits``, ``cycle``
    and ``chain``): ``thread`` waits for ``resource``, held or owed by thread ``waits_for`` (None: no thread)."""

    thread: int
    waits_for: Optional[int]
    resource: str
    evidence: str
    at: Optional[str] = "?"  # where the waiting thread is (``waitgraph.where``); None: a document without it

    def to_json(self) -> Json:
        return _write(self, _WAIT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Wait:
        return _build(cls, _WAIT_KEYS, d)


_WAIT_KEYS = (_k("thread", doc=_always, required=True), _k("waits_for", doc=_always),
              _k("resource", doc=_always, required=True), _k("evidence", doc=_always, required=True),
              _k("at", doc=_is_set))


def _waits(ds: Optional[List[Json]]) -> Optional[List[Wait]]:
    return [Wait.from_json(d) for d in ds] if ds is not None else None


def _graph_written(obj: Any, value: Any) -> bool:
    return obj.waits is not None


@dataclass(slots=True, repr=False, eq=False)
class HangVerdict(Record):
    """Why a process does not progress (the TRIAGE of a snapshot: ``verdict.triage``; a ``stack``
    document's, an event's of ``attach``'s SIGQUIT or ``--timeout``, a core's whose signal came from outside)."""

    verdict: str = ""
    pattern: Optional[str] = None  # the hang pattern that fits (verdict.py), None where none does
    gil_holder: Optional[Json] = None  # {"tid", "name", "blocked_in", "function", "file", "line"}
    waiting_for_gil: List[int] = field(default_factory=list)
    waiting_for_function: List[Json] = field(default_factory=list)  # {"tid", "tf_function", "at"}
    stuck: Optional[List[int]] = None  # stack --samples only
    moving: Optional[List[int]] = None
    pool: Optional[Pool] = None  # the event's
    # the wait-for graph (analysis/waitgraph.py): every edge, the cycle (a deadlock), the chain of waits; all
    # three written together, always by today's tfnative (None: a document from before the graph)
    waits: Optional[List[Wait]] = None
    cycle: Optional[List[Wait]] = None
    chain: Optional[List[Wait]] = None

    def to_json(self) -> Json:
        return _write(self, _HANG_VERDICT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> HangVerdict:
        return _build(cls, _HANG_VERDICT_KEYS, d)


_HANG_VERDICT_KEYS = (
    _k("verdict", doc=_always), _k("pattern", doc=_always), _k("gil_holder", doc=_always),
    _k("waiting_for_gil", doc=_always, load=_as_list), _k("waiting_for_function", doc=_always, load=_as_list),
    _k("stuck", doc=_always), _k("moving", doc=_always), _k("pool", doc=_always, load=_optional(Pool.from_json)),
    _k("waits", doc=_graph_written, load=_waits), _k("cycle", doc=_graph_written, load=_waits),
    _k("chain", doc=_graph_written, load=_waits))


@dataclass(slots=True, repr=False, eq=False)
class CrashSummary(Record):
    """What happened, in a few fields (the TRIAGE of a document that says how the process ended:
    ``analysis.event.document_triage``): hits per location, the signal, the op, the user frame nearest the last
    event, the tf.function, dumps, children."""

    breakpoints: Dict[str, int] = field(default_factory=dict)  # location -> hits
    signal: Optional[str] = None  # the fatal signal
    handled_signals: List[str] = field(default_factory=list)
    numerics: int = 0  # NaN/Inf events
    nearest_user_frame: Optional[Json] = None  # {"function", "file", "line"}
    tf_function: Optional[TfFunction] = None
    dumps: int = 0
    children_killed: List[str] = field(default_factory=list)  # "PID SIGNAL"
    op: Optional[Op] = None  # the op it died in: type, name, where it came from, where the user created it
    cxx_exception: Optional[Json] = None  # {"type", "what", "state"}
    log: Optional[str] = None  # TensorFlow's fatal log line
    eager: bool = False  # the op ran eagerly (no tf.function)
    reproducer: Optional[Json] = None  # --repro: {"path", "op", "attrs", "inputs", "check"} (analysis/reproducer.py)

    def to_json(self) -> Json:
        return _write(self, _CRASH_SUMMARY_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> CrashSummary:
        return _build(cls, _CRASH_SUMMARY_KEYS, d)


_CRASH_SUMMARY_KEYS = (
    _k("breakpoints", doc=_always, load=lambda v: dict(v or {})), _k("signal", doc=_always),
    _k("handled_signals", doc=_always, load=_as_list), _k("numerics", doc=_always, load=lambda v: v or 0),
    _k("nearest_user_frame", doc=_always), _k("tf_function", doc=_always, load=_optional(TfFunction.from_json)),
    _k("dumps", doc=_always, load=lambda v: v or 0), _k("children_killed", doc=_always, load=_as_list),
    _k("op", doc=_always, get=lambda t: t.op.triage_json() if t.op is not None else None,
       load=lambda v: Op.from_triage_json(v) if v is not None else None),
    _k("cxx_exception", doc=_truthy), _k("log", doc=_truthy), _k("eager", doc=_truthy, load=bool), _k("reproducer"))

Triage = Union[HangVerdict, CrashSummary]


def triage_from_json(d: Optional[Json]) -> Optional[Triage]:
    """The TRIAGE ``d`` stands for: a hang verdict (it has a ``"verdict"``), else a crash summary."""
    if d is None:
        return None
    return HangVerdict.from_json(d) if "verdict" in d else CrashSummary.from_json(d)
