"""gdb commands: ``tf-bt`` for people, ``-tfnative-capture`` for tfnative."""

import json

import gdb  # type: ignore

from . import SCHEMA_VERSION
from .capture import capture
from .render import hide_glue, thread_block


def _parse(argv):
    opts = {"which": "selected", "native_all": False, "json": False, "tids": [], "full": False}
    for a in argv:
        if a in ("-a", "--all-threads", "all"):
            opts["which"] = "all"
        elif a in ("-p", "--python-threads"):
            opts["which"] = "python"
        elif a == "--native-all":
            opts["native_all"] = True
        elif a == "--full":
            opts["full"] = True
        elif a == "--json":
            opts["json"] = True
        elif a.startswith("--thread="):
            opts["which"] = "all"
            opts["tids"].append(int(a.split("=", 1)[1]))
        else:
            raise gdb.GdbError("tf-bt: unknown argument %r (use -a, -p, --native-all, --json)" % a)
    return opts


class TfBt(gdb.Command):
    """Print mixed Python + native stacks: tf-bt [-a|--all-threads] [-p] [--native-all] [--full] [--json]

With no argument: the selected thread.  -a: every thread (Python ones first);
-p: only threads that run Python.  --native-all keeps interpreter glue frames;
--full does not fold runs of TensorFlow-internal frames.
Python frames are read from memory, so the interpreter needs no debug info."""

    def __init__(self):
        super().__init__("tf-bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        opts = _parse(gdb.string_to_argv(arg))
        result = capture(opts["which"], opts["tids"] or None)
        if not opts["native_all"]:
            for t in result["threads"]:
                t["frames"] = hide_glue(t["frames"])
        if opts["json"]:
            gdb.write(json.dumps(result, indent=1) + "\n")
            return
        for w in result["warnings"]:
            gdb.write("warning: %s\n" % w)
        for t in result["threads"]:
            gdb.write("\n".join(thread_block(t, fold=not opts["full"])) + "\n\n")


if hasattr(gdb, "MICommand"):

    class MiCapture(gdb.MICommand):
        """-tfnative-capture [--all-threads|--python-threads] [--thread=LWP]...: JSON of mixed stacks."""

        def __init__(self):
            super().__init__("-tfnative-capture")

        def invoke(self, argv):
            opts = _parse(argv)
            result = capture(opts["which"], opts["tids"] or None)
            result["schema"] = SCHEMA_VERSION
            return {"json": json.dumps(result)}


def register() -> None:
    TfBt()
    if hasattr(gdb, "MICommand"):
        MiCapture()
