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

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_STATS_H_
