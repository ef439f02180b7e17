"""ctypes mirrors of poolgen's C API structs (include/poolgen/poolgen.h), for the code that calls
the C API through ctypes: poolgen.numpy, and the benches and tools that load libpoolgen.so. One
copy, so that a field added to the header is added here once (a shorter mirror leaves the C side
reading past the Python struct). Loads no library.
"""
import ctypes

I64x3, I64x5 = ctypes.c_int64 * 3, ctypes.c_int64 * 5


class Tensor(ctypes.Structure):  # poolgen_tensor
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", I64x5), ("strides", I64x5), ("device", ctypes.c_int32)]


class PoolOptions(ctypes.Structure):  # poolgen_pool_options
    _fields_ = [("kernel_size", I64x3), ("stride", I64x3), ("padding", I64x3),
                ("dilation", I64x3), ("ceil_mode", ctypes.c_int32), ("device", ctypes.c_int32),
                ("padding_end_given", ctypes.c_int32), ("padding_end", I64x3),
                ("auto_pad", ctypes.c_int32), ("max_rule", ctypes.c_int32),
                ("index_format", ctypes.c_int32), ("cuda_stream", ctypes.c_void_p),
                ("pool_rule", ctypes.c_int32)]


class UnpoolOptions(ctypes.Structure):  # poolgen_unpool_options
    _fields_ = [("kernel_size", I64x3), ("stride", I64x3), ("padding", I64x3),
                ("output_size_len", ctypes.c_int32), ("output_size", I64x5),
                ("device", ctypes.c_int32), ("padding_end_given", ctypes.c_int32),
                ("padding_end", I64x3), ("output_size_rule", ctypes.c_int32),
                ("index_format", ctypes.c_int32), ("cuda_stream", ctypes.c_void_p)]


class Error(ctypes.Structure):  # poolgen_error
    _fields_ = [("code", ctypes.c_int32), ("kind", ctypes.c_int32), ("argument", ctypes.c_char_p)]
