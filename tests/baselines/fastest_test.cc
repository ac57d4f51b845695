// How a library baseline chooses among its library's candidates
// (baselines/fastest.h), on a simulated GPU whose clock falls as it heats:
// the choice must find the candidate that is fastest at the clock the judge
// times at, not the one that happened to run while the GPU was cool.
#include "baselines/fastest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ksearch::internal {
namespace {

// A GPU that starts cool and fast: a run costs `cost[i]` ms times a factor
// that rises from 0.94 to 1.0 over the first 3 ms of load (as the H200's
// clock falls under its power limit), then stays there.
struct HeatingGpu {
  std::vector<float> cost;
  double busy_ms = 0;
  std::vector<size_t> order;  // every turn's candidate, in order
  std::vector<int> runs;      // and its runs

  float Factor() const { return static_cast<float>(0.94 + 0.06 * std::min(busy_ms / 3.0, 1.0)); }
  TurnFunction Turns() {
    return [this](size_t i, int n) -> StatusOr<float> {
      order.push_back(i);
      runs.push_back(n);
      float total = 0;
      for (int r = 0; r < n; ++r) {
        const float ms = cost[i] * Factor();
        busy_ms += ms;
        total += ms;
      }
      return total / static_cast<float>(n);
    };
  }
};

TEST(ChooseFastest, FindsTheFastestAtTheClockOfAWarmGpu) {
  // Candidate 0 is 3% slower than candidate 2 once the GPU is warm.
  HeatingGpu gpu{{1.03f, 1.05f, 1.0f, 1.08f}};
  // What timing each once, in order, on a cool GPU would conclude.
  HeatingGpu naive = gpu;
  TurnFunction once = naive.Turns();
  std::vector<float> first_look;
  for (size_t i = 0; i < naive.cost.size(); ++i) first_look.push_back(*once(i, 1));
  ASSERT_EQ(std::min_element(first_look.begin(), first_look.end()) - first_look.begin(), 0)
      << "the simulation should fool a choice that times each candidate once";

  StatusOr<Choice> choice = ChooseFastest(gpu.cost.size(), gpu.Turns());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->best, 2u);
  EXPECT_EQ(choice->ran, (std::vector<size_t>{0, 1, 2, 3}));
  ASSERT_EQ(choice->median_ms.size(), 4u);
  // The medians are the warm costs.
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(choice->median_ms[j], gpu.cost[j], 1e-4) << j;
  EXPECT_TRUE(choice->dropped.empty());
}

TEST(ChooseFastest, RotatesTheOrderSoEachCandidateTakesEachPlace) {
  HeatingGpu gpu{{1.0f, 2.0f, 3.0f}};
  ChoiceSchedule schedule;
  schedule.warm_ms = 0;  // one warm-up pass only
  schedule.min_rounds = 2;
  schedule.timed_runs = 3;
  StatusOr<Choice> choice = ChooseFastest(gpu.cost.size(), gpu.Turns(), schedule);
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  // Warm-up: 0 1 2 once each; then max(3, 2) = 3 rounds of 3 runs a turn.
  const std::vector<size_t> expected = {0, 1, 2, 0, 1, 2, 1, 2, 0, 2, 0, 1};
  EXPECT_EQ(gpu.order, expected);
  EXPECT_EQ(gpu.runs, (std::vector<int>{1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3}));
}

TEST(ChooseFastest, WarmsUpForTheScheduledTimeAtMostSoManyPasses) {
  HeatingGpu gpu{{10.0f, 10.0f}};
  ChoiceSchedule schedule;
  schedule.warm_ms = 95;  // 20 ms a pass at the warm clock, 19.4 the first
  schedule.min_rounds = 1;
  StatusOr<Choice> choice = ChooseFastest(gpu.cost.size(), gpu.Turns(), schedule);
  ASSERT_TRUE(choice.ok());
  const size_t warm_turns = static_cast<size_t>(std::count(gpu.runs.begin(), gpu.runs.end(), 1));
  EXPECT_EQ(warm_turns, 10u);  // five passes: 4 would be under 95 ms
  HeatingGpu fast{{0.001f}};
  schedule.max_warm_passes = 7;
  ASSERT_TRUE(ChooseFastest(1, fast.Turns(), schedule).ok());
  EXPECT_EQ(std::count(fast.runs.begin(), fast.runs.end(), 1), 7);
}

TEST(ChooseFastest, DropsACandidateThatFailsItsFirstRun) {
  HeatingGpu gpu{{1.0f, 0.5f, 2.0f}};
  TurnFunction inner = gpu.Turns();
  TurnFunction turns = [&](size_t i, int n) -> StatusOr<float> {
    if (i == 1) return InternalError("candidate 1 needs more workspace");
    return inner(i, n);
  };
  StatusOr<Choice> choice = ChooseFastest(3, turns);
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->best, 0u);
  EXPECT_EQ(choice->ran, (std::vector<size_t>{0, 2}));
  ASSERT_EQ(choice->dropped.size(), 1u);
  EXPECT_EQ(choice->dropped[0].message(), "candidate 1 needs more workspace");
}

TEST(ChooseFastest, FailsWithTheReasonWhenNoneRuns) {
  TurnFunction turns = [](size_t i, int) -> StatusOr<float> {
    return InternalError("no kernel for candidate " + std::to_string(i));
  };
  StatusOr<Choice> choice = ChooseFastest(2, turns);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), StatusCode::kInternal);
  EXPECT_NE(choice.status().message().find("none of the 2 candidates ran"), std::string::npos);
  EXPECT_NE(choice.status().message().find("no kernel for candidate 0"), std::string::npos);
  EXPECT_FALSE(ChooseFastest(0, turns).ok());
}

TEST(ChooseFastest, AnErrorAfterTheWarmUpEndsTheChoice) {
  int calls = 0;
  TurnFunction turns = [&](size_t, int) -> StatusOr<float> {
    if (++calls == 5) return InternalError("an illegal address");
    return 1.0f;
  };
  ChoiceSchedule schedule;
  schedule.warm_ms = 0;
  StatusOr<Choice> choice = ChooseFastest(2, turns, schedule);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().message(), "an illegal address");
}

}  // namespace
}  // namespace ksearch::internal
