// The figures of a candidate over shape cases (docs/evaluation.md, "Shape
// sets"): the weighted objective over a set of timed cases, and the view of
// an evaluation restricted to one dispatch bucket, which is what a search
// ranks a bucket's kernels by and what the kernel cache stores for it.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_CORE_SHAPE_CASES_H_
#define KSEARCH_CORE_SHAPE_CASES_H_

#include <cstddef>
#include <vector>

#include "ksearch/evaluation.h"
#include "ksearch/problem.h"

namespace ksearch::internal {

// Sets e->timing, e->baseline_timing, e->speedup, e->floor_ms and
// e->roofline_fraction from the timed cases of `cases` whose index is in
// `which`: each figure is Σ weight × figure / Σ weight (the baseline: its
// median only); the speedup is Σ w·t·r / Σ w·t with each case's paired
// ratio r (and its interval likewise). Leaves them unset when no listed case
// was timed, and the speedup unset when one of them has none.
void CombineTimedCases(const std::vector<CaseResult>& cases, const std::vector<size_t>& which,
                       Evaluation* e);

// The bucket of shape case `index` of `problem` (0 without dispatch).
size_t BucketOfCase(const Problem& problem, size_t index);

// `e` restricted to dispatch bucket `bucket` of `problem`: kOk when every
// case of the bucket is kOk, with the figures of CombineTimedCases over the
// bucket's cases, else the first failing case's status; `cases` holds the
// bucket's cases only, and the message names the bucket. `e` must come from
// judging `problem` (e.cases in the problem's order); otherwise the result
// is kInvalidPlan saying so.
Evaluation BucketEvaluation(const Problem& problem, const Evaluation& e, size_t bucket);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_SHAPE_CASES_H_
