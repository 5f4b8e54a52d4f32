"""Keras 3 with jit_compile=True and a layer that makes NaN: the NaN leaves the XLA-compiled step (not
instrumented by --check-numerics) and the next eager op (OptionalGetValue, Keras fetching the logs) sees it."""
import keras
import numpy as np


class LogLayer(keras.layers.Layer):
    def call(self, x):
        return keras.ops.log(x)

model = keras.Sequential([keras.Input((2,)), LogLayer(), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse", jit_compile=True)
model.fit(np.array([[-1.0, 2.0]] * 4), np.zeros((4, 1)), epochs=1, verbose=0)
print("done")
