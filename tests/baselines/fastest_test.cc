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

// The default schedule, its rests not slept (the simulated GPUs here keep
// time themselves).
ChoiceSchedule Simulated() {
  ChoiceSchedule schedule;
  schedule.rest = [](double) {};
  return schedule;
}

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

  StatusOr<Choice> choice = ChooseFastest(gpu.cost.size(), gpu.Turns(), Simulated());
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
  ChoiceSchedule schedule = Simulated();
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
  ChoiceSchedule schedule = Simulated();
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
  StatusOr<Choice> choice = ChooseFastest(3, turns, Simulated());
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
  ChoiceSchedule schedule = Simulated();
  schedule.warm_ms = 0;
  StatusOr<Choice> choice = ChooseFastest(2, turns, schedule);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().message(), "an illegal address");
}

// A GPU that slows under sustained load and recovers as it rests: its heat
// is the ms of load not yet rested off (at most 50), and a run of candidate
// i costs `cost[i]` times 1 + slowdown[i] × heat / 50. Candidates do not
// slow alike (cuBLASLt's algorithms on the H200 did not).
struct ThrottlingGpu {
  std::vector<float> cost, slowdown;
  double heat_ms = 0;
  std::vector<double> rests;

  TurnFunction Turns() {
    return [this](size_t i, int n) -> StatusOr<float> {
      float total = 0;
      for (int r = 0; r < n; ++r) {
        const float ms = cost[i] * static_cast<float>(1.0 + slowdown[i] * heat_ms / 50.0);
        heat_ms = std::min(heat_ms + ms, 50.0);
        total += ms;
      }
      return total / static_cast<float>(n);
    };
  }
  ChoiceSchedule Schedule() {
    ChoiceSchedule schedule;
    schedule.rest = [this](double ms) {
      rests.push_back(ms);
      heat_ms = std::max(0.0, heat_ms - ms);
    };
    return schedule;
  }
};

TEST(ChooseFastest, RestsTheGpuSoThatItTimesAsTheJudgeDoes) {
  // Rested, candidate 0 is 5% faster than candidate 1; under sustained load
  // it is 5% slower.
  ThrottlingGpu gpu{{1.0f, 1.05f}, {0.10f, 0.0f}};
  ChoiceSchedule tireless = gpu.Schedule();
  tireless.rest_ratio = 0;
  StatusOr<Choice> fooled = ChooseFastest(2, gpu.Turns(), tireless);
  ASSERT_TRUE(fooled.ok()) << fooled.status().ToString();
  ASSERT_EQ(fooled->best, 1u) << "the simulation should fool a choice that never rests";
  EXPECT_TRUE(gpu.rests.empty());

  gpu.heat_ms = 0;
  StatusOr<Choice> choice = ChooseFastest(2, gpu.Turns(), gpu.Schedule());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->best, 0u);
  EXPECT_NEAR(choice->median_ms[0], 1.0f, 0.01f);  // the rested cost
  // The first warm-up turn (one run of candidate 0 on a cool GPU) rested
  // as long as it ran.
  ASSERT_FALSE(gpu.rests.empty());
  EXPECT_DOUBLE_EQ(gpu.rests.front(), 1.0);
}

TEST(ChooseFastest, RestsInProportionToTheRestRatio) {
  ThrottlingGpu gpu{{2.0f}, {0.0f}};
  ChoiceSchedule schedule = gpu.Schedule();
  schedule.rest_ratio = 0.5f;
  schedule.warm_ms = 0;
  schedule.min_rounds = 1;
  schedule.timed_runs = 3;
  ASSERT_TRUE(ChooseFastest(1, gpu.Turns(), schedule).ok());
  // The warm-up turn (one run of 2 ms), then one round's turn of three.
  EXPECT_EQ(gpu.rests, (std::vector<double>{1.0, 3.0}));
}

