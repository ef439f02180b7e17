// poolgen_tensor values for the C API's tests: contiguous (zero strides) views of host data.
#pragma once

#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"

#include <cstdint>

namespace poolgen::test {

inline poolgen_tensor c_tensor(void* data, int32_t dtype, const Ints& shape) {
  poolgen_tensor t{};  // zero strides: contiguous
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size() && d < 5; ++d) t.shape[d] = shape[d];
  return t;
}

inline poolgen_tensor c_tensor(void* data, DType dtype, const Ints& shape) {
  return c_tensor(data, static_cast<int32_t>(dtype), shape);
}

}  // namespace poolgen::test
