// The skeleton every op's call follows, in two steps: checked into a plan (the window, the
// shapes, the views and the kernels: everything that depends on the call's shapes and options
// alone, as oneDNN's primitive descriptor or XNNPACK's reshape), then run on its data. A thread
// keeps its last CPU plan of each op under the call's key (ops/call_memo.hpp): a call repeating
// it but for its data reruns the data checks and the run alone.
//
// An op is a struct of
//   Options          PoolOptions or UnpoolOptions
//   Plan             an OpPlan with whatever else its runs need
//   kNames[3]        its tensors' names in messages, in call order (inputs, then outputs)
//   kOutputs         how many of them, the last, are outputs (1 or 2)
//   check(nd, tensors, options, &plan)         every check of the call, then its kernels
//   run(nd, tensors, options, plan, views)     a checked call on views of its data
//   describe(..., &plan)   the plan's shapes and kernels from the leading tensor alone (the
//                    kernel-name queries'), and first_kernel(plan), the kernel a call runs first
#pragma once

#include "core/status.hpp"
#include "execute/direct_run.hpp"
#include "ops/call_memo.hpp"
#include "validate/views.hpp"

#include <memory>
#include <string>

namespace poolgen::detail {

struct OpPlan {
  View views[3];  // the tensors' checked views, in call order
  Device device = Device::cpu;
  std::unique_ptr<DirectRun> direct;  // where one kernel launch on the views serves the call
};

using Tensors = const TensorView* const (&)[3];

// Out of line, with its arguments in registers: inlined into without_exceptions' lambda, it
// copied the lambda's captures with loads wider than the caller's stores to them, a stalled
// store forwarding that cost a small call 5 ns (1x1x2x2 pooling 111 -> 117 ns).
template <typename Op>
[[gnu::noinline]] Status plan_and_run(int nd, const TensorView& a, const TensorView& b,
                                      const TensorView& c, const typename Op::Options& options) {
  thread_local CallMemo<typename Op::Plan> memo;
  const TensorView* const tensors[3] = {&a, &b, &c};
  const CallKey key(nd, {&a, &b, &c}, options);
  if (const typename Op::Plan* plan = memo.find(key)) {  // every check but the data's holds
    for (int k = 0; k < 3; ++k) {
      POOLGEN_RETURN_IF_ERROR(check_data(Op::kNames[k], *tensors[k], plan->views[k]));
    }
    DirectRun* direct = plan->direct.get();
    if (direct && direct->spans.apart({a.data, b.data, c.data})) {
      return direct->run({a.data, b.data, c.data});  // no view is copied: a third of the cost
    }
    View views[3] = {plan->views[0], plan->views[1], plan->views[2]};
    for (int k = 0; k < 3; ++k) views[k].data = tensors[k]->data;
    POOLGEN_RETURN_IF_ERROR(check_views_apart(Op::kNames, views, Op::kOutputs));
    return Op::run(nd, tensors, options, *plan, views);
  }
  typename Op::Plan& plan = memo.start();
  POOLGEN_RETURN_IF_ERROR(Op::check(nd, tensors, options, &plan));
  // CUDA calls ask the current device's capability each time.
  if (plan.device == Device::cpu) memo.keep(key);
  if (plan.direct) return plan.direct->run({a.data, b.data, c.data});  // checked apart
  return Op::run(nd, tensors, options, plan, plan.views);
}

template <typename Op>
Status run_op(int nd, const TensorView& a, const TensorView& b, const TensorView& c,
              const typename Op::Options& options) {
  return without_exceptions([&] { return plan_and_run<Op>(nd, a, b, c, options); });
}

// The name of the kernel a call described by `args` (Op::describe's, but the plan) runs first.
template <typename Op, typename... Args>
[[gnu::cold]] Status describe_kernel(std::string* name, const Args&... args) {
  typename Op::Plan plan;
  POOLGEN_RETURN_IF_ERROR(Op::describe(args..., &plan));
  *name = Op::first_kernel(plan).name;
  return {};
}
template <typename Op, typename... Args>
Status op_kernel_name(std::string* name, const Args&... args) {
  return without_exceptions([&] { return describe_kernel<Op>(name, args...); });
}

}  // namespace poolgen::detail
