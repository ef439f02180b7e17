"""poolgen.keras' layers on the installed Keras 3 backend (KERAS_BACKEND: tensorflow, torch or jax),
against references of the backend's conventions, saved and loaded, and a small SegNet-style
model trained with poolgen's layers and with layers of the framework's own ops (in separate
processes), same bits.

    KERAS_BACKEND=tensorflow $PYTHON -m pytest -q tests/keras

Skips (saying why) where Keras, the backend's framework or its poolgen adapter is missing.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

keras = pytest.importorskip("keras", reason="Keras is not installed here")
BACKEND = keras.backend.backend()
if BACKEND not in ("tensorflow", "torch", "jax"):
    pytest.skip(f"poolgen.keras serves the TensorFlow, PyTorch and JAX backends, not {BACKEND}",
                allow_module_level=True)
pytest.importorskip(f"poolgen.{BACKEND}", reason=f"poolgen.{BACKEND} is not installed here")
layers = pytest.importorskip("poolgen.keras")


def reference_pool(x, k, s, padding):
    """Channels-last (N, spatial..., C): values and argmax, each window's first largest tap
    (every framework's rule without NaN), in the backend's format: TensorFlow's offset in the
    item's (spatial..., C) memory, PyTorch's and poolgen.jax's plane offset."""
    n, *spatial, c = x.shape
    if padding == "same":
        out = [-(-e // si) for e, si in zip(spatial, s)]
        before = [max((o - 1) * si + ki - e, 0) // 2 for o, si, ki, e in zip(out, s, k, spatial)]
    else:
        out, before = [(e - ki) // si + 1 for e, ki, si in zip(spatial, k, s)], [0] * len(k)
    values, argmax = np.zeros([n, *out, c], x.dtype), np.zeros([n, *out, c], np.int64)
    for b, *o, ch in np.ndindex(*values.shape):
        best = where = None
        for tap in np.ndindex(*k):
            p = [oi * si - bf + t for oi, si, bf, t in zip(o, s, before, tap)]
            if all(0 <= pi < e for pi, e in zip(p, spatial)) and (best is None or
                                                                  x[(b, *p, ch)] > best):
                best, where = x[(b, *p, ch)], p
        plane = int(np.ravel_multi_index(where, spatial))
        values[(b, *o, ch)] = best
        argmax[(b, *o, ch)] = plane * c + ch if BACKEND == "tensorflow" else plane
    return values, argmax


def reference_unpool(values, argmax, size):
    """Zero but for each value at its argmax, the latest in (n, spatial..., c) order winning
    (both backends' order where each argmax stays in its channel, as pooling's do)."""
    n, c = values.shape[0], values.shape[-1]
    out = np.zeros([n, *size, c], values.dtype)
    for b, *p, ch in np.ndindex(*values.shape):
        a = argmax[(b, *p, ch)]
        where = np.unravel_index(a // c if BACKEND == "tensorflow" else a, size)
        out[(b, *where, ch)] = values[(b, *p, ch)]
    return out


def to_numpy(t):
    return keras.ops.convert_to_numpy(t)


def cases(nd, count):
    g = np.random.default_rng(nd)
    for n in range(count):
        k = [int(g.integers(1, 4)) for _ in range(nd)]
        s = [int(g.integers(1, 4)) for _ in range(nd)]
        padding = ["valid", "same"][n % 2]
        shape = [2] + [int(g.integers(max(k), 9)) for _ in range(nd)] + [3]
        x = g.integers(-4, 5, size=shape).astype(np.float32)  # ties
        yield x, k, s, padding, ["channels_last", "channels_first"][n // 2 % 2]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_layers_against_the_reference(nd):
    pool = getattr(layers, f"MaxPoolingWithArgmax{nd}D")
    unpool = getattr(layers, f"MaxUnpooling{nd}D")
    for x, k, s, padding, data_format in cases(nd, 16):
        want, want_argmax = reference_pool(x, k, s, padding)
        size = list(x.shape[1:-1])
        want_out = reference_unpool(want, want_argmax, size)
        first = data_format == "channels_first"
        move = (lambda a: np.moveaxis(a, -1, 1)) if first else (lambda a: a)
        back = (lambda a: np.moveaxis(a, 1, -1)) if first else (lambda a: a)
        xi = keras.ops.convert_to_tensor(np.ascontiguousarray(move(x)))
        values, argmax = pool(k, s, padding, data_format)(xi)
        out = unpool(k, s, padding, data_format)([values, argmax, xi])
        out_sized = unpool(k, s, padding, data_format, output_size=size)([values, argmax])
        what = (x.shape, k, s, padding, data_format)
        assert np.array_equal(back(to_numpy(values)), want), what
        assert np.array_equal(back(to_numpy(argmax)), want_argmax), what
        assert np.array_equal(back(to_numpy(out)), want_out), what
        assert np.array_equal(back(to_numpy(out_sized)), want_out), what


def test_inferred_output_size():
    """Without a size: SAME pooled * stride, VALID (pooled - 1) * stride + pool_size."""
    x = np.random.default_rng(2).standard_normal((1, 8, 6, 2)).astype(np.float32)
    for padding, k, s, size in (("same", 3, 2, (8, 6)), ("valid", 2, 2, (8, 6)),
                                ("valid", 3, 1, (8, 6))):
        values, argmax = layers.MaxPoolingWithArgmax2D(k, s, padding)(x)
        out = layers.MaxUnpooling2D(k, s, padding)([values, argmax])
        assert tuple(out.shape) == (1, *size, 2)
        assert layers.MaxUnpooling2D(k, s, padding).compute_output_shape(
            [values.shape, argmax.shape]) == (1, *size, 2)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="pool_size must be a positive int or 2"):
        layers.MaxPoolingWithArgmax2D((2, 2, 2))
    with pytest.raises(ValueError, match="padding must be 'valid' or 'same'"):
        layers.MaxUnpooling1D(2, padding="full")
    with pytest.raises(ValueError, match="data_format must be"):
        layers.MaxPoolingWithArgmax3D(2, data_format="NDHWC")
    with pytest.raises(ValueError, match=r"takes \[values, argmax\]"):
        layers.MaxUnpooling2D(2)(np.zeros((1, 2, 2, 1), np.float32))


def segnet(pool, unpool):
    """A small SegNet-style encoder-decoder: the decoder unpools by the encoder's argmax."""
    keras.utils.set_random_seed(58)
    x = keras.Input((15, 15, 3))
    e1 = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    p1, a1 = pool(2, 2, "valid")(e1)  # 7x7, the last row and column left out
    e2 = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(p1)
    p2, a2 = pool(2, 2, "same")(e2)  # 4x4, padded at the end
    d2 = unpool(2, 2, "same")([p2, a2, e2])
    d2 = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(d2)
    d1 = unpool(2, 2, "valid")([d2, a1, e1])
    y = keras.layers.Conv2D(2, 3, padding="same")(d1)
    model = keras.Model(x, y)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


class StockPool2D(keras.layers.Layer):
    """The framework's own max pooling with argmax, in the backend's format (JAX has none: the
    argmax of each window's patches, as JAX users write it, bench/jax_stock.py)."""

    def __init__(self, k, s, padding):
        super().__init__()
        self.k, self.s, self.padding = k, s, padding

    def call(self, x):
        if BACKEND == "tensorflow":
            import tensorflow as tf
            return list(tf.nn.max_pool_with_argmax(x, self.k, self.s, self.padding.upper()))
        if BACKEND == "jax":
            assert self.k == self.s
            return list(jax_stock().max_pool(x, self.k, self.padding.upper()))
        import torch
        assert self.k == self.s  # SAME pads only at the end: PyTorch's ceil_mode
        values, argmax = torch.nn.functional.max_pool2d(
            x.movedim(-1, 1), self.k, self.s, ceil_mode=self.padding == "same",
            return_indices=True)
        return [values.movedim(1, -1), argmax.movedim(1, -1)]

    def compute_output_spec(self, x):
        e = [(-(-d // self.s)) if self.padding == "same" else (d - self.k) // self.s + 1
             for d in x.shape[1:3]]
        shape = (x.shape[0], *e, x.shape[3])
        return [keras.KerasTensor(shape, x.dtype),
                keras.KerasTensor(shape, "int32" if BACKEND == "jax" else "int64")]


class StockUnpool2D(keras.layers.Layer):
    """The framework's own ops unpooling: TensorFlow's scatter_nd (whose sums equal poolgen's
    stores where no argmax repeats: windows that do not overlap, as here), PyTorch's
    max_unpool2d, JAX's `.at[].set` (bench/jax_stock.py)."""

    def __init__(self, k, s, padding):
        super().__init__()
        self.k, self.s, self.padding = k, s, padding

    def call(self, inputs):
        values, argmax, like = inputs
        if BACKEND == "tensorflow":
            import tensorflow as tf
            n = tf.shape(values, out_type=tf.int64)[0]
            item = tf.reduce_prod(tf.shape(like, out_type=tf.int64)[1:])
            index = tf.reshape(argmax + tf.range(n)[:, None, None, None] * item, [-1, 1])
            flat = tf.scatter_nd(index, tf.reshape(values, [-1]), [n * item])
            return tf.reshape(flat, tf.shape(like))
        if BACKEND == "jax":
            return jax_stock().max_unpool(values, argmax, *like.shape[1:3])
        import torch
        out = torch.nn.functional.max_unpool2d(values.movedim(-1, 1), argmax.movedim(-1, 1),
                                               self.k, self.s, 0, list(like.shape[1:3]))
        return out.movedim(1, -1)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs[2].shape, inputs[0].dtype)


def jax_stock():
    """bench/jax_stock.py: the JAX ops that the stock layers use on the JAX backend."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
    import jax_stock
    return jax_stock


# Trains the model for a few steps with poolgen's layers or the stock ones, in a fresh process
# (TensorFlow keeps the first kernel it picks for an op), and saves its weights and predictions.
TRAIN = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, sys.argv[3])
    import test_keras as t
    t.train(sys.argv[1] == "poolgen", sys.argv[2])
""")


def train(use_poolgen, path):
    if BACKEND == "tensorflow":
        import tensorflow as tf
        tf.config.experimental.enable_op_determinism()
    model = segnet(layers.MaxPoolingWithArgmax2D, layers.MaxUnpooling2D) if use_poolgen else \
        segnet(StockPool2D, StockUnpool2D)
    g = np.random.default_rng(5)
    x = g.standard_normal((8, 15, 15, 3)).astype(np.float32)
    y = g.standard_normal((8, 15, 15, 2)).astype(np.float32)
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    np.savez(path, prediction=model.predict(x, verbose=0),
             **{f"w{i}": w for i, w in enumerate(model.get_weights())})
    if use_poolgen:
        file = path + ".keras"
        model.save(file)
        loaded = keras.models.load_model(file)
        assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_segnet_trains_to_the_same_bits(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND=BACKEND,
               OMP_NUM_THREADS="1")
    results = {}
    for which in ("stock", "poolgen"):
        path = str(tmp_path / f"{which}.npz")
        subprocess.run([sys.executable, "-c", TRAIN, which, path, os.path.dirname(__file__)],
                       check=True, env=env)
        results[which] = dict(np.load(path))
    stock, ours = results["stock"], results["poolgen"]
    assert sorted(stock) == sorted(ours) and len(stock) == 9  # 4 convolutions' weights
    for key in stock:
        assert np.array_equal(stock[key].view(np.uint32), ours[key].view(np.uint32)), key
    assert not np.array_equal(stock["w0"], segnet(StockPool2D, StockUnpool2D).get_weights()[0])


def test_models_of_unknown_extents():
    """A model built for any height and width unpools to each input's own extents; a 1-D
    channels_first model infers its size."""
    x = keras.Input((None, None, 3))
    values, argmax = layers.MaxPoolingWithArgmax2D(2)(x)
    model = keras.Model(x, layers.MaxUnpooling2D(2)([values, argmax, x]))
    for shape in ((2, 9, 7, 3), (1, 4, 6, 3)):
        data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        want, want_argmax = reference_pool(data, [2, 2], [2, 2], "valid")
        out = model.predict(data, verbose=0)
        assert np.array_equal(out, reference_unpool(want, want_argmax, shape[1:3]))
    x = keras.Input((3, None))
    values, argmax = layers.MaxPoolingWithArgmax1D(2, data_format="channels_first")(x)
    y = layers.MaxUnpooling1D(2, data_format="channels_first")([values, argmax])
    assert keras.Model(x, y).predict(np.ones((2, 3, 8), np.float32), verbose=0).shape == (2, 3, 8)
