"""poolgen.jax against a NumPy reference of PyTorch's rules (plain loops over small shapes), and
under JAX's transformations: jit, vmap (one custom call per batch), eval_shape, grad, export.
Compared with PyTorch's own max_pool2d / max_unpool2d where torch is importable.

    $PYTHON -m pytest -q tests/jax   # a Python with jax and poolgen.jax

Skips (saying why) where either is missing.
"""
import ctypes
import itertools
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed here")
pj = pytest.importorskip("poolgen.jax", reason="poolgen.jax is not installed here")
import jax.numpy as jnp  # noqa: E402
import jax.test_util  # noqa: E402

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTEGERS = ["int8", "uint8", "int16", "int32", "int64"]


def reference_pool(x, kernel, stride, low, high, dilation, ceil_mode):
    """PyTorch's max pooling with indices of a channels-first float64 or int64 array (N, C,
    spatial...): docs/semantics.md's window scan, tap by tap."""
    nd = len(kernel)
    spatial = x.shape[2:]
    extents = []
    for n, k, s, lo, hi, d in zip(spatial, kernel, stride, low, high, dilation):
        out = (n + lo + hi - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= n + lo:
            out -= 1
        extents.append(out)
    values = np.zeros(x.shape[:2] + tuple(extents), x.dtype)
    indices = np.zeros(values.shape, np.int64)
    floating = np.issubdtype(x.dtype, np.floating)
    lowest = -np.inf if floating else np.iinfo(x.dtype).min
    for nc in itertools.product(range(x.shape[0]), range(x.shape[1])):
        plane = x[nc]
        for o in itertools.product(*map(range, extents)):
            starts, taps = [], []
            for i in range(nd):
                start = o[i] * stride[i] - low[i]
                end = min(start + dilation[i] * (kernel[i] - 1) + 1, spatial[i])
                while start < 0:
                    start += dilation[i]
                starts.append(start)
                taps.append(range(start, end, dilation[i]))
            best = lowest
            where = _flat(starts, spatial)
            for tap in itertools.product(*taps):
                v = plane[tap]
                if v > best or (floating and np.isnan(v)):
                    best, where = v, _flat(tap, spatial)
            values[nc + o] = best
            indices[nc + o] = where
    return values, indices


def _flat(position, extents):
    """A plane offset, also for a position past the plane (an empty window's stepped start)."""
    flat = 0
    for p, n in zip(position, extents):
        flat = flat * n + p
    return flat


def reference_unpool(values, indices, spatial):
    """PyTorch's max unpooling of channels-first arrays: the latest in row-major order wins."""
    out = np.zeros(values.shape[:2] + (math.prod(spatial),), values.dtype)
    flat_values = values.reshape(values.shape[:2] + (-1,))
    flat_indices = indices.reshape(values.shape[:2] + (-1,))
    for n, c in itertools.product(range(values.shape[0]), range(values.shape[1])):
        for v, i in zip(flat_values[n, c], flat_indices[n, c]):
            out[n, c, i] = v
    return out.reshape(values.shape[:2] + tuple(spatial))


def make_input(rng, shape, dtype):
    """Small integers (ties), with NaN and -inf among floats."""
    x = rng.integers(-4, 5, size=shape).astype(np.float64)
    if dtype in FLOATS:
        x[rng.random(shape) < 0.06] = np.nan
        x[rng.random(shape) < 0.06] = -np.inf
        return x
    return (x + (5 if dtype == "uint8" else 0)).astype(np.int64)


def to_last(a):
    """(N, C, spatial...) -> (N, spatial..., C)."""
    return np.moveaxis(a, 1, -1)


def to_first(a):
    return np.moveaxis(a, -1, 1)


def as_numpy(a):
    """A JAX result as float64 or int64 NumPy (16-bit floats widen exactly)."""
    a = np.asarray(a)
    return a.astype(np.float64 if a.dtype.name in FLOATS else np.int64)


def pool_cases():
    rng = np.random.default_rng(63)
    dtypes = FLOATS + INTEGERS
    out = []
    for n in range(36):
        nd = 1 + n % 3
        padding = ["VALID", "SAME", "pairs"][(n // 3) % 3]
        kernel = tuple(int(k) for k in rng.integers(1, 4, nd))
        stride = tuple(int(s) for s in rng.integers(1, 4, nd))
        dilation = tuple(int(d) for d in rng.integers(1, 3, nd)) if padding == "VALID" else 1
        if padding == "pairs":
            padding = tuple((int(rng.integers(0, k)), int(rng.integers(0, k))) for k in kernel)
        spatial = tuple(int(e) for e in rng.integers(4, 8 if nd < 3 else 6, nd))
        out.append(pytest.param(dtypes[n % len(dtypes)], (2, 3) + spatial, kernel, stride,
                                padding, dilation, n % 4 == 1 and padding != "SAME",
                                bool(n % 2), id=f"case{n}-{nd}d"))
    return out


@pytest.mark.parametrize("dtype,shape,kernel,stride,padding,dilation,ceil_mode,channels_last",
                         pool_cases())
def test_max_pool_matches_reference(dtype, shape, kernel, stride, padding, dilation, ceil_mode,
                                    channels_last, request):
    if dtype in ("float64", "int64"):
        request.getfixturevalue("x64")
    rng = np.random.default_rng(abs(hash((shape, kernel, stride))) % 2**32)
    x = make_input(rng, shape, dtype)
    nd = len(kernel)
    d = (dilation,) * nd if isinstance(dilation, int) else dilation
    if padding == "VALID":
        low = high = (0,) * nd
    elif padding == "SAME":
        total = [max((math.ceil(n / s) - 1) * s + dd * (k - 1) + 1 - n, 0)
                 for n, k, s, dd in zip(shape[2:], kernel, stride, d)]
        low, high = [t // 2 for t in total], [t - t // 2 for t in total]
    else:
        low, high = [p[0] for p in padding], [p[1] for p in padding]
    want_values, want_indices = reference_pool(x, kernel, stride, low, high, d, ceil_mode)
    given = jnp.asarray(to_last(x) if channels_last else x, dtype=dtype)
    values, indices = pj.max_pool(given, kernel, stride, padding, channels_last=channels_last,
                                  dilation=dilation, ceil_mode=ceil_mode)
    assert values.dtype == given.dtype == dtype
    assert indices.dtype == (jnp.int64 if dtype in ("float64", "int64") else jnp.int32)
    values, indices = as_numpy(values), np.asarray(indices)
    if channels_last:
        values, indices = to_first(values), to_first(indices)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)


def test_layouts_give_the_same_indices():
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 8)).astype(np.float32)
    first = pj.max_pool(x, (3, 2), (2, 2), "SAME", channels_last=False)
    last = pj.max_pool(to_last(x), (3, 2), (2, 2), "SAME")
    np.testing.assert_array_equal(np.asarray(first[0]), to_first(np.asarray(last[0])))
    np.testing.assert_array_equal(np.asarray(first[1]), to_first(np.asarray(last[1])))


@pytest.fixture
def x64():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def test_int64_indices_with_x64(x64):
    x = np.random.default_rng(2).standard_normal((2, 5, 6, 3))
    values, indices = pj.max_pool(x, (2, 3), (2, 2), "SAME")
    assert values.dtype == jnp.float64 and indices.dtype == jnp.int64
    want_values, want_indices = reference_pool(to_first(x), (2, 3), (2, 2), (0, 0), (1, 1),
                                               (1, 1), False)
    np.testing.assert_array_equal(to_first(np.asarray(values)), want_values)
    np.testing.assert_array_equal(to_first(np.asarray(indices)), want_indices)
    restored = pj.max_unpool(values, indices, (2, 3), (2, 2), "SAME", output_shape=x.shape)
    np.testing.assert_array_equal(to_first(np.asarray(restored)),
                                  reference_unpool(want_values, want_indices, (5, 6)))
    grad = jax.grad(lambda x: pj.max_pool(x, (2, 3), (2, 2), "SAME")[0].sum())(x)
    assert grad.dtype == jnp.float64


# Input extents that are the window's default unpooled extents of their pooled ones.
@pytest.mark.parametrize("spatial,channels_last,padding", [
    ((6,), True, "VALID"), ((6, 8), False, "SAME"), ((5, 7), True, ((1, 0), (0, 1))),
    ((6, 8, 4), True, "VALID")])
def test_unpool_round_trip(spatial, channels_last, padding):
    nd = len(spatial)
    rng = np.random.default_rng(nd)
    shape = (2, 3) + spatial
    x = rng.permutation(math.prod(shape)).reshape(shape).astype(np.float32)
    given = to_last(x) if channels_last else x
    window = (2,) * nd
    values, indices = pj.max_pool(given, window, window, padding, channels_last=channels_last)
    # By default the window's extents; given the input's, its shape.
    default = pj.max_unpool(values, indices, window, window, padding,
                            channels_last=channels_last)
    restored = pj.max_unpool(values, indices, window, window, padding, output_shape=given.shape,
                             channels_last=channels_last)
    assert restored.shape == given.shape
    pooled = np.asarray(values), np.asarray(indices)
    if channels_last:
        pooled, restored, default = ((to_first(pooled[0]), to_first(pooled[1])),
                                     to_first(np.asarray(restored)), to_first(np.asarray(default)))
    np.testing.assert_array_equal(np.asarray(restored), reference_unpool(*pooled, shape[2:]))
    spatial = pooled[0].shape[2:]
    want = [p * 2 if padding == "SAME" else
            (p - 1) * 2 + 2 - (sum(padding[i]) if isinstance(padding, tuple) else 0)
            for i, p in enumerate(spatial)]
    assert default.shape[2:] == tuple(want)
    np.testing.assert_array_equal(np.asarray(default), reference_unpool(*pooled, tuple(want)))
    # Each maximum is back in place.
    kept = np.asarray(restored) != 0
    np.testing.assert_array_equal(np.asarray(restored)[kept], x[kept])


def test_jit_and_eval_shape():
    x = np.random.default_rng(3).standard_normal((2, 7, 7, 4)).astype(np.float32)
    f = jax.jit(lambda x: pj.max_pool(x, (3, 3), (2, 2), "SAME"))
    eager = pj.max_pool(x, (3, 3), (2, 2), "SAME")
    for a, b in zip(f(x), eager):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    before = pj.stats()
    shapes = jax.eval_shape(lambda x: pj.max_pool(x, (3, 3), (2, 2), "SAME"), x)
    assert [(s.shape, s.dtype) for s in shapes] == [((2, 4, 4, 4), jnp.float32),
                                                    ((2, 4, 4, 4), jnp.int32)]
    unpooled = jax.eval_shape(lambda v, i: pj.max_unpool(v, i, (3, 3), (2, 2), "SAME"), *eager)
    assert unpooled.shape == (2, 8, 8, 4)
    assert pj.stats() == before  # nothing ran


def test_vmap_is_one_call():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((5, 2, 6, 6, 3)).astype(np.float32)
    pool = lambda x: pj.max_pool(x, (2, 2), (2, 2))
    before = pj.stats()["max_pool"]
    values, indices = jax.vmap(pool)(xs)
    assert pj.stats()["max_pool"] == before + 1
    for k in range(len(xs)):
        v, i = pool(xs[k])
        np.testing.assert_array_equal(np.asarray(values[k]), np.asarray(v))
        np.testing.assert_array_equal(np.asarray(indices[k]), np.asarray(i))
    # Nested vmap, and unpooling with unbatched indices (broadcast to the batch).
    nested = jax.jit(jax.vmap(jax.vmap(pool)))(xs.reshape(5, 2, 1, 6, 6, 3))
    np.testing.assert_array_equal(np.asarray(nested[0]).reshape(values.shape),
                                  np.asarray(values))
    unpool = lambda v, i: pj.max_unpool(v, i, (2, 2), (2, 2))
    before = pj.stats()["max_unpool"]
    batched = jax.vmap(unpool, in_axes=(0, None))(values, indices[0])
    assert pj.stats()["max_unpool"] == before + 1
    for k in range(len(xs)):
        np.testing.assert_array_equal(np.asarray(batched[k]),
                                      np.asarray(unpool(values[k], indices[0])))


def test_batch_dimensions():
    """Every dimension before the last nd + 1 is a batch dimension: none, one or several."""
    x = np.random.default_rng(8).standard_normal((2, 3, 6, 5, 4)).astype(np.float32)
    values, indices = pj.max_pool(x, (2, 2), (2, 1), "SAME")
    assert values.shape == (2, 3, 3, 5, 4)
    for a, b in itertools.product(range(2), range(3)):
        single = pj.max_pool(x[a, b], (2, 2), (2, 1), "SAME")  # (H, W, C): no batch dimension
        np.testing.assert_array_equal(np.asarray(values[a, b]), np.asarray(single[0]))
        np.testing.assert_array_equal(np.asarray(indices[a, b]), np.asarray(single[1]))
    restored = pj.max_unpool(values, indices, (2, 2), (2, 1), "SAME", output_shape=(6, 5))
    np.testing.assert_array_equal(
        np.asarray(restored).reshape(6, 6, 5, 4),
        to_last(reference_unpool(to_first(np.asarray(values).reshape(6, 3, 5, 4)),
                                 to_first(np.asarray(indices).reshape(6, 3, 5, 4)), (6, 5))))


def scatter_gradient(x_shape, indices, weights):
    """max_pool's gradient by hand: each weight added at its plane offset (channels-first)."""
    grad = np.zeros(x_shape[:2] + (math.prod(x_shape[2:]),))
    flat_i = indices.reshape(indices.shape[:2] + (-1,))
    flat_w = weights.reshape(weights.shape[:2] + (-1,))
    for n, c in itertools.product(range(x_shape[0]), range(x_shape[1])):
        for i, w in zip(flat_i[n, c], flat_w[n, c]):
            grad[n, c, i] += w
    return grad.reshape(x_shape)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_gradients(nd):
    rng = np.random.default_rng(10 + nd)
    shape = (2, 3) + (7, 6, 5)[:nd]
    x = (rng.permutation(math.prod(shape)).reshape(shape) * 0.25).astype(np.float32)
    window, strides = (3,) * nd, (2,) * nd  # overlapping windows: positions winning twice
    pool = lambda x: pj.max_pool(x, window, strides, "SAME", channels_last=False)
    values, indices = pool(x)
    w = rng.standard_normal(values.shape).astype(np.float32)
    grad = jax.grad(lambda x: (pool(x)[0] * w).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), scatter_gradient(shape, np.asarray(indices), w),
                               rtol=1e-6)
    jax.test_util.check_grads(lambda x: pool(x)[0], (x,), order=1, modes=["rev"], eps=1e-2)
    # Unpooling's: a gather of the output's gradient at the indices, for every duplicate
    # (PyTorch's), though only the latest duplicate's value is kept.
    unpool = lambda v: pj.max_unpool(v, indices, window, strides, "SAME", output_shape=shape,
                                     channels_last=False)
    u = rng.standard_normal(shape).astype(np.float32)
    grad_values = jax.grad(lambda v: (unpool(v) * u).sum())(values)
    flat_u = u.reshape(shape[:2] + (-1,))
    want = np.take_along_axis(flat_u, np.asarray(indices).reshape(shape[:2] + (-1,)), axis=2)
    np.testing.assert_array_equal(np.asarray(grad_values), want.reshape(values.shape))
    # Numerically, where no two indices name one place: non-overlapping windows.
    values, indices = pj.max_pool(x, strides, strides, channels_last=False)
    jax.test_util.check_grads(
        lambda v: pj.max_unpool(v, indices, strides, strides, output_shape=shape,
                                channels_last=False), (values,), order=1, modes=["rev"],
        eps=1e-2)


