"""pytest setup for poolgen's PyTorch binding: the package must be installed in the Python that
runs the tests (scripts/test.sh uses the environment scripts/build.sh installed it into)."""
import pytest
import torch

import poolgen.torch as pt


@pytest.fixture(autouse=True)
def stock_pytorch():
    """Every test starts with PyTorch's own kernels and one thread, and leaves them so."""
    pt.disable()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    pt.disable()
    torch.set_num_threads(threads)
