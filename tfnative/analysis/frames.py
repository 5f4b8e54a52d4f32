"""What the renderers show of each frame, decided here once (pure): the interpreter's call glue (hidden by default),
the user's own code (marked), TensorFlow's own frames (folded in runs; its C API entry points and ``Compute``
calls never), the frames at the top of a thread that only deliver an abort (one line of the text), the class a
picture gives a frame.  ``output/`` reads these fields (``EventNativeFrame.glue``, ``EventNativeFrame.abort``,
``foldable``, ``shown_class``, ``EventPythonFrame.user_code``) and holds no rule of its own; they are never written
in a document, and every one is a function of what a document keeps, so that a document read back is marked
again as it was (``mark_documents``).  Standard library and the core alone: gdb's ``tf-bt`` imports it too.
"""

from __future__ import annotations

import re
from operator import attrgetter
from typing import Dict, Iterable, List, Optional, Sequence

from ..core.frameclass import GCC_CLONE_RE, frame_class, hide_glue, is_glue, is_user_frame, native_class
from ..core.model import (
    Capture,
    Document,
    EventFrame,
    EventNativeFrame,
    EventPythonFrame,
    EventThread,
    Frame,
    NativeFrame,
    Op,
    PythonFrame,
    Thread,
)

_LANDMARK_RE = re.compile(r"^(TFE?_\w+$|.*::Compute(Async)?\()")

# How a thread that aborts gets from the failed check to the signal: libc's raise/abort, assert's and
# fortify's reporters, and the fatal logging of absl, tsl and TensorFlow (``LogMessageFatal``), C++'s
# ``std::terminate``.  A run of them at the top of a thread is one line of the text.
_RAISING = frozenset("""
    raise gsignal abort pthread_kill __pthread_kill __pthread_kill_implementation __pthread_kill_internal
    """.split())
_ABORT_EXACT = _RAISING | frozenset("""
    __assert_fail __assert_fail_base __assert_perror_fail __libc_message __libc_fatal __fortify_fail
    __chk_fail __stack_chk_fail malloc_printerr
    """.split())
_FATAL_LOG_RE = re.compile(r"^(absl::(\w+::)?(raw_)?log_internal::|(tsl|tensorflow)::internal::LogMessage"
                           r"|google::LogMessage)")
# (``__cxa_throw`` is not one: it says where an exception came from, and stays in view.)
_TERMINATE_RE = re.compile(r"^(std::terminate\b|__gnu_cxx::__verbose_terminate_handler|__cxxabiv1::__terminate"
                           r"|std::__terminate)")
_ASSERT = ("__assert", "__GI___assert")  # libc's reporters of a failed assert

# The classes a picture (the flame graph's page) colours a native frame by; any other is "system".
PICTURE_CLASSES = ("user", "tensorflow-python", "tensorflow-native", "interpreter", "system")


def is_landmark(frame: EventFrame) -> bool:
    """Frames never folded: TensorFlow's C API entry points and kernel/device Compute calls."""
    return isinstance(frame, NativeFrame) and bool(_LANDMARK_RE.match(frame.function or ""))


def abort_part(frame: EventFrame) -> Optional[str]:
    """Which part of an abort a native frame is: "raise", "abort" (libc's reporters), "assert" (a failed
    assert's reporter), "log" (a fatal log message), "terminate"; None for any other frame."""
    if not isinstance(frame, NativeFrame):
        return None
    name = frame.function or ""
    base = GCC_CLONE_RE.sub("", name.split("(", 1)[0].split("@", 1)[0].strip())
    base = base[len("__GI_"):] if base.startswith("__GI_") else base
    if base in _RAISING:
        return "raise"
    if base in _ABORT_EXACT:
        return "assert" if name.startswith(_ASSERT) else "abort"
    if _FATAL_LOG_RE.match(base):
        return "log"
    if _TERMINATE_RE.match(base):
        return "terminate"
    return None


def python_user(frame: EventPythonFrame) -> bool:
    """Whether a Python frame is marked as the user's code: its ``user``, or (a document without it) the rule."""
    return bool(frame.user) or is_user_frame(frame)


def mark_frame(frame: EventFrame) -> EventFrame:
    """Set what the renderers show of ``frame`` (but its part in an abort: ``mark_frames``); ``frame``."""
    if isinstance(frame, NativeFrame):
        frame.glue = is_glue(frame)
        cls = frame_class(frame)
        frame.foldable = cls.startswith("tensorflow") and not is_landmark(frame)
        shown = frame.frame_class or cls
        frame.shown_class = shown if shown in PICTURE_CLASSES else "system"
    elif isinstance(frame, PythonFrame):
        frame.user_code = python_user(frame)
        cls = frame_class(frame)
        frame.foldable = cls.startswith("tensorflow")
        frame.shown_class = "user" if frame.user_code else (frame.frame_class or cls)
    return frame


