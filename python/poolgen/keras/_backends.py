"""The Keras layers' computation on each backend: poolgen.tensorflow on TensorFlow's, poolgen.torch
on PyTorch's, poolgen.jax on JAX's, each in its framework's conventions (the argmax are the
backend's: TensorFlow's flattened (spatial..., C) offsets, PyTorch's and poolgen.jax's plane
offsets), which the paired unpooling layer reads. Windows are Keras': `pool_size`, `strides`,
padding "valid" or "same" (TensorFlow's SAME, the extra pad at the end)."""
import keras

from .._adapters import same_padding


def pooled_extent(size, k, s, padding):
    """A spatial extent after pooling (None stays None)."""
    if size is None:
        return None
    return -(-size // s) if padding == "same" else (size - k) // s + 1


def _backend():
    name = keras.backend.backend()
    if name not in ("tensorflow", "torch", "jax"):
        raise NotImplementedError(
            f"poolgen.keras runs on the TensorFlow, PyTorch and JAX backends, not {name!r}")
    return name


def argmax_dtype():
    """The argmax' dtype: int64, but int32 on JAX unless jax_enable_x64 is on (JAX's integers)."""
    if _backend() == "jax":
        import jax
        return "int64" if jax.config.jax_enable_x64 else "int32"
    return "int64"


def max_pool(x, pool_size, strides, padding, channels_last):
    """(values, argmax) of channels-last or channels-first x (N, C and 1 to 3 spatial)."""
    pool = {"tensorflow": _tf_pool, "torch": _torch_pool, "jax": _jax_pool}[_backend()]
    return pool(x, pool_size, strides, padding, channels_last)


def max_unpool(values, argmax, output_size, strides, channels_last):
    """values at argmax (as max_pool returned them) in (N, output_size..., C) or channels-first."""
    unpool = {"tensorflow": _tf_unpool, "torch": _torch_unpool, "jax": _jax_unpool}[_backend()]
    return unpool(values, argmax, output_size, strides, channels_last)


# TensorFlow: channels-last tensors; channels-first ones are transposed around the ops.

def _tf_moves(rank):
    to_last = [0] + list(range(2, rank)) + [1]
    to_first = [0, rank - 1] + list(range(1, rank - 1))
    return to_last, to_first


def _tf_pool(x, pool_size, strides, padding, channels_last):
    import tensorflow as tf
    import poolgen.tensorflow as pt
    to_last, to_first = _tf_moves(len(x.shape))
    if not channels_last:
        x = tf.transpose(x, to_last)
    values, argmax = pt.max_pool_with_argmax(x, list(pool_size), list(strides), padding.upper())
    if not channels_last:
        values, argmax = tf.transpose(values, to_first), tf.transpose(argmax, to_first)
    return values, argmax


def _tf_unpool(values, argmax, output_size, strides, channels_last):
    import tensorflow as tf
    import poolgen.tensorflow as pt
    to_last, to_first = _tf_moves(len(values.shape))
    if not channels_last:
        values, argmax = tf.transpose(values, to_last), tf.transpose(argmax, to_last)
    out = pt.max_unpool(values, argmax, output_size)
    return out if channels_last else tf.transpose(out, to_first)


# PyTorch: poolgen.torch takes channels-last memory as it is (a permuted view, no copy). SAME
# pads PyTorch's way (symmetrically) and, where TensorFlow's padding puts one more at the end,
# the input's end by one lowest value first, then renumbers the argmax for the unpadded plane.

def _torch_pool(x, pool_size, strides, padding, channels_last):
    import torch
    import poolgen.torch.functional as F
    nd = x.dim() - 2
    if channels_last:
        x = x.movedim(-1, 1)
    spatial = list(x.shape[2:])
    before = [0] * nd
    if padding == "same":
        pads = [same_padding(e, k, s) for e, k, s in zip(spatial, pool_size, strides)]
        before = [b for b, _ in pads]
        extra = [a - b for b, a in pads]
        if any(extra):
            lowest = -float("inf") if x.is_floating_point() else torch.iinfo(x.dtype).min
            flat = [p for e in reversed(extra) for p in (0, e)]
            x = torch.nn.functional.pad(x, flat, value=lowest)
    values, argmax = getattr(F, f"max_pool{nd}d")(x, list(pool_size), list(strides), before,
                                                  return_indices=True)
    if list(x.shape[2:]) != spatial:
        argmax = _renumber(argmax, list(x.shape[2:]), spatial)
    if channels_last:
        values, argmax = values.movedim(1, -1), argmax.movedim(1, -1)
    return values, argmax


def _renumber(argmax, padded, spatial):
    """Plane offsets in the padded plane as offsets in the unpadded one (the taps are inside)."""
    coords, rest = [], argmax
    for e in reversed(padded):
        coords.append(rest % e)
        rest = rest // e
    out = 0
    for c, e in zip(reversed(coords), spatial):
        out = out * e + c
    return out


def _torch_unpool(values, argmax, output_size, strides, channels_last):
    import poolgen.torch.functional as F
    nd = values.dim() - 2
    if channels_last:
        values, argmax = values.movedim(-1, 1), argmax.movedim(-1, 1)
    # PyTorch's window only sets the size it expects (give or take less than a stride): the one
    # that expects output_size itself.
    window = [max(1, int(o) - (p - 1) * s)
              for o, p, s in zip(output_size, values.shape[2:], strides)]
    out = getattr(F, f"max_unpool{nd}d")(values, argmax, window, list(strides), 0,
                                         [int(o) for o in output_size])
    return out.movedim(1, -1) if channels_last else out


# JAX: poolgen.jax serves both layouts and TensorFlow's SAME padding as they are.

def _jax_pool(x, pool_size, strides, padding, channels_last):
    import poolgen.jax as pj
    return pj.max_pool(x, tuple(pool_size), tuple(strides), padding.upper(),
                       channels_last=channels_last)


def _jax_unpool(values, argmax, output_size, strides, channels_last):
    import poolgen.jax as pj
    # The window only sets the default size; output_size is given.
    return pj.max_unpool(values, argmax, tuple(strides), tuple(strides),
                         output_shape=tuple(int(o) for o in output_size),
                         channels_last=channels_last)
