// The LLM-backed IdeaGenerator and Brancher: prompts rendered from the
// templates, requests issued together on the async client, replies parsed
// into ideas or candidates. Anything wrong with a single reply is a note, not
// an error: the search goes on with what the other replies gave.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "core/json_util.h"
#include "ksearch/kernel_blocks.h"
#include "ksearch/strategies.h"
#include "search/prompts.h"

namespace ksearch {
namespace {

// Whether a failed reply ends the search: FailureScope() (llm_client.h), and
// an outage or time-out while no request of this client has succeeded yet
// (the provider was never reachable: retrying each of the remaining
// requests would only repeat the wait).
bool EndsRun(const Status& status, const LlmClient& client) {
  if (FailureScope(status) == LlmFailureScope::kRun) return true;
  if (status.code() != StatusCode::kUnavailable &&
      status.code() != StatusCode::kDeadlineExceeded) {
    return false;
  }
  LlmTotals totals = client.totals();
  return totals.requests - totals.failures <= 0;
}

struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
};

// What a client has billed, followed reply by reply. A reply the client
// rejected (truncated, empty, refused) carries no usage in its error, yet it
// was billed and is in the client's totals() (LlmTotals counts it): so each
// finished reply reports what the totals grew by since the last report. The
// reports add up to exactly what the client billed, whatever the order
// callbacks run in (a report may include a concurrent reply's cost, which the
// next report then lacks). One tracker per client, shared by the generators
// that use it (both generators usually share one client).
class BillingTracker {
 public:
  explicit BillingTracker(const LlmClient& client) : client_(client), last_(client.totals()) {}

  // Called on the client's thread once a reply has finished (clients count a
  // reply in totals() before its callback runs).
  GeneratorUsage Reply() {
    std::lock_guard<std::mutex> lock(mutex_);
    LlmTotals now = client_.totals();
    GeneratorUsage delta{std::max<int64_t>(0, now.input_tokens - last_.input_tokens),
                         std::max<int64_t>(0, now.output_tokens - last_.output_tokens),
                         std::max(0.0, now.cost_usd - last_.cost_usd)};
    last_ = now;
    return delta;
  }

  static std::shared_ptr<BillingTracker> For(const LlmClient& client) {
    static std::mutex mutex;
    static std::map<const LlmClient*, std::weak_ptr<BillingTracker>> trackers;
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<BillingTracker> tracker = trackers[&client].lock();
    if (!tracker) {
      tracker = std::make_shared<BillingTracker>(client);
      trackers[&client] = tracker;
    }
    return tracker;
  }

 private:
  const LlmClient& client_;
  std::mutex mutex_;
  LlmTotals last_;
};

// Issues every request at once and waits for all replies. Each reply's usage
// goes to `sink` as it arrives (on the client's thread; rejected but billed
// replies included, through `billing`), or into `usage` when there is no
// sink. If `cancel` becomes true the pending requests are cancelled; the
// replies that had arrived are still returned (they are paid for), the
// others are kCancelled.
std::vector<StatusOr<ChatResponse>> CompleteAll(LlmClient& client,
                                                std::vector<ChatRequest> requests,
                                                const std::atomic<bool>* cancel,
                                                const UsageSink& sink, Usage* usage,
                                                const std::shared_ptr<BillingTracker>& billing) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<std::optional<StatusOr<ChatResponse>>> results;
    size_t remaining = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->results.resize(requests.size());
  shared->remaining = requests.size();
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    ids.push_back(client.Complete(std::move(requests[i]),
                                  [shared, i, sink, billing](StatusOr<ChatResponse> r) {
                                    // On the client's I/O thread.
                                    GeneratorUsage cost = billing->Reply();
                                    if (sink && (cost.input_tokens > 0 || cost.output_tokens > 0 ||
                                                 cost.cost_usd > 0)) {
                                      sink(cost);
                                    }
                                    std::lock_guard<std::mutex> lock(shared->mutex);
                                    shared->results[i] = std::move(r);
                                    if (--shared->remaining == 0) shared->done.notify_all();
                                  }));
  }
  bool cancelled = false;
  {
    std::unique_lock<std::mutex> lock(shared->mutex);
    while (shared->remaining > 0) {
      if (!cancelled && cancel && cancel->load()) {
        cancelled = true;
        lock.unlock();
        for (uint64_t id : ids) client.Cancel(id);
        lock.lock();
        continue;
      }
      shared->done.wait_for(lock, std::chrono::milliseconds(10));
    }
  }
  std::vector<StatusOr<ChatResponse>> out;
  for (auto& r : shared->results) {
    if (r->ok() && !sink) {
      usage->input_tokens += (*r)->input_tokens;
      usage->output_tokens += (*r)->output_tokens;
      usage->cost_usd += (*r)->cost_usd;
    }
    out.push_back(std::move(*r));
  }
  return out;
}

