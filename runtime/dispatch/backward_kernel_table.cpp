// The backward ops' kernels (backward_kernel_table.inc), in a translation unit of their own that
// only max_pool_backward and max_unpool_backward name: a program that never calls them does not
// link this table, nor therefore any backward kernel. Linked, the table registers itself for
// compiled_kernels().
#include "dispatch/kernel_table.hpp"

extern "C" {
#define POOLGEN_KERNEL POOLGEN_KERNEL_DECLARATION
#include "backward_kernel_table.inc"
#undef POOLGEN_KERNEL
}

namespace poolgen::detail {

const KernelTable& backward_kernels() {
  static const KernelTable table(with_variants({
#define POOLGEN_KERNEL POOLGEN_KERNEL_ENTRY
#include "backward_kernel_table.inc"
#undef POOLGEN_KERNEL
  }));
  return table;
}

namespace {
[[maybe_unused]] const bool registered = (register_kernel_table(backward_kernels()), true);
}  // namespace

}  // namespace poolgen::detail
