// CategoryBeamSearch: a search strategy of your own, on the public API only.
// Where the built-in ParallelBranchSearch keeps the k fastest kernels as the
// next seeds, this beam keeps the fastest kernel of every idea category
// (diversity first). Everything a strategy must honour comes from SearchRun:
// the budgets and the user's cancel flag, an observer's kStop, duplicates,
// ranking and idea outcomes; what is left here is the strategy's own choice.
// (tests/search/custom_strategy_test.cc runs it on a fake evaluator.)
#ifndef KSEARCH_EXAMPLES_CUSTOM_STRATEGY_CATEGORY_BEAM_H_
#define KSEARCH_EXAMPLES_CUSTOM_STRATEGY_CATEGORY_BEAM_H_

#include <ksearch/ksearch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace example {

class CategoryBeamSearch final : public ksearch::Searcher {
 public:
  // `ideas_per_seed` ideas for each kernel of the beam, `branches` candidates
  // for each idea, every round, until `budget` says stop.
  CategoryBeamSearch(ksearch::SearchBudget budget, int ideas_per_seed = 2, int branches = 2)
      : budget_(budget), ideas_per_seed_(ideas_per_seed), branches_(branches) {}

  std::string name() const override { return "category-beam"; }

  ksearch::StatusOr<ksearch::SearchSummary> Run(ksearch::SearchContext& context) override {
    if (!context.problem || !context.evaluator || !context.ideas || !context.brancher) {
      return ksearch::InvalidArgumentError(
          "category-beam needs a problem, an evaluator, an IdeaGenerator and a Brancher");
    }
    // The run starts the clock and watches the cancel flag and wall time.
    ksearch::SearchRun run(context, budget_, name());
    ksearch::SearchSummary& summary = run.summary();
    const ksearch::SearchHistory& history = run.history();

    // Round 0: the problem's starting kernel.
    if (run.BeginRound(0, {"start"})) {
      auto judged = run.Evaluate({context.problem->start.ToCandidate("start", "start")});
      if (!judged.empty()) summary.start = *judged.front();
      run.EndRound(0);
    }
    for (int round = 1; run.MayStartRound(round); ++round) {
      std::vector<std::string> beam = SelectBeam(history);
      if (!run.BeginRound(round, beam)) break;
      // The ideas of this round, with the candidates each produced.
      std::vector<ksearch::Idea> ideas;
      std::vector<std::vector<std::string>> notes;
      std::vector<ksearch::Candidate> batch;
      std::vector<size_t> idea_of;  // batch index → index into `ideas`
      for (size_t s = 0; s < beam.size() && !run.stopped(); ++s) {
        const ksearch::HistoryEntry* parent = history.FindCandidate(beam[s]);
        ksearch::IdeaRequest ask;
        ask.problem = context.problem;
        ask.parent = parent;
        ask.history = &history;
        ask.round = round;
        ask.count = ideas_per_seed_;
        ask.seed = ksearch::SearchRun::MixSeed(seed_, static_cast<uint64_t>(round), s);
        ask.label = "r" + std::to_string(round) + ".s" + std::to_string(s);
        ask.cancel = run.generation_cancel();  // a stop cuts the call short
        ask.spending = run.spending();         // a request is sent only if it fits the budgets
        auto proposed = context.ideas->Propose(ask);
        if (!proposed.ok()) {
          run.GeneratorFailed(proposed.status(), "ideas " + ask.label);
          break;
        }
        run.AddUsage(*proposed);  // the token and money budgets count it
        for (size_t j = 0; j < proposed->ideas.size() && !run.stopped(); ++j) {
          ksearch::Idea idea = std::move(proposed->ideas[j]);
          idea.id = ask.label + ".i" + std::to_string(j);
          idea.parent_id = beam[s];
          idea.round = round;
          if (idea.generator.empty()) idea.generator = context.ideas->name();
          run.ProposeIdea(idea);  // observers see it; one may say kStop
          ksearch::BranchRequest branch;
          branch.problem = context.problem;
          branch.parent = parent;
          branch.idea = &idea;
          branch.history = &history;
          branch.count = branches_;
          branch.seed = ksearch::SearchRun::MixSeed(seed_, static_cast<uint64_t>(round), s, j + 1);
          branch.label = idea.id;
          branch.cancel = run.generation_cancel();
          branch.spending = run.spending();
          auto made = context.brancher->Branch(branch);
          if (!made.ok()) {
            run.GeneratorFailed(made.status(), "branches " + idea.id);
            break;
          }
          run.AddUsage(*made);
          notes.emplace_back();
          if (!made->notes.empty()) {
            summary.notes.push_back(idea.id + ": " + made->notes);
            notes.back().push_back(made->notes);
          }
          for (size_t m = 0; m < made->candidates.size(); ++m) {
            ksearch::Candidate c = std::move(made->candidates[m]);
            if (c.source.empty()) continue;  // a branch that produced nothing
            c.id = idea.id + ".b" + std::to_string(m);
            c.provenance = {beam[s], idea.id, round, context.brancher->name()};
            batch.push_back(std::move(c));
            idea_of.push_back(ideas.size());
          }
          ideas.push_back(std::move(idea));
        }
      }
      // One Evaluate call for the round: compiled in parallel. The run drops
      // what the candidate budget does not allow, copies the verdict of a
      // kernel it has seen, and stops on a broken evaluator.
      std::vector<const ksearch::HistoryEntry*> judged = run.Evaluate(std::move(batch));
      // Each idea's outcome in words, which later idea prompts read.
      std::vector<std::vector<const ksearch::HistoryEntry*>> of_idea(ideas.size());
      for (size_t i = 0; i < judged.size(); ++i) of_idea[idea_of[i]].push_back(judged[i]);
      for (size_t i = 0; i < ideas.size(); ++i) {
        const ksearch::HistoryEntry* parent = history.FindCandidate(ideas[i].parent_id);
        ksearch::SearchRun::SetIdeaOutcome(&ideas[i], parent, of_idea[i], branches_, notes[i]);
        summary.history.ideas.push_back(std::move(ideas[i]));
      }
      run.EndRound(round);
      if (judged.empty() && !run.stopped()) {
        summary.notes.push_back("round " + std::to_string(round) + " produced nothing new");
        run.Stop(ksearch::TerminationReason::kCompleted);
      }
    }
    return run.Finish();
  }

  // The selection rule: the fastest correct kernel of each idea category
  // (the starting kernel stands for its own category); the starting kernel,
  // even broken, while nothing is correct.
  static std::vector<std::string> SelectBeam(const ksearch::SearchHistory& history) {
    std::map<std::string, const ksearch::HistoryEntry*> best_of;
    for (const ksearch::HistoryEntry& e : history.entries) {
      if (!e.evaluation.ok()) continue;
      const ksearch::Idea* idea = history.FindIdea(e.candidate.provenance.idea_id);
      std::string category(idea ? ksearch::ToString(idea->category) : "start");
      const ksearch::HistoryEntry*& slot = best_of[category];
      if (!slot || ksearch::SearchRun::Faster(e, *slot)) slot = &e;
    }
    std::vector<std::string> beam;
    for (const auto& [category, entry] : best_of) beam.push_back(entry->candidate.id);
    if (beam.empty()) beam.push_back("start");
    return beam;
  }

 private:
  ksearch::SearchBudget budget_;
  int ideas_per_seed_;
  int branches_;
  uint64_t seed_ = 1;
};

}  // namespace example

#endif  // KSEARCH_EXAMPLES_CUSTOM_STRATEGY_CATEGORY_BEAM_H_