// CompleteAll, then once more with a shorter history for the requests that
// a context-length 400 rejected. `build(history_limit)` renders all requests.
std::vector<StatusOr<ChatResponse>> CompleteWithContextRetry(
    LlmClient& client, const std::function<std::vector<ChatRequest>(int)>& build,
    int history_limit, const std::atomic<bool>* cancel, const UsageSink& sink, Usage* usage,
    const std::shared_ptr<BillingTracker>& billing) {
  std::vector<StatusOr<ChatResponse>> replies =
      CompleteAll(client, build(history_limit), cancel, sink, usage, billing);
  std::vector<size_t> again;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i].ok() && IsContextLengthError(replies[i].status())) again.push_back(i);
  }
  if (again.empty() || (cancel && cancel->load())) return replies;
  std::vector<ChatRequest> shorter = build(history_limit / 4);
  std::vector<ChatRequest> retry;
  for (size_t i : again) retry.push_back(std::move(shorter[i]));
  std::vector<StatusOr<ChatResponse>> second =
      CompleteAll(client, std::move(retry), cancel, sink, usage, billing);
  for (size_t k = 0; k < again.size(); ++k) {
    if (second[k].ok()) {
      replies[again[k]] = std::move(second[k]);
    } else {
      replies[again[k]] =
          second[k].status().WithContext("again with a shorter history (" +
                                         std::to_string(history_limit / 4) + " ideas)");
    }
  }
  return replies;
}

std::string CategoryList(const std::vector<IdeaCategory>& categories, int count) {
  std::string out;
  for (int j = 0; j < count; ++j) {
    out += (j ? ", " : "");
    out += categories.empty() ? "any" : std::string(ToString(categories[j % categories.size()]));
  }
  return out;
}

bool ParseCategoryLoosely(std::string text, IdeaCategory* out) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == ' ' || c == '-') c = '_';
  }
  if (ParseIdeaCategory(text, out)) return true;
  // "memory", "control flow and indexing", "parallelism/occupancy"…
  for (IdeaCategory c : kAllIdeaCategories) {
    std::string name(ToString(c));
    std::string head = name.substr(0, name.find('_'));
    if (text.rfind(head, 0) == 0) {
      *out = c;
      return true;
    }
  }
  return false;
}

struct ParsedIdea {
  std::optional<IdeaCategory> category;
  std::string text;
};

