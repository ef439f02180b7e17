// The backward of max unpooling (docs/semantics.md, "Gradients"): each value's gradient is the
// output gradient at the slot its index names, grad_values(p, c, n) = grad_output(index, c, n),
// a gather by index over flat planes (the runtime hands dense planes over). Duplicate indices
// each read their slot. Values are moved, never combined: value_type only sets the element width.
//
// An index outside the output plane is an error, as in max_unpool. On the CPU it stops the kernel
// and the runtime names the first one in input order; a GPU kernel cannot stop, so with
// `report_invalid` every read is clamped into the plane and the kernel reports the first invalid
// element itself (flat_planes.h), as the winner unpooling does.
#include "Halide.h"
#include "flat_planes.h"
#include "cpu_schedules.h"
#include "gpu_schedules.h"
#include "knobs.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolBackward : public Generator<MaxUnpoolBackward> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  GeneratorParam<bool> report_invalid{"report_invalid", false};

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h
  GpuIndexGatherSchedule gpu_knobs;

  void configure() {
    // (plane offset, c, n), or (c, plane offset, n) in channels-last
    grad_output_ = add_input<Buffer<>>("grad_output", value_type, 3);
    indices_ = add_input<Buffer<>>("indices", index_type, 3);
    grad_values_ = add_output<Buffer<>>("grad_values", value_type, 3);
    if (report_invalid) {  // as max_unpool_winner's
      invalid_position_ = add_output<Buffer<>>("invalid_position", Int(64), 0);
      invalid_index_ = add_output<Buffer<>>("invalid_index", index_type, 0);
    }
  }

  void generate() {
    const Layout l = layout;
    const FlatPlanes planes(*indices_, l);
    const Expr out_plane = cast(index_type, grad_output_->dim(spatial_dim(0, l)).extent());
    auto valid = [&](const Expr& i) { return in_range(i, 0, out_plane); };
    auto index = [&](const std::vector<Expr>& e) { return (*indices_)(planes.at(e)); };

    const std::vector<Expr> here = tensor_args<Expr>({p_}, c_, n_, l);
    Expr i = (*indices_)(here);
    const Expr last = grad_output_->dim(spatial_dim(0, l)).extent() - 1;
    auto gradient_at = [&](const Expr& slot) {
      return (*grad_output_)(tensor_args<Expr>({slot}, c_, n_, l));
    };
    Func out = *grad_values_;
    const bool channels_last = l == Layout::channels_last;
    if (report_invalid) {
      // Every read is clamped into the plane. Narrowing first changes no valid index (planes
      // hold fewer than 2^31 elements) and makes it one 32-bit min and max, which x86 has for
      // vectors (it has none for 64-bit lanes).
      out(here) = gradient_at(clamp(cast<int32_t>(i), 0, last));
    } else if (!channels_last) {
      // Contiguous: each index is checked as its element is read, one comparison and branch,
      // the loop ATen's gather runs, where a chunk's check and then its gather (vectors whose
      // lanes were extracted, loaded and inserted one by one) read the indices twice and ran
      // 1.35-1.6x slower on the Intel VM (docs/kernels.md). The slot needs no clamp past the
      // require, which returns before the load.
      Expr slot = require(valid(i), cast<int32_t>(i),
                          "max_unpool_backward: an index outside the plane of", out_plane);
      out(here) = gradient_at(unsafe_promise_clamped(slot, 0, last));
    } else {
      // Channels-last indices are checked a chunk at a time, a vectorizable reduction, then one
      // scalar require per chunk (a require of a vector condition would branch on every lane):
      // a chunk is a run of an image's pixels with all their channels (the vectors' lanes are
      // channels, whose planes differ). The schedule's tasks are whole chunks. An image smaller
      // than a chunk checks its own pixels only, and the last chunk is shifted inwards (it may
      // recheck pixels) rather than each pixel clamped, which keeps the check's loads dense.
      const Expr checked_size = min(kChunkPixels, planes.plane);
      in_chunk_ = RDom(0, planes.channels, 0, checked_size, "in_chunk");
      Expr q = max(0, min(chunk_ * kChunkPixels, planes.plane - checked_size)) + in_chunk_[1];
      Expr checked = (*indices_)(planes.at({q, in_chunk_[0], n_}));
      invalid_(chunk_, n_) = cast<uint8_t>(0);
      invalid_(chunk_, n_) = max(invalid_(chunk_, n_), select(valid(checked), cast<uint8_t>(0),
                                                              cast<uint8_t>(1)));
      Expr chunk_invalid = invalid_(p_ / kChunkPixels, n_);
      // The slot passes the chunk's check before it is read, and needs no clamp: a clamp was a
      // third of the scalar gather's instructions. (A require's failure prints its value: the
      // slot's, not the gradient read there.) The promise is for bounds inference.
      Expr slot = require(chunk_invalid == 0, cast<int32_t>(i),
                          "max_unpool_backward: an index outside the plane of", out_plane);
      out(here) = gradient_at(unsafe_promise_clamped(slot, 0, last));
    }

    // The runtime's buffers start at 0: a vector's chunk is then known to be one.
    grad_values_->dim(spatial_dim(0, l)).set_min(0);
    grad_output_->set_estimates(representative_region(2, l, 1, true));
    indices_->set_estimates(representative_region(2, l, 2, true));
    grad_values_->set_estimates(representative_region(2, l, 2, true));
    const int chunk_pixels = channels_last ? kChunkPixels : 0;  // the schedule's runs of pixels
    const IndexGatherStages stages{out, invalid_, in_chunk_, chunk_pixels, p_, c_, n_, l};
    if (report_invalid) {
      const FirstInvalid invalid(planes, index, valid);
      report_first_invalid(invalid, planes, index, index_type, *invalid_position_,
                           *invalid_index_);
      if (get_target().has_gpu_feature()) {
        gpu_knobs.apply(stages, invalid.first_invalid, invalid.bad,
                        {*invalid_position_, *invalid_index_});
        return;
      }
    }
    apply_cpu_schedule<CpuIndexGatherSchedule>(cpu_schedule, stages, {out}, get_target());
  }

 private:
  Input<Buffer<>>* grad_output_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* grad_values_ = nullptr;
  Output<Buffer<>>* invalid_position_ = nullptr;
  Output<Buffer<>>* invalid_index_ = nullptr;
  static constexpr int kChunkPixels = 64;
  Func invalid_{"invalid"};  // channels-last's chunk checks
  RDom in_chunk_;
  Var p_{"p"}, c_{"c"}, n_{"n"}, chunk_{"chunk"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolBackward, max_unpool_backward)
