#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ksearch/llm_recording.h"
#include "ksearch/replay_llm_client.h"
#include "llm/callbacks.h"

namespace ksearch {
namespace internal {

class ReplayLlmClientImpl : public std::enable_shared_from_this<ReplayLlmClientImpl> {
 public:
  ReplayLlmClientImpl(std::vector<LlmExchange> exchanges, ReplayLlmClient::Options options)
      : options_(options) {
    for (LlmExchange& exchange : exchanges) {
      std::string hash = RequestHash(exchange.request);
      by_hash_[hash].push_back(Entry{std::move(exchange), false});
    }
    // Issue order, not finishing order: identical requests (branches of one
    // idea) get their replies in the order the recorded search asked.
    for (auto& [hash, entries] : by_hash_) {
      std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.exchange.request_id < b.exchange.request_id;
      });
    }
    // The vectors above no longer change, so pointers into them stay valid.
    if (options_.match_tag_when_hash_differs) {
      for (auto& [hash, entries] : by_hash_) {
        for (Entry& e : entries) {
          if (!e.exchange.request.tag.empty()) by_tag_[e.exchange.request.tag].push_back(&e);
        }
      }
      for (auto& [tag, entries] : by_tag_) {
        std::stable_sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
          return a->exchange.request_id < b->exchange.request_id;
        });
      }
    }
  }

  void Start() {
    // The thread owns a reference: a client destroyed from one of its own
    // callbacks stays alive until the thread has delivered everything.
    thread_ = std::thread([self = shared_from_this()] { self->Run(); });
    thread_id_ = thread_.get_id();
  }

  // Delivers what is queued, then ends the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (std::this_thread::get_id() == thread_id_) {
      thread_.detach();
    } else if (thread_.joinable()) {
      thread_.join();
    }
  }

  uint64_t Complete(ChatRequest request, LlmClient::Callback done) {
    Job job;
    job.started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    job.done = std::move(done);
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = next_id_++;
    job.id = id;
    // Chosen now, under the lock, so that the reply depends only on the order
    // of Complete() calls.
    job.result = Choose(request, &job.provider);
    job.request = std::move(request);
    jobs_.push_back(std::move(job));
    wake_.notify_one();
    return id;
  }

  void Cancel(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Job& job : jobs_) {
      if (job.id == id) job.result = CancelledError("replay: request cancelled");
    }
  }

  LlmTotals totals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_;
  }

  void SetObserver(LlmClient::ExchangeObserver observer) {
    std::lock_guard<std::mutex> lock(mutex_);
    observer_ = std::move(observer);
  }

  int64_t misses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return misses_;
  }

  int64_t tag_matches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return tag_matches_;
  }

 private:
  struct Entry {
    LlmExchange exchange;
    bool served = false;
  };
  struct Job {
    uint64_t id = 0;
    ChatRequest request;
    LlmClient::Callback done;
    StatusOr<ChatResponse> result = Status(StatusCode::kUnknown, "not set");
    std::string provider = "replay";
    int64_t started_unix_ms = 0;
  };

  // The first unserved exchange recorded under the request's tag and model,
  // or null.
  Entry* ByTag(const ChatRequest& request) {
    if (request.tag.empty()) return nullptr;
    auto it = by_tag_.find(request.tag);
    if (it == by_tag_.end()) return nullptr;
    for (Entry* e : it->second) {
      if (!e->served && e->exchange.request.model == request.model) return e;
    }
    return nullptr;
  }

  StatusOr<ChatResponse> Choose(const ChatRequest& request, std::string* provider) {
    std::string hash = RequestHash(request);
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end() && options_.match_tag_when_hash_differs) {
      if (Entry* e = ByTag(request)) {
        ++tag_matches_;
        e->served = true;
        *provider = e->exchange.provider;
        return e->exchange.response;
      }
    }
    if (it == by_hash_.end()) {
      ++misses_;
      return NotFoundError("replay: no recorded exchange for request hash " + hash +
                           " (model \"" + request.model + "\", tag \"" + request.tag + "\")");
    }
    std::vector<Entry>& entries = it->second;
    Entry* chosen = nullptr;
    if (options_.prefer_same_tag) {
      for (Entry& e : entries) {
        if (!e.served && e.exchange.request.tag == request.tag) {
          chosen = &e;
          break;
        }
      }
    }
    if (chosen == nullptr) {
      for (Entry& e : entries) {
        if (!e.served) {
          chosen = &e;
          break;
        }
      }
    }
    if (chosen == nullptr && options_.match_tag_when_hash_differs) {
      chosen = ByTag(request);
      if (chosen != nullptr) ++tag_matches_;
    }
    if (chosen == nullptr && options_.cycle_when_exhausted) {
      chosen = &entries[cycle_[hash]++ % entries.size()];
    }
    if (chosen == nullptr) {
      ++misses_;
      return NotFoundError("replay: all " + std::to_string(entries.size()) +
                           " recorded replies for request hash " + hash + " (model \"" +
                           request.model + "\") were already served");
    }
    chosen->served = true;
    *provider = chosen->exchange.provider;
    return chosen->exchange.response;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything delivered
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      ++totals_.requests;
      if (job.result.ok()) {
        totals_.input_tokens += job.result->input_tokens;
        totals_.output_tokens += job.result->output_tokens;
        totals_.cost_usd += job.result->cost_usd;
      } else {
        ++totals_.failures;
      }
      LlmClient::ExchangeObserver observer = observer_;
      lock.unlock();
      if (observer) {
        LlmExchange exchange{job.provider, RequestHash(job.request), job.request, job.result,
                             job.started_unix_ms, job.id};
        llm::Deliver({}, "exchange observer", [&] { observer(exchange); });
      }
      llm::Deliver({}, "completion callback", [&] { job.done(std::move(job.result)); });
      lock.lock();
    }
  }

  const ReplayLlmClient::Options options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_map<std::string, std::vector<Entry>> by_hash_;
  std::unordered_map<std::string, std::vector<Entry*>> by_tag_;
  std::unordered_map<std::string, size_t> cycle_;
  std::deque<Job> jobs_;
  LlmClient::ExchangeObserver observer_;
  LlmTotals totals_;
  int64_t misses_ = 0;
  int64_t tag_matches_ = 0;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace internal

