// ParallelBranchSearch: the method. One thread (the caller of Run) owns all
// round state and runs every observer callback; generator calls run on a
// worker pool and evaluations on one evaluation thread, and both hand their
// results back through a mailbox that the owner drains. So nothing but the
// mailbox and the cancel flags is shared between threads, and generators only
// read the committed history, which changes between rounds only.
#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "core/thread_pool.h"
#include "ksearch/strategies.h"
#include "search/search_util.h"

namespace ksearch {
namespace {

using internal::Clock;

// A hash that is the same on every platform (std::hash is not), for seeds.
uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

struct RoundIdea {
  Idea idea;
  const HistoryEntry* parent = nullptr;
  int seed_index = 0;
  int index = 0;
  std::vector<const HistoryEntry*> entries;  // judged branches and repairs
  std::vector<std::string> notes;
  int64_t dropped = 0;  // branches not judged for the candidate budget
};

// Why a round's generator calls produced nothing: a whole round without a
// single request reaching the model is an outage, which fails the run (it
// can be resumed) rather than completing it for lack of work.
struct RoundReach {
  int calls_reached = 0;  // calls that got at least one reply (or needed none)
  Status unreachable;     // the first call's error that reached nothing
};

struct Pending {
  Candidate candidate;
  std::string hash;
  RoundIdea* idea = nullptr;  // null for the starting kernel
  bool is_repair = false;
  bool is_duplicate = false;
};

struct RoundState {
  int round = 0;
  std::vector<const HistoryEntry*> seeds;
  std::deque<RoundIdea> ideas;                            // deque: requests in flight point into it
  std::deque<HistoryEntry> entries;                       // judged this round
  std::map<std::string, std::vector<Pending>> in_flight;  // content hash → duplicates waiting
  int outstanding_calls = 0;
  int evaluations_in_flight = 0;
  int64_t produced = 0;  // branch candidates judged (not counting the start)
  RoundReach reach;
  // Notes arrive in completion order; they are sorted by label at the end of
  // the round so that the summary is the same on every run.
  std::vector<std::string> notes;
  int64_t dropped = 0;  // branches not judged for the candidate budget
};

// Judges candidates on its own thread in batches: whatever has arrived while
// the previous batch was being judged goes into the next Evaluate call, so
// compiles run in parallel inside the evaluator and the GPU stays busy while
// the model is still writing other branches.
class EvaluationLane {
 public:
  using Done = std::function<void(std::vector<Pending>, std::vector<Evaluation>, double)>;
  EvaluationLane(Evaluator& evaluator, int max_batch, const std::atomic<bool>* cancel,
                 internal::Mailbox& mailbox, Done done)
      : evaluator_(evaluator),
        max_batch_(std::max(1, max_batch)),
        cancel_(cancel),
        mailbox_(mailbox),
        done_(std::move(done)),
        thread_([this] { Loop(); }) {}
  ~EvaluationLane() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  EvaluationLane(const EvaluationLane&) = delete;
  EvaluationLane& operator=(const EvaluationLane&) = delete;

  // Adds candidates under one lock, so that they can share a batch.
  void Enqueue(std::vector<Pending> pending) {
    if (pending.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Pending& p : pending) queue_.push_back(std::move(p));
    }
    wake_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::vector<Pending> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        while (!queue_.empty() && static_cast<int>(batch.size()) < max_batch_) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      std::vector<Candidate> candidates;
      for (const Pending& p : batch) candidates.push_back(p.candidate);
      auto start = Clock::now();
      std::vector<Evaluation> results = evaluator_.Evaluate(candidates, cancel_);
      double seconds = internal::SecondsSince(start);
      results.resize(batch.size());  // an evaluator that broke its contract
      mailbox_.Post([this, batch = std::move(batch), results = std::move(results),
                     seconds]() mutable { done_(std::move(batch), std::move(results), seconds); });
    }
  }

