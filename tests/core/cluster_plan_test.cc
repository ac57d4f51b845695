// Thread-block clusters in launch plans: "cluster" (and the opt-in to
// non-portable sizes) parse, write back and resolve; every refusal names the
// field and the value — a cluster that does not divide the grid, one above
// the portable size without the opt-in or above any GPU's with it, and a
// plan that contradicts the kernel's compiled __cluster_dims__ or targets an
// arch without clusters.
#include <gtest/gtest.h>

#include "core/plan_resolve.h"
#include "core/plan_signature.h"
#include "ksearch/candidate.h"
#include "test_util.h"

namespace ksearch {
namespace {

std::string LaunchJson(const std::string& extra) {
  return R"({"params": {"CL": 4}, "launches": [{"kernel": "k", "grid": ["rows * CL", 1, 1], "block": [256, 1, 1], )" +
         extra + R"( "args": ["x", "y", "cols:i32"]}]})";
}

TEST(ClusterPlan, ParsesWritesBackAndResolves) {
  auto plan = LaunchPlan::FromJson(LaunchJson(R"("cluster": ["CL"],)"), "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->launches[0].cluster, (std::vector<std::string>{"CL", "1", "1"}));
  EXPECT_FALSE(plan->launches[0].non_portable_cluster_size);
  auto again = LaunchPlan::FromJson(plan->ToJson(), "round trip");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *plan);
  auto resolved = internal::ResolvePlan(testing::RowSoftmaxProblem(64, 1024), *plan);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  const internal::ResolvedLaunch& launch = resolved->launches[0];
  EXPECT_TRUE(launch.HasCluster());
  EXPECT_EQ(launch.cluster, (std::array<uint32_t, 3>{4, 1, 1}));
  EXPECT_EQ(launch.ClusterSize(), 4);

  auto wide = LaunchPlan::FromJson(
      LaunchJson(R"("cluster": [16, 1, 1], "non_portable_cluster_size": true,)"), "plan");
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_NE(wide->ToJson().find("\"non_portable_cluster_size\":true"), std::string::npos) << wide->ToJson();
  auto big = internal::ResolvePlan(testing::RowSoftmaxProblem(64, 1024), *wide);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->launches[0].ClusterSize(), 16);
  EXPECT_TRUE(big->launches[0].non_portable_cluster_size);
}

// A plan without a cluster writes exactly what it always wrote: its content
// hash, which resumes and the kernel cache key on, does not change.
TEST(ClusterPlan, APlanWithoutAClusterKeepsItsCanonicalText) {
  auto plan = LaunchPlan::FromJson(LaunchJson(""), "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->ToJson(),
            R"({"params":{"CL":4},"workspace":[],"launches":[{"kernel":"k","grid":["rows * CL","1","1"],)"
            R"("block":["256","1","1"],"shared_bytes":"0","args":["x","y","cols:i32"]}]})");
  EXPECT_FALSE(internal::ResolvePlan(testing::RowSoftmaxProblem(64, 1024), *plan)->launches[0].HasCluster());
}

TEST(ClusterPlan, RefusesClustersThatCannotRunNamingTheFieldAndValue) {
  const Problem problem = testing::RowSoftmaxProblem(64, 1024);  // grid x = 256
  const std::pair<std::string, std::string> cases[] = {
      {R"("cluster": [3, 1, 1],)", "launches[0].cluster[0]: '3' = 3 does not divide grid[0] = 256"},
      {R"("cluster": [1, 2, 1],)", "launches[0].cluster[1]: '2' = 2 does not divide grid[1] = 1"},
      {R"("cluster": [0],)", "launches[0].cluster[0]: '0' = 0 (must be 1..16)"},
      {R"("cluster": ["CL * 8"],)", "launches[0].cluster[0]: 'CL * 8' = 32 (must be 1..16)"},
      {R"("cluster": ["CL * 4"],)",
       "launches[0].cluster: 16 blocks per cluster, above the portable limit of 8 (add "
       "\"non_portable_cluster_size\": true for up to 16"},
      {R"("cluster": ["CL * 4", 1, 1], "non_portable_cluster_size": false,)", "above the portable limit of 8"},
      {R"("cluster": ["cls"],)", "launches[0].cluster[0]"},
  };
  for (const auto& [extra, expected] : cases) {
    auto plan = LaunchPlan::FromJson(LaunchJson(extra), "p");
    ASSERT_TRUE(plan.ok()) << extra << plan.status().ToString();
    auto r = internal::ResolvePlan(problem, *plan);
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_NE(r.status().message().find(expected), std::string::npos)
        << "got: " << r.status().message() << "\nexpected: " << expected;
  }
  // 32 blocks in a cluster of 4 × 2 × 2 with the opt-in: more than any GPU.
  Problem square = problem;
  auto plan = LaunchPlan::FromJson(
      R"({"launches": [{"kernel": "k", "grid": [8, 8, 8], "block": [32], "cluster": [4, 2, 4],
          "non_portable_cluster_size": true, "args": []}]})",
      "p");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto r = internal::ResolvePlan(square, *plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("32 blocks per cluster, above the largest any GPU allows (16)"),
            std::string::npos)
      << r.status().message();
  // The opt-in without a cluster means nothing: refused when parsed.
  auto alone = LaunchPlan::FromJson(LaunchJson(R"("non_portable_cluster_size": true,)"), "p");
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("launches[0].non_portable_cluster_size"), std::string::npos)
      << alone.status().message();
  EXPECT_NE(alone.status().message().find("has no \"cluster\""), std::string::npos) << alone.status().message();
  // A cluster of four entries is refused like a grid of four.
  auto four = LaunchPlan::FromJson(LaunchJson(R"("cluster": [1, 1, 1, 1],)"), "p");
  ASSERT_FALSE(four.ok());
  EXPECT_NE(four.status().message().find("launches[0].cluster: expected 1 to 3 entries"), std::string::npos)
      << four.status().message();
}

