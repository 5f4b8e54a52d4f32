"""Sources: where a snapshot's memory, registers and mapped files come from.

A ptrace-held pid (``ptrace``), a core file (``corefile``, ``coresource``,
with ``corecheck`` and ``corepaths`` for its files), a core read through gdb
(``coregdb``), a pid held by a running ``attach`` session (``sessionsock``).
gdb at a stop is the source of ``tfnative.attach``.
"""