def mark_frames(frames: Sequence[EventFrame]) -> None:
    """``mark_frame`` each of a stack's frames (innermost first), and the run at its top that only delivers an
    abort (signal, abort(), a fatal log message, ``std::terminate``; only where they raise a signal): each of
    its frames with its part (``EventNativeFrame.abort``), every other frame with none."""
    top: List[str] = []  # the parts of the frames at the top, up to the first that is no part of an abort
    leading = True
    for f in frames:
        mark_frame(f)
        if isinstance(f, NativeFrame):
            f.abort = None
        part = abort_part(f) if leading else None
        leading = part is not None
        if part is not None:
            top.append(part)
    if "raise" in top:
        for f, part in zip(frames, top):
            if isinstance(f, NativeFrame):
                f.abort = part


def mark_thread(thread: EventThread) -> None:
    """``mark_frames`` of a thread's stack, and of its Python stack alone where the two did not match."""
    mark_frames(thread.frames)
    if thread.python_frames:
        mark_frames(thread.python_frames)


def mark_documents(docs: Iterable[Document]) -> None:
    """Mark every thread of ``docs`` (documents read back: what they keep decides it as it did)."""
    for doc in docs:
        for t in doc.threads():
            mark_thread(t)


def shown(frames: Iterable[EventFrame]) -> List[EventFrame]:
    """The frames a stack shows by default: the interpreter's glue hidden (marks each native frame's ``glue``)."""
    out = []
    for f in frames:
        if isinstance(f, NativeFrame):
            f.glue = is_glue(f)
            if f.glue:
                continue
        out.append(f)
    return out


def marked_threads(capture: Capture, classes: Dict[str, str], native_all: bool = False) -> List[EventThread]:
    """A capture's threads as gdb's ``tf-bt`` shows them, the event's types built of the capture's (``capture`` is
    not changed): glue hidden (unless ``native_all``), the frames of the user's own libraries classed ``user``
    (``classes``: each library's class where its path decides it; the standard library's code in them is not the
    user's), every thread marked (``mark_thread``)."""
    users = {name for name, cls in classes.items() if cls == "user"}
    threads = []
    for captured in capture.threads:
        t = event_thread(captured)
        if not native_all:
            t.frames = shown(t.frames)
        for f in t.frames:
            if isinstance(f, NativeFrame) and f.library in users:
                f.frame_class = native_class(f, "user")
        mark_thread(t)
        threads.append(t)
    return threads


def copies(frames: Iterable[Frame]) -> List[EventFrame]:
    """The event's frames of captured ``frames``, to class and mark: new objects of the event's types (their ops
    copied too: analysis names an op's call, ``opcall``; an elided frame is never changed: itself); an event's
    frames copied again."""
    return [_copy(f) for f in frames]


def event_thread(thread: Thread, glue: bool = True) -> EventThread:
    """The event's thread of a captured one, its frames (and its Python stack alone) the event's copies of the
    capture's (``copies``; without the interpreter's glue unless ``glue``): the capture is not changed."""
    t = EventThread(*_THREAD_FIELDS(thread))
    t.frames = copies(thread.frames if glue else hide_glue(thread.frames))
    t.python_frames = copies(thread.python_frames) if thread.python_frames is not None else None
    return t


# Each type's fields in ``__init__``'s order (a dataclass's ``__match_args__``): a copy made of them is five times
# as fast as ``dataclasses.replace`` (a stack's every frame is copied).  A captured type's fields come first in
# its event type's ``__init__``: the captured fields, then analysis's own, left to their defaults.
_NATIVE_FIELDS, _PYTHON_FIELDS = attrgetter(*NativeFrame.__match_args__), attrgetter(*PythonFrame.__match_args__)
_EVENT_NATIVE_FIELDS = attrgetter(*EventNativeFrame.__match_args__)
_EVENT_PYTHON_FIELDS = attrgetter(*EventPythonFrame.__match_args__)
_OP_FIELDS, _THREAD_FIELDS = attrgetter(*Op.__match_args__), attrgetter(*Thread.__match_args__)


def _copy(frame: Frame) -> EventFrame:
    if isinstance(frame, NativeFrame):
        fields = _EVENT_NATIVE_FIELDS if isinstance(frame, EventNativeFrame) else _NATIVE_FIELDS
        copied = EventNativeFrame(*fields(frame))
        if copied.op is not None:
            copied.op = Op(*_OP_FIELDS(copied.op))
        return copied
    if isinstance(frame, PythonFrame):
        fields = _EVENT_PYTHON_FIELDS if isinstance(frame, EventPythonFrame) else _PYTHON_FIELDS
        return EventPythonFrame(*fields(frame))
    return frame
