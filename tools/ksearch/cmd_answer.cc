// `ksearch answer DIR --llm openai:MODEL`: answers the requests a search
// wrote into an exchange folder, on a machine that reaches the provider.
#include <cstdio>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "json_out.h"
#include "ksearch/exchange_answer.h"
#include "numeric_flags.h"
#include "run_args.h"
#include "run_llm.h"
#include "stop_signals.h"

namespace ksearch::cli {
namespace {

struct AnswerArgs {
  std::string folder;
  RunArgs llm;  // --llm and the client's settings, in the form MakeLlm reads
  std::string problem;  // with --llm mock and no --mock-script: script the mock from it
  bool watch = false;
  double poll_seconds = 0.5;
  bool json = false;
};

std::string Describe(const AnswerEvent& e) {
  char line[512];
  if (e.reply.ok()) {
    const ChatResponse& r = *e.reply;
    std::snprintf(line, sizeof(line), "answered %s (%s): tokens in %lld, out %lld; $%.4f; %.1f s",
                  e.name.c_str(), e.tag.c_str(), static_cast<long long>(r.input_tokens),
                  static_cast<long long>(r.output_tokens), r.cost_usd, r.latency_ms / 1000.0);
    return line;
  }
  return (e.reply_written ? "refused " : "failed ") + e.name + " (" + e.tag +
         "): " + e.reply.status().ToString() +
         (e.reply_written ? " (written as the reply)" : " (left pending)");
}

void PrintSummary(const AnswerSummary& s, const std::string& folder, bool json) {
  if (json) {
    boost::json::object o{{"folder", folder},
                          {"answered", s.answered},
                          {"refused", s.refused},
                          {"failed", s.failed},
                          {"over_budget", s.over_budget},
                          {"bad_requests", s.bad_requests},
                          {"pending", s.pending},
                          {"requests", s.totals.requests},
                          {"input_tokens", s.totals.input_tokens},
                          {"output_tokens", s.totals.output_tokens},
                          {"cost_usd", Number(s.totals.cost_usd)},
                          {"stopped_by", s.stopped_by.ok() ? boost::json::value(nullptr)
                                                           : boost::json::value(s.stopped_by.ToString())},
                          {"notes", boost::json::array(s.notes.begin(), s.notes.end())}};
    PrintJson(o);
    return;
  }
  for (const std::string& note : s.notes) std::cout << "note: " << note << "\n";
  std::printf("%s: answered %lld, refused %lld, failed %lld, over budget %lld, unreadable %lld; "
              "%lld pending; tokens in %lld, out %lld; cost $%.4f\n",
              folder.c_str(), static_cast<long long>(s.answered),
              static_cast<long long>(s.refused), static_cast<long long>(s.failed),
              static_cast<long long>(s.over_budget), static_cast<long long>(s.bad_requests),
              static_cast<long long>(s.pending), static_cast<long long>(s.totals.input_tokens),
              static_cast<long long>(s.totals.output_tokens), s.totals.cost_usd);
}

int Answer(const AnswerArgs& args) {
  const std::string kind = args.llm.llm.substr(0, args.llm.llm.find(':'));
  if (kind == "exchange" || kind == "catalog") {
    return ReportError(InvalidArgumentError(
        "--llm " + args.llm.llm +
        ": answering needs a model: openai:MODEL, anthropic:MODEL, mock or replay:FILE"));
  }
  Problem problem;
  if (kind == "mock" && args.llm.mock_script.empty()) {
    if (args.problem.empty()) {
      return ReportError(InvalidArgumentError(
          "--llm mock needs --mock-script FILE, or --problem NAME to script it from a problem"));
    }
    auto loaded = LoadProblem(args.problem);
    if (!loaded.ok()) return ReportError(loaded.status());
    problem = std::move(*loaded);
  }
  auto setup = MakeLlm(args.llm, args.llm.llm, problem, nullptr);
  if (!setup.ok()) return ReportError(setup.status());

  AnswerOptions options;
  options.model = setup->model;
  options.timeout_seconds = args.llm.llm_timeout_seconds;
  options.max_in_flight = args.llm.max_in_flight;
  options.watch = args.watch;
  options.poll_interval_seconds = args.poll_seconds;
  options.max_tokens = args.llm.budget_tokens;
  options.max_cost_usd = args.llm.budget_usd;
  if (!args.llm.prices.empty()) {
    auto prices = LoadPrices(args.llm.prices);
    if (!prices.ok()) return ReportError(prices.status());
    options.prices = std::move(*prices);
  }
  options.stop = &StopRequested();
  StatusOr<AnswerSummary> summary = Status(StatusCode::kUnknown, "not run");
  {
    StopSignals signals;  // Ctrl-C and SIGTERM end --watch
    summary = AnswerExchangeFolder(args.folder, *setup->active(), options,
                                   [&](const AnswerEvent& e) {
                                     if (!args.json) std::cout << Describe(e) << std::endl;
                                   });
  }
  if (!summary.ok()) return ReportError(summary.status());
  PrintSummary(*summary, args.folder, args.json);
  if (!summary->stopped_by.ok()) {
    return ReportError(summary->stopped_by.WithContext("stopped answering"), kExitFailure);
  }
  if (summary->failed > 0 || summary->over_budget > 0 || summary->bad_requests > 0) {
    std::cerr << "ksearch: " << (summary->failed + summary->over_budget + summary->bad_requests)
              << " request(s) left without a reply (see above)\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void AddAnswerCommand(CLI::App& app, int* exit_code) {
  static AnswerArgs args;
  auto* cmd = app.add_subcommand(
      "answer", "Answer the requests a search wrote into an exchange folder (--llm exchange:DIR)");
  cmd->add_option("DIR", args.folder, "the exchange folder (its requests/ and replies/)")
      ->required();
  cmd->add_option("--llm", args.llm.llm,
                  "openai:MODEL, anthropic:MODEL, mock (with --mock-script or --problem) or "
                  "replay:FILE; the model every request goes to")
      ->required();
  cmd->add_option("--base-url", args.llm.base_url,
                  "server URL (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the "
                  "provider's)");
  cmd->add_option("--prices", args.llm.prices,
                  "price table JSON (docs/llm.md) for costs and --budget-usd");
  AddNumber(*cmd, "--budget-tokens", args.llm.budget_tokens,
            "start no request once its prompt and output limit no longer fit in this many "
            "tokens (this call)",
            AtLeast(0));
  AddNumber(*cmd, "--budget-usd", args.llm.budget_usd, "the same in dollars (needs --prices with the model)",
            AtLeast(0));
  AddNumber(*cmd, "--max-in-flight", args.llm.max_in_flight, "requests at once", Between(1, 4096))
      ->default_val(8);
  AddNumber(*cmd, "--llm-timeout", args.llm.llm_timeout_seconds,
            "seconds per attempt until the whole reply is read", PositiveUpTo(kSecondsInADay))
      ->capture_default_str();
  AddNumber(*cmd, "--llm-attempts", args.llm.llm_attempts,
            "attempts per request, the first included (time-outs: at most 2)", Between(1, 20))
      ->capture_default_str();
  cmd->add_option("--mock-script", args.llm.mock_script, "with --llm mock: a mock script");
  cmd->add_option("--problem", args.problem,
                  "with --llm mock and no script: script the mock from this problem");
  cmd->add_flag("--watch", args.watch,
                "keep answering new requests as they appear, until Ctrl-C or SIGTERM");
  AddNumber(*cmd, "--poll-seconds", args.poll_seconds, "how often the folder is looked at",
            PositiveUpTo(kSecondsInAnHour))
      ->capture_default_str();
  cmd->add_flag("--json", args.json, "print the totals as one JSON object");
  cmd->footer(
      "Each request's reply is written to DIR/replies/NAME.json (atomically; a reply already\n"
      "there is kept). Retries, rate limits and prices are those of 'ksearch run'. A request\n"
      "the provider refuses for good (context length, a refusal) gets that error as its\n"
      "reply, as the search would have met it directly; outages leave requests pending.\n"
      "Keys come from $OPENAI_API_KEY or $ANTHROPIC_API_KEY.\n\n"
      "Exit: 0 every request tried got a reply; 4 some are left pending (a failure, the\n"
      "budget, a request file that does not read) or a failure every request would share\n"
      "(a key, a quota) stopped it; 2 bad arguments. --watch ends on Ctrl-C or SIGTERM with\n"
      "the same codes.\n\n"
      "Examples:\n"
      "  ksearch answer xchg --llm openai:gpt-5 --prices prices.json --budget-usd 5\n"
      "  ksearch answer xchg --llm anthropic:claude-sonnet-4-5 --watch\n"
      "  ksearch answer xchg --llm openai:mock --base-url http://127.0.0.1:8000/v1\n"
      "      a server of 'ksearch mock-llm'");
  cmd->callback([exit_code] { *exit_code = Answer(args); });
}

}  // namespace ksearch::cli
