#include "run_llm.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <utility>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/price_table.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/strategies.h"

namespace ksearch::cli {

StatusOr<PriceTable> LoadPrices(const std::string& path) {
  if (path.empty()) return PriceTable();
  KSEARCH_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, "--prices"));
  return PriceTable::Parse(text, path);
}

StatusOr<LlmSetup> MakeLlm(const RunArgs& args, const std::string& spec, const Problem& problem,
                           RunSession* session) {
  LlmSetup setup;
  std::string kind = spec.substr(0, spec.find(':'));
  std::string rest = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
  HttpLlmClient::Options options;
  options.base_url = args.base_url;
  options.max_in_flight = args.max_in_flight;
  options.retry.max_attempts = args.llm_attempts;
  KSEARCH_ASSIGN_OR_RETURN(options.prices, LoadPrices(args.prices));
  if (kind == "replay") {
    if (rest.empty()) return InvalidArgumentError("--llm replay:FILE needs the recording's path");
    std::error_code error;
    const bool folder = std::filesystem::is_directory(rest, error);
    if (!folder) KSEARCH_RETURN_IF_ERROR(CheckInputFile(rest, "--llm replay:FILE", kMaxRecordingBytes));
    if (folder && !std::filesystem::is_directory(rest + "/requests", error)) {
      return InvalidArgumentError(
          "--llm replay:" + rest + ": a folder without requests/ in it; replay reads a recording "
          "(a file written by --record) or an exchange folder (--llm exchange:DIR)");
    }
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
      KSEARCH_ASSIGN_OR_RETURN(std::string script,
                               ReadInputFile(args.mock_script, "--mock-script"));
      KSEARCH_RETURN_IF_ERROR(setup.mock->LoadScriptJson(script).WithContext(args.mock_script));
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

namespace {

// The models --llm, --idea-llm and --branch-llm name, each once:
// {"openai", "gpt-4o"}, {"mock", ""}, …
std::vector<std::pair<std::string, std::string>> ChosenModels(const RunArgs& args) {
  std::vector<std::pair<std::string, std::string>> out;
  if (args.strategy == "tune") return out;
  for (const std::string& spec : {args.idea_llm.empty() ? args.llm : args.idea_llm,
                                  args.branch_llm.empty() ? args.llm : args.branch_llm}) {
    if (spec.empty() || spec == "catalog") continue;
    const size_t colon = spec.find(':');
    std::pair<std::string, std::string> model{spec.substr(0, colon),
                                              colon == std::string::npos ? "" : spec.substr(colon + 1)};
    if (std::find(out.begin(), out.end(), model) == out.end()) out.push_back(std::move(model));
  }
  return out;
}

bool Hosted(const std::pair<std::string, std::string>& model) {
  return model.first == "openai" || model.first == "anthropic";
}

}  // namespace

Status CheckModelFlags(const RunArgs& args) {
  const int max_tokens = args.max_output_tokens > 0 ? args.max_output_tokens : LlmGeneratorOptions{}.max_tokens;
  if (args.thinking_budget > 0 && args.thinking_budget < 1024) {
    return InvalidArgumentError("--thinking-budget " + std::to_string(args.thinking_budget) +
                                ": Anthropic's extended thinking takes at least 1024 tokens (0: off)");
  }
  if (args.thinking_budget > 0 && args.thinking_budget >= max_tokens) {
    return InvalidArgumentError("--thinking-budget " + std::to_string(args.thinking_budget) +
                                " must be below --max-output-tokens (" + std::to_string(max_tokens) +
                                "): thinking counts toward the output limit");
  }
  if (args.budget_usd <= 0) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(PriceTable prices, LoadPrices(args.prices));
  for (const auto& model : ChosenModels(args)) {
    if (!Hosted(model) || prices.Find(model.second) != nullptr) continue;
    return InvalidArgumentError(
        "--budget-usd: " +
        (args.prices.empty() ? std::string("no --prices table given")
                             : "the price table " + args.prices + " has no price") +
        " for model " + model.second + ", so every request would cost $0 and the budget never end the "
        "run (docs/llm.md shows the format)");
  }
  return Status::Ok();
}

void NoteModelFlags(const RunArgs& args) {
  PriceTable prices;
  bool priced = false;
  if (!args.prices.empty()) {
    auto loaded = LoadPrices(args.prices);
    priced = loaded.ok();
    if (priced) prices = std::move(*loaded);
  }
  for (const auto& chosen : ChosenModels(args)) {
    if (chosen.first == "replay") continue;  // replies come from the recording
    // --llm mock speaks OpenAI's format, for a model called "mock".
    const std::string provider = chosen.first == "mock" ? "openai" : chosen.first;
    const std::string model = chosen.first == "mock" ? "mock" : chosen.second;
    const std::string name = chosen.first == "mock" ? "mock" : provider + ":" + model;
    const ModelTraits traits = TraitsOfModel(provider, model);
    if (!args.reasoning_effort.empty() && (provider != "openai" || !traits.accepts_reasoning_effort)) {
      std::cerr << "ksearch: note: --reasoning-effort is for OpenAI reasoning models (o1, o3, o4, gpt-5…); "
                << name << " takes none, so it is not sent"
                << (provider == "anthropic" ? " (Anthropic: --thinking-budget)" : "") << "\n";
    }
    if (args.thinking_budget > 0 && provider != "anthropic") {
      std::cerr << "ksearch: note: --thinking-budget is for Anthropic's extended thinking; " << name
                << " takes none, so it is not sent"
                << (traits.accepts_reasoning_effort ? " (OpenAI reasoning models: --reasoning-effort)" : "")
                << "\n";
    }
    if (args.temperature && (!traits.accepts_temperature || (provider == "anthropic" && args.thinking_budget > 0))) {
      std::cerr << "ksearch: note: --temperature is not sent to " << name
                << (traits.accepts_temperature ? " with --thinking-budget" : ", an OpenAI reasoning model")
                << "\n";
    }
    if (priced && Hosted(chosen) && prices.Find(model) == nullptr) {
      std::cerr << "ksearch: warning: the price table " << args.prices << " has no price for model " << model
                << ": its costs show as $0.0000 (docs/llm.md shows the format)\n";
    }
  }
}

std::vector<const LlmClient*> Generators::clients() const {
  std::vector<const LlmClient*> out;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->active()) out.push_back(setup->active());
  }
  return out;
}

std::vector<const LlmClient*> Generators::live_clients() const {
  std::vector<const LlmClient*> out;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->client) out.push_back(setup->client.get());
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
    KSEARCH_RETURN_IF_ERROR(CheckModelFlags(args));
    LlmGeneratorOptions gen;
    if (args.max_output_tokens > 0) gen.max_tokens = args.max_output_tokens;
    gen.idea_temperature = args.temperature;
    gen.code_temperature = args.temperature;
    gen.reasoning_effort = args.reasoning_effort;
    gen.thinking_budget_tokens = args.thinking_budget;
    gen.timeout_seconds = args.llm_timeout_seconds;
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

LlmTotals SumTotals(const std::vector<const LlmClient*>& clients) {
  LlmTotals sum;
  for (const LlmClient* client : clients) sum += client->totals();
  return sum;
}

}  // namespace ksearch::cli