internal::ResolvedLaunch Launch(std::array<uint32_t, 3> grid, std::array<uint32_t, 3> cluster) {
  internal::ResolvedLaunch launch;
  launch.kernel = "k";
  launch.grid = grid;
  launch.block = {256, 1, 1};
  launch.cluster = cluster;
  return launch;
}

TEST(ClusterMismatch, AgreesWithTheKernelsCompiledClusterAndArch) {
  // No cluster anywhere; the plan's cluster on sm_90; the kernel's own.
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 1, 1}, {}), {}, 80), "");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 1, 1}, {2, 1, 1}), {}, 90), "");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 1, 1}, {}), {4, 1, 1}, 90), "");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 1, 1}, {4, 1, 1}), {4, 1, 1}, 100), "");
}

TEST(ClusterMismatch, RefusesAnArchWithoutClustersAContradictionAndAGridOfPartClusters) {
  EXPECT_EQ(internal::ClusterMismatch(1, Launch({8, 1, 1}, {2, 1, 1}), {}, 80),
            "launches[1] (k): clusters need sm_90 or newer, and the kernel is built for sm_80");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 1, 1}, {4, 1, 1}), {2, 1, 1}, 90),
            "launches[0] (k): the plan asks for cluster [4, 1, 1] but the kernel declares "
            "__cluster_dims__(2, 1, 1); drop \"cluster\" from the plan or make the two agree");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({6, 2, 1}, {}), {4, 1, 1}, 90),
            "launches[0] (k): grid [6, 2, 1] is not a whole number of the kernel's "
            "__cluster_dims__(4, 1, 1) (x)");
  EXPECT_EQ(internal::ClusterMismatch(0, Launch({8, 3, 1}, {}), {2, 2, 1}, 90),
            "launches[0] (k): grid [8, 3, 1] is not a whole number of the kernel's "
            "__cluster_dims__(2, 2, 1) (y)");
}

}  // namespace
}  // namespace ksearch
