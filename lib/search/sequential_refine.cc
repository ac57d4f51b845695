// SequentialRefineSearch: the traditional revise loop, one candidate at a
// time, kept as the baseline the method is compared with at equal budget. It
// runs on the caller's thread; a watchdog turns SIGINT and the wall-time
// budget into the cancel flag that the blocking calls watch.
#include <algorithm>
#include <map>

#include "ksearch/strategies.h"
#include "search/search_util.h"

namespace ksearch {
namespace {

using internal::Clock;

constexpr int kMaxEmptySteps = 3;

class SequentialRefineSearch final : public Searcher {
 public:
  SequentialRefineSearch(SearchOptions options, SequentialRefineOptions refine)
      : options_(std::move(options)), refine_(refine) {}

  std::string name() const override { return "refine"; }
  StatusOr<SearchSummary> Run(SearchContext& context) override;

 private:
  SearchOptions options_;
  SequentialRefineOptions refine_;
};

StatusOr<SearchSummary> SequentialRefineSearch::Run(SearchContext& context) {
  if (!context.problem || !context.evaluator) {
    return InvalidArgumentError(
        "SequentialRefineSearch needs a problem and an evaluator in the context");
  }
  if (!context.brancher) {
    return InvalidArgumentError("SequentialRefineSearch needs a Brancher in the context");
  }
  const Problem& problem = *context.problem;
  const SearchBudget& budget = options_.budget;
  auto start = Clock::now();
  std::atomic<bool> stop_flag{false};
  internal::Watchdog watchdog(context.cancel, budget.max_wall_seconds, start, &stop_flag);
  internal::Observers observers(context.observers);
  SearchSummary summary;
  summary.strategy = name();
  SearchHistory& history = summary.history;
  std::optional<TerminationReason> stop;

  // Judges one candidate (or copies the verdict on identical content) and
  // records it. Returns the entry's index in the history.
  std::map<std::string, size_t> judged_hashes;  // content hash → history index
  auto judge = [&](Candidate candidate) -> size_t {
    std::string hash = candidate.ContentHash();
    Evaluation evaluation;
    if (auto same = judged_hashes.find(hash); same != judged_hashes.end()) {
      const HistoryEntry& original = history.entries[same->second];
      evaluation = original.evaluation;
      evaluation.message =
          "same kernel as " + original.candidate.id + ", not judged again: " + evaluation.message;
    } else {
      auto t0 = Clock::now();
      std::vector<Evaluation> results =
          context.evaluator->Evaluate(std::span<const Candidate>(&candidate, 1), &stop_flag);
      summary.gpu_seconds += internal::SecondsSince(t0);
      if (!results.empty()) evaluation = std::move(results.front());
      if (Status health = context.evaluator->health(); !health.ok() && !stop) {
        summary.error = health.WithContext("the evaluator");
        stop = TerminationReason::kFailed;
      }
    }
    evaluation.candidate_id = candidate.id;
    history.entries.push_back(HistoryEntry{std::move(candidate), std::move(evaluation)});
    const HistoryEntry& entry = history.entries.back();
    bool new_best = internal::CountResult(&summary, entry);
    if (entry.evaluation.status != EvalStatus::kCancelled) {
      judged_hashes.emplace(hash, history.entries.size() - 1);
      if (observers.Evaluated(entry.candidate, entry.evaluation)) {
        stop = TerminationReason::kStoppedByObserver;
      }
      if (new_best && observers.NewBest(entry.candidate, entry.evaluation)) {
        stop = TerminationReason::kStoppedByObserver;
      }
    }
    return history.entries.size() - 1;
  };
  auto find = [&](const std::string& id) -> size_t {
    for (size_t i = 0; i < history.entries.size(); ++i) {
      if (history.entries[i].candidate.id == id) return i;
    }
    return 0;
  };

  if (observers.RoundStart(0, {"start"})) stop = TerminationReason::kStoppedByObserver;
  if (!stop) {
    judge(problem.start.ToCandidate("start", "start"));
    summary.start = history.entries.front();
    summary.rounds = 1;
    if (observers.RoundEnd(0)) stop = TerminationReason::kStoppedByObserver;
  }
  size_t last = 0;
  int empty_steps = 0;
  const std::vector<IdeaCategory> categories =
      options_.categories.empty()
          ? std::vector<IdeaCategory>(kAllIdeaCategories.begin(), kAllIdeaCategories.end())
          : options_.categories;
  for (int step = 1; !stop; ++step) {
    if (auto why = watchdog.reason()) {
      stop = why;
      break;
    }
    if (budget.max_rounds > 0 && step >= budget.max_rounds) {
      stop = TerminationReason::kBudgetRounds;
      break;
    }
    if (auto reached = internal::BudgetReached(budget, summary, internal::SecondsSince(start))) {
      stop = reached;
      break;
    }
    size_t parent = summary.best ? find(summary.best->candidate.id) : 0;
    const HistoryEntry* failed = nullptr;
    const HistoryEntry& previous = history.entries[last];
    bool previous_was_repair =
        previous.candidate.provenance.generator.find("(repair)") != std::string::npos;
    if (last != 0 && internal::NeedsRepair(previous.evaluation.status) && !previous_was_repair) {
      failed = &previous;
    }
    std::string label = "s" + std::to_string(step);
    if (observers.RoundStart(step, {history.entries[parent].candidate.id})) {
      stop = TerminationReason::kStoppedByObserver;
      break;
    }
    Idea idea;
    idea.category = categories[static_cast<size_t>(step - 1) % categories.size()];
    if (failed) {
      const Idea* original = history.FindIdea(failed->candidate.provenance.idea_id);
      if (original) idea.category = original->category;
      idea.text = "Fix kernel " + failed->candidate.id +
                  ", which failed: " + internal::FailureReason(failed->evaluation) +
                  (original ? ". It was meant to implement: " + original->text : std::string());
      idea.generator = "refine";
    } else if (refine_.use_idea_generator && context.ideas) {
      IdeaRequest request;
      request.problem = &problem;
      request.parent = &history.entries[parent];
      request.history = &history;
      request.round = step;
      request.count = 1;
      request.categories = {idea.category};
      request.seed = internal::MixSeed(options_.seed, static_cast<uint64_t>(step));
      request.label = label;
      request.cancel = &stop_flag;
      StatusOr<IdeaResult> result = context.ideas->Propose(request);
      if (!result.ok()) {
        if (result.status().code() == StatusCode::kCancelled && stop_flag.load()) {
          stop = watchdog.reason().value_or(TerminationReason::kInterrupted);
        } else {
          summary.error = result.status().WithContext("idea " + label);
          stop = TerminationReason::kFailed;
        }
        break;
      }
      summary.input_tokens += result->input_tokens;
      summary.output_tokens += result->output_tokens;
      summary.cost_usd += result->cost_usd;
      if (!result->notes.empty()) summary.notes.push_back(label + " idea: " + result->notes);
      if (!result->ideas.empty()) {
        idea = std::move(result->ideas.front());
        if (idea.generator.empty()) idea.generator = context.ideas->name();
      }
    }
    if (idea.text.empty()) {
      idea.text =
          "Make this kernel faster, guided by its evaluation (time, roofline fraction, "
          "registers, shared memory) and by the outcomes of the earlier attempts. "
          "Suggested focus this step: " +
          std::string(ToString(idea.category)) + ".";
      idea.generator = "refine";
    }
    idea.id = label + ".idea";
    idea.parent_id = history.entries[parent].candidate.id;
    idea.round = step;
    ++summary.ideas;
    if (observers.IdeaProposed(idea)) stop = TerminationReason::kStoppedByObserver;

    BranchRequest request;
    request.problem = &problem;
    request.parent = &history.entries[parent];
    request.idea = &idea;
    request.history = &history;
    request.count = 1;
    request.failed = failed;
    request.seed = internal::MixSeed(options_.seed, static_cast<uint64_t>(step), 1);
    request.label = label;
    request.cancel = &stop_flag;
    if (failed) ++summary.repairs;
    StatusOr<BranchResult> result = context.brancher->Branch(request);
    if (!result.ok()) {
      if (result.status().code() == StatusCode::kCancelled && stop_flag.load()) {
        stop = watchdog.reason().value_or(TerminationReason::kInterrupted);
      } else {
        summary.error = result.status().WithContext("branch " + label);
        stop = TerminationReason::kFailed;
      }
      break;
    }
    summary.input_tokens += result->input_tokens;
    summary.output_tokens += result->output_tokens;
    summary.cost_usd += result->cost_usd;
    std::vector<std::string> notes;
    if (!result->notes.empty()) {
      summary.notes.push_back(label + ": " + result->notes);
      notes.push_back(result->notes);
    }
    std::string parent_id = history.entries[parent].candidate.id;
    std::string failed_id = failed ? failed->candidate.id : "";
    std::vector<const HistoryEntry*> judged;
    if (!result->candidates.empty() && !result->candidates.front().source.empty()) {
      Candidate c = std::move(result->candidates.front());
      c.id = label;
      c.provenance.parent_id = failed ? failed_id : parent_id;
      c.provenance.idea_id = idea.id;
      c.provenance.round = step;
      c.provenance.generator = context.brancher->name() + (failed ? " (repair)" : "");
      last = judge(std::move(c));
      judged.push_back(&history.entries[last]);
      empty_steps = 0;
    } else if (++empty_steps >= kMaxEmptySteps) {
      summary.notes.push_back("no candidate in " + std::to_string(empty_steps) +
                              " steps: stopping");
      stop = TerminationReason::kCompleted;
    }
    internal::SetIdeaOutcome(&idea, &history.entries[find(parent_id)], judged, 1, notes);
    history.ideas.push_back(std::move(idea));
    summary.rounds = step + 1;
    if (observers.RoundEnd(step)) stop = TerminationReason::kStoppedByObserver;
  }
  if (!stop) stop = TerminationReason::kCompleted;
  if (auto why = watchdog.reason(); why && *stop != TerminationReason::kFailed) stop = why;
  summary.termination = *stop;
  summary.wall_seconds = internal::SecondsSince(start);
  return summary;
}

}  // namespace

std::unique_ptr<Searcher> MakeSequentialRefineSearch(const SearchOptions& options,
                                                     const SequentialRefineOptions& refine) {
  return std::make_unique<SequentialRefineSearch>(options, refine);
}

}  // namespace ksearch
