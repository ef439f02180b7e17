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


# ---------------------------------------------------------------------------------------------
# The ops poolgen adds: 3-D pooling with argmax, unpooling by TensorFlow's argmax, gradients.

def pt_or_skip():
    return pytest.importorskip("poolgen.tensorflow", reason="poolgen.tensorflow is not installed")


def test_3d_pooling_of_one_plane_is_tensorflows_2d(stock):
    """Every 2-D case, as a 3-D one of depth 1 through poolgen's own op, gives TensorFlow's
    kernels' values, argmax (its format is the same there) and gradient, bit for bit."""
    pt = pt_or_skip()
    before = pt.stats()
    ran = 0
    for name, dtype, shape, ksize, strides, padding, batch in cases():
        x, _ = inputs(name, dtype, shape)
        xt = tf.cast(tf.constant(x), dtype)[:, None]
        k3, s3 = [1, 1] + ksize[1:], [1, 1] + strides[1:]
        try:
            with tf.GradientTape() as tape:
                tape.watch(xt)
                y, i = pt.max_pool_with_argmax(xt, k3, s3, padding, include_batch_in_index=batch)
                loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(
                    tf.constant(np.arange(np.prod(y.shape)).reshape(y.shape) % 7), tf.float32))
        except tf.errors.UnimplementedError:  # a dtype this poolgen build left out
            assert dtype != "float32"
            continue
        except tf.errors.OpError as e:
            assert str(stock[name + ":error"]) == type(e).__name__, name
            continue
        values = tf.cast(y, tf.float64) if dtype == "bfloat16" else y
        assert same_bits(stock[name + ":values"], values.numpy()[:, 0]), name
        assert same_bits(stock[name + ":argmax"], i.numpy()[:, 0]), name
        if dtype in FLOATS:
            grad = tf.cast(tape.gradient(loss, xt), tf.float64).numpy()[:, 0]
            assert same_bits(stock[name + ":grad"], grad), name
        ran += 1
    assert ran >= sum(1 for c in cases() if c[1] == "float32") - 1  # all but the refused one
    assert pt.stats()["max_pool3d_with_argmax"] - before["max_pool3d_with_argmax"] == ran


