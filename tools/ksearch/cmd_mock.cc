// `ksearch mock-llm`: a scripted OpenAI-compatible and Anthropic server on
// loopback, for trying a search, a prompt set or a client without a model.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

#include <boost/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/idea.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/tls_credentials.h"
#include "stop_signals.h"

namespace ksearch::cli {

// `--llm mock`: a loopback server scripted from the problem itself, so the
// whole LLM path (prompts, concurrency, parsing, judging) runs without a
// model. Idea replies name "mock variants" (the starting kernel and points of
// the problem's templates); branch replies return the variant the idea names,
// shifted by the branch number so that branches differ.
Status ScriptMockFromProblem(MockLlmServer& mock, const Problem& problem, int rounds, int branches) {
  std::vector<Candidate> variants = {problem.start.ToCandidate("", "start")};
  for (const TemplateSpec& t : problem.templates) {
    variants.push_back(t.kernel.ToCandidate("", "template"));
    for (const auto& [param, values] : t.space) {
      for (int64_t v : values) {
        Candidate c = t.kernel.ToCandidate("", "template");
        c.plan.SetParam(param, v);
        if (variants.size() < 24 && c.plan != t.kernel.plan) variants.push_back(std::move(c));
      }
    }
  }
  auto reply = [&](size_t v) {
    const Candidate& c = variants[v % variants.size()];
    return "Mock implementation of variant " + std::to_string(v % variants.size()) +
           ".\n\n```cuda\n" + c.source + (c.source.ends_with("\n") ? "" : "\n") +
           "```\n\n```json\n" + c.plan.ToJson() + "\n```\n";
  };
  const size_t n = variants.size();
  // One set of ideas per round (16 with --rounds 0); rounds past the scripted
  // ones share the last rule.
  constexpr int kScriptedRounds = 16;
  int scripted = rounds > 0 ? std::min(rounds, 64) : kScriptedRounds;
  for (int r = 0; r <= scripted; ++r) {
    boost::json::array ideas;
    for (size_t j = 0; j < kAllIdeaCategories.size(); ++j) {
      size_t v = (static_cast<size_t>(r) * kAllIdeaCategories.size() + j + 1) % n;
      ideas.push_back({{"category", ToString(kAllIdeaCategories[j])},
                       {"idea", "Try the kernel of mock variant " + std::to_string(v) + "."}});
    }
    MockRule rule;
    rule.regex = r < scripted ? "# Round " + std::to_string(r) + ":" : "# Round \\d+:";
    rule.reply.content = "```json\n" + boost::json::serialize(ideas) + "\n```\n";
    KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
  }
  for (size_t v = 0; v < n; ++v) {
    for (int b = 1; b <= std::max(1, branches); ++b) {
      MockRule rule;
      // Anchored on the idea being implemented: the history below it names
      // other variants.
      rule.regex = "implement \\([a-z_]+\\)\\s+Try the kernel of mock variant " +
                   std::to_string(v) + "\\.[\\s\\S]*implementation " + std::to_string(b) + " of";
      rule.reply.content = reply(v + static_cast<size_t>(b - 1));
      KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
    }
  }
  for (size_t j = 0; j < kAllIdeaCategories.size(); ++j) {
    MockRule rule;
    rule.contains = "Suggested focus this step: " + std::string(ToString(kAllIdeaCategories[j]));
    rule.reply.content = reply(j + 1);
    KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
  }
  MockReply fallback;
  fallback.content = reply(0);
  mock.SetDefaultReply(fallback);
  return Status::Ok();
}

namespace {

struct MockArgs {
  std::string address = "127.0.0.1";
  int port = 0;
  std::string script;
  std::string problem;
  int rounds = 6;
  int branches = 4;
  double latency_ms = 0.0;
  double fault_rate = 0.0;
  uint64_t seed = 1;
  std::string api_key_env;
  bool tls = false;
};

int ServeMock(const MockArgs& args) {
  if (args.script.empty() == args.problem.empty()) {
    return ReportError(InvalidArgumentError(
        "mock-llm needs exactly one of --script FILE or --problem NAME"));
  }
  MockLlmServer::Options options;
  options.address = args.address;
  options.port = static_cast<uint16_t>(args.port);
  options.latency_ms = args.latency_ms;
  options.fault_rate = args.fault_rate;
  options.seed = args.seed;
  if (!args.api_key_env.empty()) {
    const char* key = std::getenv(args.api_key_env.c_str());
    if (key == nullptr || *key == '\0') {
      return ReportError(InvalidArgumentError("--require-key-env " + args.api_key_env +
                                              ": that environment variable is not set"));
    }
    options.required_api_key = key;
  }
  if (args.tls) {
    auto credentials = GenerateSelfSignedCertificate({args.address, "localhost"});
    if (!credentials.ok()) return ReportError(credentials.status());
    options.tls = std::move(*credentials);
  }
  auto server = MockLlmServer::Start(std::move(options));
  if (!server.ok()) return ReportError(server.status());
  if (!args.script.empty()) {
    auto script = ReadInputFile(args.script, "--script");
    if (!script.ok()) return ReportError(script.status());
    Status loaded = (*server)->LoadScriptJson(*script).WithContext(args.script);
    if (!loaded.ok()) return ReportError(loaded);
  } else {
    auto problem = LoadWithDims(args.problem, "");
    if (!problem.ok()) return ReportError(problem.status());
    Status scripted = ScriptMockFromProblem(**server, *problem, args.rounds, args.branches);
    if (!scripted.ok()) return ReportError(scripted);
  }
  std::cout << "mock model listening (Ctrl-C to stop)\n"
            << "  OpenAI-compatible:  OPENAI_BASE_URL=" << (*server)->openai_base_url()
            << "   ksearch run ... --llm openai:mock\n"
            << "  Anthropic:          ANTHROPIC_BASE_URL=" << (*server)->base_url()
            << "   ksearch run ... --llm anthropic:mock\n";
  if (args.tls) {
    std::cout << "  (self-signed certificate: clients must be told to trust it)\n";
  }
  std::cout << std::flush;
  {
    StopSignals signals;
    while (!StopRequested().load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  MockLlmServer::Counters counters = (*server)->counters();
  (*server)->Stop();
  std::cout << "served " << counters.requests << " requests on " << counters.connections
            << " connections (" << counters.faults << " injected faults)\n";
  return kExitOk;
}

}  // namespace

void AddMockLlmCommand(CLI::App& app, int* exit_code) {
  static MockArgs args;
  auto* cmd = app.add_subcommand(
      "mock-llm", "Serve a scripted model on loopback (OpenAI-compatible and Anthropic APIs)");
  cmd->add_option("--script", args.script,
                  "mock script JSON: default reply, a queue, rules matched on the prompt "
                  "(docs/llm.md)");
  cmd->add_option("--problem", args.problem,
                  "script the replies from a problem instead: ideas name variants of its "
                  "starting kernel and templates, branches return them");
  AddNumber(*cmd, "--rounds", args.rounds, "with --problem: rounds scripted", AtLeast(0))
      ->capture_default_str();
  AddNumber(*cmd, "--branches", args.branches, "with --problem: branches per idea scripted",
            AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--address", args.address, "address to listen on (keep it on loopback)")
      ->capture_default_str();
  AddNumber(*cmd, "--port", args.port, "port (0: any free one, printed at start)",
            Between(0, 65535))
      ->capture_default_str();
  AddNumber(*cmd, "--latency-ms", args.latency_ms, "think time added to every reply",
            Between(0, 1000 * kSecondsInAnHour))
      ->capture_default_str();
  AddNumber(*cmd, "--fault-rate", args.fault_rate,
            "fraction of requests answered with a transient fault (429, 500, 503, reset)",
            Between(0, 1))
      ->capture_default_str();
  AddNumber(*cmd, "--seed", args.seed, "seed of the fault choice", AtLeast(0))
      ->capture_default_str();
  cmd->add_option("--require-key-env", args.api_key_env,
                  "refuse requests (401) without the API key held in this environment variable");
  cmd->add_flag("--tls", args.tls, "serve HTTPS with a fresh self-signed certificate");
  cmd->footer(
      "Examples:\n"
      "  ksearch mock-llm --problem softmax --port 8089\n"
      "  OPENAI_BASE_URL=http://127.0.0.1:8089/v1 ksearch run softmax --strategy branch \\\n"
      "      --llm openai:mock --compile-only --arch sm_90\n"
      "  ksearch mock-llm --script my_script.json --latency-ms 2000 --fault-rate 0.1\n"
      "                                    rehearse slow, flaky providers");
  cmd->callback([exit_code] { *exit_code = ServeMock(args); });
}

}  // namespace ksearch::cli
