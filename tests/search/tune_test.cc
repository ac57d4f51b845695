// ParameterTuneSearch's three methods over a template whose constraints cut
// its space, judged by a fake evaluator whose time has one minimum.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

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

class TuneMethods : public ::testing::TestWithParam<TuneMethod> {};

TEST_P(TuneMethods, RespectTheConstraintsAndFindTheFastestPoint) {
  Problem problem = TemplatedRowSoftmax();
  FakeEvaluator evaluator(problem, Landscape);
  SearchOptions options;
  options.budget.max_rounds = 12;
  ParameterTuneOptions tune;
  tune.method = GetParam();
  tune.batch_size = 4;
  auto searcher = MakeParameterTuneSearch(options, tune);
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  auto summary = searcher->Run(context);
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

}  // namespace
}  // namespace ksearch
