"""Sources: where a snapshot's memory, registers and mapped files come from (a live pid, ptrace, a session's socket).

A core file is a source too (``tfnative/corefile``). The map: ``docs/architecture.md``.
"""
