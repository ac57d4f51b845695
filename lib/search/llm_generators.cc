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
#include "search/idea_reply.h"
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

// A request the run's SpendingGate refused: it was never sent.
bool NotSent(const Status& status) {
  return status.code() == StatusCode::kResourceExhausted &&
         status.message().starts_with("not sent: ");
}

// A request that never reached the model: an outage, time-outs or rate
// limits that outlasted the client's retries.
bool Unreachable(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return true;
    case StatusCode::kResourceExhausted:
      return !NotSent(status);
    default:
      return false;
  }
}

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

// How the requests of one generator call are paid for: the call's cancel
// flag; where each reply's usage goes (`sink`, on the client's thread,
// rejected but billed replies included through `billing`; into `usage`
// when there is no sink); the run's gate, which admits each request before
// it is sent (may be null).
struct Spend {
  const std::atomic<bool>* cancel = nullptr;
  UsageSink sink;
  Usage* usage = nullptr;
  std::shared_ptr<BillingTracker> billing;
  SpendingGate* gate = nullptr;
};

// The most a request can cost: its prompt, estimated, and its whole output
// limit, at the client's price.
GeneratorUsage WorstCase(const LlmClient& client, const ChatRequest& request) {
  std::vector<std::string_view> messages;
  for (const ChatMessage& m : request.messages) messages.push_back(m.content);
  GeneratorUsage worst;
  worst.input_tokens = EstimatePromptTokens(request.system, messages);
  worst.output_tokens = request.max_tokens;
  worst.cost_usd = client.EstimateCostUsd(request.model, worst.input_tokens, worst.output_tokens)
                       .value_or(0.0);
  return worst;
}

