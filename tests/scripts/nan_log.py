"""A NaN from tf.math.log of a negative number: eagerly (argv[1] == "eager") or inside a tf.function."""
import sys

import tensorflow as tf


@tf.function
def model(x):
    y = tf.matmul(x, x)
    z = tf.math.log(y - 10.0)  # NAN LINE
    return tf.reduce_sum(z)


x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
if sys.argv[1:] == ["eager"]:
    print(tf.math.log(x - 2.0))  # EAGER NAN LINE
else:
    print(model(x))  # CALL LINE
