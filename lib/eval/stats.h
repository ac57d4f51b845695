// Order statistics for timings: medians with a distribution-free confidence
// interval (binomial ranks), percentiles, and per-pair ratios.
#ifndef KSEARCH_EVAL_STATS_H_
#define KSEARCH_EVAL_STATS_H_

#include <vector>

#include "ksearch/evaluation.h"

namespace ksearch::internal {

// Median, min, p10, p90 and the 95% confidence interval of the median of
// `samples_ms` (which need not be sorted). Empty input gives zeros.
TimingStats Summarize(std::vector<double> samples_ms);

// True when the 95% CI of the median is within ±fraction of the median.
bool MedianIsPrecise(const TimingStats& stats, double fraction);

// Speedup of A over B from interleaved pairs: ratio_i = b_i / a_i (> 1 when A
// is faster); returns the median ratio with its 95% CI.
Speedup PairedSpeedup(const std::vector<double>& a_ms, const std::vector<double>& b_ms);

// The probability that the i-th timed run (1-based) has its outputs checked:
// 1 for the first `all` runs, then max(floor, all / i) (docs/evaluation.md,
// "Timing"). A kernel that shortcuts more than half of n runs (what moving
// the median takes) meets a check on each with probability at least all / n,
// so it escapes them all with probability at most exp(-all / 2).
double TimingCheckProbability(double floor, int all, size_t i);

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_STATS_H_
