#include "run_output.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "json_out.h"
#include "ksearch/evaluator.h"
#include "ksearch/run_report.h"
#include "run_llm.h"

namespace ksearch::cli {

TimeSplit SplitTime(const SearchSummary& s, const std::vector<LlmExchange>& session_exchanges,
                    bool model_known) {
  TimeSplit t;
  for (const HistoryEntry& e : s.history.entries) {
    t.compile_seconds += e.evaluation.compile_ms / 1000.0;
    t.check_seconds += e.evaluation.check_ms / 1000.0;
    t.timing_seconds += e.evaluation.timing_ms / 1000.0;
  }
  if (s.wall_seconds > 0) t.candidates_per_minute = s.candidates / (s.wall_seconds / 60.0);
  if (model_known) {
    std::vector<std::pair<double, double>> spans;
    for (const LlmExchange& x : session_exchanges) {
      double latency = x.response.ok() ? x.response->latency_ms : 0.0;
      spans.emplace_back(static_cast<double>(x.started_unix_ms),
                         static_cast<double>(x.started_unix_ms) + latency);
    }
    std::sort(spans.begin(), spans.end());
    double covered_ms = 0.0, end = -1.0;
    for (const auto& [from, to] : spans) {
      if (to <= end) continue;
      covered_ms += to - std::max(from, end);
      end = to;
    }
    t.model_seconds = covered_ms / 1000.0;
  }
  return t;
}

std::string TimeSplitText(const SearchSummary& s, const TimeSplit& t) {
  char text[512];
  std::snprintf(text, sizeof(text),
                "rate: %.1f candidates/min; time: wall %.1f s, evaluator %.1f s; summed over "
                "candidates: compile %.1f s (CPU), check %.1f s, timing %.1f s (GPU)",
                t.candidates_per_minute, s.wall_seconds, s.gpu_seconds, t.compile_seconds,
                t.check_seconds, t.timing_seconds);
  std::string out = text;
  if (t.model_seconds) {
    std::snprintf(text, sizeof(text), "; waiting for the model %.1f s", *t.model_seconds);
    out += text;
  }
  return out + "\n";
}

namespace {

int64_t StatusCount(const SearchSummary& s, const char* status) {
  auto it = s.by_status.find(status);
  return it == s.by_status.end() ? 0 : it->second;
}

}  // namespace

void PrintSummaryJson(const SearchSummary& s, const Problem& problem, int64_t run_id, const TimeSplit& t) {
  boost::json::object o;
  o["run"] = run_id;
  o["strategy"] = s.strategy;
  o["termination"] = ToString(s.termination);
  if (!s.error.ok()) o["error"] = s.error.ToString();
  o["rounds"] = s.rounds;
  o["ideas"] = s.ideas;
  o["candidates"] = s.candidates;
  o["correct"] = StatusCount(s, "ok");
  o["compiled"] = StatusCount(s, "compiled");
  o["repairs"] = s.repairs;
  o["input_tokens"] = s.input_tokens;
  o["output_tokens"] = s.output_tokens;
  o["cost_usd"] = Number(s.cost_usd);
  o["wall_seconds"] = Number(s.wall_seconds);
  o["gpu_seconds"] = Number(s.gpu_seconds);
  o["candidates_per_minute"] = Number(t.candidates_per_minute);
  o["time"] = {{"wall_seconds", Number(s.wall_seconds)},
               {"evaluator_seconds", Number(s.gpu_seconds)},
               {"compile_seconds", Number(t.compile_seconds)},
               {"check_seconds", Number(t.check_seconds)},
               {"timing_seconds", Number(t.timing_seconds)},
               {"model_seconds", Number(t.model_seconds)}};
  boost::json::object by_status;
  for (const auto& [status, count] : s.by_status) by_status[status] = count;
  o["by_status"] = std::move(by_status);
  o["best_candidate_id"] = s.best ? boost::json::value(s.best->candidate.id) : nullptr;
  o["best"] = s.best ? Embedded(s.best->evaluation.ToJson()) : nullptr;
  o["best_plan"] = s.best ? Embedded(s.best->candidate.plan.ToJson()) : nullptr;
  o["best_source"] = s.best ? boost::json::value(s.best->candidate.source) : nullptr;
  // A problem with dispatch buckets: each bucket's best (its cases only),
  // null where none was correct; what the kernel cache's table holds.
  if (problem.dispatch.enabled()) {
    boost::json::array buckets;
    for (size_t b = 0; b < problem.dispatch.bucket_count(); ++b) {
      const std::optional<HistoryEntry>* entry = b < s.best_per_bucket.size() ? &s.best_per_bucket[b] : nullptr;
      boost::json::object bucket{{"bucket", problem.dispatch.BucketName(b)}};
      bucket["candidate_id"] = entry && *entry ? boost::json::value((*entry)->candidate.id) : nullptr;
      bucket["evaluation"] = entry && *entry ? Embedded((*entry)->evaluation.ToJson()) : nullptr;
      bucket["plan"] = entry && *entry ? Embedded((*entry)->candidate.plan.ToJson()) : nullptr;
      buckets.push_back(std::move(bucket));
    }
    o["best_per_bucket"] = std::move(buckets);
  }
  boost::json::array ideas, candidates;
  for (const Idea& i : s.history.ideas) {
    ideas.push_back({{"id", i.id},
                     {"parent", i.parent_id},
                     {"round", i.round},
                     {"category", ToString(i.category)},
                     {"text", i.text},
                     {"outcome", i.outcome}});
  }
  for (const HistoryEntry& e : s.history.entries) {
    boost::json::object c{{"id", e.candidate.id},
                          {"parent", e.candidate.provenance.parent_id},
                          {"idea", e.candidate.provenance.idea_id},
                          {"round", e.candidate.provenance.round},
                          {"status", ToString(e.evaluation.status)}};
    if (e.evaluation.timing) c["median_ms"] = Number(e.evaluation.timing->median_ms);
    candidates.push_back(std::move(c));
  }
  o["tree"] = {{"ideas", std::move(ideas)}, {"candidates", std::move(candidates)}};
  o["notes"] = boost::json::array(s.notes.begin(), s.notes.end());
  PrintJson(o);
}

namespace {

std::string BilledText(const LlmTotals& t) {
  char line[256];
  std::snprintf(line, sizeof line, "%lld requests (%lld failed), tokens in %lld, out %lld; cost $%.4f",
                static_cast<long long>(t.requests), static_cast<long long>(t.failures),
                static_cast<long long>(t.input_tokens), static_cast<long long>(t.output_tokens), t.cost_usd);
  return line;
}

}  // namespace

void PrintSummaryText(const SearchSummary& s, const TimeSplit& t, bool unsandboxed_compile,
                      const Billed& billed) {
  std::cout << s.FullReport() << TimeSplitText(s, t);
  if (std::string why; unsandboxed_compile && !CompileConfinementAvailable(&why)) {
    std::cout << "compiles: UNCONFINED (--unsandboxed-compile; " << why << ")\n";
  }
  if (billed.run) {
    // A resumed run: what this session bought, and the run in all.
    std::cout << "billed this session: " << BilledText(billed.session) << "\n";
    std::cout << "billed over the run (" << billed.sessions << " sessions): " << BilledText(*billed.run)
              << "\n";
  } else if (billed.session.requests > 0) {
    std::cout << "billed: " << BilledText(billed.session) << "\n";
  }
  if (s.best) std::cout << "best plan:\n" << IndentJson(s.best->candidate.plan.ToJson()) << "\n";
}

}  // namespace ksearch::cli
