"""The lines between ``watch --slurm-job``'s head and its node watchers (``watch/slurmjob.py``, ``watch/node.py``).

A node watcher writes frames on its standard output; ``srun --label`` brings them to the head, each line
prefixed with the task's number, and cuts a line longer than 1 KiB into labelled pieces.  So a frame is one
line of JSON followed by a line ``#end``: the head joins a task's pieces (without their line ends: JSON needs
none) until that line.  No piece of a frame is ``#end``: a JSON text ends with ``}`` and every piece but the
last is 1 KiB long.

A frame is a message ``{"node": NAME, KIND: ...}`` or, after a message that announces them (``"docs": K``),
one of the K documents (``report.json_lines``'s line for one process).  The head writes its orders on
``srun``'s standard input, which ``--input=all`` gives every task: one JSON line each.

Node to head: ``tick`` (every interval: seconds since the node's processes last progressed, each rank's),
``facts`` (at a report's order, before anything is held: what the node knows of each process, stopped, its CPU,
its task and its main thread's frames, for the culprit the head names before the report), ``report`` (the hang
report's documents), ``crash`` (a crash report's text, then its document), ``say`` (text
for the head to print: a straggler's stack), ``cores`` (the cores written).  Head to nodes: ``report``,
``straggler``, ``core``; the end of standard input ends the node watchers (they let their processes go).
"""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO, Dict, List, Optional, Sequence

END = "#end"
MAX_FRAME = 256 << 20  # bytes of one frame at the head: a node watcher's output is bounded too


class Feed:
    """A node watcher's side: frames written whole, one writer at a time (the tracer thread's crash reports
    and the loop's ticks)."""

    def __init__(self, stream: BinaryIO, node: str) -> None:
        self.stream = stream
        self.node = node
        self.lock = threading.Lock()

    def send(self, kind: str, value: Any, docs: Sequence[bytes] = (), **more: Any) -> None:
        """``{"node": NODE, KIND: VALUE, ...more}``, then each of ``docs`` (a document's JSON line) as a frame
        of its own (the message says how many: ``"docs": K``)."""
        message: Dict[str, Any] = {"node": self.node, kind: value, **more}
        if docs:
            message["docs"] = len(docs)
        frames = [json.dumps(message, separators=(",", ":")).encode("utf-8")] + [d.rstrip(b"\n") for d in docs]
        with self.lock:
            try:
                for frame in frames:
                    self.stream.write(frame + b"\n" + END.encode() + b"\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):  # the head is gone: the end of standard input ends us
                pass


class Message:
    """One message from a node at the head, with the documents it announced (their JSON text)."""

    def __init__(self, task: int, body: Dict[str, Any]) -> None:
        self.task = task
        self.body = body
        self.docs: List[str] = []
        self.wanted = int(body.get("docs") or 0) if isinstance(body.get("docs"), int) else 0

    @property
    def node(self) -> str:
        return str(self.body.get("node", "task %d" % self.task))

    def kind(self) -> Optional[str]:
        return next((k for k in ("tick", "facts", "report", "crash", "say", "cores", "bye") if k in self.body), None)


class Assembler:
    """The head's side: a task's labelled pieces joined into frames, frames into messages."""

    def __init__(self) -> None:
        self.pieces: Dict[int, List[str]] = {}
        self.sizes: Dict[int, int] = {}
        self.open: Dict[int, Message] = {}  # a message still waiting for its documents

    def piece(self, task: int, text: str) -> Optional[Message]:
        """One labelled piece of task ``task``'s output; a message once it is whole (its documents read)."""
        if text != END:
            self.pieces.setdefault(task, []).append(text)
            self.sizes[task] = self.sizes.get(task, 0) + len(text)
            if self.sizes[task] > MAX_FRAME:  # never ending: dropped, and the task's next frame is read
                self.pieces[task], self.sizes[task] = [], 0
            return None
        frame = "".join(self.pieces.pop(task, []))
        self.sizes[task] = 0
        pending = self.open.get(task)
        if pending is not None:
            pending.docs.append(frame)
            if len(pending.docs) >= pending.wanted:
                return self.open.pop(task)
            return None
        try:
            body = json.loads(frame)
        except ValueError:
            return None
        if not isinstance(body, dict):
            return None
        message = Message(task, body)
        if message.wanted > 0:
            self.open[task] = message
            return None
        return message


def order(kind: str, **values: Any) -> bytes:
    """One order of the head for the node watchers (a line of their standard input)."""
    return json.dumps({kind: values}, separators=(",", ":")).encode("utf-8") + b"\n"


def read_order(line: bytes) -> Optional[Dict[str, Any]]:
    """An order the head wrote, or None for a line that is none."""
    try:
        body = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
