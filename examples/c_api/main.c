/* poolgen's C API: one max_pool1d with indices, then an invalid call whose message is printed. */
#include <poolgen/poolgen.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  /* Input (N=1, C=2, L=8); kernel 2, stride 2 -> (1, 2, 4). */
  float x[16] = {1, 5, 2, 2, -1, -3, 7, 0, /* channel 0 */
                 4, 3, 9, 9, 0, 8, -2, -1 /* channel 1 */};
  const float want_values[8] = {5, 2, -1, 7, 4, 9, 8, -1};
  const int64_t want_indices[8] = {1, 2, 4, 6, 0, 2, 5, 7}; /* ties: the first maximum */
  float values[8];
  int64_t indices[8];
  char message[512];
  int failures = 0;
  int i;

  poolgen_tensor in, vals, idx;
  poolgen_pool_options opt;
  int64_t out_shape[5];
  int32_t rc;

  memset(&in, 0, sizeof in);
  memset(&opt, 0, sizeof opt);
  in.data = x;
  in.dtype = POOLGEN_F32;
  in.rank = 3;
  in.shape[0] = 1;
  in.shape[1] = 2;
  in.shape[2] = 8;
  opt.kernel_size[0] = 2; /* stride 0: defaults to the kernel; dilation 0: 1 */

  rc = poolgen_max_pool_output_shape(1, 3, in.shape, &opt, out_shape, message, sizeof message);
  if (rc != POOLGEN_OK) {
    printf("output shape failed (%d): %s\n", (int)rc, message);
    return 1;
  }
  printf("max_pool1d: (%lld, %lld, %lld) -> (%lld, %lld, %lld)\n", (long long)in.shape[0],
         (long long)in.shape[1], (long long)in.shape[2], (long long)out_shape[0],
         (long long)out_shape[1], (long long)out_shape[2]);

  vals = in;
  vals.data = values;
  memcpy(vals.shape, out_shape, sizeof out_shape);
  idx = vals;
  idx.data = indices;
  idx.dtype = POOLGEN_I64;

  rc = poolgen_max_pool(1, &in, &vals, &idx, &opt, message, sizeof message);
  if (rc != POOLGEN_OK) {
    printf("max_pool1d failed (%d): %s\n", (int)rc, message);
    return 1;
  }
  for (i = 0; i < 8; ++i) {
    printf("  out[%d] = %g @ %lld\n", i, values[i], (long long)indices[i]);
    if (values[i] != want_values[i] || indices[i] != want_indices[i]) {
      printf("  expected %g @ %lld\n", want_values[i], (long long)want_indices[i]);
      ++failures;
    }
  }

  /* An invalid request: kernel 0. It must fail with a message, never crash. */
  opt.kernel_size[0] = 0;
  message[0] = '\0';
  rc = poolgen_max_pool(1, &in, &vals, &idx, &opt, message, sizeof message);
  printf("kernel_size 0 -> code %d: %s\n", (int)rc, message);
  if (rc != POOLGEN_INVALID_ARGUMENT || message[0] == '\0') {
    printf("expected POOLGEN_INVALID_ARGUMENT with a message\n");
    ++failures;
  }

  printf("c api: %s\n", failures ? "FAILED" : "OK");
  return failures ? 1 : 0;
}
