"""TensorFlow's inter-op pool in a capture, summed up (``"pool"`` of a capture, an EVENT and its hang verdict):
``core/tensorflow/executors.pool_summary`` makes it, the verdicts read it.  Pure: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from . import jsonkeys
from .jsonkeys import Json
from .record import FrozenRecord

__all__ = ["Pool"]


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Pool(FrozenRecord):
    """The inter-op pool's workers: their name where TensorFlow names them (``tf_Compute``; None: TF 2.16-2.20
    name no thread), how many, which run a kernel (``busy``) and which do not (``idle``); for an unnamed pool,
    whether the count is exact (it may hold other unnamed pools' idle workers) and where each worker was placed
    (``pools``: {"inter-op"|"intra-op"|"tf.data"|"other"|"unknown": [tid...]})."""

    name: Optional[str] = None
    threads: int = 0
    busy: Tuple[int, ...] = ()
    idle: Tuple[int, ...] = ()
    exact: Optional[bool] = None  # unnamed pools only
    pools: Optional[Dict[str, Tuple[int, ...]]] = None  # unnamed pools with workers only
    has_name: bool = True  # False: a summary written before pools were told apart by name, without "name"

    @property
    def unnamed(self) -> bool:
        """A pool whose threads TensorFlow did not name (a summary without ``name`` is from a version of
        tfnative that saw only the named ``tf_Compute`` pool)."""
        return self.has_name and not self.name

    def placed(self, pool: str) -> Tuple[int, ...]:
        """The workers placed in ``pool`` ("inter-op"...), for an unnamed pool; () elsewhere."""
        return (self.pools or {}).get(pool, ())

    def to_json(self) -> Json:
        return jsonkeys.write(self, _POOL_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Pool:
        return cls(has_name="name" in d, **jsonkeys.read(_POOL_KEYS, d))


def _tids(value: Any) -> Tuple[int, ...]:
    return tuple(value or ())


def _placed(value: Any) -> Optional[Dict[str, Tuple[int, ...]]]:
    return {k: tuple(v or ()) for k, v in value.items()} if value is not None else None


def _listed(value: Optional[Dict[str, Tuple[int, ...]]]) -> Optional[Dict[str, Any]]:
    return {k: list(v) for k, v in value.items()} if value is not None else None


_POOL_KEYS = (
    jsonkeys.k("name", doc=lambda obj, value: obj.has_name),
    jsonkeys.k("threads", doc=jsonkeys.always, load=lambda v: v or 0),
    jsonkeys.k("busy", doc=jsonkeys.always, load=_tids, get=lambda p: list(p.busy)),
    jsonkeys.k("idle", doc=jsonkeys.always, load=_tids, get=lambda p: list(p.idle)),
    jsonkeys.k("exact"),
    jsonkeys.k("pools", load=_placed, get=lambda p: _listed(p.pools)),
)