// Issues every request the gate admits at once and waits for all replies; a
// refused request's reply is the gate's kResourceExhausted ("not sent: …").
// If `cancel` becomes true the pending requests are cancelled; the replies
// that had arrived are still returned (they are paid for), the others are
// kCancelled.
std::vector<StatusOr<ChatResponse>> CompleteAll(LlmClient& client,
                                                std::vector<ChatRequest> requests,
                                                const Spend& spend) {
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
    GeneratorUsage worst;
    if (spend.gate) {
      worst = WorstCase(client, requests[i]);
      if (Status admitted = spend.gate->Admit(worst); !admitted.ok()) {
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->results[i] = std::move(admitted);
        if (--shared->remaining == 0) shared->done.notify_all();
        continue;
      }
    }
    ids.push_back(client.Complete(
        std::move(requests[i]), [shared, i, worst, sink = spend.sink, billing = spend.billing,
                                 gate = spend.gate](StatusOr<ChatResponse> r) {
          // On the client's I/O thread.
          GeneratorUsage cost = billing->Reply();
          if (gate) gate->Settle(worst, cost);
          if (sink && (cost.input_tokens > 0 || cost.output_tokens > 0 || cost.cost_usd > 0)) {
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
      if (!cancelled && spend.cancel && spend.cancel->load()) {
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
    if (r->ok() && !spend.sink) {
      spend.usage->input_tokens += (*r)->input_tokens;
      spend.usage->output_tokens += (*r)->output_tokens;
      spend.usage->cost_usd += (*r)->cost_usd;
    }
    out.push_back(std::move(*r));
  }
  return out;
}

// CompleteAll, then once more with a shorter history for the requests that
// a context-length 400 rejected. `build(history_limit)` renders all requests.
std::vector<StatusOr<ChatResponse>> CompleteWithContextRetry(
    LlmClient& client, const std::function<std::vector<ChatRequest>(int)>& build,
    int history_limit, const Spend& spend) {
  std::vector<StatusOr<ChatResponse>> replies = CompleteAll(client, build(history_limit), spend);
  std::vector<size_t> again;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i].ok() && IsContextLengthError(replies[i].status())) again.push_back(i);
  }
  if (again.empty() || (spend.cancel && spend.cancel->load())) return replies;
  std::vector<ChatRequest> shorter = build(history_limit / 4);
  std::vector<ChatRequest> retry;
  for (size_t i : again) retry.push_back(std::move(shorter[i]));
  std::vector<StatusOr<ChatResponse>> second = CompleteAll(client, std::move(retry), spend);
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

// A reply's failure for the notes: a refused request says so as the gate
// worded it; any other failed request says it failed.
std::string FailureNote(const Status& status) {
  return NotSent(status) ? status.message() : "request failed: " + status.ToString();
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

  Spend MakeSpend(const std::atomic<bool>* cancel, const UsageSink& sink, SpendingGate* gate,
                  Usage* usage) const {
    Spend spend;
    spend.cancel = cancel;
    spend.sink = sink;
    spend.usage = usage;
    spend.billing = billing_;
    spend.gate = gate;
    return spend;
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
    const Spend spend = MakeSpend(request.cancel, request.on_usage, request.spending, &usage);
    auto replies = CompleteWithContextRetry(client_, build, options_.max_history_ideas, spend);
    IdeaResult result;
    StatusOr<ChatResponse>& reply = replies.front();
    std::string why;                   // why the reply is unusable
    bool worth_asking_again = false;   // a reply cut or malformed, not a request refused or lost
    StatusOr<internal::IdeaReply> parsed = InvalidArgumentError("no reply");
    if (!reply.ok()) {
      if (EndsRun(reply.status(), client_)) return reply.status();
      if (Unreachable(reply.status())) result.unreachable = reply.status();
      why = FailureNote(reply.status());
      // A reply cut at the output limit may fit when asked for the list only.
      worth_asking_again = reply.status().code() == StatusCode::kOutOfRange &&
                           !IsContextLengthError(reply.status());
    } else {
      parsed = internal::ParseIdeaReply(reply->content);
      if (!parsed.ok()) {
        why = parsed.status().message();
        worth_asking_again = true;
      }
    }
    std::vector<std::string> salvaged;
    if (!parsed.ok() && worth_asking_again && options_.reformat_attempts > 0 &&
        !(request.cancel && request.cancel->load())) {
      ChatRequest ask = build(options_.max_history_ideas).front();
      if (reply.ok()) ask.messages.push_back({ChatMessage::Role::kAssistant, reply->content});
      ask.messages.push_back(
          {ChatMessage::Role::kUser,
           "Your reply could not be used: " + why + ". Reply again with only the " +
               std::to_string(request.count) +
               " ideas, as one ```json block holding a list of objects with the fields "
               "\"category\" and \"idea\" ([{\"category\": \"memory_access\", \"idea\": "
               "\"…\"}]), with no other text."});
      ask.tag += ".reformat";
      std::vector<ChatRequest> asks;
      asks.push_back(std::move(ask));
      StatusOr<ChatResponse> second = std::move(CompleteAll(client_, std::move(asks), spend).front());
      if (!second.ok()) {
        if (EndsRun(second.status(), client_) &&
            second.status().code() != StatusCode::kCancelled) {
          return second.status();
        }
        why += "; asked again: " + FailureNote(second.status());
      } else if (parsed = internal::ParseIdeaReply(second->content); parsed.ok()) {
        salvaged.push_back("asked again after: " + why);
        why.clear();
      } else {
        why += "; asked again: " + parsed.status().message();
      }
    }
    result.input_tokens = usage.input_tokens;
    result.output_tokens = usage.output_tokens;
    result.cost_usd = usage.cost_usd;
    if (!parsed.ok()) {
      result.notes = reply.ok() || why.starts_with("not sent") ? why : "idea " + why;
      return result;
    }
    const std::vector<internal::ParsedIdea>& ideas = parsed->ideas;
    for (size_t j = 0; j < ideas.size() && static_cast<int>(j) < request.count; ++j) {
      Idea idea;
      const internal::ParsedIdea& p = ideas[j];
      if (p.category) {
        idea.category = *p.category;
      } else if (!request.categories.empty()) {
        idea.category = request.categories[j % request.categories.size()];
      }
      idea.text = p.text;
      idea.generator = GeneratorName();
      result.ideas.push_back(std::move(idea));
    }
    salvaged.insert(salvaged.end(), parsed->repairs.begin(), parsed->repairs.end());
    std::string notes;
    for (const std::string& r : salvaged) notes += (notes.empty() ? "salvaged: " : "; ") + r;
    if (static_cast<int>(ideas.size()) < request.count) {
      notes += (notes.empty() ? "" : "; ") + std::string("the model gave ") +
               std::to_string(ideas.size()) + " of " + std::to_string(request.count) + " ideas";
    }
    result.notes = std::move(notes);
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
    const Spend spend = MakeSpend(request.cancel, request.on_usage, request.spending, &usage);
    auto replies = CompleteWithContextRetry(client_, build, options_.max_history_ideas, spend);
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
    bool any_reply = false;
    for (size_t j = 0; j < replies.size(); ++j) {
      StatusOr<ChatResponse>& reply = replies[j];
      any_reply |= reply.ok();
      if (!reply.ok()) {
        if (reply.status().code() == StatusCode::kCancelled && request.cancel &&
            request.cancel->load()) {
          continue;  // the search stopped; no note needed
        }
        if (EndsRun(reply.status(), client_)) return reply.status();
        if (Unreachable(reply.status()) && result.unreachable.ok()) {
          result.unreachable = reply.status();
        }
        why[j] = FailureNote(reply.status());
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
    // Unreachable only when no request of the call got through.
    if (any_reply) result.unreachable = Status::Ok();
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
      std::vector<StatusOr<ChatResponse>> second = CompleteAll(
          client_, std::move(asks), MakeSpend(request.cancel, request.on_usage, request.spending, &more));
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
          why[j] += "; asked again: " + FailureNote(second[k].status());
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
