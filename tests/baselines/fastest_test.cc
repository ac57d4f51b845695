// How a library baseline chooses among its library's candidates
// (baselines/fastest.h), on a simulated GPU whose clock falls as it heats:
// the choice must find the candidate that is fastest at the clock the judge
// times at, not the one that happened to run while the GPU was cool.
#include "baselines/fastest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
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

// EventTurns against a driver that records what is queued: a simulated GPU
// clock that each run advances, events stamped with it. The turn's protocol
// (what is timed, when the host waits) is what decides which candidate's
// costs land inside the measured interval.
struct FakeGpu {
  double now_ms = 0;
  std::map<CUevent, double> stamps;
  std::vector<std::string> log;
  CUresult record_result = CUDA_SUCCESS;
};
FakeGpu* fake = nullptr;

CUresult FakeRecord(CUevent event, CUstream) {
  if (fake->record_result != CUDA_SUCCESS) return fake->record_result;
  fake->stamps[event] = fake->now_ms;
  fake->log.push_back("record");
  return CUDA_SUCCESS;
}
CUresult FakeSynchronize(CUevent) {
  fake->log.push_back("wait");
  return CUDA_SUCCESS;
}
CUresult FakeElapsed(float* ms, CUevent start, CUevent end) {
  *ms = static_cast<float>(fake->stamps.at(end) - fake->stamps.at(start));
  return CUDA_SUCCESS;
}

class EventTurnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = &gpu_;
    api_.cuEventRecord = FakeRecord;
    api_.cuEventSynchronize = FakeSynchronize;
    api_.cuEventElapsedTime = FakeElapsed;
  }
  void TearDown() override { fake = nullptr; }
  // A run of candidate i costs 1 + i ms.
  TurnFunction Turns() {
    return EventTurns(api_, nullptr, reinterpret_cast<CUevent>(uintptr_t{1}),
                      reinterpret_cast<CUevent>(uintptr_t{2}), [this](size_t i, CUstream) {
                        gpu_.log.push_back("run " + std::to_string(i));
                        gpu_.now_ms += 1.0 + static_cast<double>(i);
                        return Status::Ok();
                      });
  }
  FakeGpu gpu_;
  DriverApi api_;
};

TEST_F(EventTurnsTest, TimesTheRunsOfATurnBetweenTwoEventsAndWaitsOnce) {
  StatusOr<float> ms = Turns()(2, 3);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  EXPECT_FLOAT_EQ(*ms, 3.0f);  // a run's mean
  EXPECT_EQ(gpu_.log,
            (std::vector<std::string>{"record", "run 2", "run 2", "run 2", "record", "wait"}));
}

TEST_F(EventTurnsTest, ARunThatFailsEndsTheTurnWithItsError) {
  TurnFunction turns = EventTurns(api_, nullptr, reinterpret_cast<CUevent>(uintptr_t{1}),
                                  reinterpret_cast<CUevent>(uintptr_t{2}), [](size_t, CUstream) {
                                    return InternalError("no kernel image");
                                  });
  StatusOr<float> ms = turns(0, 2);
  ASSERT_FALSE(ms.ok());
  EXPECT_EQ(ms.status().message(), "no kernel image");
}

TEST_F(EventTurnsTest, ADriverErrorNamesTheCall) {
  gpu_.record_result = CUDA_ERROR_INVALID_HANDLE;
  StatusOr<float> ms = Turns()(0, 1);
  ASSERT_FALSE(ms.ok());
  EXPECT_NE(ms.status().message().find("cuEventRecord"), std::string::npos)
      << ms.status().ToString();
  EXPECT_TRUE(gpu_.log.empty());
}

}  // namespace
}  // namespace ksearch::internal
