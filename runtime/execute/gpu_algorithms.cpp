#include "execute/gpu_algorithms.hpp"

#include "dispatch/cuda.hpp"
#include "dispatch/launch.hpp"
#include "execute/staging.hpp"

namespace poolgen::detail {

namespace {

// What some flat kernels take besides (values, indices, output): a gated kernel's gate and its
// `always` (the winner unpooling, CUDA's accumulating scatter), a reporting kernel's report
// (the winner, CUDA's unpooling backward), the winner's slots.
struct FlatExtras {
  KernelScratch::Buffer* gate = nullptr;
  bool always = false;
  KernelReport* report = nullptr;
  KernelScratch::Buffer* winners = nullptr;
};

// Runs `kernel` on flat views in its layout, arguments in its generator's order: values,
// indices, [gate, always], output, [invalid_position, invalid_index], [winners].
Status run_flat_buffers(const Kernel& kernel, const Views& views, const FlatExtras& x,
                        bool* declined = nullptr) {
  Launch launch(kernel, true);
  launch.add_view(views[0], kernel.value, Access::read);
  launch.add_view(views[1], kernel.index, Access::read);
  if (x.gate) {
    launch.add_buffer(KernelScratch::use(x.gate, false));
    launch.add_flag(x.always);
  }
  launch.add_view(views[2], kernel.value, x.gate ? Access::write_some : Access::write);
  if (x.report) {
    launch.add_buffer(x.report->position_buffer());
    launch.add_buffer(x.report->index_buffer());
  }
  if (x.winners) launch.add_buffer(KernelScratch::use(x.winners, true));
  return launch.run(total_bytes(views), declined);
}

// The window gather on views a launch takes whole; it writes its count of the indices it could
// not serve (outside their windows; unpooling's: or their planes) to `count`.
Status window_gather_piece(const Kernel& kernel, const Window& window, const Views& views,
                           const CudaBuffer& count) {
  Launch launch(kernel);
  launch.add_view(views[0], kernel.value, Access::read);
  launch.add_view(views[1], kernel.index, Access::read);
  launch.add_window(window);
  // A GPU kernel's check divides by the input's spatial extents (innermost first).
  const View& output = views[2];
  int64_t extents[3];
  for (int i = 0; i < window.nd; ++i) extents[i] = output.shape[output.rank - 1 - i];
  launch.add_magic(extents, window.nd);
  launch.add_view(output, kernel.value, Access::write);
  launch.add_buffer(count);
  return launch.run(total_bytes(views));
}

}  // namespace

Status run_flat(const Kernel& kernel, const Views& views, bool* declined) {
  return run_flat_buffers(kernel, views, {}, declined);
}

Status window_gather(const Kernel& kernel, const Window& window, const View& values,
                     const View& indices, const View& output, bool* done) {
  *done = false;
  if (!takes_whole({&values, &indices, &output}, kernel.layout)) return {};
  int32_t outside = 0;
  halide_buffer_t count{};
  count.host = reinterpret_cast<uint8_t*>(&outside);
  count.type = {halide_type_int, 32};
  POOLGEN_RETURN_IF_ERROR(
      window_gather_piece(kernel, window, {values, indices, output}, {&count, false, true}));
  *done = outside == 0;
  return {};
}

Status run_gpu_algorithm(const Kernel* gather, const Window* window, const Kernel& kernel,
                         Device device, const Views& views, int64_t bound, const char* indexed) {
  const Layout layout = kernel.layout;
  const Staged values(views[0], layout, true, Staged::input),
      indices(views[1], layout, true, Staged::input),
      output(views[2], layout, true, Staged::output);
  const bool winner = kernel.op == Op::unpool_winner;
  const bool gated = winner || kernel.op == Op::pool_backward_scatter;
  POOLGEN_RETURN_IF_ERROR(for_each_piece(
      {values.view(), indices.view(), output.view()},
      [&](const Views& piece) {
        return fits_kernel(piece, layout, true) &&
               (!gather || (fits_kernel(piece, layout) &&
                            (device != Device::cuda || fits_cuda_grid(piece, layout))));
      },
      [&](const Views& piece, int64_t first_plane) {
        KernelScratch scratch(device);
        FlatExtras x;
        if (gated) {
          POOLGEN_RETURN_IF_ERROR(scratch.make({halide_type_int, 32}, {}, &x.gate));
          x.always = gather == nullptr;
        }
        if (gather) {
          POOLGEN_RETURN_IF_ERROR(
              window_gather_piece(*gather, *window, piece, KernelScratch::use(x.gate, true)));
        }
        if (winner) {
          const View& o = piece[2];
          const auto slots = static_cast<int32_t>(o.plane()), c = static_cast<int32_t>(o.shape[1]),
                     n = static_cast<int32_t>(o.shape[0]);
          const halide_type_t index_type = {halide_type_int,
                                            static_cast<uint8_t>(8 * element_size(kernel.index))};
          POOLGEN_RETURN_IF_ERROR(scratch.make(
              index_type,
              layout == Layout::channels_last ? std::initializer_list<int32_t>{c, slots, n}
                                              : std::initializer_list<int32_t>{slots, c, n},
              &x.winners));
        }
        if (kernel.op == Op::pool_backward_scatter) return run_flat_buffers(kernel, piece, x);
        KernelReport report(device, kernel.index);
        x.report = &report;
        POOLGEN_RETURN_IF_ERROR(run_flat_buffers(kernel, piece, x));
        return report.finish(first_plane * piece[1].plane(), bound);
      },
      [&](const Views& plane, int64_t) {
        return fail(Code::unsupported, indexed, ": expected planes the ", kernel.name,
                    " kernel's buffers hold (below 2^31 elements and 2 GiB), got planes of ",
                    bound, " elements of ", dtype_name(plane[0].dtype));
      }));
  output.finish();
  return {};
}

}  // namespace poolgen::detail
