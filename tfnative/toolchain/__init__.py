"""Build helpers: Bazel presets that keep debug info, the DWARF doctor, where TensorFlow is installed."""
