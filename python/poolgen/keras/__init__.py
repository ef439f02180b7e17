"""Keras 3 layers for max pooling with argmax and max unpooling, on poolgen.

    from poolgen.keras import MaxPoolingWithArgmax2D, MaxUnpooling2D
    values, argmax = MaxPoolingWithArgmax2D(2)(x)
    y = MaxUnpooling2D(2)([values, argmax, x])   # x: the size to restore (optional)

On the TensorFlow backend they run poolgen.tensorflow, on the PyTorch backend poolgen.torch, on
the JAX backend poolgen.jax (each must be installed), with that framework's conventions:
TensorFlow's argmax (offsets in each item's channels-last memory) or PyTorch's and poolgen.jax's
(plane offsets). An unpooling layer reads the argmax of a pooling layer on the same backend.
padding "valid" or "same" (TensorFlow's SAME); data_format "channels_last" (default,
keras.config.image_data_format()) or "channels_first". Serialisable (get_config, .keras files)
and differentiable (the values; argmax has no gradient); a model saved on one backend loads on
the others. docs/keras.md says more.
"""
import keras

from . import _backends
from .._adapters import unpooled_extent

__all__ = [f"{kind}{nd}D" for kind in ("MaxPoolingWithArgmax", "MaxUnpooling")
           for nd in (1, 2, 3)]


def _ints(value, nd, name):
    value = (value,) * nd if isinstance(value, int) else tuple(value)
    if len(value) != nd or not all(isinstance(v, int) and v > 0 for v in value):
        raise ValueError(f"{name} must be a positive int or {nd} of them, got {value!r}")
    return value


class _Window(keras.layers.Layer):
    """The window attributes both layers share and serialise."""
    nd = 0

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.pool_size = _ints(pool_size, self.nd, "pool_size")
        self.strides = self.pool_size if strides is None else _ints(strides, self.nd, "strides")
        self.padding = padding.lower()
        if self.padding not in ("valid", "same"):
            raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
        self.data_format = data_format or keras.config.image_data_format()
        if self.data_format not in ("channels_last", "channels_first"):
            raise ValueError("data_format must be 'channels_last' or 'channels_first', got "
                             f"{data_format!r}")

    @property
    def _channels_last(self):
        return self.data_format == "channels_last"

    def _spatial(self, shape):
        return list(shape[1:-1] if self._channels_last else shape[2:])

    def _with_spatial(self, shape, spatial):
        n, c = shape[0], shape[-1] if self._channels_last else shape[1]
        return (n, *spatial, c) if self._channels_last else (n, c, *spatial)

    def get_config(self):
        return {**super().get_config(), "pool_size": self.pool_size, "strides": self.strides,
                "padding": self.padding, "data_format": self.data_format}


class _MaxPoolingWithArgmax(_Window):
    """Max pooling returning [values, argmax] (argmax int64; on JAX int32 unless x64 is on)."""

    def call(self, inputs):
        values, argmax = _backends.max_pool(inputs, self.pool_size, self.strides, self.padding,
                                            self._channels_last)
        return [values, argmax]

    def compute_output_shape(self, input_shape):
        spatial = [_backends.pooled_extent(e, k, s, self.padding)
                   for e, k, s in zip(self._spatial(input_shape), self.pool_size, self.strides)]
        shape = self._with_spatial(input_shape, spatial)
        return [shape, shape]

    def compute_output_spec(self, inputs):
        values, argmax = self.compute_output_shape(inputs.shape)
        return [keras.KerasTensor(values, dtype=inputs.dtype),
                keras.KerasTensor(argmax, dtype=_backends.argmax_dtype())]


class _MaxUnpooling(_Window):
    """Max unpooling of [values, argmax] (or [values, argmax, like], `like` a tensor whose spatial
    extents are the output's, such as the pooling layer's input): zero but for each value at its
    argmax. The output's spatial extents: `output_size`, else like's, else inferred (SAME
    pooled * stride, VALID (pooled - 1) * stride + pool_size)."""

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None,
                 output_size=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)
        self.output_size = None if output_size is None else _ints(output_size, self.nd,
                                                                   "output_size")

    def _output_spatial(self, shapes):
        if self.output_size is not None:
            return list(self.output_size)
        if len(shapes) == 3:
            return self._spatial(shapes[2])
        return [None if e is None else unpooled_extent(e, k, s, self.padding == "same")
                for e, k, s in zip(self._spatial(shapes[0]), self.pool_size, self.strides)]

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
            raise ValueError("MaxUnpooling takes [values, argmax] or [values, argmax, like], got "
                             f"{type(inputs).__name__}")
        size = self._output_spatial([tuple(t.shape) for t in inputs])
        if any(e is None for e in size):  # a dynamic extent: like's, at run time
            size = keras.ops.shape(inputs[2])[1:-1] if self._channels_last else \
                keras.ops.shape(inputs[2])[2:]
        return _backends.max_unpool(inputs[0], inputs[1], size, self.strides,
                                    self._channels_last)

    def compute_output_shape(self, input_shape):
        return self._with_spatial(input_shape[0], self._output_spatial(input_shape))

    def compute_output_spec(self, inputs):
        shape = self.compute_output_shape([tuple(t.shape) for t in inputs])
        return keras.KerasTensor(shape, dtype=inputs[0].dtype)

    def get_config(self):
        return {**super().get_config(), "output_size": self.output_size}


def _layer(base, nd):
    name = f"{base.__name__[1:]}{nd}D"
    cls = type(name, (base,), {"nd": nd, "__doc__": f"{nd}-D {base.__doc__}",
                               "__module__": __name__})
    return keras.saving.register_keras_serializable(package="poolgen")(cls)


MaxPoolingWithArgmax1D = _layer(_MaxPoolingWithArgmax, 1)
MaxPoolingWithArgmax2D = _layer(_MaxPoolingWithArgmax, 2)
MaxPoolingWithArgmax3D = _layer(_MaxPoolingWithArgmax, 3)
MaxUnpooling1D = _layer(_MaxUnpooling, 1)
MaxUnpooling2D = _layer(_MaxUnpooling, 2)
MaxUnpooling3D = _layer(_MaxUnpooling, 3)
