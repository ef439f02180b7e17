#!/usr/bin/env python3
"""tf.nn.max_pool_with_argmax and MaxPoolGradWithArgmax on TensorFlow's own kernels or, with
`poolgen`, on poolgen's (poolgen.tensorflow imported first), as a model calls them (the op's
output allocation included); and a Keras model that pools with argmax and unpools (forward, and
a training step's gradient), of layers over TensorFlow's ops (max_pool_with_argmax, scatter_nd)
or poolgen.keras' layers: median of 15 calls, f32, one process per thread count and variant
(TensorFlow's thread pools are set before it starts).

    for t in 1 2; do for v in stock poolgen; do
      $PYTHON bench/tensorflow_bench.py $t $v; done; done    # rows: case|threads|variant|fwd ms|grad ms
"""
import sys
import time

import numpy as np
import tensorflow as tf

threads, variant = int(sys.argv[1]), sys.argv[2]
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
if variant == "poolgen":
    import poolgen.tensorflow  # noqa: F401  (before the ops' first use)

ROWS = [("8x112x112x64 k2s2 VALID", (8, 112, 112, 64), 2, 2, "VALID"),
        ("8x112x112x64 k3s2 SAME", (8, 112, 112, 64), 3, 2, "SAME"),
        ("1x56x56x64 k2s2 VALID", (1, 56, 56, 64), 2, 2, "VALID")]


def median_ms(f):
    f()
    times = []
    for _ in range(15):
        start = time.perf_counter()
        result = f()
        (result[0] if isinstance(result, tuple) else result).numpy()  # wait for the values
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


for name, shape, k, s, padding in ROWS:
    x = tf.constant(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    values, argmax = tf.nn.max_pool_with_argmax(x, k, s, padding)
    grad = tf.ones_like(values)
    forward = median_ms(lambda: tf.nn.max_pool_with_argmax(x, k, s, padding))
    backward = median_ms(lambda: tf.raw_ops.MaxPoolGradWithArgmax(
        input=x, grad=grad, argmax=argmax, ksize=[1, k, k, 1], strides=[1, s, s, 1],
        padding=padding))
    print(f"{name}|{threads}|{variant}|{forward:.3f}|{backward:.3f}", flush=True)


# Keras: Input -> pooling with argmax -> unpooling to the input's shape, k2s2.
import keras  # noqa: E402


def stock_pool_unpool(x):
    values, argmax = tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")
    n = tf.shape(x, out_type=tf.int64)[0]
    item = tf.reduce_prod(tf.shape(x, out_type=tf.int64)[1:])
    index = tf.reshape(argmax + tf.range(n)[:, None, None, None] * item, [-1, 1])
    return tf.reshape(tf.scatter_nd(index, tf.reshape(values, [-1]), [n * item]), tf.shape(x))


for name, shape in (("8x112x112x64", (8, 112, 112, 64)), ("1x56x56x64", (1, 56, 56, 64))):
    inputs = keras.Input(shape[1:])
    if variant == "poolgen":
        from poolgen.keras import MaxPoolingWithArgmax2D, MaxUnpooling2D
        values, argmax = MaxPoolingWithArgmax2D(2)(inputs)
        outputs = MaxUnpooling2D(2)([values, argmax, inputs])
    else:
        outputs = keras.layers.Lambda(stock_pool_unpool)(inputs)
    model = keras.Model(inputs, outputs)
    x = tf.constant(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    forward = tf.function(lambda: model(x))

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = model(x)
        return tape.gradient(y, x)

    print(f"keras pool+unpool {name} k2s2|{threads}|{variant}|{median_ms(forward):.3f}|"
          f"{median_ms(gradient):.3f}", flush=True)
