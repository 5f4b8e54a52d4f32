"""gdb-side half of tfnative.

Everything in this package runs inside gdb's embedded Python (any Python 3.8+),
except the modules marked *pure*, which import nothing from gdb and are shared
with the ``tfnative`` CLI: ``linetable``, ``pylayout``, ``mixed`` and ``render``.

``gdb_scripts/tf-bt.py`` is the file to ``source`` in gdb; it registers the
``tf-bt`` command and the ``-tfnative-capture`` MI command.
"""

SCHEMA_VERSION = 1
