"""TensorFlow's structures in a target's memory: the op a kernel runs and its inputs, its thread pools and thread
names, its fatal log line (pure; the standard library alone)."""
