// ParameterTuneSearch's three methods over a template whose constraints cut
// its space, judged by a fake evaluator whose time has one minimum.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/shape_cases.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

using testing::FakeEvaluator;
using testing::TemplatedRowSoftmax;

// Fastest at BLOCK=256, VEC=4 (allowed: 256 * 4 <= 1024); smooth elsewhere,
// so neighbourhood moves lead there.
Evaluation Landscape(const Candidate& c) {
  if (c.plan.params.empty()) return testing::Timed(5.0);  // the starting kernel
  double block = static_cast<double>(c.plan.Param("BLOCK", 1));
  double vec = static_cast<double>(c.plan.Param("VEC", 1));
  double ms = 1.0 + 0.3 * std::abs(std::log2(block / 256.0)) + 0.2 * std::abs(std::log2(vec / 4.0));
  return testing::Timed(ms);
}

bool Allowed(const Candidate& c) {
  int64_t block = c.plan.Param("BLOCK", -1), vec = c.plan.Param("VEC", -1);
  return block * vec <= 1024 && block >= 64;
}

// Twelve rounds of four with `method`.
StatusOr<SearchSummary> Tune(const Problem& problem, Evaluator& evaluator, TuneMethod method) {
  SearchOptions options;
  options.budget.max_rounds = 12;
  ParameterTuneOptions tune;
  tune.method = method;
  tune.batch_size = 4;
  auto searcher = MakeParameterTuneSearch(options, tune);
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  return searcher->Run(context);
}

class TuneMethods : public ::testing::TestWithParam<TuneMethod> {};

TEST_P(TuneMethods, RespectTheConstraintsAndFindTheFastestPoint) {
  Problem problem = TemplatedRowSoftmax();
  FakeEvaluator evaluator(problem, Landscape);
  auto summary = Tune(problem, evaluator, GetParam());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->strategy, "tune");
  std::map<std::string, int> times_judged;
  for (const Candidate& c : evaluator.judged()) {
    if (c.plan.params.empty()) continue;
    EXPECT_TRUE(Allowed(c)) << ToString(GetParam()) << " judged " << c.plan.ToJson();
    ++times_judged[c.plan.ToJson()];
  }
  for (const auto& [plan, n] : times_judged) {
    // Only successive halving measures a point again.
    if (GetParam() != TuneMethod::kSuccessiveHalving) {
      EXPECT_EQ(n, 1) << plan;
    }
  }
  // 14 allowed points of 24; twelve rounds of four are enough for all three.
  ASSERT_TRUE(summary->best.has_value());
  EXPECT_EQ(summary->best->candidate.plan.Param("BLOCK", -1), 256) << ToString(GetParam());
  EXPECT_EQ(summary->best->candidate.plan.Param("VEC", -1), 4) << ToString(GetParam());
  EXPECT_EQ(summary->history.entries.size(), static_cast<size_t>(summary->candidates));
}

std::string MethodName(const ::testing::TestParamInfo<TuneMethod>& method) {
  return std::string(ToString(method.param));
}

INSTANTIATE_TEST_SUITE_P(AllMethods, TuneMethods,
                         ::testing::Values(TuneMethod::kRandom, TuneMethod::kAnnealing,
                                           TuneMethod::kSuccessiveHalving),
                         MethodName);

TEST(ParameterTuneSearch, AnnealingWalksNeighboursOfItsCurrentPoint) {
  Problem problem = TemplatedRowSoftmax();
  FakeEvaluator evaluator(problem, Landscape);
  SearchOptions options;
  options.budget.max_rounds = 3;
  ParameterTuneOptions tune;
  tune.method = TuneMethod::kAnnealing;
  tune.batch_size = 2;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  auto summary = MakeParameterTuneSearch(options, tune)->Run(context);
  ASSERT_TRUE(summary.ok());
  // Round 0: start + default (BLOCK=128, VEC=1); round 1: two neighbours of
  // the default, each one step away on one parameter.
  const auto& entries = summary->history.entries;
  ASSERT_GE(entries.size(), 4u);
  for (size_t i = 2; i < 4; ++i) {
    const LaunchPlan& plan = entries[i].candidate.plan;
    int steps = (plan.Param("BLOCK", 0) != 128) + (plan.Param("VEC", 0) != 1);
    EXPECT_EQ(steps, 1) << plan.ToJson();
  }
}

TEST(ParameterTuneSearch, SuccessiveHalvingRemeasuresTheBetterHalf) {
  Problem problem = TemplatedRowSoftmax();
  FakeEvaluator evaluator(problem, Landscape);
  SearchOptions options;
  options.budget.max_rounds = 4;
  ParameterTuneOptions tune;
  tune.method = TuneMethod::kSuccessiveHalving;
  tune.batch_size = 4;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  auto summary = MakeParameterTuneSearch(options, tune)->Run(context);
  ASSERT_TRUE(summary.ok());
  // Round 1: a bracket of 4 new points; round 2: the better 2 again; round 3:
  // a new bracket (one survivor is the bracket's winner).
  std::map<int, std::vector<const HistoryEntry*>> by_round;
  for (const HistoryEntry& e : summary->history.entries) {
    by_round[e.candidate.provenance.round].push_back(&e);
  }
  ASSERT_EQ(by_round[1].size(), 4u);
  ASSERT_EQ(by_round[2].size(), 2u);
  std::vector<std::pair<double, std::string>> first;
  for (const HistoryEntry* e : by_round[1]) {
    first.emplace_back(e->evaluation.timing->median_ms, e->candidate.id);
  }
  std::sort(first.begin(), first.end());
  std::set<std::string> again = {by_round[2][0]->candidate.id, by_round[2][1]->candidate.id};
  EXPECT_EQ(again, (std::set<std::string>{first[0].second, first[1].second}));
  EXPECT_EQ(by_round[3].size(), 4u);
}

