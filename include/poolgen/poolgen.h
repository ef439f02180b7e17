/* poolgen C API: the C++ API (poolgen.hpp) behind plain structs and status codes. Never throws.
 * Arrays are in PyTorch order; unused trailing entries are ignored. */
#ifndef POOLGEN_H
#define POOLGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types (poolgen::DType). */
enum {
  POOLGEN_F32 = 0,
  POOLGEN_I64 = 1,
  POOLGEN_F64 = 2,
  POOLGEN_F16 = 3,
  POOLGEN_BF16 = 4,
  POOLGEN_I8 = 5,
  POOLGEN_U8 = 6,
  POOLGEN_I16 = 7,
  POOLGEN_I32 = 8
};
enum {
  POOLGEN_OK = 0,
  POOLGEN_INVALID_ARGUMENT = 1,
  POOLGEN_INDEX_OUT_OF_RANGE = 2,
  POOLGEN_UNSUPPORTED = 3,
  POOLGEN_INTERNAL = 4
};

/* What a failure is about (poolgen::ErrorKind), beyond its code: for bindings that map errors to
 * their framework's exception types without reading messages, whose wording may change. */
enum {
  POOLGEN_ERROR_NONE = 0,
  POOLGEN_ERROR_OPTION = 1,    /* an option's value: kernel_size, stride, output_size, ... */
  POOLGEN_ERROR_TENSOR = 2,    /* a tensor's dtype, rank, shape, strides, device or memory */
  POOLGEN_ERROR_INDEX = 3,     /* an index outside its plane */
  POOLGEN_ERROR_NO_KERNEL = 4, /* a valid call this build has no kernel for */
  POOLGEN_ERROR_NO_DEVICE = 5, /* no CUDA device or driver */
  POOLGEN_ERROR_INTERNAL = 6
};
typedef struct poolgen_error {
  int32_t code;         /* POOLGEN_OK, POOLGEN_INVALID_ARGUMENT, ... */
  int32_t kind;         /* POOLGEN_ERROR_* */
  const char* argument; /* the argument it names ("input", "output_size", ...); "" for none */
} poolgen_error;

/* Devices (poolgen::Device): where a tensor's data lives. */
enum { POOLGEN_CPU = 0, POOLGEN_CUDA = 1 };

typedef struct poolgen_tensor {
  void* data;
  int32_t dtype; /* POOLGEN_F32, ...; indices are POOLGEN_I64 or POOLGEN_I32 */
  int32_t rank;  /* 2..5 */
  int64_t shape[5];
  int64_t strides[5]; /* in elements; all zero means contiguous (channels-last: give strides) */
  int32_t device;     /* POOLGEN_CPU (0) or POOLGEN_CUDA: data is a CUDA device pointer */
} poolgen_tensor;

/* Index formats (poolgen::IndexFormat): the conventions of PyTorch, ONNX, TensorFlow and
 * XNNPACK. */
enum {
  POOLGEN_INDEX_PLANE = 0,
  POOLGEN_INDEX_ONNX = 1,
  POOLGEN_INDEX_ONNX_COLUMN_MAJOR = 2,
  POOLGEN_INDEX_TENSORFLOW = 3,
  POOLGEN_INDEX_TENSORFLOW_WITH_BATCH = 4,
  POOLGEN_INDEX_WINDOW = 5
};

/* Other frameworks' pooling (poolgen::AutoPad, poolgen::MaxRule; the index formats are the
 * POOLGEN_INDEX_* values below). */
enum {
  POOLGEN_EXPLICIT_PADDING = 0,
  POOLGEN_SAME_UPPER = 1,
  POOLGEN_SAME_LOWER = 2,
  POOLGEN_VALID = 3
};
enum { POOLGEN_MAX_ANY_NAN = 0, POOLGEN_MAX_FIRST_TAP = 1 };
/* Whose window arithmetic pooling follows (poolgen::PoolRule). */
enum {
  POOLGEN_POOL_RULE_PYTORCH = 0,
  POOLGEN_POOL_RULE_ONNX_RUNTIME = 1,
  POOLGEN_POOL_RULE_TENSORFLOW = 2
};
/* Unpooling's output_size rules (poolgen::OutputSizeRule). */
enum {
  POOLGEN_OUTPUT_SIZE_PYTORCH = 0,
  POOLGEN_OUTPUT_SIZE_ONNX_RUNTIME = 1,
  POOLGEN_OUTPUT_SIZE_ONNX = 2,
  POOLGEN_OUTPUT_SIZE_ANY = 3
};

