"""poolgen: max pooling with indices and max unpooling, bit-exact with PyTorch.

`poolgen.torch` runs PyTorch's pooling ops on poolgen's kernels (docs/pytorch.md).
"""
__version__ = "0.1.0"
