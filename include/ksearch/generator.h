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
#include <mutex>
#include <string>
#include <string_view>
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

// Keeps a run's model requests within its token and money budgets. A
// provider bills a reply once it has begun writing it, whether or not the
// client waits for it, so a budget is kept by not sending, not by
// cancelling: a generator asks Admit() before it sends each request, with
// the request's worst case (its prompt's tokens, estimated, plus its
// max_tokens, and their price), sends it only when admitted, and calls
// Settle() with the same worst case and what the reply was billed once the
// request has finished. A request is admitted while everything billed so
// far, plus the worst cases of the requests in flight, plus its own fits in
// the budget. The first refusal is final: every later request is refused
// too, and the searcher stops (kBudgetTokens or kBudgetCost) while the
// requests in flight finish and their replies are counted and judged.
//
// Thread safety: every method may be called from any thread.
class SpendingGate {
 public:
  enum class Limit { kNone, kTokens, kCost };

  // A limit of zero is no limit.
  SpendingGate(int64_t max_tokens, double max_cost_usd);
  SpendingGate(const SpendingGate&) = delete;
  SpendingGate& operator=(const SpendingGate&) = delete;

  // Reserves `worst_case` and returns OK, or refuses: kResourceExhausted,
  // the message starting "not sent: " and saying what the request could use
  // and what is left.
  [[nodiscard]] Status Admit(const GeneratorUsage& worst_case);
  // Releases an admitted request's reservation and counts what it was billed.
  void Settle(const GeneratorUsage& worst_case, const GeneratorUsage& billed);
  // Spending counted elsewhere (the searcher's totals, which include
  // generators that never ask the gate): the gate counts at least this much
  // as spent.
  void AtLeastSpent(const GeneratorUsage& total);
  // The limit of the first refusal; kNone while nothing was refused.
  Limit refused() const;
  // Billed so far, as the gate counts it.
  GeneratorUsage spent() const;

 private:
  GeneratorUsage SpentLocked() const;

  const int64_t max_tokens_;
  const double max_cost_usd_;
  mutable std::mutex mutex_;
  GeneratorUsage settled_;   // billed, through Settle()
  GeneratorUsage reported_;  // the most given to AtLeastSpent()
  GeneratorUsage reserved_;  // worst cases of the requests in flight
  Limit refused_ = Limit::kNone;
};

// A request's prompt in tokens, estimated from above: one token per three
// bytes (the common tokenizers count three to four bytes of English or code
// per token), plus a few per message for the roles.
int64_t EstimatePromptTokens(std::string_view system,
                             const std::vector<std::string_view>& messages);

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
  // When set, the generator sends a model request only when the gate admits
  // it (SpendingGate); a refused request is not sent and a note says so.
  SpendingGate* spending = nullptr;
};

struct IdeaResult {
  std::vector<Idea> ideas;   // ids, parent and round are filled in by the searcher
  std::string notes;         // why fewer than asked, parse problems, …
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
  // Set when no request of the call reached the model: the error of the
  // first (an outage, time-outs or rate limits that outlasted the client's
  // retries). Not an error of the call, which may be one bad minute; a
  // searcher decides (ParallelBranchSearch fails the run when no call of a
  // whole round reached the model).
  Status unreachable;
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
  // See IdeaRequest::on_usage and IdeaRequest::spending.
  UsageSink on_usage;
  SpendingGate* spending = nullptr;
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
  // See IdeaResult::unreachable.
  Status unreachable;
};

class Brancher {
 public:
  virtual ~Brancher() = default;
  virtual StatusOr<BranchResult> Branch(const BranchRequest& request) = 0;
  virtual std::string name() const = 0;
};

}  // namespace ksearch

#endif  // KSEARCH_GENERATOR_H_
