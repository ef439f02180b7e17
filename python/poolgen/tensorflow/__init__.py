"""TensorFlow on poolgen: importing this module makes poolgen TensorFlow's CPU kernels of
MaxPoolWithArgmax and MaxPoolGradWithArgmax, so that tf.nn.max_pool_with_argmax and its
gradient (eager, tf.function, Keras) run poolgen's kernels with TensorFlow's own results, bit for
bit. Import it before the program first runs those ops: TensorFlow keeps the kernel it chose for
an op's first call of each signature.

    import poolgen.tensorflow  # before the model runs
    values, argmax = tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")

Served: every dtype TensorFlow's own kernels take but uint16/32/64 (which stay TensorFlow's),
int32 and int64 argmax, include_batch_in_index; the gradient for float16, bfloat16, float32 and
float64. Windows over batch or depth stay refused (Unimplemented), as TensorFlow's are for the
batch. The one difference: an argmax outside its image in the gradient is InvalidArgumentError
here, where TensorFlow's kernel aborts the process. docs/tensorflow.md says more.
"""
import ctypes

import tensorflow as tf

from .._adapters import check_built_for, compiled_library

try:
    from ._built_for import TENSORFLOW_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = tf.__version__
check_built_for("poolgen.tensorflow", "TensorFlow", _BUILT_FOR, tf.__version__,
                "build poolgen against it (pip install --no-build-isolation ./python)")
_path = compiled_library(__file__, "_kernels*.so", "poolgen.tensorflow")
tf.load_op_library(_path)
_library = ctypes.CDLL(_path)  # the same library, for its C entry points
_library.poolgen_tensorflow_register()  # the kernels of the dtypes this poolgen build has
_served = _library.poolgen_tensorflow_served
_served.restype = ctypes.c_int64
_served.argtypes = [ctypes.c_int]


def stats():
    """Calls poolgen served since the import: {"max_pool_with_argmax": n, "max_pool_grad_with_argmax": n}."""
    return {"max_pool_with_argmax": _served(0), "max_pool_grad_with_argmax": _served(1)}
