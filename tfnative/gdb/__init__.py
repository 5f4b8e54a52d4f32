"""Everything that starts, talks to and stops gdb.

The map of its modules: ``docs/architecture.md``.
"""
