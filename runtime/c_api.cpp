// The C API: plain structs in, codes and messages out; nothing is thrown across it.
#include "c_api.hpp"

using namespace poolgen;
using namespace poolgen::c_api;

extern "C" {

int32_t poolgen_max_pool_output_shape(int32_t nd, int32_t rank, const int64_t* input_shape,
                                      const poolgen_pool_options* options, int64_t* out_shape,
                                      char* message, size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    POOLGEN_RETURN_IF_ERROR(check_call(nd, options));
    return shape_query(rank, input_shape, out_shape, [&](const Ints& in, Ints* out) {
      return max_pool_output_shape(nd, in, pool_options(nd, *options), out);
    });
  });
}

int32_t poolgen_max_pool(int32_t nd, const poolgen_tensor* input, const poolgen_tensor* values,
                         const poolgen_tensor* indices, const poolgen_pool_options* options,
                         char* message, size_t message_size) {
  return guarded(message, message_size, [&] {
    return with_tensors(nd, options, {"input", "values", "indices"}, {input, values, indices},
                        [&](const TensorView& in, const TensorView& v, const TensorView& i) {
                          return max_pool(nd, in, v, i, pool_options(nd, *options));
                        });
  });
}

int32_t poolgen_max_unpool_output_shape(int32_t nd, int32_t rank, const int64_t* input_shape,
                                        const poolgen_unpool_options* options,
                                        int64_t* out_shape, char* message, size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    POOLGEN_RETURN_IF_ERROR(check_call(nd, options));
    UnpoolOptions u;
    POOLGEN_RETURN_IF_ERROR(unpool_options(nd, *options, &u));
    return shape_query(rank, input_shape, out_shape, [&](const Ints& in, Ints* out) {
      return max_unpool_output_shape(nd, in, u, out);
    });
  });
}

int32_t poolgen_max_unpool(int32_t nd, const poolgen_tensor* values,
                           const poolgen_tensor* indices, const poolgen_tensor* output,
                           const poolgen_unpool_options* options, char* message,
                           size_t message_size) {
  return guarded(message, message_size, [&] {
    return with_unpool_tensors(nd, options, {"values", "indices", "output"},
                               {values, indices, output}, max_unpool);
  });
}

void poolgen_set_num_threads(int32_t threads) { set_num_threads(threads); }
void poolgen_set_min_parallel_bytes(int64_t bytes) { set_min_parallel_bytes(bytes); }

int32_t poolgen_cuda_available(void) { return cuda_available() ? 1 : 0; }

}  // extern "C"