TEST(ParameterTuneSearch, CompileOnlyRunRespectsConstraintsAndStopsWhenTheSpaceIsExhausted) {
  Problem problem = TemplatedRowSoftmax();
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  SearchOptions options;
  ParameterTuneOptions tune;
  tune.batch_size = 8;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator.get();
  auto summary = MakeParameterTuneSearch(options, tune)->Run(context);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->termination, TerminationReason::kCompleted);
  // The start and the 14 allowed points.
  EXPECT_EQ(summary->candidates, 15);
  // Compile-only: compiled, never run, so none counts as correct.
  EXPECT_EQ(summary->correct, 0) << summary->FullReport();
  EXPECT_EQ(summary->by_status.at("compiled"), 15) << summary->FullReport();
  for (const HistoryEntry& e : summary->history.entries) {
    if (!e.candidate.plan.params.empty()) {
      EXPECT_TRUE(Allowed(e.candidate)) << e.candidate.plan.ToJson();
    }
  }
}

// Dispatch buckets: the small rows want BLOCK 64, the large ones BLOCK 512,
// and VEC 8 is wrong at the check-only odd shape (in the small bucket). The
// tune keeps the best of each bucket, judged only by that bucket's cases.
TEST(ParameterTuneSearch, KeepsABestKernelPerDispatchBucket) {
  Problem problem = TemplatedRowSoftmax();
  problem.shapes = {ShapeCase{"small", {{"rows", 4}}, 3.0, true},
                    ShapeCase{"odd", {{"rows", 7}}, 1.0, false},
                    ShapeCase{"big", {{"rows", 64}}, 1.0, true}};
  problem.dispatch = DispatchSpec{"rows", {16}};
  ASSERT_TRUE(problem.Validate().ok()) << problem.Validate().ToString();
  auto judge = [&problem](const Candidate& c) {
    double block = static_cast<double>(c.plan.Param("BLOCK", 2048));
    bool vec8 = c.plan.Param("VEC", 1) == 8;
    double small_ms = 1.0 + 0.3 * std::abs(std::log2(block / 64.0));
    double big_ms = 1.0 + 0.3 * std::abs(std::log2(block / 512.0));
    Evaluation e;
    for (size_t i = 0; i < problem.shapes.size(); ++i) {
      const std::string& name = problem.shapes[i].name;
      CaseResult r = testing::FakeCase(problem, i,
                                       vec8 && name == "odd" ? EvalStatus::kWrongResult : EvalStatus::kOk,
                                       name == "small" ? small_ms : big_ms);
      if (r.status != EvalStatus::kOk) r.message = "wrong at the tail (fake)";
      if (r.timed) {
        r.baseline = "fake_baseline";
        r.baseline_median_ms = 1.0;
        r.speedup = r.speedup_ci_low = r.speedup_ci_high = 1.0 / r.median_ms;
      }
      e.cases.push_back(r);
    }
    e.status = vec8 ? EvalStatus::kWrongResult : EvalStatus::kOk;
    e.message = vec8 ? "at case 'odd': wrong (fake)" : "correct (fake)";
    if (!vec8) {
      std::vector<size_t> all = {0, 1, 2};
      internal::CombineTimedCases(e.cases, all, &e);
    }
    return e;
  };
  FakeEvaluator evaluator(problem, judge);
  auto summary = Tune(problem, evaluator, TuneMethod::kRandom);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->best_per_bucket.size(), 2u);
  ASSERT_TRUE(summary->best_per_bucket[0]);
  ASSERT_TRUE(summary->best_per_bucket[1]);
  const HistoryEntry& small = *summary->best_per_bucket[0];
  const HistoryEntry& big = *summary->best_per_bucket[1];
  EXPECT_EQ(small.candidate.plan.Param("BLOCK", -1), 64);
  EXPECT_NE(small.candidate.plan.Param("VEC", -1), 8) << "wrong at a case of its bucket";
  EXPECT_EQ(big.candidate.plan.Param("BLOCK", -1), 512);
  // Each entry carries its bucket's view: its cases and its weighted time.
  EXPECT_EQ(small.evaluation.status, EvalStatus::kOk);
  ASSERT_EQ(small.evaluation.cases.size(), 2u);  // small and odd
  EXPECT_EQ(small.evaluation.cases[1].name, "odd");
  ASSERT_TRUE(small.evaluation.timing);
  EXPECT_DOUBLE_EQ(small.evaluation.timing->median_ms, 1.0);
  ASSERT_EQ(big.evaluation.cases.size(), 1u);
  EXPECT_DOUBLE_EQ(big.evaluation.timing->median_ms, 1.0);
  EXPECT_NE(big.evaluation.message.find("bucket rows>16"), std::string::npos) << big.evaluation.message;
  // The overall best is correct everywhere and fastest by the weighted time
  // (3 × small + 1 × big): BLOCK 64 or 128 beat 512 there.
  ASSERT_TRUE(summary->best);
  EXPECT_LT(summary->best->candidate.plan.Param("BLOCK", -1), 512);
  EXPECT_NE(summary->FullReport().find("bucket 1: "), std::string::npos) << summary->FullReport();
}

}  // namespace
}  // namespace ksearch
