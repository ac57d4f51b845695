// A search strategy of your own, on the public API only: a beam search that
// keeps, each round, the best kernel of every idea category (diversity first)
// where the built-in ParallelBranchSearch keeps the k fastest.
//   example_custom_strategy [PROBLEM] [--compile-only]     (default: softmax)
// Ideas come from the offline catalog, branches from parameter mutation: no
// language model needed (MakeLlmIdeaGenerator/MakeLlmBrancher plug one in).
#include <ksearch/ksearch.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace {

class CategoryBeamSearch final : public ksearch::Searcher {
 public:
  explicit CategoryBeamSearch(int rounds) : rounds_(rounds) {}
  std::string name() const override { return "category-beam"; }

  ksearch::StatusOr<ksearch::SearchSummary> Run(ksearch::SearchContext& context) override {
    if (!context.problem || !context.evaluator || !context.ideas || !context.brancher) {
      return ksearch::InvalidArgumentError("needs a problem, an evaluator, ideas and a brancher");
    }
    ksearch::SearchSummary summary{name()};
    ksearch::SearchHistory& history = summary.history;
    Judge(context, {context.problem->start.ToCandidate("start", "start")}, &summary);
    summary.start = history.entries.front();
    std::vector<std::string> beam = {"start"};  // round 0: the starting kernel
    for (int round = 1; round <= rounds_; ++round) {
      if (context.cancel && context.cancel->load()) break;
      for (auto* o : context.observers) o->OnRoundStart(round, beam);
      std::vector<ksearch::Candidate> batch;
      for (size_t s = 0; s < beam.size(); ++s) {
        const ksearch::HistoryEntry* parent = history.FindCandidate(beam[s]);
        ksearch::IdeaRequest ask{context.problem, parent, &history, round, 2};
        ask.seed = round * 100 + s;
        auto ideas = context.ideas->Propose(ask);
        if (!ideas.ok()) return ideas.status();
        for (size_t j = 0; j < ideas->ideas.size(); ++j) {
          ksearch::Idea idea = ideas->ideas[j];
          idea.id = "r" + std::to_string(round) + "." + std::to_string(s) + "." + std::to_string(j);
          idea.parent_id = beam[s];
          idea.round = round;
          history.ideas.push_back(idea);
          ++summary.ideas;
          ksearch::BranchRequest branch{context.problem, parent, &history.ideas.back(), &history,
                                        2};
          auto made = context.brancher->Branch(branch);
          if (!made.ok()) return made.status();
          for (size_t m = 0; m < made->candidates.size(); ++m) {
            ksearch::Candidate c = made->candidates[m];
            if (c.source.empty()) continue;  // a branch that produced nothing
            c.id = idea.id + ".b" + std::to_string(m);
            c.provenance = {beam[s], idea.id, round, context.brancher->name()};
            batch.push_back(std::move(c));
          }
        }
      }
      if (batch.empty()) break;         // nothing left to try
      Judge(context, batch, &summary);  // one Evaluate call: compiled in parallel
      beam = SelectBeam(history);
      summary.rounds = round;
      for (auto* o : context.observers) o->OnRoundEnd(round);
    }
    return summary;  // termination: kCompleted (the default)
  }

 private:
  // "Better": timed and faster; untimed (compile-only) kernels by registers.
  static bool Better(const ksearch::Evaluation& a, const ksearch::Evaluation& b) {
    if (a.timing && b.timing) return a.timing->median_ms < b.timing->median_ms;
    if (a.timing || b.timing) return a.timing.has_value();
    auto regs = [](const ksearch::Evaluation& e) {
      return e.resources.empty() ? 1 << 20 : e.resources[0].registers;
    };
    return regs(a) < regs(b);
  }

  void Judge(ksearch::SearchContext& context, const std::vector<ksearch::Candidate>& batch,
             ksearch::SearchSummary* summary) {
    auto results = context.evaluator->Evaluate(batch, context.cancel);
    for (size_t i = 0; i < batch.size(); ++i) {
      const ksearch::Evaluation& e = results[i];
      summary->history.entries.push_back({batch[i], e});
      ++summary->candidates;
      ++summary->by_status[std::string(ksearch::ToString(e.status))];
      for (auto* o : context.observers) o->OnCandidateEvaluated(batch[i], e);
      if (!e.ok()) continue;
      ++summary->correct;
      if (!summary->best || Better(e, summary->best->evaluation)) {
        summary->best = summary->history.entries.back();
        for (auto* o : context.observers) o->OnNewBest(batch[i], e);
      }
    }
  }

  // The selection rule: the best correct kernel of each idea category.
  static std::vector<std::string> SelectBeam(const ksearch::SearchHistory& history) {
    std::map<std::string, const ksearch::HistoryEntry*> best_of;
    for (const ksearch::HistoryEntry& e : history.entries) {
      if (!e.evaluation.ok()) continue;
      const ksearch::Idea* idea = history.FindIdea(e.candidate.provenance.idea_id);
      std::string category(idea ? ksearch::ToString(idea->category) : "start");
      auto& slot = best_of[category];
      if (!slot || Better(e.evaluation, slot->evaluation)) slot = &e;
    }
    std::vector<std::string> beam;
    for (const auto& [category, entry] : best_of) beam.push_back(entry->candidate.id);
    return beam;
  }

  int rounds_;
};

}  // namespace

int Fail(const ksearch::Status& status, int code) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return code;
}

int main(int argc, char** argv) {
  const char* name = "softmax";
  bool compile_only = !ksearch::CudaDriverAvailable();  // without a GPU: judge up to compilation
  for (int i = 1; i < argc; ++i) {
    bool flag = !std::strcmp(argv[i], "--compile-only");
    compile_only |= flag;
    if (!flag) name = argv[i];
  }
  auto problem = ksearch::LoadProblem(name);
  if (!problem.ok()) return Fail(problem.status(), 2);
  ksearch::EvaluatorOptions eval_options;
  eval_options.compile_only = compile_only;
  if (compile_only) eval_options.arch = "sm_90";
  auto evaluator = ksearch::CreateLocalEvaluator(*problem, eval_options);
  if (!evaluator.ok()) return Fail(evaluator.status(), 3);

  auto ideas = ksearch::MakeCatalogIdeaGenerator();
  auto brancher = ksearch::MakeParameterMutationBrancher();
  ksearch::SearchContext context{&*problem, evaluator->get(), ideas.get(), brancher.get()};
  CategoryBeamSearch search(/*rounds=*/3);
  auto summary = search.Run(context);
  if (!summary.ok()) return Fail(summary.status(), 4);
  std::printf("%s", summary->FullReport().c_str());
  for (const auto& idea : summary->history.ideas) {
    std::printf("  %s: %s\n", idea.id.c_str(), idea.text.c_str());
  }
  return summary->best ? 0 : 1;
}