// The idea list of a reply: the first ```json (or untagged) block holding a
// list of {"category", "idea"} objects (or of strings, or {"ideas": [...]}),
// else the whole reply as JSON. Errors: kInvalidArgument naming what is wrong.
StatusOr<std::vector<ParsedIdea>> ParseIdeas(std::string_view reply) {
  std::vector<std::string> texts;
  for (const FencedBlock& b : ExtractFencedBlocks(reply)) {
    if (b.language == "json" || b.language.empty()) texts.push_back(b.text);
  }
  if (texts.empty()) {
    // Some models answer with bare JSON; anything else is prose.
    size_t first = reply.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || (reply[first] != '[' && reply[first] != '{')) {
      return InvalidArgumentError("reply has no ```json block with the idea list");
    }
    texts.emplace_back(reply);
  }
  Status first_error;
  for (const std::string& text : texts) {
    auto doc = internal::JsonDocument::Parse(text, "idea list");
    if (!doc.ok()) {
      if (first_error.ok()) first_error = doc.status();
      continue;
    }
    internal::JsonNode root = internal::JsonNode::Root(**doc);
    if (root.IsObject()) {
      auto ideas = root.Find("ideas");
      if (!ideas.ok() || !*ideas) {
        if (first_error.ok()) first_error = root.Error("expected a list of ideas");
        continue;
      }
      root = **ideas;
    }
    auto items = root.Array();
    if (!items.ok()) {
      if (first_error.ok()) first_error = items.status();
      continue;
    }
    std::vector<ParsedIdea> out;
    for (const internal::JsonNode& item : *items) {
      ParsedIdea idea;
      if (item.IsString()) {
        idea.text = *item.String();
      } else if (item.IsObject()) {
        for (const char* key : {"idea", "text", "description"}) {
          auto field = item.Find(key);
          if (field.ok() && *field && (*field)->IsString()) {
            idea.text = *(*field)->String();
            break;
          }
        }
        auto category = item.Find("category");
        IdeaCategory parsed;
        if (category.ok() && *category && (*category)->IsString() &&
            ParseCategoryLoosely(*(*category)->String(), &parsed)) {
          idea.category = parsed;
        }
      }
      while (!idea.text.empty() && std::isspace(static_cast<unsigned char>(idea.text.back()))) {
        idea.text.pop_back();
      }
      if (!idea.text.empty()) out.push_back(std::move(idea));
    }
    if (!out.empty()) return out;
    if (first_error.ok()) first_error = root.Error("the list holds no idea text");
  }
  if (first_error.ok()) {
    return InvalidArgumentError("reply has no ```json block with the idea list");
  }
  return InvalidArgumentError("reply's idea list is unusable: " + first_error.message());
}

class LlmGeneratorBase {
 protected:
  LlmGeneratorBase(LlmClient& client, LlmGeneratorOptions options)
      : client_(client), options_(std::move(options)), billing_(BillingTracker::For(client)) {}

  std::string GeneratorName() const {
    return "llm:" + (options_.model.empty() ? client_.provider() : options_.model);
  }

  // Values every template may use.
  std::map<std::string, std::string> CommonValues(const Problem& problem,
                                                  const HistoryEntry* parent) const {
    std::map<std::string, std::string> v;
    v["problem"] = internal::RenderProblem(problem);
    v["problem_name"] = problem.name;
    v["device"] = parent ? internal::RenderDevice(parent->evaluation.device) : "an NVIDIA GPU";
    v["contract"] = options_.prompts.contract;
    v["categories"] = options_.prompts.categories;
    if (parent) {
      v["parent_id"] = parent->candidate.id;
      v["parent"] = internal::RenderEntry(*parent, problem);
    }
    return v;
  }

  ChatRequest MakeRequest(const std::map<std::string, std::string>& values,
                          const std::string& user_template,
                          const std::optional<double>& temperature, std::string tag) const {
    ChatRequest request;
    request.model = options_.model;
    request.system = internal::RenderTemplate(options_.prompts.system, values);
    request.messages.push_back(
        {ChatMessage::Role::kUser, internal::RenderTemplate(user_template, values)});
    request.temperature = temperature;
    request.max_tokens = options_.max_tokens;
    request.reasoning_effort = options_.reasoning_effort;
    request.thinking_budget_tokens = options_.thinking_budget_tokens;
    request.timeout_seconds = options_.timeout_seconds;
    request.tag = std::move(tag);
    return request;
  }

  LlmClient& client_;
  LlmGeneratorOptions options_;
  std::shared_ptr<BillingTracker> billing_;
};

class LlmIdeaGenerator final : public IdeaGenerator, private LlmGeneratorBase {
 public:
  LlmIdeaGenerator(LlmClient& client, LlmGeneratorOptions options)
      : LlmGeneratorBase(client, std::move(options)) {}

  std::string name() const override { return GeneratorName(); }

