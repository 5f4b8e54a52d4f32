"""Snapshots: the one snapshot path, the one "CFI first, gdb where it must" policy, one process, many, a job.

The map of its modules: ``docs/architecture.md``.
"""
