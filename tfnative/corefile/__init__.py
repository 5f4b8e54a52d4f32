"""Core files: the ELF core reader (``reader``), the core as a snapshot source (``source``), path rules for a
core from another machine (``paths``), file checks (``checks``), the core through gdb (``withgdb``), the core's
document (``document``), what a core says (``triage``) and its Markdown bug report (``report``)."""
