#!/usr/bin/env python3
"""poolgen.jax against what JAX users write today, as a jitted model calls them: max pooling with
indices (the argmax of each window's patches, bench/jax_stock.py), the values alone
(flax.linen.max_pool, lax.reduce_window: no indices), max unpooling (an `.at[].set` scatter),
and a training step's gradient through pooling and unpooling. f32 NHWC, 2x2 windows at stride 2,
median of 21 calls (the result waited for), one process per thread count: XLA's and poolgen's
threads both limited to it.

    for t in 1 2; do $PYTHON bench/jax_bench.py $t; done   # rows: case|threads|stock ms|poolgen ms
"""
import os
import sys
import time

threads = int(sys.argv[1])
if threads == 1:  # (before JAX starts) XLA's CPU work on the calling thread
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false"
                               " intra_op_parallelism_threads=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import poolgen.jax as pj  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax_stock  # noqa: E402

pj.set_num_threads(threads)
try:
    import flax.linen as nn
except ImportError:
    nn = None


def median_ms(f, *args):
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(21):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def rows(shape, padding):
    n, h, w, c = shape
    x = jnp.asarray(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    window = dict(window_shape=(2, 2), strides=(2, 2), padding=padding)
    ours_pool = jax.jit(lambda x: pj.max_pool(x, **window))
    stock_pool = jax.jit(lambda x: jax_stock.max_pool(x, 2, padding))
    values, indices = ours_pool(x)
    ours_unpool = jax.jit(lambda v, i: pj.max_unpool(v, i, **window, output_shape=(h, w)))
    stock_unpool = jax.jit(lambda v, i: jax_stock.max_unpool(v, i, h, w))
    weight = jnp.asarray(np.random.default_rng(1).standard_normal(shape).astype(np.float32))

    def step(pool, unpool):
        loss = lambda x: jnp.sum(unpool(*pool(x)) * weight)
        return jax.jit(jax.grad(loss))

    name = "x".join(map(str, shape)) + f" k2s2 {padding}"
    yield f"{name} pool with indices", median_ms(stock_pool, x), median_ms(ours_pool, x)
    if nn is not None:
        flax_pool = jax.jit(lambda x: nn.max_pool(x, (2, 2), (2, 2), padding))
        yield (f"{name} pool, values alone (flax.linen.max_pool)", median_ms(flax_pool, x),
               median_ms(ours_pool, x))
    yield f"{name} unpool", median_ms(stock_unpool, values, indices), median_ms(ours_unpool,
                                                                                 values, indices)
    yield (f"{name} pool+unpool gradient", median_ms(step(stock_pool, stock_unpool), x),
           median_ms(step(ours_pool, ours_unpool), x))


for shape, padding in (((8, 112, 112, 64), "VALID"), ((8, 111, 111, 64), "SAME"),
                       ((1, 56, 56, 64), "VALID")):
    for case, stock, ours in rows(shape, padding):
        print(f"{case}|{threads}|{stock:.3f}|{ours:.3f}|{stock / ours:.2f}x", flush=True)
