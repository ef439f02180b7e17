"""poolgen.tensorflow against TensorFlow itself: tf.nn.max_pool_with_argmax and its gradient run
in a subprocess on TensorFlow's own kernels, then here with poolgen's serving them (imported
before their first use), bit for bit, and counted by stats().

    $PYTHON -m pytest -q tests/tensorflow   # a Python with tensorflow and poolgen.tensorflow

Skips (saying why) where either is missing.
"""
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed here")

# The cases: (name, dtype, NHWC shape, ksize, strides, padding, include_batch_in_index).
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64"]
FLOATS = {"float32", "float64", "float16", "bfloat16"}


def cases():
    g = np.random.default_rng(58)
    out = []
    for n in range(60):
        dtype = DTYPES[n % len(DTYPES)]
        shape = [int(g.integers(1, 3)), int(g.integers(1, 10)), int(g.integers(1, 10)),
                 int(g.integers(1, 5))]
        ksize = [1, int(g.integers(1, 5)), int(g.integers(1, 5)), 1]
        strides = [1, int(g.integers(1, 4)), int(g.integers(1, 4)), 1]
        out.append((f"case{n}", dtype, shape, ksize, strides, ["SAME", "VALID"][n % 2],
                    bool(n % 3 == 0)))
    # Windows that do not fit (empty outputs, then refusals), the v0.1 shape, a one-pixel frame.
    out += [("empty", "float32", [1, 2, 3, 2], [1, 3, 1, 1], [1, 2, 1, 1], "VALID", False),
            ("refused", "float32", [1, 1, 2, 1], [1, 3, 1, 1], [1, 1, 1, 1], "VALID", False),
            ("v01", "float32", [2, 112, 112, 64], [1, 2, 2, 1], [1, 2, 2, 1], "VALID", True),
            ("same_s4", "float32", [1, 3, 3, 1], [1, 1, 1, 1], [1, 4, 4, 1], "SAME", True)]
    return out


def inputs(name, dtype, shape):
    g = np.random.default_rng(zlib.crc32(name.encode()))  # the same in every process
    if dtype in FLOATS:
        x = g.integers(-4, 5, size=shape).astype(np.float32)  # ties
        x[g.random(shape) < 0.05] = np.nan
        x[g.random(shape) < 0.05] = -np.inf
    else:
        x = g.integers(0, 100, size=shape)
    return x, g.standard_normal(shape).astype(np.float32)


# Runs every case on the TensorFlow kernels of a fresh process (poolgen never imported there).
STOCK = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf
    sys.path.insert(0, sys.argv[2])
    import test_tensorflow as t
    np.savez(sys.argv[1], **t.run_all(tf))
""")


def run_all(tf):
    """{name_field: array} for every case: values, argmax, gradient, or an error's class name."""
    results = {}
    for name, dtype, shape, ksize, strides, padding, batch in cases():
        x, _ = inputs(name, dtype, shape)
        xt = tf.cast(tf.constant(x), dtype)
        try:
            with tf.GradientTape() as tape:
                tape.watch(xt)
                y, i = tf.nn.max_pool_with_argmax(xt, ksize, strides, padding,
                                                  include_batch_in_index=batch)
                loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(
                    tf.constant(np.arange(np.prod(y.shape)).reshape(y.shape) % 7), tf.float32))
            results[name + ":values"] = tf.cast(y, tf.float64).numpy() if dtype == "bfloat16" \
                else y.numpy()
            results[name + ":argmax"] = i.numpy()
            if dtype in FLOATS:
                grad = tape.gradient(loss, xt)
                results[name + ":grad"] = tf.cast(grad, tf.float64).numpy()
        except tf.errors.OpError as e:
            results[name + ":error"] = np.array(type(e).__name__)
    return results


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    path = tmp_path_factory.mktemp("stock") / "stock.npz"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", STOCK, str(path), os.path.dirname(__file__)],
                   check=True, env=env)
    return dict(np.load(path))


@pytest.fixture(scope="module")
def served():
    pt = pytest.importorskip("poolgen.tensorflow", reason="poolgen.tensorflow is not installed")
    before = pt.stats()
    results = run_all(tf)
    after = pt.stats()
    return results, {k: after[k] - before[k] for k in after}


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    return np.array_equal(a, b)


def test_every_case_matches_tensorflow(stock, served):
    results, counts = served
    assert sorted(results) == sorted(stock)
    differing = [key for key in stock if not same_bits(stock[key], results[key])]
    assert not differing, differing
    assert stock["refused:error"] == "InvalidArgumentError"
    assert stock["empty:values"].shape == (1, 0, 3, 2)
    # Every case but the refused one ran on poolgen where its build has the dtype (f32 always;
    # a build without some dtypes leaves those to TensorFlow's kernels), and the gradients.
    f32 = [c for c in cases() if c[1] == "float32" and c[0] != "refused"]
    assert len(f32) <= counts["max_pool_with_argmax"] <= len(cases()) - 1
    assert len(f32) <= counts["max_pool_grad_with_argmax"] <= sum(
        1 for c in cases() if c[1] in FLOATS and c[0] != "refused")


def test_tf_function_runs_poolgen():
    pt = pytest.importorskip("poolgen.tensorflow", reason="poolgen.tensorflow is not installed")

    @tf.function
    def pool(x):
        return tf.nn.max_pool_with_argmax(x, 3, 2, "SAME")

    x = np.random.default_rng(1).standard_normal((2, 15, 17, 8)).astype(np.float32)
    before = pt.stats()["max_pool_with_argmax"]
    values, argmax = pool(tf.constant(x))
    assert pt.stats()["max_pool_with_argmax"] == before + 1
    flat = x.reshape(2, -1)  # argmax without the batch: offsets in each image's NHWC elements
    picked = np.take_along_axis(flat, argmax.numpy().reshape(2, -1), axis=1)
    assert np.array_equal(picked, values.numpy().reshape(2, -1))


def test_invalid_argmax_is_an_error_not_an_abort():
    pytest.importorskip("poolgen.tensorflow", reason="poolgen.tensorflow is not installed")
    with pytest.raises(tf.errors.InvalidArgumentError, match="indices"):
        tf.raw_ops.MaxPoolGradWithArgmax(
            input=np.zeros((1, 2, 2, 1), np.float32), grad=np.ones((1, 1, 1, 1), np.float32),
            argmax=np.array([[[[7]]]], np.int64), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
            padding="VALID")


def test_depth_windows_are_refused():
    pytest.importorskip("poolgen.tensorflow", reason="poolgen.tensorflow is not installed")
    with pytest.raises(tf.errors.UnimplementedError, match="spatial windows only"):
        tf.nn.max_pool_with_argmax(np.zeros((1, 2, 2, 2), np.float32), [1, 1, 1, 2],
                                   [1, 1, 1, 2], "VALID")
