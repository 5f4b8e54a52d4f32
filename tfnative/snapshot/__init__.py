"""Snapshots: the unwinder pipeline (``pipeline``), the one "CFI first, gdb where it must" rule (``policy``),
one process (``process``), many processes (``many``), samples over time (``samples``) and a Slurm job (``slurm``)."""
