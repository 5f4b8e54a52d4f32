"""tfnative: native debugging for TensorFlow with one mixed Python + C++ stack."""

# The one place tfnative's version is written: the wheel's metadata reads it from here (pyproject's
# [tool.setuptools.dynamic]), ``tfnative --version`` prints it, and every JSON document names it ("version").
__version__ = "0.4.0"
