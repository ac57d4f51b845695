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
      // Caught by the round-trip check of tests/fuzz/plan_fuzz: the first "A"
      // ran, ToJson kept the last, so the stored plan was not the one that ran.
      {R"({"params": {"A": 1, "A": 2}, "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})",
       "p.json: params: duplicate key 'A'"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [], "grid": [2]}]})",
       "p.json: launches[0]: duplicate key 'grid'"},
      // Caught by tests/fuzz/plan_fuzz: converting 1e300 to int64 before the
      // range check was undefined behaviour (seen under UBSan only).
      {R"({"params": {"B": 1e300}, "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})",
       "params.B: expected an integer, got 1e+300"},
      {R"({"params": {"B": -1e19}, "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]})",
       "params.B: expected an integer"},
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
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["1e300:f32"]}]})", "launches[0].args[0]: '1e300' does not fit in f32"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["-3.5e38:f32"]}]})", "'-3.5e38' does not fit in f32"},
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

// A plan of `launches` launches of kernel `k` with `args` tensor arguments
// each, `workspaces` one-element buffers and `params` params, as JSON.
std::string PlanJson(int launches, int args, int workspaces, int params) {
  std::string json = R"({"params": {)";
  for (int i = 0; i < params; ++i) json += (i ? ", " : "") + std::string("\"P") + std::to_string(i) + "\": 1";
  json += R"(}, "workspace": [)";
  for (int i = 0; i < workspaces; ++i) {
    json += (i ? ", " : "") + std::string(R"({"name": "w)") + std::to_string(i) + R"(", "elements": 1})";
  }
  json += R"(], "launches": [)";
  for (int i = 0; i < launches; ++i) {
    json += (i ? ", " : "") + std::string(R"({"kernel": "k", "grid": [1], "block": [1], "args": [)");
    for (int a = 0; a < args; ++a) json += a ? ", \"x\"" : "\"x\"";
    json += "]}";
  }
  return json + "]}";
}

// Each cap refuses a plan one past it (at parse time and when resolving a plan
// built in code) and accepts a plan at it.
TEST(LaunchPlan, RefusesPlansOverTheCaps) {
  Problem p = testing::RowSoftmaxProblem(64, 1024);
  struct Cap {
    std::string at_cap, over_cap, expected;
  };
  const Cap caps[] = {
      {PlanJson(64, 1, 0, 0), PlanJson(65, 1, 0, 0), "launches: 65 launches (at most 64)"},
      {PlanJson(1, 1, 32, 0), PlanJson(1, 1, 33, 0), "workspace: 33 workspace buffers (at most 32)"},
      {PlanJson(2, 64, 0, 0), PlanJson(2, 65, 0, 0), "launches[0].args: 65 arguments (at most 64)"},
      {PlanJson(1, 1, 0, 64), PlanJson(1, 1, 0, 65), "params: 65 params (at most 64)"},
  };
  for (const Cap& c : caps) {
    auto at = LaunchPlan::FromJson(c.at_cap, "p.json");
    ASSERT_TRUE(at.ok()) << at.status().ToString();
    EXPECT_TRUE(internal::ResolvePlan(p, *at).ok()) << internal::ResolvePlan(p, *at).status().ToString();
    auto over = LaunchPlan::FromJson(c.over_cap, "p.json");
    ASSERT_FALSE(over.ok()) << c.expected;
    EXPECT_EQ(over.status().message(), "p.json: " + c.expected);
    // A plan built in code never went through FromJson; ResolvePlan checks too.
    LaunchPlan built = *at;
    if (built.launches.size() == 64) built.launches.push_back(built.launches[0]);
    if (built.workspace.size() == 32) built.workspace.push_back({"w32", DType::kF32, "1"});
    if (built.launches[0].args.size() == 64) built.launches[0].args.push_back("x");
    if (built.params.size() == 64) built.params.emplace_back("P64", 1);
    auto resolved = internal::ResolvePlan(p, built);
    ASSERT_FALSE(resolved.ok()) << c.expected;
    EXPECT_EQ(resolved.status().message(), c.expected);
  }
}

TEST(LaunchPlan, RefusesOverlongNamesAndExpressions) {
  const std::string name(internal::kMaxNameLength + 1, 'a');
  const std::string expr = "1" + std::string(kMaxExpressionLength, ' ');
  const std::string launch = R"({"kernel": "k", "grid": [1], "block": [1], "args": []})";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"params": {")" + name + R"(": 1}, "launches": [)" + launch + "]}", "params[0]: 'aaaa"},
      {R"({"launches": [{"kernel": ")" + name + R"(", "grid": [1], "block": [1], "args": []}]})",
       "launches[0].kernel: 'aaaa"},
      {R"({"workspace": [{"name": ")" + name + R"(", "elements": 1}], "launches": [)" + launch + "]}",
       "workspace[0].name: 'aaaa"},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [")" + name + R"("]}]})",
       "launches[0].args[0]: 'aaaa"},
      {R"({"launches": [{"kernel": "k", "grid": [1, ")" + expr + R"("], "block": [1], "args": []}]})",
       "launches[0].grid[1]: '1    "},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "shared_bytes": ")" + expr +
           R"(", "args": []}]})",
       "launches[0].shared_bytes: '1    "},
      {R"({"workspace": [{"name": "w", "elements": ")" + expr + R"("}], "launches": [)" + launch + "]}",
       "workspace[0].elements: '1    "},
      {R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [")" + expr +
           R"(    :i32"]}]})",
       "launches[0].args[0]: '1    "},
  };
  for (const auto& [json, expected] : cases) {
    auto plan = LaunchPlan::FromJson(json, "p.json");
    ASSERT_FALSE(plan.ok()) << expected;
    const std::string message = plan.status().message();
    EXPECT_EQ(message.find("p.json: " + expected), 0u) << message;
    EXPECT_NE(message.find("characters long (at most"), std::string::npos) << message;
    EXPECT_LT(message.size(), 200u) << "the message quotes the whole text: " << message;
  }
}

