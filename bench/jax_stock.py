"""What JAX users write today for max pooling with indices and max unpooling, which JAX lacks:
the argmax of each window from its patches, and the unpooling as an `.at[].set` scatter. Channels
last (N, H, W, C), 2-D windows that tile the input (pool size == stride), VALID or SAME (the
extra rows and columns at the end, padded with the lowest value); the indices are plane offsets
(h * W + w), as poolgen.jax's, so that either unpooling reads either pooling's indices.

bench/jax_bench.py times them against poolgen.jax, and tests/keras trains a model with them on
Keras' JAX backend against poolgen.keras' layers.
"""
import jax.numpy as jnp


def max_pool(x, k, padding="VALID"):
    """(values, indices) of k x k windows at stride k: each window's first largest tap."""
    n, h, w, c = x.shape
    oh, ow = (-(-h // k), -(-w // k)) if padding == "SAME" else (h // k, w // k)
    lowest = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    x = x[:, :oh * k, :ow * k]
    x = jnp.pad(x, ((0, 0), (0, oh * k - x.shape[1]), (0, ow * k - x.shape[2]), (0, 0)),
                constant_values=lowest)
    # (N, OH, OW, C, k * k): each window's taps in row-major order.
    patches = x.reshape(n, oh, k, ow, k, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, oh, ow, c, -1)
    tap = jnp.argmax(patches, axis=-1)
    values = jnp.take_along_axis(patches, tap[..., None], axis=-1)[..., 0]
    rows = jnp.arange(oh)[:, None, None] * k + tap // k
    cols = jnp.arange(ow)[None, :, None] * k + tap % k
    return values, (rows * w + cols).astype(jnp.int32)


def max_unpool(values, indices, h, w):
    """(N, h, w, C): zeros but for each value at its plane offset."""
    n, _, _, c = values.shape
    batch = jnp.arange(n)[:, None, None, None]
    channel = jnp.arange(c)[None, None, None, :]
    out = jnp.zeros((n, h * w, c), values.dtype).at[batch, indices, channel].set(values)
    return out.reshape(n, h, w, c)
