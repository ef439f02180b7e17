"""torch.nn's MaxPool*d and MaxUnpool*d on poolgen: subclasses with the same arguments, state and
repr, whose forward runs poolgen.torch.functional."""
import torch

from . import functional as F

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


def _pool_module(base, function):
    class Pool(base):
        __doc__ = f"{base.__name__} on poolgen (arguments as torch.nn.{base.__name__})."

        def forward(self, input):
            return function(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    Pool.__name__ = Pool.__qualname__ = base.__name__
    return Pool


def _unpool_module(base, function):
    class Unpool(base):
        __doc__ = f"{base.__name__} on poolgen (arguments as torch.nn.{base.__name__})."

        def forward(self, input, indices, output_size=None):
            return function(input, indices, self.kernel_size, self.stride, self.padding,
                            output_size)

    Unpool.__name__ = Unpool.__qualname__ = base.__name__
    return Unpool


MaxPool1d = _pool_module(torch.nn.MaxPool1d, F.max_pool1d)
MaxPool2d = _pool_module(torch.nn.MaxPool2d, F.max_pool2d)
MaxPool3d = _pool_module(torch.nn.MaxPool3d, F.max_pool3d)
MaxUnpool1d = _unpool_module(torch.nn.MaxUnpool1d, F.max_unpool1d)
MaxUnpool2d = _unpool_module(torch.nn.MaxUnpool2d, F.max_unpool2d)
MaxUnpool3d = _unpool_module(torch.nn.MaxUnpool3d, F.max_unpool3d)
