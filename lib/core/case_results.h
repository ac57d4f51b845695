// Per-case results of an Evaluation (CaseResult) as JSON, both ways, and as
// lines of Evaluation::Report. One codec for every reader and writer of
// evaluations (the CLI's --json, the worker protocol, the store), so that a
// case reported by a worker reads the same everywhere.
//
// Layout: "cases": [{"name", "dims": {DIM: VALUE, …}, "weight", "timed",
// "status", "message", "median_ms", "min_ms", "p10_ms", "p90_ms",
// "ci_low_ms", "ci_high_ms", "repetitions", "baseline_median_ms",
// "baseline", "speedup", "speedup_ci_low", "speedup_ci_high", "floor_ms",
// "max_l2_rel_error", "allowed_l2_rel_error"}, …]; written only when there are cases, so the
// JSON of a problem with one shape is unchanged. Non-finite numbers are
// written as null and read back as 0.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_CORE_CASE_RESULTS_H_
#define KSEARCH_CORE_CASE_RESULTS_H_

#include <boost/json/value.hpp>
#include <string>
#include <vector>

#include "core/json_util.h"
#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

boost::json::value CaseResultsToJson(const std::vector<CaseResult>& cases);
// `node` is the "cases" array. Errors: kInvalidArgument naming the member
// ("cases[1].status: unknown status 'fine'").
StatusOr<std::vector<CaseResult>> CaseResultsFromNode(const JsonNode& node);
// Reads "cases" of an evaluation object into *out when present.
Status ReadCaseResults(const JsonNode& evaluation, std::vector<CaseResult>* out);
// One line per case: name, dims, status, time, speedup (for Report()).
std::string CaseResultsReport(const std::vector<CaseResult>& cases);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_CASE_RESULTS_H_