  Evaluator& evaluator_;
  int max_batch_;
  const std::atomic<bool>* cancel_;
  internal::Mailbox& mailbox_;
  Done done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class BranchRun {
 public:
  BranchRun(SearchContext& context, const SearchOptions& options,
            const ParallelBranchOptions& branch)
      : context_(context),
        options_(options),
        branch_(branch),
        run_(context, options.budget, "branch", RunOptions(branch)) {}

  SearchSummary Run();

 private:
  // Returns the number of branch candidates the round produced.
  int64_t RunRound(int round);
  void Drain(RoundState& rs);
  std::vector<const HistoryEntry*> SelectSeeds() const;

  void SubmitPropose(RoundState& rs, int seed_index);
  void OnIdeas(RoundState& rs, int seed_index, StatusOr<IdeaResult> result);
  void SubmitBranch(RoundState& rs, RoundIdea& idea, const HistoryEntry* failed);
  void OnBranches(RoundState& rs, RoundIdea& idea, const HistoryEntry* failed,
                  StatusOr<BranchResult> result);
  void Submit(RoundState& rs, Pending pending);
  void OnEvaluated(std::vector<Pending> batch, std::vector<Evaluation> results, double seconds);
  void Record(RoundState& rs, Pending pending, Evaluation evaluation);
  void FinishRound(RoundState& rs);

  // Each reply's cost, as it arrives: the owner thread adds it and checks the
  // budgets at once. Runs on any thread (it only posts to the mailbox).
  UsageSink MakeUsageSink() {
    return [this](const GeneratorUsage& u) { mailbox_.Post([this, u] { run_.AddUsage(u); }); };
  }
  // Rewrites the duplicates of this round so that each names the earliest
  // candidate (by id) with its content, whatever order they arrived in.
  void CanonicalizeDuplicates(RoundState& rs);

  static SearchRun::Options RunOptions(const ParallelBranchOptions& branch) {
    SearchRun::Options options;
    options.skip_duplicates = branch.skip_duplicates;
    return options;
  }

  SearchContext& context_;
  const SearchOptions& options_;
  const ParallelBranchOptions& branch_;
  SearchRun run_;
  SearchSummary& summary_ = run_.summary();
  internal::Mailbox mailbox_;
  std::unique_ptr<internal::ThreadPool> pool_;  // model calls
  std::unique_ptr<EvaluationLane> lane_;
  RoundState* current_ = nullptr;
  std::vector<Pending> to_judge_;  // submitted, not yet handed to the lane
};

void BranchRun::Drain(RoundState& rs) {
  while (rs.outstanding_calls > 0 || rs.evaluations_in_flight > 0) {
    // Everything the last closures produced goes to the lane together.
    lane_->Enqueue(std::move(to_judge_));
    to_judge_.clear();
    mailbox_.RunFor(std::chrono::milliseconds(10));
    run_.CheckLimits();
  }
}

std::vector<const HistoryEntry*> BranchRun::SelectSeeds() const {
  const SearchHistory& history = summary_.history;
  std::map<std::string, IdeaCategory> category_of;
  for (const Idea& idea : history.ideas) category_of[idea.id] = idea.category;
  std::vector<const HistoryEntry*> correct;
  std::set<std::string> hashes;
  for (const HistoryEntry& e : history.entries) {
    if (!e.evaluation.ok()) continue;
    if (!hashes.insert(e.candidate.ContentHash()).second) continue;
    correct.push_back(&e);
  }
  if (correct.empty()) return {&history.entries.front()};  // the starting kernel, even broken
  std::sort(correct.begin(), correct.end(),
            [](const HistoryEntry* a, const HistoryEntry* b) { return SearchRun::Faster(*a, *b); });
  // Greedy: the fastest left, unless a kernel tied with it comes from an idea
  // category not yet among the seeds.
  auto category = [&](const HistoryEntry* e) -> int {
    auto it = category_of.find(e->candidate.provenance.idea_id);
    return it == category_of.end() ? -1 : static_cast<int>(it->second);
  };
  std::vector<const HistoryEntry*> seeds;
  std::set<int> used;
  while (static_cast<int>(seeds.size()) < std::max(1, options_.seeds) && !correct.empty()) {
    size_t pick = 0;
    for (size_t i = 0;
         i < correct.size() && SearchRun::Tied(*correct[0], *correct[i], branch_.tie_fraction);
         ++i) {
      if (!used.count(category(correct[i]))) {
        pick = i;
        break;
      }
    }
    used.insert(category(correct[pick]));
    seeds.push_back(correct[pick]);
    correct.erase(correct.begin() + static_cast<long>(pick));
  }
  return seeds;
}

// Counts a finished generator call for RoundReach.
void CountReach(RoundReach& reach, const Status& unreachable, const std::string& what) {
  if (unreachable.ok()) {
    ++reach.calls_reached;
  } else if (reach.unreachable.ok()) {
    reach.unreachable = unreachable.WithContext(what);
  }
}

void BranchRun::SubmitPropose(RoundState& rs, int seed_index) {
  // A stop for the token or money budget cancels nothing in flight but
  // starts nothing new either.
  if (run_.generation_cancel()->load() || run_.stopped()) return;
  static const std::vector<IdeaCategory> kSix(kAllIdeaCategories.begin(), kAllIdeaCategories.end());
  const std::vector<IdeaCategory>& all = options_.categories.empty() ? kSix : options_.categories;
  IdeaRequest request;
  request.problem = context_.problem;
  request.parent = rs.seeds[static_cast<size_t>(seed_index)];
  request.history = &summary_.history;
  request.round = rs.round;
  request.count = options_.ideas;
  for (int j = 0; j < options_.ideas; ++j) {
    int64_t slot = (int64_t{rs.round} * options_.seeds + seed_index) * options_.ideas + j;
    request.categories.push_back(all[static_cast<size_t>(slot % static_cast<int64_t>(all.size()))]);
  }
  request.seed = SearchRun::MixSeed(options_.seed, static_cast<uint64_t>(rs.round),
                                    static_cast<uint64_t>(seed_index));
  request.label = "r" + std::to_string(rs.round) + ".s" + std::to_string(seed_index);
  request.cancel = run_.generation_cancel();
  request.on_usage = MakeUsageSink();
  request.spending = run_.spending();
  ++rs.outstanding_calls;
  pool_->Post([this, &rs, seed_index, request] {
    StatusOr<IdeaResult> result = context_.ideas->Propose(request);
    mailbox_.Post([this, &rs, seed_index, result = std::move(result)]() mutable {
      --rs.outstanding_calls;
      OnIdeas(rs, seed_index, std::move(result));
    });
  });
}

void BranchRun::OnIdeas(RoundState& rs, int seed_index, StatusOr<IdeaResult> result) {
  std::string label = "r" + std::to_string(rs.round) + ".s" + std::to_string(seed_index);
  if (!result.ok()) {
    run_.GeneratorFailed(result.status(), "ideas " + label);
    return;
  }
  run_.AddUsage(*result);
  CountReach(rs.reach, result->unreachable, "ideas " + label);
  if (!result->notes.empty()) rs.notes.push_back(label + " ideas: " + result->notes);
  int count = std::min<int>(static_cast<int>(result->ideas.size()), options_.ideas);
  for (int j = 0; j < count; ++j) {
    RoundIdea& ri = rs.ideas.emplace_back();
    ri.idea = std::move(result->ideas[static_cast<size_t>(j)]);
    ri.idea.id = label + ".i" + std::to_string(j);
    ri.parent = rs.seeds[static_cast<size_t>(seed_index)];
    ri.idea.parent_id = ri.parent->candidate.id;
    ri.idea.round = rs.round;
    if (ri.idea.generator.empty()) ri.idea.generator = context_.ideas->name();
    ri.seed_index = seed_index;
    ri.index = j;
    run_.ProposeIdea(ri.idea);
    SubmitBranch(rs, ri, nullptr);
  }
}

void BranchRun::SubmitBranch(RoundState& rs, RoundIdea& idea, const HistoryEntry* failed) {
  if (run_.generation_cancel()->load()) return;
  if (run_.stopped()) {
    // The token or money budget: say why the idea has no branches.
    if (!failed) {
      idea.notes.push_back("not implemented: the run stopped (" +
                           std::string(ToString(*run_.stopped())) + ") before its branches were asked for");
    }
    return;
  }
  BranchRequest request;
  request.problem = context_.problem;
  request.parent = idea.parent;
  request.idea = &idea.idea;
  request.history = &summary_.history;
  request.count = failed ? 1 : options_.branches;
  request.failed = failed;
  request.seed = SearchRun::MixSeed(options_.seed, static_cast<uint64_t>(rs.round),
                                    static_cast<uint64_t>(idea.seed_index * 4096 + idea.index),
                                    failed ? 1 + Fnv1a(failed->candidate.id) : 0);
  request.label = failed ? failed->candidate.id + ".fix" : idea.idea.id;
  request.cancel = run_.generation_cancel();
  request.on_usage = MakeUsageSink();
  request.spending = run_.spending();
  if (failed) ++summary_.repairs;
  ++rs.outstanding_calls;
  pool_->Post([this, &rs, &idea, failed, request] {
    StatusOr<BranchResult> result = context_.brancher->Branch(request);
    mailbox_.Post([this, &rs, &idea, failed, result = std::move(result)]() mutable {
      --rs.outstanding_calls;
      OnBranches(rs, idea, failed, std::move(result));
    });
  });
}

void BranchRun::OnBranches(RoundState& rs, RoundIdea& idea, const HistoryEntry* failed,
                           StatusOr<BranchResult> result) {
  std::string label = failed ? failed->candidate.id + ".fix" : idea.idea.id;
  if (!result.ok()) {
    run_.GeneratorFailed(result.status(), (failed ? "repair " : "branches ") + label);
    return;
  }
  run_.AddUsage(*result);
  CountReach(rs.reach, result->unreachable, (failed ? "repair " : "branches ") + label);
  if (!result->notes.empty()) {
    rs.notes.push_back(label + ": " + result->notes);
    idea.notes.push_back(result->notes);
  }
  int limit = failed ? 1 : options_.branches;
  for (int m = 0; m < std::min<int>(limit, static_cast<int>(result->candidates.size())); ++m) {
    Candidate& c = result->candidates[static_cast<size_t>(m)];
    if (c.source.empty()) continue;
    c.id = failed ? label : idea.idea.id + ".b" + std::to_string(m);
    c.provenance.parent_id = failed ? failed->candidate.id : idea.parent->candidate.id;
    c.provenance.idea_id = idea.idea.id;
    c.provenance.round = rs.round;
    c.provenance.generator = context_.brancher->name() + (failed ? " (repair)" : "");
    Pending p;
    p.hash = c.ContentHash();
    p.candidate = std::move(c);
    p.idea = &idea;
    p.is_repair = failed != nullptr;
    Submit(rs, std::move(p));
  }
}

void BranchRun::Submit(RoundState& rs, Pending pending) {
  if (!run_.ReserveCandidate()) {
    ++rs.dropped;
    return;
  }
  if (branch_.skip_duplicates) {
    if (const HistoryEntry* original = run_.FindJudged(pending.hash)) {
      Evaluation copy = original->evaluation;
      copy.message =
          SearchRun::DuplicateMessage(original->candidate.id, SearchRun::RawMessage(copy.message));
      pending.is_duplicate = true;
      Record(rs, std::move(pending), std::move(copy));
      return;
    }
    if (auto it = rs.in_flight.find(pending.hash); it != rs.in_flight.end()) {
      pending.is_duplicate = true;
      it->second.push_back(std::move(pending));
      return;
    }
    rs.in_flight[pending.hash];
  }
  ++rs.evaluations_in_flight;
  to_judge_.push_back(std::move(pending));
}

void BranchRun::OnEvaluated(std::vector<Pending> batch, std::vector<Evaluation> results,
                            double seconds) {
  RoundState& rs = *current_;
  run_.AddGpuSeconds(seconds);
  run_.CheckEvaluator();
  for (size_t i = 0; i < batch.size(); ++i) {
    --rs.evaluations_in_flight;
    std::string hash = batch[i].hash;
    std::string id = batch[i].candidate.id;
    // A resumed run's evaluator may answer from a stored duplicate's record.
    results[i].message = SearchRun::RawMessage(results[i].message);
    Record(rs, std::move(batch[i]), std::move(results[i]));
    auto waiting = rs.in_flight.extract(hash);
    if (waiting.empty()) continue;
    const HistoryEntry& original = rs.entries.back();
    for (Pending& dup : waiting.mapped()) {
      Evaluation copy = original.evaluation;
      copy.message = SearchRun::DuplicateMessage(id, copy.message);
      Record(rs, std::move(dup), std::move(copy));
    }
  }
}

void BranchRun::Record(RoundState& rs, Pending pending, Evaluation evaluation) {
  evaluation.candidate_id = pending.candidate.id;
  HistoryEntry& entry =
      rs.entries.emplace_back(HistoryEntry{std::move(pending.candidate), std::move(evaluation)});
  if (pending.idea) {
    pending.idea->entries.push_back(&entry);
    ++rs.produced;
  }
  run_.Record(entry, pending.is_duplicate);
  if (entry.evaluation.status == EvalStatus::kCancelled) return;
  if (options_.repair && pending.idea && !pending.is_repair && !pending.is_duplicate &&
      SearchRun::NeedsRepair(entry.evaluation.status)) {
    SubmitBranch(rs, *pending.idea, &entry);
  }
}

void BranchRun::CanonicalizeDuplicates(RoundState& rs) {
  if (!branch_.skip_duplicates) return;
  std::map<std::string, std::vector<HistoryEntry*>> groups;
  for (HistoryEntry& e : rs.entries) groups[e.candidate.ContentHash()].push_back(&e);
  for (auto& [hash, group] : groups) {
    std::sort(group.begin(), group.end(), [](const HistoryEntry* a, const HistoryEntry* b) {
      return SearchRun::Earlier(a->candidate, b->candidate);
    });
    // A kernel judged before this round (an earlier round, or the starting
    // kernel) stays the original.
    const HistoryEntry* earlier = run_.FindJudged(hash);
    const bool from_earlier_round =
        earlier && std::none_of(group.begin(), group.end(), [&](const HistoryEntry* e) {
          return e->candidate.id == earlier->candidate.id;
        });
    if (group.size() < 2 && !from_earlier_round) continue;
    const std::string original =
        from_earlier_round ? earlier->candidate.id : group.front()->candidate.id;
    for (HistoryEntry* e : group) {
      std::string raw = SearchRun::RawMessage(e->evaluation.message);
      std::string canonical =
          e->candidate.id == original ? raw : SearchRun::DuplicateMessage(original, raw);
      if (canonical == e->evaluation.message) continue;
      e->evaluation.message = std::move(canonical);
      run_.Revised(*e);
    }
    if (!from_earlier_round && group.front()->evaluation.status != EvalStatus::kCancelled) {
      run_.SetJudged(hash, *group.front());
    }
  }
}

void BranchRun::FinishRound(RoundState& rs) {
  std::sort(rs.ideas.begin(), rs.ideas.end(), [](const RoundIdea& a, const RoundIdea& b) {
    return std::tie(a.seed_index, a.index) < std::tie(b.seed_index, b.index);
  });
  // Everything a later prompt reads is put in a canonical order first, so
  // that the prompts are a function of the run's state and not of the order
  // replies and evaluations arrived in (a resumed run then sends the same
  // requests, and the store answers them).
  CanonicalizeDuplicates(rs);
  for (RoundIdea& ri : rs.ideas) {
    std::sort(ri.entries.begin(), ri.entries.end(),
              [](const HistoryEntry* a, const HistoryEntry* b) {
                return SearchRun::Earlier(a->candidate, b->candidate);
              });
    std::sort(ri.notes.begin(), ri.notes.end(), SearchRun::NaturalLess);
  }
  // Outcomes first: parents point into the committed history, which the
  // appends below may move.
  for (RoundIdea& ri : rs.ideas) {
    SearchRun::SetIdeaOutcome(&ri.idea, ri.parent, ri.entries, options_.branches, ri.notes);
  }
  for (RoundIdea& ri : rs.ideas) summary_.history.ideas.push_back(std::move(ri.idea));
  std::vector<HistoryEntry*> entries;
  for (HistoryEntry& e : rs.entries) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](const HistoryEntry* a, const HistoryEntry* b) {
    return SearchRun::Earlier(a->candidate, b->candidate);
  });
  for (HistoryEntry* e : entries) summary_.history.entries.push_back(std::move(*e));
  std::sort(rs.notes.begin(), rs.notes.end(), SearchRun::NaturalLess);
  for (std::string& note : rs.notes) summary_.notes.push_back(std::move(note));
  if (rs.dropped > 0) {
    summary_.notes.push_back("candidate budget reached: " + std::to_string(rs.dropped) +
                             " branches of round " + std::to_string(rs.round) + " not judged");
  }
  run_.EndRound(rs.round);
}

