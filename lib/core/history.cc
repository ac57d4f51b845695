#include <cstdio>

#include "ksearch/generator.h"
#include "ksearch/searcher.h"

namespace ksearch {

const HistoryEntry* SearchHistory::FindCandidate(const std::string& id) const {
  for (const HistoryEntry& e : entries) {
    if (e.candidate.id == id) return &e;
  }
  return nullptr;
}

const Idea* SearchHistory::FindIdea(const std::string& id) const {
  for (const Idea& i : ideas) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

std::string_view ToString(TerminationReason reason) {
  switch (reason) {
    case TerminationReason::kCompleted: return "completed";
    case TerminationReason::kBudgetRounds: return "round budget reached";
    case TerminationReason::kBudgetCandidates: return "candidate budget reached";
    case TerminationReason::kBudgetTokens: return "token budget reached";
    case TerminationReason::kBudgetCost: return "cost budget reached";
    case TerminationReason::kBudgetWallTime: return "wall-time budget reached";
    case TerminationReason::kBudgetGpuTime: return "GPU-time budget reached";
    case TerminationReason::kTargetReached: return "target speedup reached";
    case TerminationReason::kStoppedByObserver: return "stopped by an observer";
    case TerminationReason::kInterrupted: return "interrupted";
    case TerminationReason::kFailed: return "failed";
  }
  return "unknown";
}

std::string SearchSummary::BriefReport() const {
  char text[512];
  // A compile-only evaluator passes kernels it never ran (kCompiled): they
  // are counted as compiled, never as correct.
  auto count = [&](const char* status) {
    auto it = by_status.find(status);
    return static_cast<long long>(it == by_status.end() ? 0 : it->second);
  };
  const long long compiled = count("compiled");
  std::string best_text = compiled > 0 ? "no kernel judged correct" : "no correct kernel";
  if (best && best->evaluation.timing) {
    std::snprintf(text, sizeof(text), "best %s %.4f ms", best->candidate.id.c_str(),
                  best->evaluation.timing->median_ms);
    best_text = text;
    if (best->evaluation.speedup) {
      std::snprintf(text, sizeof(text), " (%.3fx vs %s)", best->evaluation.speedup->ratio,
                    best->evaluation.speedup->baseline.c_str());
      best_text += text;
    }
  } else if (best && best->evaluation.status == EvalStatus::kCompiled) {
    best_text += "; best compiled " + best->candidate.id + " (fewest registers; never run)";
  } else if (best) {
    best_text = "best " + best->candidate.id + " (untimed)";
  }
  std::string counts = std::to_string(candidates) + " candidates, " +
                       std::to_string(count("ok")) + " correct";
  if (compiled > 0) counts += ", " + std::to_string(compiled) + " compiled (compile-only: not run)";
  std::snprintf(text, sizeof(text), "%s: %s after %d rounds; %s; %s; %.1f s", strategy.c_str(),
                std::string(ToString(termination)).c_str(), rounds, counts.c_str(),
                best_text.c_str(), wall_seconds);
  return text;
}

std::string SearchSummary::FullReport() const {
  std::string out = BriefReport() + "\n";
  if (termination == TerminationReason::kFailed) out += "error: " + error.ToString() + "\n";
  if (!by_status.empty()) {
    out += "statuses:";
    for (const auto& [status, count] : by_status) out += " " + status + "=" + std::to_string(count);
    out += "\n";
  }
  char text[256];
  std::snprintf(text, sizeof(text), "ideas %lld; tokens in %lld, out %lld; cost $%.4f; evaluator %.1f s\n",
                static_cast<long long>(ideas), static_cast<long long>(input_tokens),
                static_cast<long long>(output_tokens), cost_usd, gpu_seconds);
  out += text;
  if (repairs > 0) out += "repair attempts: " + std::to_string(repairs) + "\n";
  if (!notes.empty()) {
    // The first notes say what kind of trouble the run had; all of them are in
    // the JSON summary and the store.
    constexpr size_t kShown = 20;
    out += "notes (" + std::to_string(notes.size()) + "):\n";
    for (size_t i = 0; i < notes.size() && i < kShown; ++i) out += "  " + notes[i] + "\n";
    if (notes.size() > kShown) {
      out += "  ... " + std::to_string(notes.size() - kShown) + " more\n";
    }
  }
  for (size_t b = 0; b < best_per_bucket.size(); ++b) {
    const std::optional<HistoryEntry>& entry = best_per_bucket[b];
    if (!entry) {
      out += "bucket " + std::to_string(b) + ": no kernel correct at all of its cases\n";
      continue;
    }
    out += "bucket " + std::to_string(b) + ": " + entry->candidate.id + " — " + entry->evaluation.message + "\n";
  }
  if (start) out += "starting kernel:\n" + start->evaluation.Report();
  if (best) {
    out += best->evaluation.status == EvalStatus::kCompiled ? "best compiled kernel (never run):\n"
                                                            : "best kernel:\n";
    out += best->evaluation.Report();
  }
  return out;
}

}  // namespace ksearch
