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
#include "parallel/settings.hpp"
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

// A call whose plan holds (its shapes and options are the plan's): the data checks, then the
// run. Out of line: one copy of Op::run for plan_and_run and PreparedOp.
template <typename Op>
[[gnu::noinline]] Status run_planned(int nd, Tensors tensors,
                                     const typename Op::Options& options,
                                     const typename Op::Plan& plan) {
  for (int k = 0; k < 3; ++k) {
    if (!has_data(*tensors[k], plan.views[k])) {
      return check_data(Op::kNames[k], *tensors[k], plan.views[k]);
    }
  }
  void* const data[3] = {tensors[0]->data, tensors[1]->data, tensors[2]->data};
  DirectRun* direct = plan.direct.get();
  if (direct && direct->spans.apart(data)) {
    return direct->run(data);  // no view is copied: a third of the cost
  }
  View views[3] = {plan.views[0], plan.views[1], plan.views[2]};
  for (int k = 0; k < 3; ++k) views[k].data = data[k];
  POOLGEN_RETURN_IF_ERROR(check_views_apart(Op::kNames, views, Op::kOutputs));
  return Op::run(nd, tensors, options, plan, views);
}

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
    return run_planned<Op>(nd, tensors, options, *plan);
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

}  // namespace poolgen::detail

namespace poolgen {

// A prepared call (PreparedCall, include/poolgen/poolgen.hpp): what it keeps of one op's call.
struct PreparedCall::State {
  virtual ~State() = default;
  virtual Status run(void* const (&data)[3]) = 0;
};
struct PreparedAccess {
  static void keep(PreparedCall* call, std::unique_ptr<PreparedCall::State> state) {
    call->state_ = std::move(state);
  }
};

}  // namespace poolgen

namespace poolgen::detail {

// A call's views (their data replaced on each run), options and plan, kept as a thread's memo
// keeps its last call, without the key: the caller promises the shapes.
template <typename Op>
class PreparedOp final : public PreparedCall::State {
 public:
  PreparedOp(int nd, Tensors tensors, const typename Op::Options& options)
      : nd_(nd), tensors_{*tensors[0], *tensors[1], *tensors[2]}, options_(options) {}
  PreparedOp(const PreparedOp&) = delete;  // pointers_ point into it
  PreparedOp& operator=(const PreparedOp&) = delete;

  [[gnu::cold]] Status check() {
    settings_ = settings_changes();
    return Op::check(nd_, pointers_, options_, &plan_);
  }

  Status run(void* const (&data)[3]) override {
    for (int k = 0; k < 3; ++k) tensors_[k].data = data[k];
    // CUDA plans ask the device on every call (plan_and_run keeps none), and changed settings
    // may choose other kernels: those runs take the whole call.
    if (plan_.device != Device::cpu || settings_changes() != settings_) {
      return plan_and_run<Op>(nd_, tensors_[0], tensors_[1], tensors_[2], options_);
    }
    return run_planned<Op>(nd_, pointers_, options_, plan_);
  }

 private:
  int nd_;
  TensorView tensors_[3];
  const TensorView* const pointers_[3] = {&tensors_[0], &tensors_[1], &tensors_[2]};
  typename Op::Options options_;
  typename Op::Plan plan_;
  int64_t settings_ = 0;
};

// Cold: prepared once, compiled for size.
template <typename Op>
[[gnu::cold]] Status prepare_op(int nd, const TensorView& a, const TensorView& b,
                                const TensorView& c, const typename Op::Options& options,
                                PreparedCall* call) {
  return without_exceptions([&]() -> Status {
    if (!call) {
      return fail(Code::invalid_argument, "call", ": expected a PreparedCall, got a null pointer");
    }
    *call = PreparedCall();
    const TensorView* const tensors[3] = {&a, &b, &c};
    auto state = std::make_unique<PreparedOp<Op>>(nd, tensors, options);
    POOLGEN_RETURN_IF_ERROR(state->check());
    PreparedAccess::keep(call, std::move(state));
    return {};
  });
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