int64_t BranchRun::RunRound(int round) {
  RoundState rs;
  rs.round = round;
  current_ = &rs;
  struct Reset {
    RoundState*& current;
    ~Reset() { current = nullptr; }
  } reset{current_};
  if (round == 0) {
    if (!run_.BeginRound(0, {"start"})) return 0;
    Pending start;
    start.candidate = context_.problem->start.ToCandidate("start", "start");
    start.hash = start.candidate.ContentHash();
    Submit(rs, std::move(start));
    Drain(rs);
    if (rs.entries.empty()) {  // the candidate budget is zero-sized or the run stopped
      FinishRound(rs);
      return 0;
    }
    // Committed at once so that round 0's generators see it in the history.
    summary_.start = rs.entries.front();
    summary_.history.entries.push_back(std::move(rs.entries.front()));
    rs.entries.pop_front();
    rs.seeds = {&summary_.history.entries.back()};
  } else {
    rs.seeds = SelectSeeds();
    std::vector<std::string> ids;
    for (const HistoryEntry* s : rs.seeds) ids.push_back(s->candidate.id);
    if (!run_.BeginRound(round, ids)) return 0;
  }
  for (int s = 0; s < static_cast<int>(rs.seeds.size()); ++s) SubmitPropose(rs, s);
  Drain(rs);
  if (rs.reach.calls_reached == 0 && !rs.reach.unreachable.ok()) {
    run_.Fail(rs.reach.unreachable.WithContext(
        "round " + std::to_string(round) + ": no request reached the model"));
  }
  FinishRound(rs);
  return rs.produced;
}

