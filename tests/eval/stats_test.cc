#include "eval/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ksearch::internal {
namespace {

TEST(Stats, SummarizesMedianPercentilesAndInterval) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  TimingStats s = Summarize(samples);
  EXPECT_EQ(s.repetitions, 100);
  EXPECT_DOUBLE_EQ(s.median_ms, 50.5);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_NEAR(s.p10_ms, 10.9, 1e-9);
  EXPECT_NEAR(s.p90_ms, 90.1, 1e-9);
  EXPECT_LT(s.ci_low_ms, s.median_ms);
  EXPECT_GT(s.ci_high_ms, s.median_ms);
  EXPECT_GE(s.ci_low_ms, 38);
  EXPECT_LE(s.ci_high_ms, 62);
}

TEST(Stats, PrecisionNeedsATightInterval) {
  std::vector<double> tight(200, 1.0);
  for (int i = 0; i < 200; ++i) tight[static_cast<size_t>(i)] += (i % 7) * 1e-4;
  EXPECT_TRUE(MedianIsPrecise(Summarize(tight), 0.01));
  std::vector<double> loose;
  for (int i = 0; i < 10; ++i) loose.push_back(1.0 + i * 0.1);
  EXPECT_FALSE(MedianIsPrecise(Summarize(loose), 0.01));
  EXPECT_FALSE(MedianIsPrecise(Summarize({}), 0.01));
}

TEST(Stats, PairedSpeedupIsTheMedianOfPerPairRatios) {
  std::vector<double> a = {1.0, 1.0, 1.0, 2.0, 1.0};
  std::vector<double> b = {2.0, 2.0, 2.0, 2.0, 3.0};
  Speedup s = PairedSpeedup(a, b);
  EXPECT_DOUBLE_EQ(s.ratio, 2.0);
  EXPECT_EQ(s.pairs, 5);
  EXPECT_LE(s.ci_low, s.ratio);
  EXPECT_GE(s.ci_high, s.ratio);
}


// Every one of the first `all` timed runs is checked; later ones less often,
// never below the floor; and a kernel that shortcuts the later half of n
// runs meets a check with the probability the header promises.
TEST(Stats, TimedRunsAreAllCheckedAtFirstAndEnoughAfter) {
  for (size_t i = 1; i <= 24; ++i) EXPECT_EQ(TimingCheckProbability(0.125, 24, i), 1.0) << i;
  EXPECT_DOUBLE_EQ(TimingCheckProbability(0.125, 24, 48), 0.5);
  EXPECT_DOUBLE_EQ(TimingCheckProbability(0.125, 24, 500), 0.125);
  EXPECT_EQ(TimingCheckProbability(0.0, 0, 7), 0.0);
  for (size_t n : {size_t{10}, size_t{50}, size_t{100}, size_t{500}}) {
    double escape = 1.0;
    for (size_t i = n / 2 + 1; i <= n; ++i) escape *= 1.0 - TimingCheckProbability(0.125, 24, i);
    EXPECT_LE(escape, std::exp(-12.0)) << "n = " << n;
  }
}

}  // namespace
}  // namespace ksearch::internal