  StatusOr<IdeaResult> Propose(const IdeaRequest& request) override {
    if (!request.problem || !request.parent) {
      return InvalidArgumentError("IdeaRequest needs a problem and a parent");
    }
    auto values = CommonValues(*request.problem, request.parent);
    values["count"] = std::to_string(request.count);
    values["requested_categories"] = CategoryList(request.categories, request.count);
    values["round"] = std::to_string(request.round);
    auto build = [&](int history_limit) {
      values["history"] = internal::RenderIdeaHistory(request.history,
                                                      request.parent->candidate.id, history_limit);
      std::vector<ChatRequest> requests;
      requests.push_back(MakeRequest(values, options_.prompts.ideas, options_.idea_temperature,
                                     "ideas " + request.label));
      return requests;
    };
    Usage usage;
    auto replies = CompleteWithContextRetry(client_, build, options_.max_history_ideas,
                                            request.cancel, request.on_usage, &usage, billing_);
    IdeaResult result;
    result.input_tokens = usage.input_tokens;
    result.output_tokens = usage.output_tokens;
    result.cost_usd = usage.cost_usd;
    StatusOr<ChatResponse>& reply = replies.front();
    if (!reply.ok()) {
      if (EndsRun(reply.status(), client_)) return reply.status();
      result.notes = "idea request failed: " + reply.status().ToString();
      return result;
    }
    auto parsed = ParseIdeas(reply->content);
    if (!parsed.ok()) {
      result.notes = parsed.status().message();
      return result;
    }
    for (size_t j = 0; j < parsed->size() && static_cast<int>(j) < request.count; ++j) {
      Idea idea;
      const ParsedIdea& p = (*parsed)[j];
      if (p.category) {
        idea.category = *p.category;
      } else if (!request.categories.empty()) {
        idea.category = request.categories[j % request.categories.size()];
      }
      idea.text = p.text;
      idea.generator = GeneratorName();
      result.ideas.push_back(std::move(idea));
    }
    if (static_cast<int>(parsed->size()) < request.count) {
      result.notes = "the model gave " + std::to_string(parsed->size()) + " of " +
                     std::to_string(request.count) + " ideas";
    }
    return result;
  }
};

class LlmBrancher final : public Brancher, private LlmGeneratorBase {
 public:
  LlmBrancher(LlmClient& client, LlmGeneratorOptions options)
      : LlmGeneratorBase(client, std::move(options)) {}

  std::string name() const override { return GeneratorName(); }