TEST(ResolvePlan, CapsTheTotalWorkspaceBytes) {
  Problem p = testing::RowSoftmaxProblem(64, 1024);
  auto plan = [](const std::string& second_elements, const std::string& second_dtype) {
    auto parsed = LaunchPlan::FromJson(
        R"({"workspace": [{"name": "a", "dtype": "f32", "elements": "2 * 1024 * 1024 * 1024"},
                          {"name": "b", "dtype": ")" + second_dtype + R"(", "elements": ")" + second_elements + R"("}],
            "launches": [{"kernel": "k", "grid": [1], "block": [1], "args": ["a", "b"]}]})",
        "p");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    return parsed.value_or(LaunchPlan());
  };
  // 8 GiB + 8 GiB is exactly the cap.
  auto at_cap = internal::ResolvePlan(p, plan("1024 * 1024 * 1024", "f64"));
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().ToString();
  EXPECT_EQ(at_cap->workspace_elements[1], int64_t{1} << 30);
  struct Over {
    std::string elements, dtype, expected;
  };
  const Over cases[] = {
      {"1024 * 1024 * 1024 + 1", "f64", "workspace[1].elements: '1024 * 1024 * 1024 + 1' = 1073741825 f64 elements"},
      {"8 * 1024 * 1024 * 1024 + 1", "u8", "= 8589934593 u8 elements take the plan's workspace past 17179869184 bytes (16 GiB"},
      // elements × 8 overflows int64 before any sum.
      {"4611686018427387904", "f64", "workspace[1].elements: '4611686018427387904' = 4611686018427387904 f64"},
  };
  for (const Over& c : cases) {
    auto r = internal::ResolvePlan(p, plan(c.elements, c.dtype));
    ASSERT_FALSE(r.ok()) << c.elements;
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
}

// The evaluator reports a plan that does not resolve as invalid_plan with this
// message, so it has to say which field held the bad expression.
TEST(ResolvePlan, NamesTheFieldOfAnExpressionThatDoesNotEvaluate) {
  Problem p = testing::RowSoftmaxProblem(64, 1024);
  const std::string deep = std::string(100, '(') + "1" + std::string(100, ')');
  const std::string ok = R"j({"kernel": "k", "grid": [1], "block": [1], "args": []})j";
  const std::pair<std::string, std::string> cases[] = {
      {R"j("grid": ["(-9223372036854775807 - 1) / -1"], "block": [1], "args": [])j",
       "launches[1].grid[0]: expression '(-9223372036854775807 - 1) / -1': 64-bit overflow in '/'"},
      {R"j("grid": [1, "rows % (cols - 1024)"], "block": [1], "args": [])j",
       "launches[1].grid[1]: expression 'rows % (cols - 1024)': remainder by zero"},
      {R"j("grid": [1], "block": [1], "shared_bytes": "9223372036854775807 * 2", "args": [])j",
       "launches[1].shared_bytes: expression '9223372036854775807 * 2': 64-bit overflow"},
      {R"j("grid": [1], "block": [1], "args": ["-(-9223372036854775807 - 1):i64"])j",
       "launches[1].args[0]: expression '-(-9223372036854775807 - 1)': 64-bit overflow"},
      {R"j("grid": [1], "block": [1], "args": ["(-9223372036854775807 - 1) % -1:f32"])j",
       "launches[1].args[0]: not a float literal, nor an integer expression"},
      {R"j("grid": [1], "block": [")j" + deep + R"j("], "args": [])j",
       "launches[1].block[0]: expression '(((((((((("},
  };
  for (const auto& [launch, expected] : cases) {
    std::string json = R"j({"launches": [)j" + ok + R"j(, {"kernel": "k", )j" + launch + "}]}";
    auto plan = LaunchPlan::FromJson(json, "p");
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto r = internal::ResolvePlan(p, *plan);
    ASSERT_FALSE(r.ok()) << launch;
    EXPECT_EQ(r.status().message().find(expected), 0u)
        << "got: " << r.status().message() << "\nexpected to start with: " << expected;
  }
  auto plan = LaunchPlan::FromJson(R"j({"launches": [{"kernel": "k", "grid": [")j" + deep +
                                       R"j("], "block": [1], "args": []}]})j",
                                   "p");
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(internal::ResolvePlan(p, *plan).status().message().find("nested deeper than 64 levels"),
            std::string::npos);
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