SearchSummary BranchRun::Run() {
  int threads = std::min(std::max(1, branch_.max_concurrent_calls),
                         std::max(1, options_.seeds * options_.ideas));
  pool_ = std::make_unique<internal::ThreadPool>(threads);
  lane_ = std::make_unique<EvaluationLane>(
      *context_.evaluator, branch_.max_evaluation_batch, run_.evaluation_cancel(), mailbox_,
      [this](std::vector<Pending> batch, std::vector<Evaluation> results, double seconds) {
        OnEvaluated(std::move(batch), std::move(results), seconds);
      });
  int empty_rounds = 0;
  for (int round = 0; run_.MayStartRound(round); ++round) {
    empty_rounds = RunRound(round) == 0 ? empty_rounds + 1 : 0;
    if (!run_.stopped() && empty_rounds >= std::max(1, branch_.max_empty_rounds)) {
      summary_.notes.push_back("no new candidate in " + std::to_string(empty_rounds) +
                               " rounds: nothing left to try");
      run_.Stop(TerminationReason::kCompleted);
    }
  }
  lane_.reset();
  pool_.reset();
  // A run that ran out of work without a single idea never searched: every
  // generator call came back empty (each reply failed: an unreachable or
  // misconfigured model). That is a failure, not completion.
  if (run_.stopped().value_or(TerminationReason::kCompleted) == TerminationReason::kCompleted &&
      summary_.ideas == 0 && summary_.rounds > 1) {
    std::string why = "no generator call produced an idea in " +
                      std::to_string(summary_.rounds - 1) + " rounds";
    for (const std::string& note : summary_.notes) {
      if (note.find("ideas: ") != std::string::npos) {
        why += "; first: " + note;
        break;
      }
    }
    run_.Fail(UnavailableError(why));
  }
  return run_.Finish();
}

