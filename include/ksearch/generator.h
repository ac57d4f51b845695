// IdeaGenerator and Brancher: the two extension points that create work for a
// search. An IdeaGenerator proposes optimization ideas for a parent kernel; a
// Brancher turns (parent, idea) into candidate implementations. Both come
// LLM-backed (prompted through an LlmClient) and offline (a catalog of
// parameter moves over a problem's templates).
//
// Contract for implementations:
// - Calls block until done and may run concurrently from several searcher
//   threads: implementations must be thread-safe.
// - A generator that produces nothing useful (a malformed model reply, say)
//   returns an empty vector with the reason in `notes`; a Status error means
//   the generator itself cannot work (no credentials, budget exhausted) and
//   stops the search.
// - `cancel`, when it becomes true, asks the call to return early with
//   kCancelled.
//
// Ownership: the request's references are borrowed for the call only.
#ifndef KSEARCH_GENERATOR_H_
#define KSEARCH_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/idea.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

// What one reply of a generator's model cost.
struct GeneratorUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
};
// Receives each reply's cost as the reply arrives, so that a searcher checks
// its token and money budgets after every reply rather than after a whole
// call. Runs on whatever thread received the reply (an LLM client's I/O
// thread, say): keep it short and thread-safe.
using UsageSink = std::function<void(const GeneratorUsage&)>;

// A judged candidate, as the search remembers it.
struct HistoryEntry {
  Candidate candidate;
  Evaluation evaluation;
};

// What a search has done so far: every idea with its outcome and every judged
// candidate, in the order they finished.
struct SearchHistory {
  std::vector<Idea> ideas;
  std::vector<HistoryEntry> entries;

  const HistoryEntry* FindCandidate(const std::string& id) const;
  const Idea* FindIdea(const std::string& id) const;
};

struct IdeaRequest {
  const Problem* problem = nullptr;
  const HistoryEntry* parent = nullptr;   // the seed the ideas apply to
  const SearchHistory* history = nullptr;
  int round = 0;
  int count = 4;                          // ideas wanted
  // The category asked for each idea, `count` entries in order (idea j in
  // categories[j]). A generator may label an idea otherwise when it has
  // nothing for the asked category; empty: any categories.
  std::vector<IdeaCategory> categories;
  uint64_t seed = 0;                      // for deterministic generators
  // A short name of the request, unique within a run, for logs and LLM
  // recordings ("r1.s0"); replay uses it to tell identical requests apart.
  std::string label;
  const std::atomic<bool>* cancel = nullptr;
  // When set, the generator reports each reply's cost here as it arrives and
  // leaves the result's token and cost fields zero.
  UsageSink on_usage;
};

struct IdeaResult {
  std::vector<Idea> ideas;   // ids, parent and round are filled in by the searcher
  std::string notes;         // why fewer than asked, parse problems, …
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
};

class IdeaGenerator {
 public:
  virtual ~IdeaGenerator() = default;
  virtual StatusOr<IdeaResult> Propose(const IdeaRequest& request) = 0;
  virtual std::string name() const = 0;   // "catalog", "llm:gpt-5"
};

struct BranchRequest {
  const Problem* problem = nullptr;
  const HistoryEntry* parent = nullptr;
  const Idea* idea = nullptr;
  const SearchHistory* history = nullptr;
  int count = 4;                          // implementations wanted
  // For repair: the failed branch and its evaluation (compile log, mismatch);
  // null for a first attempt.
  const HistoryEntry* failed = nullptr;
  uint64_t seed = 0;
  // A short name of the request, unique within a run ("r1.s0.i2",
  // "r1.s0.i2.b3.fix"): see IdeaRequest::label.
  std::string label;
  // When this becomes true, replies still being written are cancelled; those
  // already received (and paid for) are still returned.
  const std::atomic<bool>* cancel = nullptr;
  // See IdeaRequest::on_usage.
  UsageSink on_usage;
};

struct BranchResult {
  // Ids and provenance are filled in by the searcher. Candidate i is branch
  // i; an entry with an empty source stands for a branch that produced
  // nothing (the reason is in notes) and keeps the others in their places.
  std::vector<Candidate> candidates;
  std::string notes;                  // e.g. "branch 2: no ```json block in the reply"
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
};

class Brancher {
 public:
  virtual ~Brancher() = default;
  virtual StatusOr<BranchResult> Branch(const BranchRequest& request) = 0;
  virtual std::string name() const = 0;
};

}  // namespace ksearch

#endif  // KSEARCH_GENERATOR_H_
