// What `ksearch run` and `ksearch resume` print at the end: the summary as
// text or as the JSON document of docs/schemas/run.json, where the time went,
// and what the provider billed.
#ifndef KSEARCH_TOOLS_RUN_OUTPUT_H_
#define KSEARCH_TOOLS_RUN_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/problem.h"
#include "ksearch/searcher.h"

namespace ksearch::cli {

// Where a search's time went. compile, check and timing are summed over the
// judged candidates (compiles run in parallel, so their sum can pass the
// wall time); model is the wall time during which at least one model
// request of this session was in flight; evaluator is the wall time the
// search spent waiting for evaluations.
struct TimeSplit {
  double compile_seconds = 0.0;
  double check_seconds = 0.0;
  double timing_seconds = 0.0;
  std::optional<double> model_seconds;  // unknown without a database
  double candidates_per_minute = 0.0;
};

// The split of `s`'s time; the model's share from this session's exchanges,
// only when `model_known` (they are read from the store).
TimeSplit SplitTime(const SearchSummary& s, const std::vector<LlmExchange>& session_exchanges,
                    bool model_known);
// "rate: …; time: wall …" and a newline.
std::string TimeSplitText(const SearchSummary& s, const TimeSplit& t);

// The summary and the search tree as one JSON document on stdout.
void PrintSummaryJson(const SearchSummary& s, const Problem& problem, int64_t run_id,
                      const TimeSplit& t);
// The summary as text on stdout: the report, where the time went, whether
// compiles ran unconfined, what `clients` billed and the best plan.
void PrintSummaryText(const SearchSummary& s, const TimeSplit& t, bool unsandboxed_compile,
                      const std::vector<const LlmClient*>& clients);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_RUN_OUTPUT_H_