class ParallelBranchSearch final : public Searcher {
 public:
  ParallelBranchSearch(SearchOptions options, ParallelBranchOptions branch)
      : options_(std::move(options)), branch_(branch) {}

  std::string name() const override { return "branch"; }

  StatusOr<SearchSummary> Run(SearchContext& context) override {
    if (!context.problem || !context.evaluator) {
      return InvalidArgumentError(
          "ParallelBranchSearch needs a problem and an evaluator in the context");
    }
    if (!context.ideas || !context.brancher) {
      return InvalidArgumentError(
          "ParallelBranchSearch needs an IdeaGenerator and a Brancher in the context (offline: "
          "MakeCatalogIdeaGenerator() and MakeParameterMutationBrancher())");
    }
    if (options_.seeds < 1 || options_.ideas < 1 || options_.branches < 1) {
      return InvalidArgumentError(
          "seeds, ideas and branches must be at least 1 (got " + std::to_string(options_.seeds) +
          ", " + std::to_string(options_.ideas) + ", " + std::to_string(options_.branches) + ")");
    }
    BranchRun run(context, options_, branch_);
    return run.Run();
  }

 private:
  SearchOptions options_;
  ParallelBranchOptions branch_;
};

}  // namespace

std::unique_ptr<Searcher> MakeParallelBranchSearch(const SearchOptions& options,
                                                   const ParallelBranchOptions& branch) {
  return std::make_unique<ParallelBranchSearch>(options, branch);
}

}  // namespace ksearch