  StatusOr<BranchResult> Branch(const BranchRequest& request) override {
    if (!request.problem || !request.parent || !request.idea) {
      return InvalidArgumentError("BranchRequest needs a problem, a parent and an idea");
    }
    auto values = CommonValues(*request.problem, request.parent);
    values["idea"] = request.idea->text;
    values["idea_category"] = std::string(ToString(request.idea->category));
    auto build = [&](int history_limit) {
      values["history"] = internal::RenderIdeaHistory(request.history,
                                                      request.parent->candidate.id, history_limit);
      std::vector<ChatRequest> requests;
      if (request.failed) {
        values["failed_id"] = request.failed->candidate.id;
        values["failed"] = internal::RenderKernel(request.failed->candidate);
        values["failure"] = internal::RenderEvaluation(request.failed->evaluation);
        requests.push_back(MakeRequest(values, options_.prompts.repair,
                                       options_.code_temperature, "repair " + request.label));
      } else {
        values["branches"] = std::to_string(request.count);
        for (int j = 0; j < request.count; ++j) {
          values["branch"] = std::to_string(j + 1);
          values["design_axis"] = internal::DesignAxis(j, request.count);
          requests.push_back(MakeRequest(values, options_.prompts.branch,
                                         options_.code_temperature,
                                         "branch " + request.label + ".b" + std::to_string(j)));
        }
      }
      return requests;
    };
    Usage usage;
    auto replies = CompleteWithContextRetry(client_, build, options_.max_history_ideas,
                                            request.cancel, request.on_usage, &usage, billing_);
    BranchResult result;
    result.input_tokens = usage.input_tokens;
    result.output_tokens = usage.output_tokens;
    result.cost_usd = usage.cost_usd;
    // A reply that holds no usable kernel: the reason, or the candidate.
    auto parse = [&](const ChatResponse& reply, std::vector<std::string>* repairs)
        -> StatusOr<Candidate> {
      KSEARCH_ASSIGN_OR_RETURN(KernelBlocks blocks, ExtractKernelBlocks(reply.content));
      KSEARCH_ASSIGN_OR_RETURN(LaunchPlan plan, LaunchPlan::FromJson(blocks.launch_plan_json,
                                                                      "the reply's launch plan"));
      *repairs = std::move(blocks.repairs);
      Candidate c;
      c.source = std::move(blocks.cuda_source);
      c.plan = std::move(plan);
      c.compile_options = request.parent->candidate.compile_options;
      return c;
    };
    std::vector<std::string> why(replies.size());
    std::vector<std::vector<std::string>> repairs(replies.size());
    result.candidates.resize(replies.size());
    std::vector<size_t> reformat;  // replies worth one more request
    for (size_t j = 0; j < replies.size(); ++j) {
      StatusOr<ChatResponse>& reply = replies[j];
      if (!reply.ok()) {
        if (reply.status().code() == StatusCode::kCancelled && request.cancel &&
            request.cancel->load()) {
          continue;  // the search stopped; no note needed
        }
        if (EndsRun(reply.status(), client_)) return reply.status();
        why[j] = "request failed: " + reply.status().ToString();
        // A reply cut at the output limit may fit when asked for code only.
        if (reply.status().code() == StatusCode::kOutOfRange &&
            !IsContextLengthError(reply.status())) {
          reformat.push_back(j);
        }
        continue;
      }
      StatusOr<Candidate> c = parse(*reply, &repairs[j]);
      if (c.ok()) {
        result.candidates[j] = std::move(*c);
      } else {
        why[j] = c.status().message();
        reformat.push_back(j);
      }
    }
    // One more request per unusable reply, quoting what was wrong.
    if (options_.reformat_attempts > 0 && !reformat.empty() &&
        !(request.cancel && request.cancel->load())) {
      std::vector<ChatRequest> again = build(options_.max_history_ideas);
      std::vector<ChatRequest> asks;
      for (size_t j : reformat) {
        ChatRequest ask = again[j];
        if (replies[j].ok()) {
          ask.messages.push_back({ChatMessage::Role::kAssistant, replies[j]->content});
        }
        ask.messages.push_back(
            {ChatMessage::Role::kUser,
             "Your reply could not be used: " + why[j] +
                 ". Reply again with only the complete kernel source in one ```cuda block "
                 "(device code only: no host code, no main(), no PyTorch wrapper) and the "
                 "complete launch plan in one ```json block, with no explanation."});
        ask.tag += ".reformat";
        asks.push_back(std::move(ask));
      }
      Usage more;
      std::vector<StatusOr<ChatResponse>> second =
          CompleteAll(client_, std::move(asks), request.cancel, request.on_usage, &more, billing_);
      result.input_tokens += more.input_tokens;
      result.output_tokens += more.output_tokens;
      result.cost_usd += more.cost_usd;
      for (size_t k = 0; k < reformat.size(); ++k) {
        const size_t j = reformat[k];
        if (!second[k].ok()) {
          if (EndsRun(second[k].status(), client_) &&
              second[k].status().code() != StatusCode::kCancelled) {
            return second[k].status();
          }
          why[j] += "; asked again: " + second[k].status().message();
          continue;
        }
        StatusOr<Candidate> c = parse(*second[k], &repairs[j]);
        if (c.ok()) {
          result.candidates[j] = std::move(*c);
          repairs[j].insert(repairs[j].begin(), "asked again after: " + why[j]);
          why[j].clear();
        } else {
          why[j] += "; asked again: " + c.status().message();
        }
      }
    }
    // Candidates keep their branch index (empty slots stay empty).
    for (size_t j = 0; j < replies.size(); ++j) {
      std::string text = why[j];
      for (const std::string& r : repairs[j]) text += (text.empty() ? "salvaged: " : "; ") + r;
      if (text.empty()) continue;
      if (!result.notes.empty()) result.notes += "; ";
      result.notes +=
          (request.failed ? std::string("repair") : "branch " + std::to_string(j)) + ": " + text;
    }
    return result;
  }
};

}  // namespace

StatusOr<std::unique_ptr<IdeaGenerator>> MakeLlmIdeaGenerator(LlmClient& client,
                                                              const LlmGeneratorOptions& options) {
  KSEARCH_RETURN_IF_ERROR(options.prompts.Validate());
  return std::unique_ptr<IdeaGenerator>(std::make_unique<LlmIdeaGenerator>(client, options));
}

StatusOr<std::unique_ptr<Brancher>> MakeLlmBrancher(LlmClient& client,
                                                    const LlmGeneratorOptions& options) {
  KSEARCH_RETURN_IF_ERROR(options.prompts.Validate());
  return std::unique_ptr<Brancher>(std::make_unique<LlmBrancher>(client, options));
}

}  // namespace ksearch
