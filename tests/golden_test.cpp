// PyTorch's golden vectors against (a) the reference and (b) the library, on both paths.
#include <gtest/gtest.h>

#include "golden_cases.hpp"
#include "lib_util.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace poolgen {
namespace {

using golden::Case;
using test::same_floats;
using test::same_ints;

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, ReferenceAndLibraryBitExact) {
  const Case& c = GetParam();
  ASSERT_TRUE(c.op == "pool" || c.op == "unpool") << c.op;
  if (c.op == "pool") {
    Ints shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    Status st = ref::max_pool<float>(c.nd, c.input_shape, c.in_values, c.pool, &shape, &values,
                                     &indices);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(shape, c.output_shape) << "reference";
    EXPECT_TRUE(same_floats(c.out_values, values)) << "reference";
    EXPECT_TRUE(same_ints(c.out_indices, indices)) << "reference";

    Ints lib_shape;
    st = max_pool_output_shape(c.nd, c.input_shape, c.pool, &lib_shape);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(lib_shape, c.output_shape) << "max_pool_output_shape";
    for (Path path : {Path::automatic, Path::general}) {
      SCOPED_TRACE(std::string("path ") + test::path_name(path));
      test::PoolRun r = test::run_pool(c.nd, c.input_shape, c.in_values, c.output_shape, c.pool,
                                       path);
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      EXPECT_TRUE(r.guards_ok) << "bytes outside the outputs were written";
      EXPECT_TRUE(same_floats(c.out_values, r.values));
      EXPECT_TRUE(same_ints(c.out_indices, r.indices));
    }
  } else {
    Ints shape;
    std::vector<float> out;
    Status st = ref::max_unpool<float>(c.nd, c.input_shape, c.in_values, c.in_indices, c.unpool,
                                       &shape, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(shape, c.output_shape) << "reference";
    EXPECT_TRUE(same_floats(c.out_values, out)) << "reference";

    Ints lib_shape;
    st = max_unpool_output_shape(c.nd, c.input_shape, c.unpool, &lib_shape);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(lib_shape, c.output_shape) << "max_unpool_output_shape";
    for (Path path : {Path::automatic, Path::general}) {
      SCOPED_TRACE(std::string("path ") + test::path_name(path));
      test::UnpoolRun r = test::run_unpool(c.nd, c.input_shape, c.in_values, c.in_indices,
                                           c.output_shape, c.unpool, path);
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      EXPECT_TRUE(r.guards_ok) << "bytes outside the output were written";
      EXPECT_TRUE(same_floats(c.out_values, r.output));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PyTorch, Golden, ::testing::ValuesIn(golden::cases_for_gtest()),
                         golden::case_name);

}  // namespace
}  // namespace poolgen
