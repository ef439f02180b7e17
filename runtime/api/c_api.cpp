// The C API: plain structs in, codes and messages out; nothing is thrown across it.
#include "api/c_api.hpp"

#include "validate/window.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace poolgen::c_api {
namespace {

// A C list into a C++ one, whose capacity is reused (the conversions keep thread-local
// options and views, so that a call allocates nothing).
void assign(Ints* to, const int64_t* values, int nd) { to->assign(values, values + nd); }

// assign, but empty when every entry is zero: the C structs' way of saying "use the default".
void assign_or_default(Ints* to, const int64_t* values, int nd) {
  if (std::all_of(values, values + nd, [](int64_t v) { return v == 0; })) {
    to->clear();
  } else {
    assign(to, values, nd);
  }
}

Status unpool_options(int32_t nd, const poolgen_unpool_options& o, UnpoolOptions* u) {
  if (o.output_size_len < 0 || o.output_size_len > 5) {
    return detail::fail(Code::invalid_argument, "output_size_len", ": expected 0 to 5, got ",
                        o.output_size_len);
  }
  // No kernel_size and an output_size: unpooling by the indices alone.
  if (o.output_size_len > 0) {
    assign_or_default(&u->kernel_size, o.kernel_size, nd);
  } else {
    assign(&u->kernel_size, o.kernel_size, nd);
  }
  assign_or_default(&u->stride, o.stride, nd);
  assign(&u->padding, o.padding, nd);
  assign(&u->output_size, o.output_size, o.output_size_len);
  u->path = Path::automatic;
  u->device = static_cast<Device>(o.device);
  u->cuda_stream = o.cuda_stream;
  if (o.padding_end_given) {
    assign(&u->padding_end, o.padding_end, nd);
  } else {
    u->padding_end.clear();
  }
  u->output_size_rule = static_cast<OutputSizeRule>(o.output_size_rule);
  u->index_format = static_cast<IndexFormat>(o.index_format);
  return {};
}

// The *_output_shape entry points: checks the arrays, runs `compute`, copies the shape out.
template <typename F>
Status shape_query(int32_t rank, const int64_t* input_shape, int64_t* out_shape, F compute) {
  if (!input_shape || !out_shape) {
    return detail::fail(Code::invalid_argument, input_shape ? "out_shape" : "input_shape",
                        ": expected an array, got a null pointer");
  }
  if (rank < 0 || rank > 5) {
    return detail::fail(Code::invalid_argument, "rank", ": expected 0 to 5, got ", rank);
  }
  thread_local Ints in, out;  // pool_options' reason
  assign(&in, input_shape, rank);
  POOLGEN_RETURN_IF_ERROR(compute(in, &out));
  std::copy(out.begin(), out.end(), out_shape);
  return {};
}

}  // namespace

Status tensor_view(const char* argument, const poolgen_tensor* t, TensorView* out) {
  if (!t) {
    return detail::fail(Code::invalid_argument, argument,
                        ": expected a poolgen_tensor, got a null pointer");
  }
  if (t->rank < 2 || t->rank > 5) {
    return detail::fail(Code::invalid_argument, argument, ": expected rank 2 to 5, got ",
                        t->rank);
  }
  out->data = t->data;
  out->dtype = static_cast<DType>(t->dtype);
  assign(&out->shape, t->shape, t->rank);
  assign_or_default(&out->strides, t->strides, t->rank);
  out->device = static_cast<Device>(t->device);
  return {};
}

namespace {
// The thread's last call's error: its code, kind and argument (held in t_last_argument).
thread_local poolgen_error t_last_error = {POOLGEN_OK, POOLGEN_ERROR_NONE, ""};
thread_local char t_last_argument[64];
}  // namespace

int32_t report(const Status& status, char* message, size_t size) {
  const char* argument = "";
  if (!status.ok()) {
    const std::string name = status.argument();
    const size_t n = std::min(sizeof t_last_argument - 1, name.size());
    std::memcpy(t_last_argument, name.data(), n);
    t_last_argument[n] = '\0';
    argument = t_last_argument;
  }
  t_last_error = {static_cast<int32_t>(status.code()), static_cast<int32_t>(status.kind()),
                  argument};
  if (message && size > 0) {
    const size_t n = std::min(size - 1, status.message().size());
    std::memcpy(message, status.message().data(), n);
    message[n] = '\0';
  }
  return static_cast<int32_t>(status.code());
}

Status check_call(int32_t nd, const void* options) {
  if (!nd_ok(nd)) return bad_nd(nd);
  if (!options) {
    return detail::fail(Code::invalid_argument, "options",
                        ": expected options, got a null pointer");
  }
  return {};
}

bool nd_ok(int32_t nd) { return nd >= 1 && nd <= 3; }

Status bad_nd(int32_t nd) {
  return detail::fail(Code::invalid_argument, "nd", ": expected 1, 2 or 3, got ", nd);
}

