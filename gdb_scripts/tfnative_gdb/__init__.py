"""The readers tfnative shares between gdb's embedded Python and its own process.

The modules that import ``gdb`` (``capture``, ``commands``, ``opbreak``,
``gdbinit``) run inside gdb only; the others are pure (no gdb, no subprocess)
and are what ``tfnative`` itself uses to read a target's memory: Python frames
(``pyframes``, ``pylayout``, ``linetable``), the merge (``mixed``,
``threads``), ops (``opkernel``), AutoGraph (``autograph``), elision and text
(``elide``, ``render``).

``gdb_scripts/tf-bt.py`` is the file to ``source`` in gdb; it registers the
``tf-bt`` command and the ``-tfnative-capture`` MI command.
"""

SCHEMA_VERSION = 1

# The end of x86-64 Linux user space as processes get it (4-level paging; the kernel maps higher only
# when asked with a hint above it): every reader of target memory takes no address at or above it.
USER_SPACE_END = 1 << 47