def reference_pool(x, ksize, strides, padding, with_batch):
    """TensorFlow's max_pool_with_argmax in N-D, for inputs without NaN: each window's first
    largest tap in row-major order, SAME padding as TensorFlow pads, the argmax flattened over
    (n,) spatial..., c."""
    n, *spatial, c = x.shape
    nd = len(spatial)
    if padding == "SAME":
        out = [-(-e // s) for e, s in zip(spatial, strides)]
        before = [max((o - 1) * s + k - e, 0) // 2
                  for o, s, k, e in zip(out, strides, ksize, spatial)]
    else:
        out = [(e - k) // s + 1 for e, k, s in zip(spatial, ksize, strides)]
        before = [0] * nd
    values = np.zeros([n, *out, c], x.dtype)
    argmax = np.zeros([n, *out, c], np.int64)
    for b, *o, ch in np.ndindex(*values.shape):
        best, where = None, None
        for tap in np.ndindex(*ksize):
            p = [oi * s - bf + t for oi, s, bf, t in zip(o, strides, before, tap)]
            if all(0 <= pi < e for pi, e in zip(p, spatial)) and \
                    (best is None or x[(b, *p, ch)] > best):
                best, where = x[(b, *p, ch)], p
        flat = 0
        for pi, e in zip([b] + where if with_batch else where, ([n] if with_batch else []) +
                         spatial):
            flat = flat * e + pi
        values[(b, *o, ch)], argmax[(b, *o, ch)] = best, flat * c + ch
    return values, argmax


def window_cases(nd, count, seed):
    g = np.random.default_rng(seed)
    for n in range(count):
        shape = [int(g.integers(1, 3))] + [int(g.integers(1, 7)) for _ in range(nd)] + \
                [int(g.integers(1, 4))]
        ksize = [int(g.integers(1, 4)) for _ in range(nd)]
        strides = [int(g.integers(1, 4)) for _ in range(nd)]
        padding = "SAME" if n % 2 else "VALID"
        if padding == "VALID":
            shape[1:-1] = [max(e, k) for e, k in zip(shape[1:-1], ksize)]
        yield g, shape, ksize, strides, padding, bool(n % 3 == 0)


@pytest.mark.parametrize("nd", [1, 3])
def test_1d_and_3d_pooling_against_the_reference(nd):
    """The ranks TensorFlow has no argmax op for, on integer-valued inputs with ties, and the
    gradient (integer-valued, so that any order of its sums is exact)."""
    pt = pt_or_skip()
    for g, shape, ksize, strides, padding, batch in window_cases(nd, 30, 58 + nd):
        x = g.integers(-3, 4, size=shape).astype(np.float32)
        want, want_argmax = reference_pool(x, ksize, strides, padding, batch)
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y, i = pt.max_pool_with_argmax(xt, ksize, strides, padding,
                                           include_batch_in_index=batch)
            weights = g.integers(-5, 6, size=want.shape).astype(np.float32)
            loss = tf.reduce_sum(y * weights)
        what = (shape, ksize, strides, padding, batch)
        assert same_bits(want, y.numpy()), what
        assert same_bits(want_argmax, i.numpy()), what
        grad = np.zeros(x.size, np.float32)
        offsets = want_argmax.reshape(shape[0], -1) + (
            0 if batch else np.arange(shape[0])[:, None] * (x.size // shape[0]))
        np.add.at(grad, offsets.ravel(), weights.ravel())
        assert same_bits(grad.reshape(shape), tape.gradient(loss, xt).numpy()), what


def reference_unpool(values, argmax, size, with_batch):
    """Zero but for each value at its argmax, in NHWC order (the latest wins)."""
    n, c = values.shape[0], values.shape[-1]
    out = np.zeros([n, *size, c], values.dtype)
    flat = out.reshape(n, -1)
    for b, rest in np.ndindex(n, values[0].size):
        index = argmax.reshape(n, -1)[b, rest]
        if with_batch:
            out.reshape(-1)[index] = values.reshape(n, -1)[b, rest]
        else:
            flat[b, index] = values.reshape(n, -1)[b, rest]
    return out


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8"])
def test_unpooling_against_the_reference(nd, dtype):
    """max_unpool of max_pool_with_argmax's results (overlapping windows name one place several
    times) and of argmax drawn anywhere in the output, both argmax types; its gradient gathers."""
    pt = pt_or_skip()
    for g, shape, ksize, strides, padding, batch in window_cases(nd, 12, 7 * nd):
        x = tf.cast(g.integers(0, 50, size=shape), dtype)
        try:
            values, argmax = pt.max_pool_with_argmax(x, ksize, strides, padding,
                                                     include_batch_in_index=batch)
        except tf.errors.UnimplementedError as e:
            pytest.skip(f"this poolgen build has no {dtype} pooling kernel: {e.message}")
        size = shape[1:-1]
        frame = np.prod(shape) if batch else np.prod(shape[1:])
        anywhere = g.integers(0, frame, size=argmax.shape)
        for a in (argmax, tf.constant(anywhere, tf.int32)):
            vt = tf.cast(values, tf.float32) if dtype == "bfloat16" else values
            want = reference_unpool(vt.numpy(), a.numpy(), size, batch)
            got = pt.max_unpool(values, a, size, include_batch_in_index=batch)
            got = tf.cast(got, tf.float32) if dtype == "bfloat16" else got
            assert same_bits(want, got.numpy()), (shape, ksize, strides, padding, batch)
            if dtype not in FLOATS:
                continue
            grad_out = tf.cast(g.standard_normal([shape[0], *size, shape[-1]]), dtype)
            with tf.GradientTape() as tape:
                tape.watch(values)
                loss = tf.reduce_sum(tf.cast(pt.max_unpool(values, a, size, batch), tf.float32)
                                     * tf.cast(grad_out, tf.float32))
            flat = tf.cast(grad_out, tf.float32).numpy().reshape(1 if batch else shape[0], -1)
            index = a.numpy().reshape(flat.shape[0], -1)
            want_grad = np.take_along_axis(flat, index, axis=1).reshape(values.shape)
            got_grad = tf.cast(tape.gradient(loss, values), tf.float32).numpy()
            assert same_bits(want_grad, got_grad), (shape, ksize, strides, padding, batch)


def test_unpooling_errors():
    pt = pt_or_skip()
    values = np.ones((1, 2, 2, 1), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices: expected tensorflow "
                       r"indices in \[0, 16\).*got 16"):
        pt.max_unpool(values, np.array([0, 1, 2, 16]).reshape(1, 2, 2, 1), [4, 4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="output_size must hold 2"):
        pt._ops.poolgen_max_unpool(
            values, np.zeros((1, 2, 2, 1), np.int64), [4, 4, 4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="argmax shape"):
        pt.max_unpool(values, np.zeros((1, 2, 1, 1), np.int64), [4, 4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="output_size must be positive"):
        pt.max_unpool(values, np.zeros((1, 2, 2, 1), np.int64), [4, 0])
    # Sizes whose element count overflows int64: an error, eager and in a graph, not the abort
    # of TensorFlow's TensorShape.
    for size in ([1 << 40, 1 << 40], [1 << 62, 4]):
        with pytest.raises(tf.errors.InvalidArgumentError, match="output_size: expected an "
                           "output .* of at most 2\\^63 - 1 elements"):
            pt.max_unpool(values, np.zeros((1, 2, 2, 1), np.int64), size)
        with pytest.raises(tf.errors.InvalidArgumentError, match="output_size"):
            tf.function(lambda v, a: pt.max_unpool(v, a, size))(
                values, np.zeros((1, 2, 2, 1), np.int64))
    with pytest.raises(ValueError, match="3-, 4- or 5-dimensional"):
        pt.max_pool_with_argmax(np.zeros((2, 2), np.float32), 1, 1, "VALID")
    with pytest.raises(ValueError, match="ksize must hold 1, 3 or 5"):
        pt.max_pool_with_argmax(np.zeros((1, 2, 2, 2, 1), np.float32), [2, 2], 1, "VALID")


def test_graph_shapes_and_stats():
    """tf.function infers the unpooled shape from a constant output_size or the input's shape;
    stats() counts each op."""
    pt = pt_or_skip()

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 6, 8, 3], tf.float32)])
    def round_trip(x):
        values, argmax = pt.max_pool_with_argmax(x, 2, 2, "VALID")
        return pt.max_unpool(values, argmax, tf.shape(x, out_type=tf.int64)[1:4])

    assert round_trip.get_concrete_function().structured_outputs.shape.as_list() == \
        [None, 4, 6, 8, 3]
    before = pt.stats()
    x = np.random.default_rng(3).standard_normal((2, 4, 6, 8, 3)).astype(np.float32)
    out = round_trip(tf.constant(x)).numpy()
    kept = out != 0
    assert np.array_equal(out[kept], x[kept]) and kept.sum() == 2 * 2 * 3 * 4 * 3
    after = pt.stats()
    assert after["max_pool3d_with_argmax"] == before["max_pool3d_with_argmax"] + 1
    assert after["max_unpool"] == before["max_unpool"] + 1


def test_unpooled_size():
    """TensorFlow models' unpooled extents: SAME pooled * stride, VALID (pooled - 1) * stride +
    ksize, in every form of ksize and strides."""
    pt = pt_or_skip()
    assert pt.unpooled_size([4, 3], 3, 2, "SAME") == [8, 6]
    assert pt.unpooled_size([4, 3], [3, 2], [2, 1], "VALID") == [9, 4]
    assert pt.unpooled_size([2, 2, 2], [1, 2, 2, 2, 1], [1, 2, 3, 1, 1], "VALID") == [4, 5, 3]
    with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID'"):
        pt.unpooled_size([4], 2, 2, "same")
