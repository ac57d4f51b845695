#include "run_llm.h"

#include <filesystem>

#include "commands.h"
#include "ksearch/price_table.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/strategies.h"

namespace ksearch::cli {

StatusOr<LlmSetup> MakeLlm(const RunArgs& args, const std::string& spec, const Problem& problem,
                           RunSession* session) {
  LlmSetup setup;
  std::string kind = spec.substr(0, spec.find(':'));
  std::string rest = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
  HttpLlmClient::Options options;
  options.base_url = args.base_url;
  options.max_in_flight = args.max_in_flight;
  options.retry.max_attempts = args.llm_attempts;
  if (!args.prices.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(options.prices, PriceTable::Load(args.prices));
  }
  if (kind == "replay") {
    if (rest.empty()) return InvalidArgumentError("--llm replay:FILE needs the recording's path");
    std::error_code error;
    const bool folder = std::filesystem::is_directory(rest, error);
    KSEARCH_ASSIGN_OR_RETURN(auto exchanges,
                             folder ? LoadExchangeFolder(rest) : LoadLlmRecording(rest));
    // Replay matches requests by hash, which includes the model: use the
    // recorded one.
    if (!exchanges.empty()) setup.model = exchanges.front().request.model;
    // On a GPU, prompts quote measured times, which differ from the recorded
    // run's: fall back to the request's place in the tree (its tag).
    ReplayLlmClient::Options replay;
    replay.match_tag_when_hash_differs = true;
    KSEARCH_ASSIGN_OR_RETURN(auto client,
                             ReplayLlmClient::Create(std::move(exchanges), replay));
    setup.client = std::move(client);
  } else if (kind == "exchange") {
    if (rest.empty()) return InvalidArgumentError("--llm exchange:DIR needs the folder's path");
    ExchangeLlmClient::Options exchange;
    exchange.folder = rest;
    exchange.prices = options.prices;
    KSEARCH_ASSIGN_OR_RETURN(auto client, ExchangeLlmClient::Create(std::move(exchange)));
    setup.exchange = client.get();
    setup.client = std::move(client);
  } else if (kind == "mock") {
    KSEARCH_ASSIGN_OR_RETURN(setup.mock, MockLlmServer::Start({}));
    if (!args.mock_script.empty()) {
      KSEARCH_RETURN_IF_ERROR(setup.mock->LoadScript(args.mock_script));
    } else {
      KSEARCH_RETURN_IF_ERROR(ScriptMockFromProblem(*setup.mock, problem, args.rounds, args.branches));
    }
    options.provider = LlmProvider::kOpenAi;
    options.base_url = setup.mock->openai_base_url();
    setup.model = "mock";
  } else if (kind == "openai" || kind == "anthropic") {
    if (rest.empty()) return InvalidArgumentError("--llm " + kind + ":MODEL needs a model name");
    KSEARCH_ASSIGN_OR_RETURN(options.provider, ParseLlmProvider(kind));
    setup.model = rest;
    if (args.budget_usd > 0 && options.prices.Find(rest) == nullptr) {
      return InvalidArgumentError(
          "--budget-usd: " +
          (args.prices.empty() ? std::string("no --prices table given")
                               : "the price table " + args.prices + " has no price") +
          " for model " + rest + ", so every request would cost $0 and the budget never end the "
          "run (docs/llm.md shows the format)");
    }
  } else {
    return InvalidArgumentError(
        "--llm " + spec +
        ": expected openai:MODEL, anthropic:MODEL, exchange:DIR, mock, replay:FILE or catalog");
  }
  if (!setup.client) {
    options.default_model = setup.model;
    KSEARCH_ASSIGN_OR_RETURN(auto client, HttpLlmClient::Create(std::move(options)));
    setup.http = client.get();
    setup.client = std::move(client);
  }
  if (session) {
    KSEARCH_ASSIGN_OR_RETURN(setup.recorded, session->WrapLlmClient(*setup.client));
  }
  if (!args.record.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(setup.recorder, LlmRecorder::Open(args.record));
    setup.active()->SetObserver(setup.recorder->observer());
  }
  return setup;
}

std::vector<const LlmClient*> Generators::clients() const {
  std::vector<const LlmClient*> out;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->active()) out.push_back(setup->active());
  }
  return out;
}

std::vector<const HttpLlmClient*> Generators::http_clients() const {
  std::vector<const HttpLlmClient*> out;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->http) out.push_back(setup->http);
  }
  return out;
}

std::vector<const ExchangeLlmClient*> Generators::exchange_clients() const {
  std::vector<const ExchangeLlmClient*> out;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->exchange) out.push_back(setup->exchange);
  }
  return out;
}

StatusOr<Generators> MakeGenerators(const RunArgs& args, const Problem& problem,
                                    RunSession* session) {
  Generators made;
  // A language model (one for ideas and one for branches when --idea-llm /
  // --branch-llm differ), or the offline catalog.
  const std::string idea_spec = args.idea_llm.empty() ? args.llm : args.idea_llm;
  const std::string branch_spec = args.branch_llm.empty() ? args.llm : args.branch_llm;
  bool use_llm = args.strategy != "tune" && !idea_spec.empty() && idea_spec != "catalog" &&
                 !branch_spec.empty() && branch_spec != "catalog";
  if (use_llm) {
    LlmGeneratorOptions gen;
    if (args.max_output_tokens > 0) gen.max_tokens = args.max_output_tokens;
    if (args.thinking_budget > 0 && args.thinking_budget >= gen.max_tokens) {
      return InvalidArgumentError(
          "--thinking-budget " + std::to_string(args.thinking_budget) +
          " must be below --max-output-tokens (" + std::to_string(gen.max_tokens) +
          "): thinking counts toward the output limit");
    }
    gen.idea_temperature = args.temperature;
    gen.code_temperature = args.temperature;
    gen.reasoning_effort = args.reasoning_effort;
    gen.thinking_budget_tokens = args.thinking_budget;
    gen.timeout_seconds = args.llm_timeout;
    gen.reformat_attempts = 1;
    if (!args.prompts.empty()) {
      KSEARCH_ASSIGN_OR_RETURN(gen.prompts, PromptTemplates::Load(args.prompts));
    }
    KSEARCH_ASSIGN_OR_RETURN(made.idea_llm, MakeLlm(args, idea_spec, problem, session));
    gen.model = made.idea_llm.model;
    KSEARCH_ASSIGN_OR_RETURN(made.ideas, MakeLlmIdeaGenerator(*made.idea_llm.active(), gen));
    LlmClient* branch_client = made.idea_llm.active();
    if (branch_spec != idea_spec) {
      KSEARCH_ASSIGN_OR_RETURN(made.branch_llm, MakeLlm(args, branch_spec, problem, session));
      branch_client = made.branch_llm.active();
      gen.model = made.branch_llm.model;
    }
    KSEARCH_ASSIGN_OR_RETURN(made.brancher, MakeLlmBrancher(*branch_client, gen));
  } else if (args.strategy != "tune") {
    made.ideas = MakeCatalogIdeaGenerator();
    made.brancher = MakeParameterMutationBrancher();
  }
  return made;
}

}  // namespace ksearch::cli
