#!/usr/bin/env python3
"""A SegNet-style encoder-decoder in Flax (linen) on poolgen.jax: the encoder max-pools with
indices, the decoder max-unpools by them, and it trains with optax, gradients through poolgen's
backward kernels. JAX has neither op; docs/jax.md says more.

    python3 examples/flax/segnet.py        # after `pip install --no-build-isolation ./python`
                                           # where jax, flax and optax are installed
"""
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import poolgen.jax as pj


def pool(x, padding):
    return pj.max_pool(x, (2, 2), (2, 2), padding)


def unpool(values, indices, like, padding):
    return pj.max_unpool(values, indices, (2, 2), (2, 2), padding, output_shape=like.shape)


class SegNet(nn.Module):
    """Two encoder stages (15x15 -> 7x7 "VALID", the last row and column left out; 7x7 -> 4x4
    "SAME", padded at the end) and two decoder stages that unpool by their indices. `pool` and
    `unpool` are poolgen.jax's unless given (tests/jax compares them with JAX-only ones)."""
    classes: int = 2
    pool: Callable = pool
    unpool: Callable = unpool

    @nn.compact
    def __call__(self, x):
        e1 = nn.relu(nn.Conv(8, (3, 3))(x))
        p1, i1 = self.pool(e1, "VALID")
        e2 = nn.relu(nn.Conv(16, (3, 3))(p1))
        p2, i2 = self.pool(e2, "SAME")
        d2 = nn.relu(nn.Conv(8, (3, 3))(self.unpool(p2, i2, e2, "SAME")))
        d1 = self.unpool(d2, i1, e1, "VALID")
        return nn.Conv(self.classes, (3, 3))(d1)


def train(model, steps=20, seed=0):
    """Trains `model` to segment random images (each pixel's class: whether its first channel
    is positive) and returns the losses and the final parameters."""
    rng = np.random.default_rng(seed)
    images = jnp.asarray(rng.standard_normal((8, 15, 15, 3)).astype(np.float32))
    labels = (images[..., 0] > 0).astype(jnp.int32)
    params = model.init(jax.random.key(seed), images)
    optimizer = optax.sgd(0.3)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state):
        def loss_of(p):
            logits = model.apply(p, images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        loss, grads = jax.value_and_grad(loss_of)(params)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(params, updates), state, loss

    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return losses, params


if __name__ == "__main__":
    losses, _ = train(SegNet())
    print(f"SegNet on poolgen.jax: loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
