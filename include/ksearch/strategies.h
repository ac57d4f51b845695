// The built-in search strategies and the generators that feed them
// (docs/search.md is the guide).
//
// Offline, no language model:
//
//   ksearch::SearchOptions options;
//   options.budget.max_rounds = 8;
//   auto searcher = ksearch::MakeParameterTuneSearch(options);
//   ksearch::SearchContext context;
//   context.problem = &problem;
//   context.evaluator = evaluator.get();
//   auto summary = searcher->Run(context);
//
// The method itself, with a language model:
//
//   auto client = ksearch::HttpLlmClient::Create(client_options);   // llm.h
//   auto ideas = ksearch::MakeLlmIdeaGenerator(**client);
//   auto brancher = ksearch::MakeLlmBrancher(**client);
//   auto searcher = ksearch::MakeParallelBranchSearch(options);
//   context.ideas = ideas.get();
//   context.brancher = brancher.get();
//   auto summary = searcher->Run(context);
//
// The same parallel-branch loop runs offline with MakeCatalogIdeaGenerator()
// and MakeParameterMutationBrancher(), which turn the idea categories into
// moves over a problem's template parameters.
//
// Thread safety: see searcher.h (one Run at a time per searcher) and
// generator.h (generators are called from several threads at once).
#ifndef KSEARCH_STRATEGIES_H_
#define KSEARCH_STRATEGIES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/generator.h"
#include "ksearch/llm_client.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"