def test_gradients_under_vmap_and_jit():
    rng = np.random.default_rng(20)
    xs = rng.standard_normal((4, 1, 6, 6, 2)).astype(np.float32)
    loss = lambda x: (pj.max_pool(x, (2, 2), (1, 1), "SAME")[0] ** 2).sum()
    before = pj.stats()["max_pool_backward"]
    grads = jax.jit(jax.vmap(jax.grad(loss)))(xs)
    assert pj.stats()["max_pool_backward"] == before + 1
    for k in range(len(xs)):
        np.testing.assert_array_equal(np.asarray(grads[k]), np.asarray(jax.grad(loss)(xs[k])))


def test_16_bit_gradients():
    x = jnp.asarray(np.random.default_rng(21).permutation(64).reshape(1, 8, 8, 1), jnp.bfloat16)
    grad = jax.grad(lambda x: pj.max_pool(x, (2, 2), (2, 2))[0].astype(jnp.float32).sum())(x)
    assert grad.dtype == jnp.bfloat16
    _, indices = pj.max_pool(x, (2, 2), (2, 2))
    want = scatter_gradient((1, 1, 8, 8), to_first(np.asarray(indices)), np.ones((1, 1, 4, 4)))
    np.testing.assert_array_equal(to_first(np.asarray(grad, np.float32)), want)


