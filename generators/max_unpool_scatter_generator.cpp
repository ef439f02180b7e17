// Max unpooling, general path: into zeroed output planes (zeroed here on GPUs, by the runtime on
// the CPU), scatter each value to the slot its index names, in input order, so the latest
// duplicate wins. Planes are flat here (the runtime hands dense planes over), which makes the
// index the slot with no decoding. The runtime runs it on cache-sized groups of planes, one group
// per task, so the scatter finds its freshly zeroed planes in cache. Values are moved, never
// compared: value_type only sets the element width.
// Indices may count from another origin than their plane's: plane q of the call (n * C + c)
// finds its slots at index - (plane_origin + q) * plane_stride, which serves ONNX's global
// indices (plane_origin: the call's first plane in the tensor, plane_stride: the output plane)
// with no pass over them; PyTorch's plane offsets pass plane_stride 0.
//
// The output's flat dimension may start past a plane's first slot (min > 0: a slab of rows of
// every plane, which the runtime streams out of a scratch): an index outside [min, min +
// extent) is then invalid, as one outside the plane is.
//
// With `accumulate` it is max pooling's backward (docs/semantics.md, "Gradients"): the same
// scatter into the pooling input's planes, but each value is added to its slot, in input order
// and in the value type's arithmetic (add_in_type), and an index outside the plane (an empty
// window's) is dropped instead of stopping the kernel. On GPUs it is the fallback behind the
// window gather and gated as max_unpool_winner is: it runs only where `always` is set or `gate`
// (the gather's count of indices outside their windows, on the device) is not 0.
#include "Halide.h"
#include "flat_planes.h"
#include "window.h"
#include "cpu_schedules.h"
#include "gpu_schedules.h"
#include "knobs.h"
#include "prefetch_lines.h"
#include "reuse_equal_lets.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolScatter : public Generator<MaxUnpoolScatter> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  GeneratorParam<bool> accumulate{"accumulate", false};

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h
  GpuScatterSchedule gpu_knobs;  // pool backward's (unpooling runs max_unpool_winner on GPUs)

  void configure() {
    // (plane offset, c, n), or (c, plane offset, n) in channels-last; indices as values
    values_ = add_input<Buffer<>>("values", value_type, 3);
    indices_ = add_input<Buffer<>>("indices", index_type, 3);
    if (!accumulate) {
      plane_origin_ = add_input<int64_t>("plane_origin");
      plane_stride_ = add_input<int64_t>("plane_stride");
    }
    if (get_target().has_gpu_feature()) {
      gate_ = add_input<Buffer<>>("gate", Int(32), 0);
      always_ = add_input<bool>("always");
    } else if (sets_knob(cpu_schedule, "prefetch_pixels") ||
               sets_knob(cpu_schedule, "prefetch_elements")) {
      // Whether the schedule's prefetches (CpuScatterSchedule::prefetch_pixels,
      // prefetch_elements) run: the runtime's scatter_prefetches (pixels out of cache only;
      // elements where the processor gains from them).
      prefetch_ = add_input<bool>("prefetch");
    }
    output_ = add_output<Buffer<>>("output", value_type, 3);
  }

  void generate() {
    const Layout l = layout;
    const int plane_dim = spatial_dim(0, l);
    Func out = *output_;
    // A GPU kernel zeroes its planes; on the CPU the runtime zeroes each group in one pass
    // before the scatter (here, a plane or a pixel at a time, small planes and few channels paid
    // a memset call or a masked tail each).
    const bool zeroes = get_target().has_gpu_feature();
    out(tensor_args<Expr>({p_}, c_, n_, l)) = undef(value_type);
    RDom every_slot;
    Expr runs = Internal::const_true();
    if (zeroes) {  // an update over every slot, which the gate closes
      runs = *always_ || (*gate_)() != 0;
      every_slot = FlatPlanes(*output_, l).elements("slot");
      every_slot.where(runs);
      out(every_slot[0], every_slot[1], every_slot[2]) = cast(value_type, 0);
    }

    // On the CPU in NCHW a plane is a scalar loop (an element at a time, in input order): there
    // the accumulating scatter skips a dropped element (a where-clause, one unsigned comparison)
    // instead of clamping its slot and adding -0.0 to it: 14 instructions an element instead of
    // 18 (f32 i64 on one thread: 1x64x56x56 55 -> 40 us, 1x64x14x14 3.7 -> 2.9). Channels-last
    // does the same where the schedule runs it scalar (CpuScatterSchedule::scalar_index_bits).
    const std::optional<CpuScatterSchedule> cpu =
        zeroes ? std::nullopt
               : hand_written_schedule<CpuScatterSchedule>(cpu_schedule, get_target());
    const bool scalar =
        l == Layout::contiguous || (cpu && cpu->scalar_index_bits == Type(index_type).bits());
    const bool skips = accumulate && !zeroes && scalar;
    const Expr elements = values_->dim(plane_dim).extent();
    // Prefetching (contiguous), whole steps of `unroll` elements are a 2-D domain (the step's
    // elements inside) and the rest an update of its own: the prefetched addresses are then a
    // step ahead's, with none of a guarded tail's bounds to compute every step.
    const int steps =
        cpu && cpu->prefetch_elements > 0 && l == Layout::contiguous ? cpu->unroll : 1;
    RDom r = steps > 1 ? RDom(0, steps, 0, elements / steps, "step") : RDom(0, elements, "element");
    // Unrolled (the schedule's knob), the loop's tail is guarded, but bounds inference would size
    // the indices by whole unrolled steps (the where-clause reads them ahead of the guard): the
    // position, and channels-last's channel (whose loop is the one unrolled there), are promised
    // inside their extents, which the guard ensures.
    const int channel_dim = l == Layout::channels_last ? 0 : 1;
    const Expr channel_min = values_->dim(channel_dim).min();
    const Expr channel =
        skips ? unsafe_promise_clamped(c_, channel_min,
                                       channel_min + values_->dim(channel_dim).extent() - 1)
              : Expr(c_);
    const auto scatter = [&](RDom domain, Expr position) {
      if (skips) position = unsafe_promise_clamped(position, 0, elements - 1);
      const std::vector<Expr> element = tensor_args<Expr>({position}, channel, n_, l);
      Expr index = (*indices_)(element);
      const Expr first = cast(index.type(), output_->dim(plane_dim).min());
      // The slot counted from the output's first, in one subtraction of a plane's constant: the
      // check and the address share it (the address's own subtraction of the min cancels).
      Expr from_first;
      if (accumulate) {
        from_first = index - first;
      } else {
        Expr plane_number = cast<int64_t>(n_) * values_->dim(channel_dim).extent() + c_;
        const Expr plane_first =
            (*plane_origin_ + plane_number) * *plane_stride_ + cast<int64_t>(first);
        from_first = cast<int64_t>(index) - plane_first;
      }
      Expr plane = cast(from_first.type(), output_->dim(plane_dim).extent());
      Expr valid = in_range(from_first, 0, plane);
      if (zeroes) domain.where(runs);
      if (skips) domain.where(valid);
      // Nothing outside the output is written: the accumulating vectors clamp their slots (an
      // invalid one adds -0.0); elsewhere a slot is stored only once the where-clause or the
      // require (which returns before the store) found it valid, so it is promised inside.
      const bool clamps = accumulate && !skips;
      Expr slot = cast<int32_t>(clamps ? clamp(from_first, 0, plane - 1)
                                       : unsafe_promise_clamped(from_first, 0, plane - 1)) +
                  output_->dim(plane_dim).min();
      const std::vector<Expr> at = tensor_args<Expr>({slot}, c_, n_, l);
      Expr value = (*values_)(element);
      if (skips) {
        out(at) = add_in_type(out(at), value);
      } else if (accumulate) {
        // A dropped element adds -0.0 to the slot it was clamped to, which leaves every value as
        // it is (-0.0 too); a where-clause would keep channels-last's vectors from forming.
        out(at) = add_in_type(out(at), select(valid, value, -cast(value_type, 0)));
      } else {
        // An invalid index stops the kernel with an error; the runtime then finds and names
        // it (the message names no index: keeping one for it cost each element a register copy).
        out(at) = require(valid, value, "max_unpool: an index outside its plane of", plane);
      }
    };
    if (steps > 1) {
      scatter(r, r.y * steps + r.x);
      const Expr stepped = elements / steps * steps;
      RDom rest(stepped, elements - stepped, "rest");
      scatter(rest, rest);
    } else {
      scatter(r, r);
    }

    // Estimates for the autoschedulers: the 2-D benchmark shape's planes.
    values_->set_estimates(representative_region(2, l, 2, true));
    indices_->set_estimates(representative_region(2, l, 2, true));
    output_->set_estimates(representative_region(2, l, 1, true));
    const ScatterStages stages{out, p_, c_, n_, r, every_slot, l, skips,
                               ImageParam(*values_).parameter(),
                               ImageParam(*indices_).parameter()};
    if (get_target().has_gpu_feature()) {
      gpu_knobs.apply(stages, get_target());
    } else {
      apply_cpu_schedule<CpuScatterSchedule>(cpu_schedule, stages, {out}, get_target());
    }
  }

  // The prefetches, each line, on the calls the flag names.
  void schedule() {
    get_pipeline().add_custom_lowering_pass(new ReuseEqualLets);
    if (prefetch_) {
      get_pipeline().add_custom_lowering_pass(
          new PrefetchEveryLine(get_target(), Expr(*prefetch_)));
    }
  }

 private:
  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Input<int64_t>* plane_origin_ = nullptr;
  Input<int64_t>* plane_stride_ = nullptr;
  Input<Buffer<>>* gate_ = nullptr;
  Input<bool>* always_ = nullptr;
  Input<bool>* prefetch_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Var p_{"p"}, c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolScatter, max_unpool_scatter)