typedef struct poolgen_pool_options {
  int64_t kernel_size[3];
  int64_t stride[3]; /* all zero: kernel_size */
  int64_t padding[3];
  int64_t dilation[3]; /* all zero: 1 */
  int32_t ceil_mode;
  int32_t device; /* POOLGEN_CUDA: run on the GPU, copying host tensors there and back */
  /* Zero-initialized: PyTorch's definition. The rest as PoolOptions' fields of these names. */
  int32_t padding_end_given; /* nonzero: padding_end holds the end padding (ONNX's pads) */
  int64_t padding_end[3];
  int32_t auto_pad;     /* POOLGEN_EXPLICIT_PADDING, POOLGEN_SAME_UPPER, ... */
  int32_t max_rule;     /* POOLGEN_MAX_ANY_NAN (PyTorch) or POOLGEN_MAX_FIRST_TAP */
  int32_t index_format; /* POOLGEN_INDEX_PLANE (PyTorch), POOLGEN_INDEX_ONNX, ... */
  void* cuda_stream;    /* a CUstream: see PoolOptions::cuda_stream; NULL: synchronous */
  int32_t pool_rule;    /* POOLGEN_POOL_RULE_PYTORCH, POOLGEN_POOL_RULE_ONNX_RUNTIME, ... */
} poolgen_pool_options;

typedef struct poolgen_unpool_options {
  int64_t kernel_size[3]; /* all zero with an output_size: by the indices alone (UnpoolOptions) */
  int64_t stride[3]; /* all zero: kernel_size */
  int64_t padding[3];
  int32_t output_size_len; /* 0, nd or nd + 2 */
  int64_t output_size[5];
  int32_t device; /* as poolgen_pool_options.device */
  /* Zero-initialized: PyTorch's definition. The rest as UnpoolOptions' fields of these names. */
  int32_t padding_end_given; /* nonzero: padding_end holds the end padding (ONNX's pads) */
  int64_t padding_end[3];
  int32_t output_size_rule; /* POOLGEN_OUTPUT_SIZE_PYTORCH, POOLGEN_OUTPUT_SIZE_ONNX_RUNTIME, ... */
  int32_t index_format;     /* POOLGEN_INDEX_PLANE (PyTorch), POOLGEN_INDEX_ONNX, ... */
  void* cuda_stream;        /* as poolgen_pool_options.cuda_stream */
} poolgen_unpool_options;

/* Each returns a POOLGEN_* code; on failure the message (NUL-terminated, truncated to
 * message_size) says which argument, what was expected and what was given. message may be
 * NULL. Output shapes are written to out_shape (nd + 2 or nd + 1 entries, as the input).
 * As in the C++ API, an output tensor whose memory (first to last element) overlaps an input's
 * or another output's is POOLGEN_INVALID_ARGUMENT, refused before anything is written. */
int32_t poolgen_max_pool_output_shape(int32_t nd, int32_t rank, const int64_t* input_shape,
                                      const poolgen_pool_options* options, int64_t* out_shape,
                                      char* message, size_t message_size);
int32_t poolgen_max_pool(int32_t nd, const poolgen_tensor* input, const poolgen_tensor* values,
                         const poolgen_tensor* indices, const poolgen_pool_options* options,
                         char* message, size_t message_size);
int32_t poolgen_max_unpool_output_shape(int32_t nd, int32_t rank, const int64_t* input_shape,
                                        const poolgen_unpool_options* options,
                                        int64_t* out_shape, char* message, size_t message_size);
int32_t poolgen_max_unpool(int32_t nd, const poolgen_tensor* values,
                           const poolgen_tensor* indices, const poolgen_tensor* output,
                           const poolgen_unpool_options* options, char* message,
                           size_t message_size);

/* The backward passes (poolgen::max_pool_backward and max_unpool_backward; gradients are
 * POOLGEN_F32, POOLGEN_F64, POOLGEN_F16 or POOLGEN_BF16). grad_input has the pooling input's
 * shape, grad_output and indices the pooled shape; grad_values has the unpooling values' shape
 * (the indices'), grad_output the unpooled shape. Indices outside the input plane add nothing to
 * grad_input; outside the unpooled plane they are POOLGEN_INDEX_OUT_OF_RANGE. */
int32_t poolgen_max_pool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                  const poolgen_tensor* indices, const poolgen_tensor* grad_input,
                                  const poolgen_pool_options* options, char* message,
                                  size_t message_size);
