"""``tfnative attach``: gdb at a stop as a source, and the session that drives it.

The session (``attachloop``) runs one target (``targets``) under gdb
(``gdbmi``, ``session``), arms breakpoints (``breakpoints``, ``symbolload``,
``tfops``) and hands each stop to its handler, which makes the event
(``stopevent``) through the one snapshot path.
"""