def test_errors_carry_poolgens_message():
    x = jnp.zeros((1, 4, 4, 2))
    with pytest.raises(ValueError, match="kernel_size 5"):
        pj.max_pool(x, (5, 5))
    with pytest.raises(ValueError, match="padding"):
        pj.max_pool(x, (2, 2), padding=((2, 0), (0, 0)))  # a side as wide as the window
    with pytest.raises(ValueError, match="window_shape"):
        pj.max_pool(x, (2, 2, 2, 2))
    # SAME with a dilated window may pad a side by the undilated kernel or more, which poolgen's
    # end padding refuses (ONNX Runtime's limit).
    with pytest.raises(ValueError, match="padding_end: expected less than kernel_size"):
        pj.max_pool(jnp.ones((1, 5, 1)), (2,), (1,), "SAME", dilation=3)
    values, indices = pj.max_pool(x, (2, 2), (2, 2))
    with pytest.raises(Exception, match="poolgen: indices: expected indices in \\[0, 15\\]"):
        jax.block_until_ready(pj.max_unpool(values, indices + 16, (2, 2), (2, 2)))
    with pytest.raises(Exception, match="poolgen: indices"):
        jax.block_until_ready(jax.jit(lambda v, i: pj.max_unpool(v, i, (2, 2), (2, 2)))(
            values, indices - 1))
    with pytest.raises(Exception, match="poolgen: input: expected float32"):
        jax.block_until_ready(pj.max_pool(jnp.zeros((1, 4, 4, 1), jnp.uint16), (2, 2)))
    # Output sizes past what int64 or memory can hold: poolgen's error at trace time, before
    # JAX builds a shape.
    for size in ((1 << 40, 1 << 40), (1 << 62, 4), (1 << 31, 1 << 31)):
        with pytest.raises(ValueError, match="poolgen: output: expected at most 2\\^59 elements"):
            pj.max_unpool(values, indices, (2, 2), (2, 2), output_shape=size)
    with pytest.raises(ValueError, match="output_size: expected spatial dimension 0 to be >= 1"):
        pj.max_unpool(values, indices, (2, 2), (2, 2), output_shape=(-4, 4))


