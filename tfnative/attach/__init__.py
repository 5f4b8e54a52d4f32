"""``tfnative attach``: the session that drives gdb over one target, one handler per kind of stop.

The map of its modules, and how one event flows through them: ``docs/architecture.md``.
"""
