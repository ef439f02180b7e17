// poolgen.numpy's library: poolgen's C API (include/poolgen/poolgen.h), which the package calls
// through ctypes, and nothing else. Its code is libpoolgen.a's, linked whole with the kernels
// (python/setup.py); this file gives the library its one translation unit, and checks at
// compile time that the C API is the one poolgen/numpy/__init__.py's structures mirror (its
// tests check the same offsets there: tests/numpy).
#include <poolgen/poolgen.h>

#include <cstddef>

static_assert(sizeof(poolgen_tensor) == 104 && offsetof(poolgen_tensor, strides) == 56,
              "poolgen_tensor changed: update _Tensor in poolgen/numpy/__init__.py");
static_assert(offsetof(poolgen_pool_options, pool_rule) == 160,
              "poolgen_pool_options changed: update _PoolOptions in poolgen/numpy/__init__.py");
static_assert(offsetof(poolgen_unpool_options, cuda_stream) == 160,
              "poolgen_unpool_options changed: update _UnpoolOptions in poolgen/numpy/__init__.py");
