"""Core files: read, checked, unwound (by the snapshot policy, through gdb where it must) and reported.

The map of its modules: ``docs/architecture.md``.
"""
