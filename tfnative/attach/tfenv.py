"""TensorFlow's debug switches, as environment variables for the launched script.

Each switch is opt-in and sets only the variables documented here; without
them the script's environment is exactly the user's.

* ``--vlog N``: ``TF_CPP_MAX_VLOG_LEVEL=N`` (what TF 2.21 reads; the old
  ``TF_CPP_MIN_VLOG_LEVEL`` is silently dead there, and is set too for older
  TFs) and ``TF_CPP_MIN_LOG_LEVEL=0``.
* ``--vmodule M=N,...``: ``TF_CPP_VMODULE`` and ``TF_CPP_MIN_LOG_LEVEL=0``
  (``executor=1`` logs every node the executor runs, with its thread id).
* ``--dump-graphs DIR``: ``TF_DUMP_GRAPH_PREFIX=DIR`` and
  ``TF_DUMP_GRAPH_NAME_FILTER='*'`` (without the filter 2.21 dumps nothing).
* ``--dump-xla DIR``: ``XLA_FLAGS`` += ``--xla_dump_to=DIR --xla_dump_hlo_as_text``.
* ``--check-numerics``: ``PYTHONPATH`` gets ``tfnative/inject`` first, whose
  ``sitecustomize`` calls ``tf.debugging.enable_check_numerics()`` once the
  script imports TensorFlow, and signals a NaN/Inf to gdb
  (``TFNATIVE_NUMERICS_SIGNAL``); it restores ``PYTHONPATH`` for the script
  at once and runs any ``sitecustomize`` it shadows.
* ``--op-origins``: the same ``sitecustomize``, which records where each op
  traced into a graph was created (``TFNATIVE_OP_ORIGINS``: a file in a
  private temporary directory of tfnative's, removed at the end), so that a
  ``--break-op`` hit or a crash in a kernel says which line made its op.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..errors import TfnativeError

INJECT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "inject")  # tfnative/inject
# A real-time signal no library of ours uses; gdb stops on it and drops it.
NUMERICS_SIGNAL = int(signal.SIGRTMAX) - 2
NUMERICS_SIGNAL_NAME = "SIG%d" % NUMERICS_SIGNAL  # gdb's name for a real-time signal


@dataclass
class DebugSwitches:
    vlog: Optional[int] = None
    vmodule: Optional[str] = None
    dump_graphs: Optional[str] = None
    dump_xla: Optional[str] = None
    check_numerics: bool = False
    numerics_no_xla: bool = False  # --numerics-no-xla: jit_compile=True functions run without XLA, checked
    op_origins: Optional[str] = None  # the file the script's hook writes op origins to (--op-origins)
    dump_dirs: List[str] = field(default_factory=list)

    def environment(self, base: Dict[str, str]) -> Dict[str, str]:
        """The script's environment: ``base`` plus what the switches set."""
        env = dict(base)
        if self.vlog is not None:
            env["TF_CPP_MAX_VLOG_LEVEL"] = str(self.vlog)
            env["TF_CPP_MIN_VLOG_LEVEL"] = str(self.vlog)
            env["TF_CPP_MIN_LOG_LEVEL"] = "0"
        if self.vmodule:
            if not re.fullmatch(r"[\w*?.-]+=\d+(,[\w*?.-]+=\d+)*", self.vmodule):
                raise TfnativeError("--vmodule %r: expected MODULE=LEVEL[,MODULE=LEVEL...]" % self.vmodule)
            env["TF_CPP_VMODULE"] = self.vmodule
            env["TF_CPP_MIN_LOG_LEVEL"] = "0"
        if self.dump_graphs:
            d = self._dir(self.dump_graphs)
            env["TF_DUMP_GRAPH_PREFIX"] = d
            env["TF_DUMP_GRAPH_NAME_FILTER"] = "*"
        if self.check_numerics or self.op_origins:
            if not os.path.isfile(os.path.join(INJECT_DIR, "sitecustomize.py")):
                raise TfnativeError("%s/sitecustomize.py is missing: reinstall tfnative" % INJECT_DIR)
            if "PYTHONPATH" in base:
                env["TFNATIVE_SAVED_PYTHONPATH"] = base["PYTHONPATH"]
            env["PYTHONPATH"] = INJECT_DIR + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
        if self.check_numerics:
            env["TFNATIVE_NUMERICS_SIGNAL"] = str(NUMERICS_SIGNAL)
            if self.numerics_no_xla:
                env["TFNATIVE_NUMERICS_NO_XLA"] = "1"
        if self.op_origins:
            env["TFNATIVE_OP_ORIGINS"] = self.op_origins
        if self.dump_xla:
            d = self._dir(self.dump_xla)
            flags = env.get("XLA_FLAGS", "").strip()
            env["XLA_FLAGS"] = (flags + " " if flags else "") + "--xla_dump_to=%s --xla_dump_hlo_as_text" % d
        return env

    def _dir(self, path: str) -> str:
        d = os.path.abspath(path)
        if any(c.isspace() for c in d):
            raise TfnativeError("dump directory %r: TensorFlow's flags cannot carry a blank in a path" % path)
        os.makedirs(d, exist_ok=True)
        self.dump_dirs.append(d)
        return d

    def produced(self, since: float) -> List[str]:
        """Files written under the dump directories since ``since`` (a time.time())."""
        out = []
        for d in self.dump_dirs:
            for root, _dirs, files in os.walk(d):
                for name in files:
                    p = os.path.join(root, name)
                    try:
                        if os.path.getmtime(p) >= since - 1:
                            out.append(p)
                    except OSError:
                        pass
        return sorted(out)
