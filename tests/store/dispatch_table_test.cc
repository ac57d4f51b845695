// KernelRunner's choice of kernel by shape and its refusals, without a GPU:
// the dispatch table (lib/store/dispatch_table.h) picks the entry for the
// dims of a launch and refuses dims the search did not check.
#include <gtest/gtest.h>

#include "store/dispatch_table.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch::internal {
namespace {

using testing::BucketedSoftmax;
using testing::RowSoftmaxProblem;

StatusOr<size_t> At(const DispatchTable& table, std::vector<DimValue> dims, bool allow = false) {
  return table.Select(dims, allow);
}

TEST(DispatchTable, PicksTheEntryOfTheBucketTheDimsFallIn) {
  // Entries in any order: entry 0 serves rows > 16, entry 1 rows <= 16.
  auto table = DispatchTable::Create(BucketedSoftmax(), {1, 0});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(At(*table, {{"rows", 4}}).value_or(9), 1u);
  EXPECT_EQ(At(*table, {{"rows", 7}}).value_or(9), 1u);  // a check-only case counts
  EXPECT_EQ(At(*table, {{"rows", 1}}).value_or(9), 1u);  // anywhere inside the bucket
  EXPECT_EQ(At(*table, {{"rows", 16}}).value_or(9), 1u);
  EXPECT_EQ(At(*table, {{"rows", 17}}).value_or(9), 0u);
  EXPECT_EQ(At(*table, {{"rows", 100000}}).value_or(9), 0u);
  EXPECT_EQ(At(*table, {}).value_or(9), 0u);  // the problem's dims: rows 64
  EXPECT_EQ(At(*table, {{"rows", 4}, {"cols", 256}}).value_or(9), 1u);
  ASSERT_EQ(table->checked(1).size(), 2u);  // decode and odd
  EXPECT_EQ(table->checked(1)[1], (DispatchTable::Dims{{"rows", 7}, {"cols", 256}}));
}

TEST(DispatchTable, RefusesDimsTheSearchDidNotCheck) {
  auto table = DispatchTable::Create(BucketedSoftmax(), {0, 1});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  // Another value of a dim that is not the dispatch dim was never checked.
  auto cols = At(*table, {{"rows", 4}, {"cols", 512}});
  EXPECT_EQ(cols.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(cols.status().message().find("dim cols = 512 was not checked by the search for this kernel "
                                         "(checked at: rows=4 cols=256; rows=7 cols=256)"),
            std::string::npos)
      << cols.status().message();
  EXPECT_NE(cols.status().message().find("allow_unchecked_dims"), std::string::npos);
  // Opting out runs the bucket's kernel anyway.
  EXPECT_EQ(At(*table, {{"rows", 4}, {"cols", 512}}, true).value_or(9), 0u);
  auto unknown = At(*table, {{"depth", 4}});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'depth' is not a dim"), std::string::npos);
  EXPECT_EQ(At(*table, {{"rows", 0}}).status().code(), StatusCode::kInvalidArgument);
}

TEST(DispatchTable, RefusesABucketWithoutAKernel) {
  // The search found no correct kernel for rows > 16.
  auto table = DispatchTable::Create(BucketedSoftmax(), {0});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(At(*table, {{"rows", 8}}).value_or(9), 0u);
  auto large = At(*table, {{"rows", 300}});
  EXPECT_EQ(large.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(large.status().message().find("dim rows = 300 is outside every checked bucket: it falls in "
                                          "rows>16, and the table holds kernels for rows<=16"),
            std::string::npos)
      << large.status().message();
  // Opting out runs the nearest bucket's kernel.
  EXPECT_EQ(At(*table, {{"rows", 300}}, true).value_or(9), 0u);
}

TEST(DispatchTable, AKernelForTheWholeProblemRunsAtItsCheckedShapesOnly) {
  // Without shape cases: the problem's own dims.
  auto plain = DispatchTable::Create(RowSoftmaxProblem(64, 256), {-1});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(At(*plain, {}).value_or(9), 0u);
  EXPECT_EQ(At(*plain, {{"rows", 64}}).value_or(9), 0u);
  auto other = At(*plain, {{"rows", 17}});
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("dim rows = 17 was not checked"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(At(*plain, {{"rows", 17}}, true).value_or(9), 0u);
  // With shape cases: any case's dims, and only those.
  auto whole = DispatchTable::Create(BucketedSoftmax(), {-1});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(At(*whole, {{"rows", 7}}).value_or(9), 0u);
  EXPECT_EQ(At(*whole, {{"rows", 64}}).value_or(9), 0u);
  EXPECT_EQ(At(*whole, {{"rows", 8}}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(DispatchTable, RefusesTablesThatDoNotFitTheProblem) {
  struct Case {
    Problem problem;
    std::vector<int> buckets;
    const char* message;
  } cases[] = {
      {RowSoftmaxProblem(64, 256), {0}, "entry 0 serves bucket 0, but problem 'row_softmax' has no dispatch buckets"},
      {BucketedSoftmax(), {2}, "entry 0 serves bucket 2, but problem 'row_softmax' has 2 buckets"},
      {BucketedSoftmax(), {0, 0}, "entry 1: bucket rows<=16 is served by entry 0 already"},
      {BucketedSoftmax(), {0, -1}, "entry 1 serves the whole problem (bucket -1)"},
      {BucketedSoftmax(), {}, "no cached kernel given"},
  };
  for (const Case& c : cases) {
    auto table = DispatchTable::Create(c.problem, c.buckets);
    ASSERT_FALSE(table.ok()) << c.message;
    EXPECT_EQ(table.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(table.status().message().find(c.message), std::string::npos) << table.status().message();
  }
}

}  // namespace
}  // namespace ksearch::internal