def test_export_round_trip():
    x = np.random.default_rng(5).standard_normal((2, 6, 6, 3)).astype(np.float32)

    def f(x):
        values, indices = pj.max_pool(x, (2, 2), (2, 2))
        return pj.max_unpool(values, indices, (2, 2), (2, 2), output_shape=x.shape)

    exported = jax.export.export(jax.jit(f), disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call(name) for name in pj.TARGETS])(
            jax.ShapeDtypeStruct(x.shape, x.dtype))
    restored = jax.export.deserialize(exported.serialize())
    np.testing.assert_array_equal(np.asarray(restored.call(x)), np.asarray(f(x)))
    with pytest.raises(ValueError, match="custom call"):  # not without allowing them
        jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct(x.shape, x.dtype))


def test_set_num_threads():
    x = np.random.default_rng(6).standard_normal((4, 32, 32, 16)).astype(np.float32)
    want = pj.max_pool(x, (3, 3), (2, 2), "SAME")
    try:
        for n in (1, 2):
            pj.set_num_threads(n)
            assert pj.get_num_threads() == n
            got = pj.max_pool(x, (3, 3), (2, 2), "SAME")
            np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    finally:
        pj.set_num_threads(0)
    assert pj.get_num_threads() >= 1
    with pytest.raises(ValueError):
        pj.set_num_threads(-1)


