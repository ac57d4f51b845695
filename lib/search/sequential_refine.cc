// SequentialRefineSearch: the traditional revise loop, one candidate at a
// time, kept as the baseline the method is compared with at equal budget. It
// runs on the caller's thread; its SearchRun's watchdog turns SIGINT and the
// wall-time budget into the cancel flags that the blocking calls watch.
#include "ksearch/strategies.h"

namespace ksearch {
namespace {

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
  SearchRun run(context, options_.budget, name());
  SearchSummary& summary = run.summary();
  const SearchHistory& history = run.history();

  // Judges one candidate (SearchRun copies the verdict on identical content)
  // and returns its entry's index in the history; nullopt when the candidate
  // budget left it unjudged.
  auto judge = [&](Candidate candidate) -> std::optional<size_t> {
    if (run.Evaluate({std::move(candidate)}).empty()) return std::nullopt;
    return history.entries.size() - 1;
  };
  auto find = [&](const std::string& id) -> size_t {
    for (size_t i = 0; i < history.entries.size(); ++i) {
      if (history.entries[i].candidate.id == id) return i;
    }
    return 0;
  };

  if (run.BeginRound(0, {"start"}) && judge(problem.start.ToCandidate("start", "start"))) {
    summary.start = history.entries.front();
    run.EndRound(0);
  }
  size_t last = 0;
  int empty_steps = 0;
  const std::vector<IdeaCategory> categories =
      options_.categories.empty()
          ? std::vector<IdeaCategory>(kAllIdeaCategories.begin(), kAllIdeaCategories.end())
          : options_.categories;
  for (int step = 1; run.MayStartRound(step); ++step) {
    size_t parent = summary.best ? find(summary.best->candidate.id) : 0;
    const HistoryEntry* failed = nullptr;
    const HistoryEntry& previous = history.entries[last];
    bool previous_was_repair =
        previous.candidate.provenance.generator.find("(repair)") != std::string::npos;
    if (last != 0 && SearchRun::NeedsRepair(previous.evaluation.status) && !previous_was_repair) {
      failed = &previous;
    }
    std::string label = "s" + std::to_string(step);
    if (!run.BeginRound(step, {history.entries[parent].candidate.id})) break;
    Idea idea;
    idea.category = categories[static_cast<size_t>(step - 1) % categories.size()];
    if (failed) {
      const Idea* original = history.FindIdea(failed->candidate.provenance.idea_id);
      if (original) idea.category = original->category;
      idea.text = "Fix kernel " + failed->candidate.id +
                  ", which failed: " + SearchRun::FailureReason(failed->evaluation) +
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
      request.seed = SearchRun::MixSeed(options_.seed, static_cast<uint64_t>(step));
      request.label = label;
      request.cancel = run.generation_cancel();
      request.spending = run.spending();
      StatusOr<IdeaResult> result = context.ideas->Propose(request);
      if (!result.ok()) {
        run.GeneratorFailed(result.status(), "idea " + label);
        break;
      }
      run.AddUsage(*result);
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
    run.ProposeIdea(idea);
    // The idea's reply may have used up the token or money budget.
    if (run.CheckLimits()) {
      SearchRun::SetIdeaOutcome(&idea, &history.entries[parent], {}, 1,
                                {"not implemented: the run stopped (" +
                                 std::string(ToString(*run.stopped())) + ")"});
      summary.history.ideas.push_back(std::move(idea));
      run.EndRound(step);
      break;
    }

    BranchRequest request;
    request.problem = &problem;
    request.parent = &history.entries[parent];
    request.idea = &idea;
    request.history = &history;
    request.count = 1;
    request.failed = failed;
    request.seed = SearchRun::MixSeed(options_.seed, static_cast<uint64_t>(step), 1);
    request.label = label;
    request.cancel = run.generation_cancel();
    request.spending = run.spending();
    if (failed) ++summary.repairs;
    StatusOr<BranchResult> result = context.brancher->Branch(request);
    if (!result.ok()) {
      run.GeneratorFailed(result.status(), "branch " + label);
      break;
    }
    run.AddUsage(*result);
    // A step whose implementation request never reached the model is an
    // outage: the run fails (and can be resumed) rather than running out of
    // steps.
    if (!result->unreachable.ok()) {
      run.Fail(result->unreachable.WithContext("step " + label + ": no request reached the model"));
    }
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
      if (std::optional<size_t> index = judge(std::move(c))) {
        last = *index;
        judged.push_back(&history.entries[last]);
      }
      empty_steps = 0;
    } else if (++empty_steps >= kMaxEmptySteps) {
      summary.notes.push_back("no candidate in " + std::to_string(empty_steps) +
                              " steps: stopping");
      run.Stop(TerminationReason::kCompleted);
    }
    SearchRun::SetIdeaOutcome(&idea, &history.entries[find(parent_id)], judged, 1, notes);
    summary.history.ideas.push_back(std::move(idea));
    run.EndRound(step);
  }
  return run.Finish();
}

}  // namespace

std::unique_ptr<Searcher> MakeSequentialRefineSearch(const SearchOptions& options,
                                                     const SequentialRefineOptions& refine) {
  return std::make_unique<SequentialRefineSearch>(options, refine);
}

}  // namespace ksearch
