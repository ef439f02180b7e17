// The C API's index converter, apart from the ops (c_api.cpp) so that a C program that converts
// nothing links none of it.
#include "api/c_api.hpp"

#include <string>

using namespace poolgen;
using namespace poolgen::c_api;

extern "C" {

int32_t poolgen_convert_indices(int32_t nd, int32_t frame_rank, const int64_t* frame_shape,
                                const poolgen_tensor* from, int32_t from_format,
                                const poolgen_tensor* to, int32_t to_format,
                                const poolgen_pool_options* window, char* message,
                                size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    if (!nd_ok(nd)) return bad_nd(nd);
    if (!frame_shape) {
      return detail::fail(Code::invalid_argument, "frame_shape",
                          ": expected an array, got a null pointer");
    }
    if (frame_rank < 0 || frame_rank > 5) {
      return detail::fail(Code::invalid_argument, "frame_rank", ": expected 0 to 5, got ",
                          frame_rank);
    }
    TensorView f, t;
    POOLGEN_RETURN_IF_ERROR(tensor_view("from", from, &f));
    POOLGEN_RETURN_IF_ERROR(tensor_view("to", to, &t));
    PoolOptions options;
    if (window) options = pool_options(nd, *window);
    return convert_indices(nd, Ints(frame_shape, frame_shape + frame_rank), f,
                           static_cast<IndexFormat>(from_format), t,
                           static_cast<IndexFormat>(to_format), window ? &options : nullptr);
  });
}

}  // extern "C"