def from_torch(t, dtype):
    """A torch tensor's bytes as NumPy (torch 1.13's NumPy interop predates NumPy 2)."""
    t = t.contiguous()
    return np.frombuffer(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()),
                         dtype).reshape(tuple(t.shape))


# (Debian's torch 1.13 warns that it cannot use this environment's NumPy 2.)
@pytest.mark.filterwarnings("ignore:Failed to initialize NumPy")
def test_matches_torch():
    """max_pool2d(return_indices=True) and max_unpool2d, bit for bit (NaN payloads included)."""
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for kernel, stride, pad, dilation, ceil in [(2, 2, 0, 1, False), (3, 2, 1, 1, True),
                                                (3, 1, 1, 2, False)]:
        x = rng.integers(-3, 4, size=(2, 3, 9, 8)).astype(np.float32)
        x[rng.random(x.shape) < 0.05] = np.nan
        x[rng.random(x.shape) < 0.05] = -0.0
        t = torch.frombuffer(bytearray(x.tobytes()), dtype=torch.float32).reshape(x.shape)
        want_v, want_i = F.max_pool2d(t, kernel, stride, pad, dilation, ceil_mode=ceil,
                                      return_indices=True)
        values, indices = pj.max_pool(x, (kernel,) * 2, (stride,) * 2, ((pad, pad),) * 2,
                                      channels_last=False, dilation=dilation, ceil_mode=ceil)
        np.testing.assert_array_equal(np.asarray(values).view(np.uint32),
                                      from_torch(want_v, np.uint32))
        np.testing.assert_array_equal(np.asarray(indices), from_torch(want_i, np.int64))
        if dilation != 1:
            continue  # (PyTorch's unpooling has no dilation)
        size = list(x.shape[2:])
        want_u = F.max_unpool2d(want_v, want_i, kernel, stride, pad, output_size=size)
        got_u = pj.max_unpool(values, indices, (kernel,) * 2, (stride,) * 2, ((pad, pad),) * 2,
                              output_shape=size, channels_last=False)
        np.testing.assert_array_equal(np.asarray(got_u).view(np.uint32),
                                      from_torch(want_u, np.uint32))


def test_cuda_handlers_are_registered():
    """Each target has a CUDA handler (on XLA's stream), registered for JAX's CUDA platform, and
    a function of them lowers for CUDA; running them is owed a GPU (and a jaxlib with CUDA)."""
    for op in ("max_pool", "max_pool_backward", "max_unpool", "max_unpool_backward"):
        assert getattr(pj._library, f"poolgen_jax_{op}_cuda")
    from jax._src.lib import xla_client  # (registrations wait there for a CUDA backend)
    pending = getattr(xla_client, "_custom_callback", {}).get("CUDA")
    if pending is not None and not any(d.platform == "gpu" for d in jax.devices()):
        assert set(pj.TARGETS) <= {entry[0] for entry in pending}
    f = lambda x: pj.max_unpool(*pj.max_pool(x, (2, 2), (2, 2)), (2, 2), (2, 2))
    exported = jax.export.export(
        jax.jit(jax.grad(lambda x: f(x).sum())), platforms=["cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(t) for t in pj.TARGETS])(
            np.ones((1, 4, 4, 2), np.float32))
    module = exported.mlir_module()
    for target in ("poolgen_max_pool", "poolgen_max_unpool_backward"):
        assert f"@{target}(" in module, target