const PoolOptions& pool_options(int32_t nd, const poolgen_pool_options& o) {
  thread_local PoolOptions p;
  assign(&p.kernel_size, o.kernel_size, nd);
  assign_or_default(&p.stride, o.stride, nd);
  assign(&p.padding, o.padding, nd);
  assign_or_default(&p.dilation, o.dilation, nd);
  if (p.dilation.empty()) p.dilation.assign(1, 1);
  p.ceil_mode = o.ceil_mode != 0;
  p.path = Path::automatic;
  p.device = static_cast<Device>(o.device);
  p.cuda_stream = o.cuda_stream;
  if (o.padding_end_given) {
    assign(&p.padding_end, o.padding_end, nd);
  } else {
    p.padding_end.clear();
  }
  p.auto_pad = static_cast<AutoPad>(o.auto_pad);
  p.max_rule = static_cast<MaxRule>(o.max_rule);
  p.index_format = static_cast<IndexFormat>(o.index_format);
  p.pool_rule = static_cast<PoolRule>(o.pool_rule);
  return p;
}

Status tensor_views(const char* const (&names)[3], const poolgen_tensor* const (&tensors)[3],
                    const TensorView* (&views)[3]) {
  thread_local TensorView converted[3];
  for (int k = 0; k < 3; ++k) {
    POOLGEN_RETURN_IF_ERROR(tensor_view(names[k], tensors[k], &converted[k]));
    views[k] = &converted[k];
  }
  return {};
}

Status cpp_options(int32_t nd, const poolgen_unpool_options& o, const UnpoolOptions** out) {
  thread_local UnpoolOptions u;  // pool_options' reason
  POOLGEN_RETURN_IF_ERROR(unpool_options(nd, o, &u));
  *out = &u;
  return {};
}

}  // namespace poolgen::c_api

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

constexpr const char* kPoolNames[3] = {"input", "values", "indices"};
constexpr const char* kUnpoolNames[3] = {"values", "indices", "output"};

int32_t poolgen_max_pool(int32_t nd, const poolgen_tensor* input, const poolgen_tensor* values,
                         const poolgen_tensor* indices, const poolgen_pool_options* options,
                         char* message, size_t message_size) {
  return run_entry(nd, options, kPoolNames, {input, values, indices}, max_pool, message,
                   message_size);
}

int32_t poolgen_prepare_max_pool(int32_t nd, const poolgen_tensor* input,
                                 const poolgen_tensor* values, const poolgen_tensor* indices,
                                 const poolgen_pool_options* options, poolgen_prepared** prepared,
                                 char* message, size_t message_size) {
  return prepare_entry(nd, options, kPoolNames, {input, values, indices}, prepare_max_pool,
                       prepared, message, message_size);
}

int32_t poolgen_max_unpool_output_shape(int32_t nd, int32_t rank, const int64_t* input_shape,
                                        const poolgen_unpool_options* options,
                                        int64_t* out_shape, char* message, size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    POOLGEN_RETURN_IF_ERROR(check_call(nd, options));
    thread_local UnpoolOptions u;  // pool_options' reason
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
  return run_entry(nd, options, kUnpoolNames, {values, indices, output}, max_unpool, message,
                   message_size);
}

int32_t poolgen_prepare_max_unpool(int32_t nd, const poolgen_tensor* values,
                                   const poolgen_tensor* indices, const poolgen_tensor* output,
                                   const poolgen_unpool_options* options,
                                   poolgen_prepared** prepared, char* message,
                                   size_t message_size) {
  return prepare_entry(nd, options, kUnpoolNames, {values, indices, output},
                       prepare_max_unpool, prepared, message, message_size);
}

int32_t poolgen_prepared_run(poolgen_prepared* prepared, void* first, void* second, void* third,
                             char* message, size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    if (!prepared) {
      return detail::fail(Code::invalid_argument, "prepared",
                          ": expected a prepared call, got a null pointer");
    }
    return prepared->call.run(first, second, third);
  });
}

void poolgen_prepared_free(poolgen_prepared* prepared) { delete prepared; }

void poolgen_set_num_threads(int32_t threads) { set_num_threads(threads); }
void poolgen_set_min_parallel_bytes(int64_t bytes) { set_min_parallel_bytes(bytes); }
void poolgen_set_parallel_for(void (*run)(int32_t, int32_t, void (*)(int32_t, void*), void*, void*),
                              void* context) {
  set_parallel_for({run, context});
}
void poolgen_set_streaming_bytes(int64_t bytes) { set_streaming_bytes(bytes); }

int32_t poolgen_cuda_available(void) { return cuda_available() ? 1 : 0; }

void poolgen_set_cuda_allocator(void* (*allocate)(void*, size_t, void*, void**),
                                void (*release)(void*, void*, void*), void* context) {
  CudaAllocator allocator;
  allocator.allocate = allocate;
  allocator.release = release;
  allocator.context = context;
  set_cuda_allocator(allocator);
}

int32_t poolgen_cuda_check_reports(int32_t wait, char* message, size_t message_size) {
  return guarded(message, message_size, [&] { return cuda_check_reports(wait != 0); });
}

int32_t poolgen_expand_option(const char* option, const int64_t* list, int32_t count, int32_t nd,
                              int64_t* out, char* message, size_t message_size) {
  return guarded(message, message_size, [&]() -> Status {
    if (!option || !out || (count > 0 && !list) || count < 0 || count > 3) {
      return detail::fail(Code::invalid_argument, "option",
                          ": expected an option name, 0 to 3 entries and an output array, got ",
                          count, " entries");
    }
    thread_local Ints entries;  // pool_options' reason
    assign(&entries, list, count);
    return detail::expand_option(option, entries, nd, out);
  });
}

poolgen_error poolgen_last_error(void) { return t_last_error; }

}  // extern "C"
