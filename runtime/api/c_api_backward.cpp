// The C API's backward ops, apart from the forward ones (c_api.cpp) so that a C program calling
// only the forward ops links no backward kernel.
#include "api/c_api.hpp"

using namespace poolgen;
using namespace poolgen::c_api;

extern "C" {

int32_t poolgen_max_pool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                  const poolgen_tensor* indices, const poolgen_tensor* grad_input,
                                  const poolgen_pool_options* options, char* message,
                                  size_t message_size) {
  return guarded(message, message_size, [&] {
    return with_tensors(nd, options, {"grad_output", "indices", "grad_input"},
                        {grad_output, indices, grad_input},
                        [&](const TensorView& g, const TensorView& i, const TensorView& o) {
                          return max_pool_backward(nd, g, i, o, pool_options(nd, *options));
                        });
  });
}

int32_t poolgen_max_unpool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                    const poolgen_tensor* indices,
                                    const poolgen_tensor* grad_values,
                                    const poolgen_unpool_options* options, char* message,
                                    size_t message_size) {
  return guarded(message, message_size, [&] {
    return with_unpool_tensors(nd, options, {"grad_output", "indices", "grad_values"},
                               {grad_output, indices, grad_values}, max_unpool_backward);
  });
}

}  // extern "C"
