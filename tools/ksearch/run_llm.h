// The model side of `ksearch run`: the LLM clients --llm, --idea-llm and
// --branch-llm name, and the idea generator and brancher built on them.
#ifndef KSEARCH_TOOLS_RUN_LLM_H_
#define KSEARCH_TOOLS_RUN_LLM_H_

#include <memory>
#include <string>
#include <vector>

#include "ksearch/exchange_llm_client.h"
#include "ksearch/generator.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/llm_recording.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/price_table.h"
#include "ksearch/problem.h"
#include "ksearch/run_session.h"
#include "ksearch/status.h"
#include "run_args.h"

namespace ksearch::cli {

// What --llm makes: the client (and, for mock, its server), and the model
// name requests carry.
// Members are destroyed bottom-up: the store's wrapper before the live client
// it borrows, the client before the recorder and the mock server.
struct LlmSetup {
  std::unique_ptr<MockLlmServer> mock;
  std::unique_ptr<LlmRecorder> recorder;
  std::unique_ptr<LlmClient> client;
  std::unique_ptr<LlmClient> recorded;  // the run's store in front of `client`
  std::string model;
  HttpLlmClient* http = nullptr;  // `client`, when it is one
  ExchangeLlmClient* exchange = nullptr;  // `client`, when it is one

  LlmClient* active() const { return recorded ? recorded.get() : client.get(); }
};


// The model flags checked before anything is recorded, so that a run they
// refuse leaves no trace in the store: --budget-usd needs a price for every
// hosted model (--prices, which must load); --thinking-budget is 0 or at
// least 1024, and below --max-output-tokens. Errors: kInvalidArgument naming
// the flag, the value and the fix; the price table's own errors.
// The --prices table at `path` (empty: no table), read up to the bound every
// input file has: a device or a pipe named by mistake is not read without end.
StatusOr<PriceTable> LoadPrices(const std::string& path);

Status CheckModelFlags(const RunArgs& args);
// Says once on stderr what the model flags will not do for the models
// chosen, instead of dropping it silently: --reasoning-effort for a model
// that takes none, --thinking-budget for a model other than Anthropic's,
// --temperature for an OpenAI reasoning model or with --thinking-budget, and
// a --prices table without a price for a model (costs then show as $0).
void NoteModelFlags(const RunArgs& args);

// Makes the client `spec` names (openai:MODEL, anthropic:MODEL,
// exchange:DIR, mock, replay:FILE or replay:DIR of an exchange folder), behind the run's store when `session` is not null (replies
// recorded, and reused on resume) and --record's file when given.
StatusOr<LlmSetup> MakeLlm(const RunArgs& args, const std::string& spec, const Problem& problem,
                           RunSession* session);

// The totals of `clients` together (requests, failures, tokens, cost).
LlmTotals SumTotals(const std::vector<const LlmClient*>& clients);

// What writes a search's ideas and kernels: language models, the offline
// catalog (branch and refine without a model), or nothing (tune).
// Members are destroyed bottom-up: the generators before the clients they
// borrow.
struct Generators {
  LlmSetup idea_llm, branch_llm;  // empty without a model
  std::unique_ptr<IdeaGenerator> ideas;
  std::unique_ptr<Brancher> brancher;

  // The clients in use, for the progress line (the run's store in front of
  // a live client: replies reused on resume count), and the live clients
  // behind them, for what this session was billed.
  std::vector<const LlmClient*> clients() const;
  std::vector<const LlmClient*> live_clients() const;
  std::vector<const HttpLlmClient*> http_clients() const;
  std::vector<const ExchangeLlmClient*> exchange_clients() const;
};

// The generators --strategy and --llm (or --idea-llm and --branch-llm) ask
// for, with the generator options of the model flags.
StatusOr<Generators> MakeGenerators(const RunArgs& args, const Problem& problem,
                                    RunSession* session);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_RUN_LLM_H_
