// The C API's backward ops, apart from the forward ones (c_api.cpp) so that a C program calling
// only the forward ops links no backward kernel.
#include "api/c_api.hpp"

using namespace poolgen;
using namespace poolgen::c_api;

extern "C" {

constexpr const char* kPoolBackwardNames[3] = {"grad_output", "indices", "grad_input"};
constexpr const char* kUnpoolBackwardNames[3] = {"grad_output", "indices", "grad_values"};

int32_t poolgen_max_pool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                  const poolgen_tensor* indices, const poolgen_tensor* grad_input,
                                  const poolgen_pool_options* options, char* message,
                                  size_t message_size) {
  return run_entry(nd, options, kPoolBackwardNames, {grad_output, indices, grad_input},
                   max_pool_backward, message, message_size);
}

int32_t poolgen_prepare_max_pool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                          const poolgen_tensor* indices,
                                          const poolgen_tensor* grad_input,
                                          const poolgen_pool_options* options,
                                          poolgen_prepared** prepared, char* message,
                                          size_t message_size) {
  return prepare_entry(nd, options, kPoolBackwardNames, {grad_output, indices, grad_input},
                       prepare_max_pool_backward, prepared, message, message_size);
}

int32_t poolgen_max_unpool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                    const poolgen_tensor* indices,
                                    const poolgen_tensor* grad_values,
                                    const poolgen_unpool_options* options, char* message,
                                    size_t message_size) {
  return run_entry(nd, options, kUnpoolBackwardNames, {grad_output, indices, grad_values},
                   max_unpool_backward, message, message_size);
}

int32_t poolgen_prepare_max_unpool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                            const poolgen_tensor* indices,
                                            const poolgen_tensor* grad_values,
                                            const poolgen_unpool_options* options,
                                            poolgen_prepared** prepared, char* message,
                                            size_t message_size) {
  return prepare_entry(nd, options, kUnpoolBackwardNames, {grad_output, indices, grad_values},
                       prepare_max_unpool_backward, prepared, message, message_size);
}

}  // extern "C"
