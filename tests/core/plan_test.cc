#include <gtest/gtest.h>

#include "core/plan_resolve.h"
#include "ksearch/candidate.h"
#include "test_util.h"

namespace ksearch {
namespace {

TEST(LaunchPlan, ParsesTheDesignExampleAndRoundTrips) {
  auto plan = LaunchPlan::FromJson(R"({ "params": {"BLOCK": 256, "VEC": 4},
    "workspace": [{"name": "partial", "dtype": "f32", "elements": "rows * 32"}],
    "launches": [{"kernel": "row_partials", "grid": ["rows", 32, 1], "block": ["BLOCK", 1, 1],
                  "shared_bytes": "BLOCK * 4", "args": ["x", "partial", "cols:i32"]},
                 {"kernel": "row_finish", "grid": ["rows", 1, 1], "block": [256, 1, 1],
                  "args": ["x", "partial", "y", "cols:i32"]}] })",
                                   "example");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Param("VEC", 0), 4);
  ASSERT_EQ(plan->launches.size(), 2u);
  EXPECT_EQ(plan->launches[0].grid[1], "32");
  EXPECT_EQ(plan->launches[1].shared_bytes, "0");
  auto again = LaunchPlan::FromJson(plan->ToJson(), "round trip");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *plan);
}

struct BadPlan {
  const char* json;
  const char* expected;
};

TEST(LaunchPlan, NamesTheFieldOfEveryError) {
  const BadPlan cases[] = {
      {R"({"launches": []})", "at least one launch"},
      {R"({"params": {"B": 1}})", "missing required field 'launches'"},
      {R"({"params": {"B": 1.5}, "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})",
       "params.B: expected an integer"},
      {R"({"launches": [{"kernel": "k", "grid": [1,1,1,1], "block": [1], "args": []}]})",
       "launches[0].grid: expected 1 to 3 entries"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["n:u16"]}]})",
       "scalar type 'u16'"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [], "extra": 1}]})",
       "launches[0].extra: unknown field"},
      {R"({"workspace": [{"name": "w", "dtype": "f33", "elements": 4}], "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})",
       "unknown dtype 'f33'"},
      {R"({"launches": [{"kernel": "my kernel", "grid": [1], "block": [1], "args": []}]})",
       "not an identifier"},
      {R"({"launches": )", "malformed JSON"},
  };
  for (const BadPlan& c : cases) {
    auto plan = LaunchPlan::FromJson(c.json, "p.json");
    ASSERT_FALSE(plan.ok()) << c.json;
    EXPECT_NE(plan.status().message().find(c.expected), std::string::npos)
        << "got: " << plan.status().message() << "\nexpected to contain: " << c.expected;
    EXPECT_EQ(plan.status().message().rfind("p.json", 0), 0u) << plan.status().message();
  }
}

TEST(ResolvePlan, BindsTensorsWorkspaceAndScalars) {
  Problem p = testing::RowSoftmaxProblem(64, 1024);
  auto plan = LaunchPlan::FromJson(R"j({"params": {"BLOCK": 128},
    "workspace": [{"name": "tmp", "dtype": "f64", "elements": "rows * 2"}],
    "launches": [{"kernel": "k", "grid": ["ceil_div(rows, 8)", 1, 1], "block": ["BLOCK"],
                  "shared_bytes": "BLOCK * 8", "args": ["x", "tmp", "y", "cols:i32", "rows * cols:i64", "1e-5:f32"]}]})j",
                                   "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto r = internal::ResolvePlan(p, *plan);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& l = r->launches[0];
  EXPECT_EQ(l.grid[0], 8u);
  EXPECT_EQ(l.block[0], 128u);
  EXPECT_EQ(l.shared_bytes, 1024);
  EXPECT_EQ(r->workspace_elements[0], 128);
  ASSERT_EQ(l.args.size(), 6u);
  EXPECT_EQ(l.args[0].kind, internal::ResolvedArg::Kind::kTensor);
  EXPECT_EQ(l.args[1].kind, internal::ResolvedArg::Kind::kWorkspace);
  EXPECT_EQ(l.args[3].int_value, 1024);
  EXPECT_EQ(l.args[4].int_value, 64 * 1024);
  EXPECT_EQ(l.args[4].Size(), 8);
  EXPECT_FLOAT_EQ(l.args[5].float_value, 1e-5f);
}

TEST(ResolvePlan, RejectsPlansThatCannotRun) {
  Problem p = testing::RowSoftmaxProblem(64, 1024);
  const BadPlan cases[] = {
      {R"({"launches": [{"kernel": "k", "grid": ["rowz"], "block": [1], "args": []}]})", "unknown name 'rowz'"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [2048], "args": []}]})", "must be 1..1024"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [64, 32], "args": []}]})", "2048 threads per block"},
      {R"({"launches": [{"kernel": "k", "grid": [0], "block": [1], "args": []}]})", "launches[0].grid[0]"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["z"]}]})", "'z' is not a tensor or workspace"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["rows * cols * cols * cols:i32"]}]})", "does not fit in i32"},
      {R"({"params": {"rows": 3}, "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})", "shadow the problem dim"},
      {R"({"workspace": [{"name": "w", "elements": "0"}], "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})", "must be positive"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "shared_bytes": "0 - 4", "args": []}]})", "must be >= 0"},
  };
  for (const BadPlan& c : cases) {
    auto plan = LaunchPlan::FromJson(c.json, "p");
    ASSERT_TRUE(plan.ok()) << c.json << plan.status().ToString();
    auto r = internal::ResolvePlan(p, *plan);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "got: " << r.status().message() << "\nexpected: " << c.expected;
  }
}

TEST(Candidate, ContentHashIgnoresIdAndProvenance) {
  Candidate a;
  a.source = "x";
  a.id = "c1";
  Candidate b = a;
  b.id = "c2";
  b.provenance.round = 4;
  EXPECT_EQ(a.ContentHash(), b.ContentHash());
  b.plan.SetParam("BLOCK", 64);
  EXPECT_NE(a.ContentHash(), b.ContentHash());
  EXPECT_EQ(a.ContentHash().size(), 64u);
}

}  // namespace
}  // namespace ksearch
