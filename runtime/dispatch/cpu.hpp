// Kernel calls on the CPU: Halide's errors captured per call, and its parallel loops run on
// poolgen's workers, or on the calling thread where the call is too small to share.
#pragma once

#include "dispatch/arguments.hpp"

#include <functional>
#include <string>

namespace poolgen::detail {

// Runs a kernel's `entry` (its Kernel::entry, or a variant's: variant_for) with args[1...]
// already filled (args[0] is set to the call's context). Returns Halide's error code; the
// message Halide reported goes to *error. The call moves `call_bytes` (inputs and outputs):
// unless that is worth_sharing, the kernel's parallel loops run on the calling thread; otherwise
// on the workers (parallel_for), several small iterations to a task.
int run_on_cpu(KernelEntry entry, KernelArgs& args, std::string* error, int64_t call_bytes);

// Calls f(user_context) with a user context that collects the first message Halide's runtime
// reports (kernels and runtime calls alike) and carries the call's bytes, which decide how
// parallel loops run (run_on_cpu). Returns f's result; the message goes to *error.
int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error,
                       int64_t call_bytes = 0);

}  // namespace poolgen::detail
