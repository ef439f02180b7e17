"""The drop-in switch: PyTorch's own pooling operators (aten's CPU kernels of max_pool2d/3d with
indices, their backward ops, max_unpool2d/3d and their out= forms; with a CUDA build of PyTorch
2, their CUDA kernels too) run on poolgen while it is on. What poolgen cannot serve falls back to
PyTorch's kernel, so the switch never changes what raises; stats() says which calls ran where."""
import contextlib

from ._library import ops

__all__ = ["enable", "disable", "is_enabled", "enabled", "stats", "reset_stats", "serves_cuda",
           "cuda_check"]


def _switch(on):
    """Turns the drop-in on or off; returns whether it was on."""
    return ops._set_dropin(on)


def enable():
    """PyTorch's max pooling with indices and max unpooling (CPU tensors; CUDA tensors where
    serves_cuda()) run on poolgen from now on."""
    _switch(True)


def disable():
    """PyTorch's own kernels again."""
    _switch(False)


def is_enabled():
    return ops._dropin_enabled()


@contextlib.contextmanager
def enabled(on=True):
    """`with poolgen.torch.enabled():` runs the block with the drop-in on (or off, with False),
    then restores the switch as it was."""
    was_on = _switch(on)
    try:
        yield
    finally:
        _switch(was_on)


def stats(device=None):
    """Calls per aten operator since the last reset_stats(): {"max_pool2d_with_indices":
    {"poolgen": served, "pytorch": fell back}, ...}, and "last_fallback": why the latest call
    that fell back did ("" if none). device: "cpu" or "cuda" counts that device's calls only."""
    names, counts = ops._dropin_ops(), ops._dropin_counts(device or "")
    result = {name: {"poolgen": counts[2 * k], "pytorch": counts[2 * k + 1]}
              for k, name in enumerate(names)}
    result["last_fallback"] = ops._dropin_last_fallback()
    return result


def reset_stats():
    ops._reset_dropin_counts()


def serves_cuda():
    """Whether this build serves CUDA tensors (it was built against a PyTorch with CUDA)."""
    return ops._serves_cuda()


def cuda_check(wait=True):
    """Raises the error a call on CUDA tensors could find only once its kernels had run on the
    stream (an invalid unpooling index; poolgen wrote nothing through it), as RuntimeError. Every
    call on CUDA tensors checks the kernels that have run so far; with wait (the default) this
    waits for all of them, as torch.cuda.synchronize() would."""
    ops._cuda_check(wait)