namespace ksearch {

// ---------------------------------------------------------------------------
// ParallelBranchSearch

struct ParallelBranchOptions {
  // Generator calls (Propose / Branch) running at once. Each LLM-backed call
  // keeps its requests in flight while it waits, so this bounds the requests
  // in flight to about max_concurrent_calls × SearchOptions::branches.
  int max_concurrent_calls = 32;
  // At most this many candidates go to the evaluator in one Evaluate() call.
  // Candidates that arrive while a batch is being judged wait for the next.
  int max_evaluation_batch = 64;
  // Two timed kernels whose medians differ by at most this fraction count as
  // a tie; ties are broken toward idea categories not yet among the seeds.
  double tie_fraction = 0.01;
  // A candidate whose content (source, plan, options) was already judged in
  // this run is not judged again: it gets a copy of the earlier evaluation.
  bool skip_duplicates = true;
  // The run ends (kCompleted; the notes say why) after this many consecutive
  // rounds that produced no candidate at all: the catalog ran out of moves,
  // or every reply was unusable.
  int max_empty_rounds = 2;
};

// R rounds of: the top-k correct kernels so far are the seeds (round 0: the
// problem's starting kernel, judged first); for each seed the IdeaGenerator
// writes n ideas spread across SearchOptions::categories; for each idea the
// Brancher writes b implementations. Every generator call and evaluation of a
// round is in flight at once: ideas are requested for all seeds together,
// each idea's branches are requested as soon as it arrives, and candidates go
// to the evaluator in batches while the rest are still being written. With
// SearchOptions::repair, a branch that fails to compile or is wrong gets one
// fix attempt. The k fastest correct (distinct) kernels become the next
// seeds. Ideas get an outcome in words, which later idea prompts read.
//
// "Fastest" is the median time when the evaluator timed the kernels. A
// compile-only evaluator times nothing; then kernels rank by fewer registers
// per thread (summed over the plan's kernels), then less local memory, then
// the earlier candidate — deterministic, and a rough proxy for occupancy.
//
// Needs context.ideas and context.brancher. Ids: the starting kernel is
// "start"; idea j of seed s in round r is "r<r>.s<s>.i<j>"; its branch m is
// "r<r>.s<s>.i<j>.b<m>", a repair appends ".fix". With the same seed and a
// deterministic generator (the catalog, or an LLM served by ReplayLlmClient)
// a run rebuilds the same tree.
std::unique_ptr<Searcher> MakeParallelBranchSearch(const SearchOptions& options,
                                                   const ParallelBranchOptions& branch = {});

// ---------------------------------------------------------------------------
// SequentialRefineSearch

struct SequentialRefineOptions {
  // Ask context.ideas for one idea before each revision (two generator calls
  // per candidate). When false, or when context.ideas is null, each revision
  // is one Brancher call with a generic "improve it from its evaluation" idea
  // — the traditional refine loop.
  bool use_idea_generator = false;
};

// The traditional loop that the method is compared with: one candidate at a
// time. Each step revises the best correct kernel so far, shown with its
// evaluation; when the previous step's candidate failed to compile or was
// wrong, the step is a repair of that candidate instead (with its compile log
// or mismatch report). A step is a "round" for the budget (max_rounds = steps).
// Needs context.brancher. Ids: "s<step>" for candidates, "s<step>.idea" for
// the step's idea.
std::unique_ptr<Searcher> MakeSequentialRefineSearch(const SearchOptions& options,
                                                     const SequentialRefineOptions& refine = {});

// ---------------------------------------------------------------------------
// ParameterTuneSearch

enum class TuneMethod {
  // Points drawn at random from the valid space, with a share of every batch
  // (local_fraction) spent one step away from the best point so far.
  kRandom,
  // Simulated annealing: each round judges a batch of neighbours of the
  // current point (one or two params moved one step along their lists) and
  // moves to one of them by the Metropolis rule on log(time); the temperature
  // falls geometrically per round. A random restart when no neighbour is left.
  kAnnealing,
  // Successive halving: a bracket starts with batch_size random points; each
  // rung keeps the better half and judges the survivors again, so the last
  // survivor rests on several independent measurements — what counts when
  // points differ by less than run-to-run noise. Then a new bracket starts.
  kSuccessiveHalving,
};
// "random", "annealing", "halving".
std::string_view ToString(TuneMethod method);
// Accepts the names above (also "anneal", "successive_halving").
// Errors: kInvalidArgument listing them.
[[nodiscard]] StatusOr<TuneMethod> ParseTuneMethod(std::string_view name);

struct ParameterTuneOptions {
  TuneMethod method = TuneMethod::kRandom;
  // Candidates judged per round (one Evaluate call, compiled in parallel).
  int batch_size = 16;
  // kRandom: share of each batch spent near the best point so far (one
  // parameter moved one step); the rest is drawn at random from the
  // unexplored space.
  double local_fraction = 0.5;
  // kAnnealing: the starting temperature, in units of log(time): a neighbour
  // 10% slower is accepted with probability exp(-0.095 / T).
  double initial_temperature = 0.1;
  // kAnnealing: the temperature is multiplied by this after every round.
  double cooling_rate = 0.7;
  // A template space larger than this is sampled instead of enumerated.
  int64_t max_enumerated_points = 200000;
};

// Offline tuning of the problem's templates: round 0 judges the starting
// kernel and each template's default point; every later round judges a batch
// of new points that satisfy the template's constraints (and resolve to a
// valid plan). Needs no IdeaGenerator or Brancher. Stops on the budget, when
// the space is exhausted (kCompleted), or when cancelled. Without templates it
// judges the starting kernel only. Candidate ids are "c0", "c1", …; a
// successive-halving re-measurement is a new history entry with the same id.
std::unique_ptr<Searcher> MakeParameterTuneSearch(const SearchOptions& options,
                                                  const ParameterTuneOptions& tune = {});

// ---------------------------------------------------------------------------
// Offline generators: the idea catalog and parameter mutation

// Proposes ideas as moves over launch-plan parameters, named by category:
// a parameter belongs to categories by its name (VEC, BK, TILE… memory
// access; STAGES, PREFETCH… asynchrony; TM, TN, OCB… compute; BLOCK, SPLIT,
// BM, BN, WARPS… parallelism; UNROLL, STEP… control flow; HALF, ACC…
// data types). A move steps one parameter along its template's declared
// list (a template parent) or doubles/halves it (any other parent); a parent
// that is no template point also gets "switch to template T" ideas. Moves
// already tried on the same parent (per the history) are proposed last.
// When a requested category has no move, another category's move takes its
// place (the idea is labelled with its real category).
//
// Idea texts end with a machine-readable tag that
// MakeParameterMutationBrancher() applies: "[move BLOCK=512]",
// "[template online]". Deterministic for a given IdeaRequest::seed.
std::unique_ptr<IdeaGenerator> MakeCatalogIdeaGenerator();

// Implements an idea by editing the parent's launch-plan parameters: branch 0
// applies the idea's tag exactly; further branches combine it with one more
// step of another parameter (or a further step of the same one). Points that
// break a template constraint, do not resolve to a valid plan, or were judged
// before (per the history) are skipped, so a call may return fewer
// candidates than asked (notes say why). An idea without a tag (from a
// language model, say) gets random moves on parameters of its category.
// Repair requests get nothing (notes say so): a parameter point that fails is
// simply a data point.
std::unique_ptr<Brancher> MakeParameterMutationBrancher();

// ---------------------------------------------------------------------------
// LLM-backed generators

// The prompt templates, read from files (prompts/ in the source tree,
// share/ksearch/prompts when installed; the built-in copy is compiled into the
// library). Placeholders are written {{name}}; docs/search.md lists the names
// each template may use. Users override templates by folder: Load(dir) reads
// each file present there and keeps the built-in text for the others.
struct PromptTemplates {
  std::string system;      // system.md: the role; every request
  std::string ideas;       // ideas.md: propose ideas for a parent
  std::string branch;      // branch.md: implement one idea
  std::string repair;      // repair.md: fix a failed branch
  std::string contract;    // contract.md: the kernel contract and reply format ({{contract}})
  std::string categories;  // categories.md: the six idea categories ({{categories}})

