"""gdb's side of a recorded MI session, replayed: what ``tfnative.gdb.mi.Gdb`` answers, from a transcript.

A transcript (``transcripts/*.json``, written by ``transcripts/record.py`` over
a real gdb and a real process) holds, in order, every command the code sent
with the raw lines gdb wrote up to its result, and every event read
(``next_event``) with the raw line gdb wrote for it, or ``null`` where the
read timed out.  ``ReplayGdb`` parses those lines with ``tfnative.gdb.mi``'s own parser
and answers with them.  The code under test must send exactly the recorded
commands and read events at the recorded places: anything else raises
``TranscriptMismatch``, an ``AssertionError`` no ``except GdbError`` swallows.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any, Deque, Dict, List, Optional

from tfnative.gdb.mi import mi_quote, parse_line, result_payload

TRANSCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transcripts")


class TranscriptMismatch(AssertionError):
    """The code did what the recorded session did not."""


def load(name: str) -> Dict[str, Any]:
    """The transcript ``transcripts/NAME.json``."""
    with open(os.path.join(TRANSCRIPTS, name + ".json")) as f:
        return json.load(f)


def events(transcript: Dict[str, Any], message: Optional[str] = None) -> List[Dict[str, Any]]:
    """The event records read in the session (parsed), those named ``message`` if given."""
    recs = [parse_line(step["event"]) for step in transcript["steps"] if step.get("event")]
    return [r for r in recs if message is None or r.get("message") == message]


class ReplayGdb:
    """The part of ``tfnative.gdb.mi.Gdb`` the code uses, answered from one transcript."""

    def __init__(self, transcript: Dict[str, Any], pid: int = 0) -> None:
        self.steps: List[Dict[str, Any]] = transcript["steps"]
        self.at = 0
        self.sent: List[str] = []  # the commands replayed, in order
        self.console: Deque[str] = collections.deque(maxlen=400)
        self.said = 0  # as Gdb.said: how many lines ``console`` ever had
        self.dead = False
        self.pid = pid

    def _next(self, kind: str, what: Optional[str]) -> Dict[str, Any]:
        doing = "sent %r" % what if kind == "send" else "read an event"
        if self.at >= len(self.steps):
            raise TranscriptMismatch("the code %s after the transcript's last step (%d)" % (doing, self.at))
        step = self.steps[self.at]
        if kind not in step or (kind == "send" and step["send"] != what):
            raise TranscriptMismatch("step %d: the code %s; the transcript has %r" % (self.at, doing, step))
        self.at += 1
        return step

    def command(self, cmd: str, timeout: float = 60.0) -> Dict[str, Any]:
        step = self._next("send", cmd)
        self.sent.append(cmd)
        result = None
        for line in step["lines"]:
            rec = parse_line(line)
            if rec.get("type") == "result":
                result = rec
            elif isinstance(rec.get("payload"), str):
                self.console.append(rec["payload"])
                self.said += 1
        if result is None:
            raise TranscriptMismatch("step %d: gdb never answered %r in the recorded session" % (self.at - 1, cmd))
        return result_payload(result)

    def said_since(self, mark: int) -> List[str]:
        n = min(self.said - mark, len(self.console))
        return list(self.console)[len(self.console) - n:] if n > 0 else []

    def console_command(self, text: str, timeout: float = 60.0) -> Dict[str, Any]:
        return self.command("-interpreter-exec console %s" % mi_quote(text), timeout)

    def next_event(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        line = self._next("event", None)["event"]
        return None if line is None else parse_line(line)

    def wait_event(self, message: str, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        while True:
            rec = self.next_event(timeout)
            if rec is None:
                return None
            if rec.get("message") == message:
                return rec.get("payload") or {}

    def finished(self) -> None:
        """Every recorded step was replayed."""
        if self.at != len(self.steps):
            raise TranscriptMismatch("%d recorded steps never replayed, the next: %r"
                                     % (len(self.steps) - self.at, self.steps[self.at]))