// EventTurns against a driver that records what is queued: a simulated GPU
// clock that each run advances, events stamped with it. The turn's protocol
// (what is timed, when the host waits) is what decides which costs land
// inside the measured interval.
struct FakeGpu {
  double now_ms = 0;
  std::map<CUevent, double> stamps;
  std::vector<std::string> log;
  CUresult record_result = CUDA_SUCCESS;
  uintptr_t next_handle = 16;
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
CUresult FakeEventCreate(CUevent* event, unsigned) {
  *event = reinterpret_cast<CUevent>(fake->next_handle++);
  return CUDA_SUCCESS;
}
CUresult FakeEventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult FakeMemAlloc(CUdeviceptr* p, size_t) {
  *p = static_cast<CUdeviceptr>(fake->next_handle++ << 20);
  return CUDA_SUCCESS;
}
CUresult FakeMemFree(CUdeviceptr) { return CUDA_SUCCESS; }
CUresult FakeMemset(CUdeviceptr, unsigned, size_t, CUstream) {
  fake->log.push_back("flush");
  fake->now_ms += 0.04;
  return CUDA_SUCCESS;
}

class EventTurnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = &gpu_;
    api_.cuEventRecord = FakeRecord;
    api_.cuEventSynchronize = FakeSynchronize;
    api_.cuEventElapsedTime = FakeElapsed;
    api_.cuEventCreate = FakeEventCreate;
    api_.cuEventDestroy = FakeEventDestroy;
    api_.cuMemAlloc = FakeMemAlloc;
    api_.cuMemFree = FakeMemFree;
    api_.cuMemsetD32Async = FakeMemset;
  }
  void TearDown() override { fake = nullptr; }
  // A run of candidate i costs 1 + i ms, and `switch_ms` more when the run
  // before was another candidate's (what cuBLASLt seems to pay on the H200
  // when it changes algorithms; the judge, running one, never pays it).
  TurnFunction Turns(const DeviceBuffer* flush, double switch_ms = 0) {
    return EventTurns(api_, nullptr, reinterpret_cast<CUevent>(uintptr_t{1}),
                      reinterpret_cast<CUevent>(uintptr_t{2}), flush,
                      [this, switch_ms](size_t i, CUstream) {
                        gpu_.log.push_back("run " + std::to_string(i));
                        if (last_ != i) gpu_.now_ms += switch_ms;
                        last_ = i;
                        gpu_.now_ms += 1.0 + static_cast<double>(i);
                        return Status::Ok();
                      });
  }
  FakeGpu gpu_;
  DriverApi api_;
  size_t last_ = ~size_t{0};
};

TEST_F(EventTurnsTest, EachRunIsTimedAloneAfterTheFlushAndWaitedFor) {
  auto flush = DeviceBuffer::Allocate(api_, 1 << 20);
  ASSERT_TRUE(flush.ok());
  StatusOr<float> ms = Turns(&*flush)(2, 3);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  EXPECT_FLOAT_EQ(*ms, 3.0f);  // a run's mean, without the flushes
  const std::vector<std::string> timed = {"flush", "record", "run 2", "record", "wait"};
  std::vector<std::string> expected = {"run 2"};  // the untimed lead-in
  for (int r = 0; r < 3; ++r) expected.insert(expected.end(), timed.begin(), timed.end());
  EXPECT_EQ(gpu_.log, expected);
}

TEST_F(EventTurnsTest, WithoutAFlushTheRunsFollowEachOther) {
  StatusOr<float> ms = Turns(nullptr)(1, 2);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  EXPECT_FLOAT_EQ(*ms, 2.0f);
  EXPECT_EQ(gpu_.log, (std::vector<std::string>{"run 1", "record", "run 1", "record", "wait",
                                                "record", "run 1", "record", "wait"}));
}

TEST_F(EventTurnsTest, TheCostOfSwitchingCandidatesStaysOutOfTheTimes) {
  TurnFunction turns = Turns(nullptr, /*switch_ms=*/0.5);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 2; ++i) {
      StatusOr<float> ms = turns(i, 2);
      ASSERT_TRUE(ms.ok()) << ms.status().ToString();
      EXPECT_FLOAT_EQ(*ms, 1.0f + static_cast<float>(i)) << "candidate " << i;
    }
  }
}

TEST_F(EventTurnsTest, ARunThatFailsEndsTheTurnWithItsError) {
  TurnFunction turns =
      EventTurns(api_, nullptr, reinterpret_cast<CUevent>(uintptr_t{1}),
                 reinterpret_cast<CUevent>(uintptr_t{2}), nullptr,
                 [](size_t, CUstream) { return InternalError("no kernel image"); });
  StatusOr<float> ms = turns(0, 2);
  ASSERT_FALSE(ms.ok());
  EXPECT_EQ(ms.status().message(), "no kernel image");
}

TEST_F(EventTurnsTest, ADriverErrorNamesTheCall) {
  gpu_.record_result = CUDA_ERROR_INVALID_HANDLE;
  StatusOr<float> ms = Turns(nullptr)(0, 1);
  ASSERT_FALSE(ms.ok());
  EXPECT_NE(ms.status().message().find("cuEventRecord"), std::string::npos)
      << ms.status().ToString();
}

}  // namespace
}  // namespace ksearch::internal
