"""TensorFlow on poolgen.

Importing this module makes poolgen TensorFlow's CPU kernels of MaxPoolWithArgmax and
MaxPoolGradWithArgmax, so that tf.nn.max_pool_with_argmax and its gradient (eager, tf.function,
Keras) run poolgen's kernels with TensorFlow's own results, bit for bit. Import it before the
program first runs those ops: TensorFlow keeps the kernel it chose for an op's first call of each
signature.

    import poolgen.tensorflow as pt  # before the model runs
    values, argmax = tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")
    restored = pt.max_unpool(values, argmax, x.shape[1:3])  # the input's extents

It adds, in TensorFlow's conventions, what TensorFlow lacks: max_pool_with_argmax for 1-D and 3-D
inputs (N, spatial..., C) and max_unpool (1-D to 3-D) by TensorFlow's argmax, each with its
gradient. Served: every dtype TensorFlow's own kernels take but uint16/32/64, int32 and int64
argmax, include_batch_in_index; gradients for float16, bfloat16, float32 and float64. The one
difference from TensorFlow's kernels: an argmax outside its image in the gradient is
InvalidArgumentError here, where TensorFlow's kernel aborts the process. docs/tensorflow.md says
more.
"""
import ctypes

import tensorflow as tf

from .._adapters import check_built_for, compiled_library, unpooled_extent

try:
    from ._built_for import TENSORFLOW_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = tf.__version__
check_built_for("poolgen.tensorflow", "TensorFlow", _BUILT_FOR, tf.__version__,
                "build poolgen against it (pip install --no-build-isolation ./python)")
_path = compiled_library(__file__, "_kernels*.so", "poolgen.tensorflow")
_ops = tf.load_op_library(_path)
_library = ctypes.CDLL(_path)  # the same library, for its C entry points
_library.poolgen_tensorflow_register()  # the kernels of the dtypes this poolgen build has
_served = _library.poolgen_tensorflow_served
_served.restype = ctypes.c_int64
_served.argtypes = [ctypes.c_int]

__all__ = ["max_pool_with_argmax", "max_unpool", "unpooled_size", "stats"]

# stats()' names, in the order of the library's counters (kernels.cc's kOps).
_STATS = ["max_pool_with_argmax", "max_pool_grad_with_argmax", "max_pool3d_with_argmax",
          "max_pool3d_grad_with_argmax", "max_unpool", "max_unpool_grad"]


def stats():
    """Calls poolgen served since the import, per op: {"max_pool_with_argmax": n, ...}."""
    return {name: _served(i) for i, name in enumerate(_STATS)}


def _window(v, nd, name):
    """An int or nd ints (TensorFlow's 1, nd or nd + 2 form) as nd + 2 ints, 1 at N and C."""
    v = [v] if isinstance(v, int) else list(v)
    if len(v) == nd + 2:
        return v
    if len(v) == 1:
        v = v * nd
    if len(v) != nd:
        raise ValueError(f"{name} must hold 1, {nd} or {nd + 2} ints for {nd}-D pooling, got {v}")
    return [1] + v + [1]


def max_pool_with_argmax(input, ksize, strides, padding, include_batch_in_index=False,
                         output_dtype=tf.int64):
    """tf.nn.max_pool_with_argmax for channels-last inputs of rank 3, 4 or 5 (1-D to 3-D).

    Rank 4 is TensorFlow's own op (which poolgen serves); rank 3 runs it over a height of 1
    (TensorFlow's argmax is the same), rank 5 poolgen's PoolgenMaxPool3DWithArgmax, whose argmax
    is TensorFlow's ((n*D + z)*H + y)*W + x)*C + c (n only with include_batch_in_index).
    """
    input = tf.convert_to_tensor(input)
    rank = input.shape.rank
    if rank not in (3, 4, 5):
        raise ValueError(f"input must be 3-, 4- or 5-dimensional (N, spatial..., C), got shape "
                         f"{input.shape}")
    nd = rank - 2
    ksize, strides = _window(ksize, nd, "ksize"), _window(strides, nd, "strides")
    if rank == 5:
        return _ops.poolgen_max_pool3d_with_argmax(input, ksize, strides, padding,
                                                   include_batch_in_index, Targmax=output_dtype)
    if rank == 3:
        values, argmax = tf.nn.max_pool_with_argmax(
            input[:, None], [1, 1] + ksize[1:], [1, 1] + strides[1:], padding,
            output_dtype=output_dtype, include_batch_in_index=include_batch_in_index)
        return values[:, 0], argmax[:, 0]
    return tf.nn.max_pool_with_argmax(input, ksize, strides, padding, output_dtype=output_dtype,
                                      include_batch_in_index=include_batch_in_index)


def unpooled_size(pooled, ksize, strides, padding):
    """The spatial extents to unpool `pooled` extents to, as TensorFlow models take them (TensorFlow
    Addons' MaxUnpooling2D, TensorFlow Lite): SAME pooled * stride, VALID (pooled - 1) * stride +
    ksize; ksize and strides an int or one per spatial dimension."""
    pooled = list(pooled)
    nd = len(pooled)
    k, s = _window(ksize, nd, "ksize")[1:-1], _window(strides, nd, "strides")[1:-1]
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return [unpooled_extent(p, ki, si, padding == "SAME") for p, ki, si in zip(pooled, k, s)]


def max_unpool(values, argmax, output_size, include_batch_in_index=False):
    """Max unpooling by TensorFlow's argmax: (N, output_size..., C), zero but for each value at its
    argmax (the latest in NHWC order where two name one place), for rank 3, 4 or 5 values.

    output_size: the spatial extents (an unpooled_size, or the pooled input's); argmax: as
    max_pool_with_argmax returned it, with the same include_batch_in_index. An argmax outside
    the output is InvalidArgumentError. Its gradient, for the values, reads the output's
    gradient at each argmax.
    """
    values = tf.convert_to_tensor(values)
    if values.shape.rank == 3:
        size = tf.concat([[1], tf.cast(output_size, tf.int64)], 0)
        return _ops.poolgen_max_unpool(values[:, None], argmax[:, None], size,
                                       include_batch_in_index)[:, 0]
    return _ops.poolgen_max_unpool(values, argmax, tf.cast(output_size, tf.int64),
                                   include_batch_in_index)


@tf.RegisterGradient("PoolgenMaxPool3DWithArgmax")
def _max_pool3d_gradient(op, grad, _argmax_grad):
    return _ops.poolgen_max_pool3d_grad_with_argmax(
        op.inputs[0], grad, op.outputs[1], op.get_attr("ksize"), op.get_attr("strides"),
        op.get_attr("padding"), op.get_attr("include_batch_in_index"))


@tf.RegisterGradient("PoolgenMaxUnpool")
def _max_unpool_gradient(op, grad):
    values_grad = _ops.poolgen_max_unpool_grad(grad, op.inputs[1],
                                               op.get_attr("include_batch_in_index"))
    return [values_grad, None, None]
