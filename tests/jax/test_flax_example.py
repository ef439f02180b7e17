"""examples/flax/segnet.py: the Flax SegNet trains on poolgen.jax's ops (its loss falls), to the
same bits as with JAX-only pooling and unpooling (bench/jax_stock.py: the argmax of each
window's patches and an `.at[].set` scatter, which give the same indices for these windows).

    $PYTHON -m pytest -q tests/jax   # a Python with jax, flax, optax and poolgen.jax
"""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("poolgen.jax", reason="poolgen.jax is not installed here")
pytest.importorskip("flax", reason="Flax is not installed here")
pytest.importorskip("optax", reason="optax is not installed here")
import jax  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_segnet_trains_to_the_same_bits_as_jax_only_ops():
    example = load(ROOT / "examples" / "flax" / "segnet.py", "flax_segnet")
    stock = load(ROOT / "bench" / "jax_stock.py", "jax_stock")
    losses, params = example.train(example.SegNet())
    assert losses[-1] < losses[0] * 0.95, losses
    stock_losses, stock_params = example.train(example.SegNet(
        pool=lambda x, padding: stock.max_pool(x, 2, padding),
        unpool=lambda v, i, like, padding: stock.max_unpool(v, i, *like.shape[1:3])))
    assert losses == stock_losses
    for ours, theirs in zip(jax.tree_util.tree_leaves(params),
                            jax.tree_util.tree_leaves(stock_params)):
        assert np.array_equal(np.asarray(ours).view(np.uint32), np.asarray(theirs).view(np.uint32))
