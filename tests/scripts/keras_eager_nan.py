"""Eager Keras (run_eagerly) with a layer that makes NaN: Keras rebuilds the error it sees."""
import keras
import numpy as np


class LogLayer(keras.layers.Layer):
    def call(self, x):
        return keras.ops.log(x)

model = keras.Sequential([keras.Input((2,)), LogLayer(), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
model.fit(np.array([[-1.0, 2.0]] * 4), np.zeros((4, 1)), epochs=1, verbose=0)
print("done")
