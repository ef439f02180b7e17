// The dispatch table: every compiled kernel (from the generated kernel_table.inc), chosen by
// operation, rank and window, and called through Halide's uniform argv entry point.
#pragma once

#include "poolgen/poolgen.hpp"
#include "shapes.hpp"

#include <string>
#include <vector>

namespace poolgen::detail {

enum class Op { pool, unpool_scatter, unpool_gather };

struct Kernel {
  Op op;
  int nd;                    // 0: any rank
  int kernel, stride, padding;  // the fixed window (dilation 1) in every dimension; 0: any
  int (*entry)(void** args);    // Halide's <name>_argv
  const char* name;
};

const std::vector<Kernel>& kernel_table();

// The fastest kernel for `op` whose window accepts `window` (a fixed-window kernel only with
// path == automatic); null if none.
const Kernel* find_kernel(Op op, int nd, const Window& window, Path path);

// Runs `kernel` with args[1...] already filled (args[0] is set to the call's error context).
// Returns Halide's error code; the message Halide reported goes to *error.
int run_kernel(const Kernel& kernel, std::vector<void*>& args, std::string* error);

}  // namespace poolgen::detail