StatusOr<std::unique_ptr<ReplayLlmClient>> ReplayLlmClient::Create(
    std::vector<LlmExchange> exchanges) {
  return Create(std::move(exchanges), Options());
}

StatusOr<std::unique_ptr<ReplayLlmClient>> ReplayLlmClient::Create(
    std::vector<LlmExchange> exchanges, Options options) {
  try {
    auto impl = std::make_shared<internal::ReplayLlmClientImpl>(std::move(exchanges), options);
    impl->Start();
    return std::unique_ptr<ReplayLlmClient>(new ReplayLlmClient(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("ReplayLlmClient::Create: ") + e.what());
  }
}

StatusOr<std::unique_ptr<ReplayLlmClient>> ReplayLlmClient::Open(const std::string& path) {
  return Open(path, Options());
}

StatusOr<std::unique_ptr<ReplayLlmClient>> ReplayLlmClient::Open(const std::string& path,
                                                                 Options options) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<LlmExchange> exchanges, LoadLlmRecording(path));
  return Create(std::move(exchanges), options);
}

ReplayLlmClient::ReplayLlmClient(std::shared_ptr<internal::ReplayLlmClientImpl> impl)
    : impl_(std::move(impl)) {}

ReplayLlmClient::~ReplayLlmClient() { impl_->Stop(); }

uint64_t ReplayLlmClient::Complete(ChatRequest request, Callback done) {
  return impl_->Complete(std::move(request), std::move(done));
}
void ReplayLlmClient::Cancel(uint64_t request_id) { impl_->Cancel(request_id); }
LlmTotals ReplayLlmClient::totals() const { return impl_->totals(); }
void ReplayLlmClient::SetObserver(ExchangeObserver observer) {
  impl_->SetObserver(std::move(observer));
}
std::string ReplayLlmClient::provider() const { return "replay"; }
int64_t ReplayLlmClient::misses() const { return impl_->misses(); }

int64_t ReplayLlmClient::tag_matches() const { return impl_->tag_matches(); }

}  // namespace ksearch
