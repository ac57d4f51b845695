#include "eval/stats.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ksearch::internal
