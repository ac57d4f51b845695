#include "eval/stats.h"

#include <algorithm>
#include <cmath>

namespace ksearch::internal {
namespace {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  double position = q * static_cast<double>(sorted.size() - 1);
  size_t low = static_cast<size_t>(std::floor(position));
  size_t high = std::min(low + 1, sorted.size() - 1);
  double weight = position - static_cast<double>(low);
  return sorted[low] * (1.0 - weight) + sorted[high] * weight;
}

// Ranks bounding the median with ~95% confidence: n/2 ± 1.96·√n/2 (normal
// approximation of the binomial), clamped to the sample.
void MedianInterval(const std::vector<double>& sorted, double* low, double* high) {
  double n = static_cast<double>(sorted.size());
  double half_width = 1.96 * std::sqrt(n) / 2.0;
  long lo = static_cast<long>(std::floor(n / 2.0 - half_width)) - 1;
  long hi = static_cast<long>(std::ceil(n / 2.0 + half_width));
  lo = std::clamp(lo, 0L, static_cast<long>(sorted.size()) - 1);
  hi = std::clamp(hi, 0L, static_cast<long>(sorted.size()) - 1);
  *low = sorted[static_cast<size_t>(lo)];
  *high = sorted[static_cast<size_t>(hi)];
}

}  // namespace

TimingStats Summarize(std::vector<double> samples) {
  TimingStats stats;
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  stats.repetitions = static_cast<int>(samples.size());
  stats.median_ms = Percentile(samples, 0.5);
  stats.min_ms = samples.front();
  stats.p10_ms = Percentile(samples, 0.1);
  stats.p90_ms = Percentile(samples, 0.9);
  MedianInterval(samples, &stats.ci_low_ms, &stats.ci_high_ms);
  return stats;
}

bool MedianIsPrecise(const TimingStats& stats, double fraction) {
  if (stats.repetitions < 3 || stats.median_ms <= 0) return false;
  return stats.ci_high_ms - stats.median_ms <= fraction * stats.median_ms &&
         stats.median_ms - stats.ci_low_ms <= fraction * stats.median_ms;
}

double TimingCheckProbability(double floor, int all, size_t i) {
  if (i == 0) return 1.0;
  double p = std::max(floor, static_cast<double>(std::max(0, all)) / static_cast<double>(i));
  return std::clamp(p, 0.0, 1.0);
}

Speedup PairedSpeedup(const std::vector<double>& a_ms, const std::vector<double>& b_ms) {
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a_ms.size(), b_ms.size()); ++i) {
    if (a_ms[i] > 0) ratios.push_back(b_ms[i] / a_ms[i]);
  }
  Speedup s;
  TimingStats stats = Summarize(ratios);
  s.ratio = stats.median_ms;
  s.ci_low = stats.ci_low_ms;
  s.ci_high = stats.ci_high_ms;
  s.pairs = stats.repetitions;
  return s;
}

}  // namespace ksearch::internal