int32_t poolgen_max_unpool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                    const poolgen_tensor* indices,
                                    const poolgen_tensor* grad_values,
                                    const poolgen_unpool_options* options, char* message,
                                    size_t message_size);


/* A call prepared once and run many times on new data (poolgen::PreparedCall): each
 * poolgen_prepare_* checks its call's tensors and options as the call of the same name would
 * (the tensors' data must be present but is not read), then sets *prepared to a new prepared
 * call (NULL on failure, the error being the call's). poolgen_prepared_run runs it on the three
 * tensors' data, in the call's argument order, for tensors of the prepared shapes and strides;
 * one thread at a time runs a prepared call. poolgen_prepared_free releases it (NULL: nothing). */
typedef struct poolgen_prepared poolgen_prepared;
int32_t poolgen_prepare_max_pool(int32_t nd, const poolgen_tensor* input,
                                 const poolgen_tensor* values, const poolgen_tensor* indices,
                                 const poolgen_pool_options* options, poolgen_prepared** prepared,
                                 char* message, size_t message_size);
int32_t poolgen_prepare_max_unpool(int32_t nd, const poolgen_tensor* values,
                                   const poolgen_tensor* indices, const poolgen_tensor* output,
                                   const poolgen_unpool_options* options,
                                   poolgen_prepared** prepared, char* message,
                                   size_t message_size);
int32_t poolgen_prepare_max_pool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                          const poolgen_tensor* indices,
                                          const poolgen_tensor* grad_input,
                                          const poolgen_pool_options* options,
                                          poolgen_prepared** prepared, char* message,
                                          size_t message_size);
int32_t poolgen_prepare_max_unpool_backward(int32_t nd, const poolgen_tensor* grad_output,
                                            const poolgen_tensor* indices,
                                            const poolgen_tensor* grad_values,
                                            const poolgen_unpool_options* options,
                                            poolgen_prepared** prepared, char* message,
                                            size_t message_size);
int32_t poolgen_prepared_run(poolgen_prepared* prepared, void* first, void* second, void* third,
                             char* message, size_t message_size);
void poolgen_prepared_free(poolgen_prepared* prepared);

/* poolgen::convert_indices: frame_shape has frame_rank entries; window may be NULL unless a
 * format is POOLGEN_INDEX_WINDOW. */
int32_t poolgen_convert_indices(int32_t nd, int32_t frame_rank, const int64_t* frame_shape,
                                const poolgen_tensor* from, int32_t from_format,
                                const poolgen_tensor* to, int32_t to_format,
                                const poolgen_pool_options* window, char* message,
                                size_t message_size);

void poolgen_set_num_threads(int32_t threads);
/* See poolgen::set_min_parallel_bytes. */
void poolgen_set_min_parallel_bytes(int64_t bytes);
/* See poolgen::set_streaming_bytes. */
void poolgen_set_streaming_bytes(int64_t bytes);
/* poolgen::set_parallel_for: run NULL restores poolgen's worker threads. */
void poolgen_set_parallel_for(void (*run)(int32_t count, int32_t threads,
                                          void (*task)(int32_t t, void* task_context),
                                          void* task_context, void* context),
                              void* context);

/* 1 when this build has CUDA kernels and a CUDA device is present, else 0. */
int32_t poolgen_cuda_available(void);

/* poolgen::set_cuda_allocator: allocate NULL restores the default. */
void poolgen_set_cuda_allocator(void* (*allocate)(void* context, size_t bytes, void* stream,
                                                  void** handle),
                                void (*release)(void* context, void* handle, void* stream),
                                void* context);
/* A window option as a framework gives it (PyTorch's int-or-tuple lists: `count` 1 or nd
 * entries), expanded to nd entries in `out` with the checks and messages of the C++ API:
 * `option` is "kernel_size", "stride", "padding" or "dilation"; count 0 leaves an optional one
 * (all but kernel_size) at zeros, the options structs' default. For bindings, so that they
 * expand lists as poolgen does. */
int32_t poolgen_expand_option(const char* option, const int64_t* list, int32_t count, int32_t nd,
                              int64_t* out, char* message, size_t message_size);

/* poolgen::cuda_check_reports: a POOLGEN_* code and its message. */
int32_t poolgen_cuda_check_reports(int32_t wait, char* message, size_t message_size);

/* The calling thread's last call that returned a POOLGEN_* code: that code, what the error is
 * about and the argument it names (code POOLGEN_OK, kind POOLGEN_ERROR_NONE, argument "" after
 * a success). The argument stays valid until the thread's next such call. */
poolgen_error poolgen_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* POOLGEN_H */
