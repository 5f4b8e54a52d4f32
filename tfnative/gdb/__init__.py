"""Everything that starts, talks to and stops gdb: the MI connection (``mi``), starting, attaching, signals and
detaching (``control``), symbol loading (``symbols``), surrogate symbol files (``surrogate``), breakpoints
(``breakpoints``), op breakpoints and op annotation through gdb (``ops``), stacks taken through gdb (``stacks``)."""
