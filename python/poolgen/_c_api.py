"""ctypes mirrors of poolgen's C API structs (include/poolgen/poolgen.h), for the code that calls
the C API through ctypes: poolgen.numpy, and the benches and tools that load libpoolgen.so. One
copy, so that a field added to the header is added here once (a shorter mirror leaves the C side
reading past the Python struct). Loads no library.
"""
import ctypes

I64x3, I64x5 = ctypes.c_int64 * 3, ctypes.c_int64 * 5

# The header's codes, named as there without POOLGEN_ (tests/numpy checks them against it).
DTYPES = {"float32": 0, "int64": 1, "float64": 2, "float16": 3, "bfloat16": 4, "int8": 5,
          "uint8": 6, "int16": 7, "int32": 8}  # POOLGEN_F32, POOLGEN_I64, ...
F32, I64 = DTYPES["float32"], DTYPES["int64"]
OK, INVALID_ARGUMENT, INDEX_OUT_OF_RANGE, UNSUPPORTED, INTERNAL = range(5)
(INDEX_PLANE, INDEX_ONNX, INDEX_ONNX_COLUMN_MAJOR, INDEX_TENSORFLOW,
 INDEX_TENSORFLOW_WITH_BATCH, INDEX_WINDOW) = range(6)
EXPLICIT_PADDING, SAME_UPPER, SAME_LOWER, VALID = range(4)
MAX_ANY_NAN, MAX_FIRST_TAP = range(2)
POOL_RULE_PYTORCH, POOL_RULE_ONNX_RUNTIME, POOL_RULE_TENSORFLOW = range(3)
OUTPUT_SIZE_PYTORCH, OUTPUT_SIZE_ONNX_RUNTIME, OUTPUT_SIZE_ONNX, OUTPUT_SIZE_ANY = range(4)


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
