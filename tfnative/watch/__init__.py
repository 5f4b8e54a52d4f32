"""``tfnative watch``: a watchdog over a whole job that takes every process's stacks when it stops progressing."""
