// Prepared calls (PreparedCall, poolgen_prepared): their own errors, and runs that must follow
// their data and the settings of their time. The ops' errors prepared are FailsWhen's
// (common.hpp, FailsPrepared); the results, the differential tests' (Calling::prepared).
#include "errors/common.hpp"

namespace poolgen {
namespace {

TEST(PreparedErrors, EmptyOrMissingCall) {
  PreparedCall empty;
  EXPECT_FALSE(empty.prepared());
  float data = 0;
  EXPECT_TRUE(IsError(empty.run(&data, &data, &data), Code::invalid_argument, {"call", "empty"}));
  PoolCall c;
  EXPECT_TRUE(IsError(prepare_max_pool(c.nd, c.input, c.values, c.indices, c.o, nullptr),
                      Code::invalid_argument, {"call", "null"}));
}

// A prepare that fails empties the call it was given, even a prepared one.
TEST(PreparedErrors, RefusedPrepareEmptiesTheCall) {
  PoolCall c;
  PreparedCall call;
  ASSERT_TRUE(prepare_max_pool(c.nd, c.input, c.values, c.indices, c.o, &call).ok());
  ASSERT_TRUE(call.prepared());
  c.o.kernel_size = {0};
  EXPECT_TRUE(IsError(prepare_max_pool(c.nd, c.input, c.values, c.indices, c.o, &call),
                      Code::invalid_argument, {"kernel_size", "0"}));
  EXPECT_FALSE(call.prepared());
}

// Runs on other buffers of the prepared shapes give their own results, also after a move, and
// after the settings changed (threads, streaming, the shared calls' threshold), which a run
// follows as the call would.
TEST(PreparedRuns, FollowTheirDataAndTheSettings) {
  PoolBackwardCall first;
  PreparedCall call;
  ASSERT_TRUE(prepare_max_pool_backward(first.nd, first.grad_output, first.indices,
                                        first.grad_input, first.o, &call)
                  .ok());
  PreparedCall moved = std::move(call);
  EXPECT_FALSE(call.prepared());  // NOLINT(bugprone-use-after-move): moved-from is empty
  for (int round = 0; round < 4; ++round) {
    PoolBackwardCall other;
    for (float& g : other.grad) g = g * static_cast<float>(round + 2) - 1.0f;
    if (round == 1) set_num_threads(1);
    if (round == 2) set_streaming_bytes(0);
    if (round == 3) set_min_parallel_bytes(0);
    ASSERT_TRUE(moved.run(other.grad.data(), other.idx.data(), other.gin.data() + test::kGuard)
                    .ok());
    EXPECT_TRUE(other.LikeReference()) << "round " << round;
    EXPECT_TRUE(other.guards_ok());
  }
  set_num_threads(0);
  set_streaming_bytes(-1);
  set_min_parallel_bytes(-1);
}

// An invalid index is found by a run, as by the call: index_out_of_range naming it.
TEST(PreparedRuns, ReportInvalidIndices) {
  UnpoolCall c;
  PreparedCall call;
  ASSERT_TRUE(prepare_max_unpool(c.nd, c.values, c.indices, c.output, c.o, &call).ok());
  c.idx[5] = 36;
  EXPECT_TRUE(IsError(call.run(c.vals.data(), c.idx.data(), c.out.data() + test::kGuard),
                      Code::index_out_of_range, {"indices", "36"}));
  EXPECT_TRUE(c.guards_ok());
}

// The C API: prepare, run and free; the prepared pointer's errors.
TEST(PreparedCApi, PrepareRunAndFree) {
  PoolCall want;
  ASSERT_TRUE(want.run().ok());
  std::vector<float> in = want.in, vals(18, -1.0f);
  std::vector<int64_t> idx(18, -1);
  poolgen_tensor input = c_tensor(in.data(), POOLGEN_F32, {1, 2, 6, 6}),
                 values = c_tensor(vals.data(), POOLGEN_F32, {1, 2, 3, 3}),
                 indices = c_tensor(idx.data(), POOLGEN_I64, {1, 2, 3, 3});
  poolgen_pool_options o;
  std::memset(&o, 0, sizeof o);
  o.kernel_size[0] = o.kernel_size[1] = 2;
  char message[kMsg];
  poolgen_prepared* prepared = nullptr;
  ASSERT_EQ(poolgen_prepare_max_pool(2, &input, &values, &indices, &o, &prepared, message, kMsg),
            POOLGEN_OK)
      << message;
  ASSERT_NE(prepared, nullptr);
  ASSERT_EQ(poolgen_prepared_run(prepared, in.data(), vals.data(), idx.data(), message, kMsg),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(vals, want.vals);
  EXPECT_EQ(idx, want.idx);
  EXPECT_TRUE(CIsError(poolgen_prepared_run(prepared, in.data(), nullptr, idx.data(), message,
                                            kMsg),
                       POOLGEN_INVALID_ARGUMENT, message, {"values", "null"}));
  poolgen_prepared_free(prepared);
  poolgen_prepared_free(nullptr);

  EXPECT_TRUE(CIsError(poolgen_prepared_run(nullptr, in.data(), vals.data(), idx.data(), message,
                                            kMsg),
                       POOLGEN_INVALID_ARGUMENT, message, {"prepared", "null"}));
  EXPECT_TRUE(CIsError(
      poolgen_prepare_max_pool(2, &input, &values, &indices, &o, nullptr, message, kMsg),
      POOLGEN_INVALID_ARGUMENT, message, {"prepared", "null"}));
  o.kernel_size[1] = 0;
  prepared = reinterpret_cast<poolgen_prepared*>(&o);  // must be replaced by NULL
  EXPECT_TRUE(CIsError(
      poolgen_prepare_max_pool(2, &input, &values, &indices, &o, &prepared, message, kMsg),
      POOLGEN_INVALID_ARGUMENT, message, {"kernel_size", "0"}));
  EXPECT_EQ(prepared, nullptr);
}

// Each op's C entry prepares the call of its name (its argument names, its options' checks).
TEST(PreparedCApi, EveryOp) {
  char message[kMsg];
  poolgen_prepared* prepared = nullptr;
  UnpoolBackwardCall ub;
  poolgen_tensor g = c_tensor(ub.grad.data(), POOLGEN_F32, {2, 1, 6, 6}),
                 i = c_tensor(ub.idx.data(), POOLGEN_I64, {2, 1, 3, 3}),
                 v = c_tensor(ub.gvals.data() + test::kGuard, POOLGEN_F32, {2, 1, 3, 3});
  poolgen_unpool_options uo;
  std::memset(&uo, 0, sizeof uo);
  uo.kernel_size[0] = uo.kernel_size[1] = 2;
  ASSERT_EQ(poolgen_prepare_max_unpool_backward(2, &g, &i, &v, &uo, &prepared, message, kMsg),
            POOLGEN_OK)
      << message;
  EXPECT_TRUE(CIsError(poolgen_prepared_run(prepared, ub.grad.data(), ub.idx.data(),
                                            ub.grad.data(), message, kMsg),
                       POOLGEN_INVALID_ARGUMENT, message, {"grad_values"}));  // overlaps
  poolgen_prepared_free(prepared);
  uo.output_size_len = 9;
  EXPECT_TRUE(CIsError(poolgen_prepare_max_unpool(2, &v, &i, &g, &uo, &prepared, message, kMsg),
                       POOLGEN_INVALID_ARGUMENT, message, {"output_size_len", "9"}));
  poolgen_pool_options po;
  std::memset(&po, 0, sizeof po);
  po.kernel_size[0] = 2;
  EXPECT_TRUE(CIsError(
      poolgen_prepare_max_pool_backward(2, &v, &i, &g, &po, &prepared, message, kMsg),
      POOLGEN_INVALID_ARGUMENT, message, {"kernel_size", "0"}));
  EXPECT_EQ(prepared, nullptr);
  po.kernel_size[1] = 2;
  ASSERT_EQ(poolgen_prepare_max_pool_backward(2, &v, &i, &g, &po, &prepared, message, kMsg),
            POOLGEN_OK)
      << message;
  poolgen_prepared_free(prepared);
}

}  // namespace
}  // namespace poolgen
