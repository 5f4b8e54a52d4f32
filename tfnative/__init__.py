"""tfnative: native debugging for TensorFlow with one mixed Python + C++ stack."""

__version__ = "0.1.0"
