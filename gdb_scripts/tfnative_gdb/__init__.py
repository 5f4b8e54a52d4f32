"""The gdb adapters: tfnative's code that runs inside gdb's embedded Python.

``capture`` (mixed stacks at a stop, ``GdbMemory``: the target's memory as
gdb's inferior gives it), ``commands`` (``tf-bt`` for people,
``-tfnative-capture`` and ``-tfnative-registers`` for tfnative), ``opbreak``
(``--break-op``'s breakpoints) and ``gdbinit`` (loads this package and
``tfnative``'s pure core beside it without touching gdb's ``sys.path``).
The readers themselves (Python frames, ops, the merge, text) are
``tfnative.core`` and ``tfnative.output.render``, shared with tfnative's own
process.

``gdb_scripts/tf-bt.py`` is the file to ``source`` in gdb; it registers the
``tf-bt`` command and the ``-tfnative-capture`` MI command.
"""

SCHEMA_VERSION = 1