  // The templates compiled into the library.
  static PromptTemplates Builtin();
  // The built-in templates, with each of system.md, ideas.md, branch.md,
  // repair.md, contract.md and categories.md found in `directory` replacing
  // its built-in text. Errors: kNotFound (no such folder), kPermissionDenied,
  // kInvalidArgument (Validate's errors, naming the file).
  [[nodiscard]] static StatusOr<PromptTemplates> Load(const std::string& directory);
  // Every template uses only the placeholders it may use and closes every
  // "{{". Errors: kInvalidArgument naming the template and the placeholder.
  [[nodiscard]] Status Validate() const;
};

struct LlmGeneratorOptions {
  // ChatRequest::model. Empty: the client's default model.
  std::string model;
  // Sampling temperature of idea requests; unset: none is sent (the
  // provider's default). Never sent to models that reject one (ModelTraits).
  std::optional<double> idea_temperature;
  // Sampling temperature of implementation and repair requests; as above.
  std::optional<double> code_temperature;
  // ChatRequest::max_tokens of every request: the output limit, reasoning or
  // thinking tokens included (reasoning models need room: 16000 or more).
  int max_tokens = 16384;
  // ChatRequest::reasoning_effort (OpenAI reasoning models); empty: not sent.
  std::string reasoning_effort;
  // ChatRequest::thinking_budget_tokens (Anthropic extended thinking; less
  // than max_tokens); 0: off.
  int thinking_budget_tokens = 0;
  // ChatRequest::timeout_seconds (per attempt).
  double timeout_seconds = 240.0;
  // A branch or repair reply with no usable kernel (no or several blocks, a
  // plan that does not parse, a reply cut at max_tokens) gets this many
  // further requests (0 or 1), which quote what was wrong and ask for the
  // blocks only. The CLI sets 1.
  int reformat_attempts = 0;
  // Idea prompts show at most this many earlier ideas with their outcomes
  // (the most recent; those on the same parent first).
  int max_history_ideas = 40;
  // The templates; Validate() is checked when a generator is made.
  PromptTemplates prompts = PromptTemplates::Builtin();
};

// Both generators borrow `client`, which must outlive them. A call issues its
// requests at once (Branch: `count` requests in flight together) and waits
// for the replies on the calling thread; callers run many calls in parallel.
// Failure is per reply: a malformed reply (no ```json idea list, no ```cuda
// block, a plan that does not parse) or a request that failed with an error
// of LlmFailureScope::kReply (truncated, empty, refused, malformed or
// odd-shaped replies, rate limits and outages outlasting the retries) yields
// fewer results and a note; a context-length 400 is first retried once with
// a quarter of the history. Errors of scope kRun stop the search
// (kUnauthenticated, kPermissionDenied, kNotFound: unknown model, wrong URL
// or a replay recording without this request, kFailedPrecondition: TLS or
// exhausted quota, kInvalidArgument), and so do kUnavailable and
// kDeadlineExceeded while no request of the client has succeeded (the
// provider is unreachable). When IdeaRequest/BranchRequest::cancel is set,
// Propose returns kCancelled and Branch returns what had arrived. Each
// reply's usage goes to the request's on_usage as it arrives, when set.
// Errors making a generator: kInvalidArgument (PromptTemplates::Validate).
[[nodiscard]] StatusOr<std::unique_ptr<IdeaGenerator>> MakeLlmIdeaGenerator(
    LlmClient& client, const LlmGeneratorOptions& options = {});
[[nodiscard]] StatusOr<std::unique_ptr<Brancher>> MakeLlmBrancher(
    LlmClient& client, const LlmGeneratorOptions& options = {});

}  // namespace ksearch

#endif  // KSEARCH_STRATEGIES_H_
