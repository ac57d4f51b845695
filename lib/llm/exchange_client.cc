// ExchangeLlmClient: requests written as files, replies read from files, on
// one polling thread that also delivers every callback.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/file_util.h"
#include "ksearch/exchange_llm_client.h"
#include "llm/callbacks.h"
#include "store/records.h"

namespace ksearch {
namespace internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

Status MakeFolder(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return Status::Ok();
    return InvalidArgumentError(path + ": exists and is not a folder");
  }
  int error = errno;
  std::string message = path + ": cannot create the folder: " + std::strerror(error);
  if (error == ENOENT) return NotFoundError(message);
  if (error == EACCES || error == EPERM || error == EROFS) return PermissionDeniedError(message);
  return UnknownError(message);
}

// What a poll saw of a reply file; a file is read once two polls see the same.
struct FileStamp {
  std::string path;
  off_t size = 0;
  int64_t mtime_ns = 0;
  ino_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};

std::optional<FileStamp> Stamp(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  return FileStamp{path, info.st_size,
                   int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec, info.st_ino};
}

}  // namespace

class ExchangeLlmClientImpl : public std::enable_shared_from_this<ExchangeLlmClientImpl> {
 public:
  explicit ExchangeLlmClientImpl(ExchangeLlmClient::Options options)
      : options_(std::move(options)),
        requests_dir_(JoinPath(options_.folder, "requests")),
        replies_dir_(JoinPath(options_.folder, "replies")) {}

  Status MakeFolders() {
    KSEARCH_RETURN_IF_ERROR(MakeFolder(options_.folder));
    KSEARCH_RETURN_IF_ERROR(MakeFolder(requests_dir_));
    return MakeFolder(replies_dir_);
  }

  void Start() {
    // The thread owns a reference: a client destroyed from one of its own
    // callbacks stays alive until the thread has delivered everything.
    thread_ = std::thread([self = shared_from_this()] { self->Run(); });
    thread_id_ = thread_.get_id();
  }

  // Cancels what is pending, lets the thread deliver it, and ends the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      for (auto& [id, job] : pending_) {
        job.result = CancelledError("exchange: the client was destroyed");
        ready_.push_back(std::move(job));
      }
      pending_.clear();
    }
    wake_.notify_all();
    if (std::this_thread::get_id() == thread_id_) {
      thread_.detach();
    } else if (thread_.joinable()) {
      thread_.join();
    }
  }

  uint64_t Complete(ChatRequest request, LlmClient::Callback done) {
    if (request.model.empty()) request.model = options_.default_model;
    Job job;
    job.name = ExchangeRequestName(request);
    job.text = ExchangeRequestToJson(request);
    job.request = std::move(request);
    job.done = std::move(done);
    job.asked = SteadyClock::now();
    job.started_unix_ms = NowUnixMs();
    std::lock_guard<std::mutex> lock(mutex_);
    job.id = next_id_++;
    const uint64_t id = job.id;
    if (stopping_) {
      job.result = CancelledError("exchange: the client is shutting down");
      ready_.push_back(std::move(job));
    } else {
      if (requested_set_.insert(job.name).second) requested_.push_back(job.name);
      pending_.emplace(id, std::move(job));
    }
    wake_.notify_all();
    return id;
  }

  // A reply already in the folder has arrived: the polling thread takes it
  // once it has settled (within two polls) instead of cancelling it.
  void Cancel(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    it->second.cancelling = true;
    wake_.notify_all();
  }

  LlmTotals totals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_;
  }

  void SetObserver(LlmClient::ExchangeObserver observer) {
    std::lock_guard<std::mutex> lock(mutex_);
    observer_ = std::move(observer);
  }

  ExchangeLlmClient::Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    ExchangeLlmClient::Stats s = stats_;
    s.pending = static_cast<int>(pending_.size());
    const auto now = SteadyClock::now();
    bool first = true;
    for (const auto& [id, job] : pending_) {
      double age = std::chrono::duration<double>(now - job.asked).count();
      s.oldest_pending_seconds = first ? age : std::max(s.oldest_pending_seconds, age);
      s.newest_pending_seconds = first ? age : std::min(s.newest_pending_seconds, age);
      first = false;
    }
    return s;
  }

  const std::string& folder() const { return options_.folder; }

  std::vector<std::string> requested() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requested_;
  }

 private:
  struct Job {
    uint64_t id = 0;
    std::string name;
    std::string text;  // the request file's contents
    ChatRequest request;
    LlmClient::Callback done;
    SteadyClock::time_point asked;
    int64_t started_unix_ms = 0;
    bool written = false;
    std::optional<FileStamp> seen;  // the reply file as an earlier poll found it
    SteadyClock::time_point seen_at;
    // Cancel() was called: the next polls still take a reply already in the
    // folder (it has arrived, and may be paid for), else deliver kCancelled.
    bool cancelling = false;
    int polls_since_cancel = 0;
    StatusOr<ChatResponse> result = Status(StatusCode::kUnknown, "not set");
  };
  // Writes the request file unless the same text is there already (a
  // resumed search asking again keeps the file, and its time, as it was).
  Status WriteRequest(const Job& job) const {
    const std::string path = JoinPath(requests_dir_, job.name + ".json");
    StatusOr<std::string> existing = ReadFile(path);
    if (existing.ok() && *existing == job.text) return Status::Ok();
    if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) {
      return existing.status().WithContext("exchange");
    }
    Status written = WriteFileAtomically(path, job.text);
    return written.ok() ? written : written.WithContext("exchange: writing a request");
  }

  // The reply file of `job` once it has stayed the same for a poll interval.
  std::optional<std::string> SettledReply(Job& job) const {
    std::optional<FileStamp> now;
    for (const char* extension : {".json", ".txt"}) {
      now = Stamp(JoinPath(replies_dir_, job.name + extension));
      if (now) break;
    }
    if (!now) {
      job.seen.reset();
      return std::nullopt;
    }
    if (job.seen && *job.seen == *now) {
      const double settled = std::chrono::duration<double>(SteadyClock::now() - job.seen_at).count();
      // Half an interval: a poll woken early by Complete() still counts.
      if (settled >= 0.5 * options_.poll_interval_seconds) return now->path;
      return std::nullopt;
    }
    job.seen = now;
    job.seen_at = SteadyClock::now();
    return std::nullopt;
  }

  // What the file means for the request; counts usage and bad files.
  StatusOr<ChatResponse> Interpret(const Job& job, const std::string& path) {
    StatusOr<ExchangeReply> read = ReadExchangeReply(path);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!read.ok()) {
      ++stats_.bad_replies;
      return read.status().WithContext("exchange");
    }
    ++stats_.replies_read;
    if (!read->reply.ok()) {
      const Status& recorded = read->reply.status();
      return Status(recorded.code(), "exchange: " + recorded.message() + " (recorded in " + path + ")");
    }
    ChatResponse response = std::move(*read->reply);
    if (!read->usage_known) ++stats_.replies_without_usage;
    if (response.model.empty()) response.model = job.request.model;
    if (response.cost_usd <= 0 && read->usage_known) {
      const std::string& priced =
          options_.prices.Find(response.model) ? response.model : job.request.model;
      response.cost_usd =
          options_.prices.CostUsd(priced, response.input_tokens, response.output_tokens);
    }
    response.latency_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - job.asked).count();
    response.attempts = std::max(1, response.attempts);
    // Billed whatever follows: the answering side paid for it.
    totals_.input_tokens += response.input_tokens;
    totals_.output_tokens += response.output_tokens;
    totals_.cost_usd += response.cost_usd;
    if (response.finish_reason == FinishReason::kLength) {
      return OutOfRangeError("exchange: " + path +
                             ": the reply was cut at max_tokens (finish_reason \"length\")");
    }
    if (response.content.find_first_not_of(" \t\r\n") == std::string::npos) {
      return DataLossError("exchange: " + path + ": the reply is empty");
    }
    return response;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (ready_.empty() && !stopping_) {
        wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_interval_seconds));
      }
      // Files are written and read without the lock: Complete() and Cancel()
      // must not wait for the disk.
      std::vector<uint64_t> ids;
      for (const auto& [id, job] : pending_) ids.push_back(id);
      lock.unlock();
      for (uint64_t id : ids) Poll(id);
      lock.lock();
      std::deque<Job> deliver = std::move(ready_);
      ready_.clear();
      const bool done = stopping_ && pending_.empty();
      LlmClient::ExchangeObserver observer = observer_;
      for (const Job& job : deliver) {
        // A request cancelled while it waits was neither answered nor billed:
        // a resumed search asks for the same file again.
        if (job.result.status().code() == StatusCode::kCancelled) continue;
        ++totals_.requests;
        if (!job.result.ok()) ++totals_.failures;
      }
      lock.unlock();
      for (Job& job : deliver) Deliver(job, observer);
      lock.lock();
      if (done && ready_.empty()) return;
    }
  }

  // Writes the request file of pending job `id` if it is not written yet,
  // and takes its reply when one has settled.
  void Poll(uint64_t id) {
    Job probe;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;  // cancelled meanwhile
      probe.name = it->second.name;
      probe.text = it->second.written ? std::string() : it->second.text;
      probe.request.model = it->second.request.model;  // all Interpret needs of it
      probe.written = it->second.written;
      probe.seen = it->second.seen;
      probe.seen_at = it->second.seen_at;
      probe.asked = it->second.asked;
      probe.cancelling = it->second.cancelling;
    }
    std::optional<StatusOr<ChatResponse>> result;
    bool wrote = false;
    if (!probe.written) {
      Status written = WriteRequest(probe);
      if (written.ok()) {
        wrote = true;
      } else {
        result = written;
      }
    }
    std::optional<std::string> reply;
    if (!result) reply = SettledReply(probe);
    if (reply) result = Interpret(probe, *reply);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    if (wrote) ++stats_.requests_written;
    it->second.written = true;
    it->second.seen = probe.seen;
    it->second.seen_at = probe.seen_at;
    // No reply, or one still being written after two more polls: cancelled.
    if (!result && probe.cancelling &&
        (!probe.seen || ++it->second.polls_since_cancel > 2)) {
      result = CancelledError("exchange: request " + probe.name + " cancelled");
    }
    if (!result) return;
    it->second.result = std::move(*result);
    ready_.push_back(std::move(it->second));
    pending_.erase(it);
  }

  static void Deliver(Job& job, const LlmClient::ExchangeObserver& observer) {
    if (observer) {
      LlmExchange exchange{"exchange", RequestHash(job.request), job.request, job.result,
                           job.started_unix_ms, job.id};
      llm::Deliver({}, "exchange observer", [&] { observer(exchange); });
    }
    llm::Deliver({}, "completion callback", [&] { job.done(std::move(job.result)); });
  }

  const ExchangeLlmClient::Options options_;
  const std::string requests_dir_;
  const std::string replies_dir_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Job> pending_;
  std::deque<Job> ready_;
  LlmClient::ExchangeObserver observer_;
  LlmTotals totals_;
  ExchangeLlmClient::Stats stats_;
  std::vector<std::string> requested_;
  std::set<std::string> requested_set_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace internal

StatusOr<std::unique_ptr<ExchangeLlmClient>> ExchangeLlmClient::Create(Options options) {
  if (options.folder.empty()) {
    return InvalidArgumentError("exchange: no folder given (exchange:DIR)");
  }
  if (!(options.poll_interval_seconds > 0) || options.poll_interval_seconds > 3600) {
    return InvalidArgumentError("exchange: poll_interval_seconds must be in (0, 3600], got " +
                                std::to_string(options.poll_interval_seconds));
  }
  try {
    auto impl = std::make_shared<internal::ExchangeLlmClientImpl>(std::move(options));
    KSEARCH_RETURN_IF_ERROR(impl->MakeFolders());
    impl->Start();
    return std::unique_ptr<ExchangeLlmClient>(new ExchangeLlmClient(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("ExchangeLlmClient::Create: ") + e.what());
  }
}

ExchangeLlmClient::ExchangeLlmClient(std::shared_ptr<internal::ExchangeLlmClientImpl> impl)
    : impl_(std::move(impl)) {}
ExchangeLlmClient::~ExchangeLlmClient() { impl_->Stop(); }

uint64_t ExchangeLlmClient::Complete(ChatRequest request, Callback done) {
  return impl_->Complete(std::move(request), std::move(done));
}
void ExchangeLlmClient::Cancel(uint64_t request_id) { impl_->Cancel(request_id); }
LlmTotals ExchangeLlmClient::totals() const { return impl_->totals(); }
void ExchangeLlmClient::SetObserver(ExchangeObserver observer) {
  impl_->SetObserver(std::move(observer));
}
std::string ExchangeLlmClient::provider() const { return "exchange"; }
ExchangeLlmClient::Stats ExchangeLlmClient::stats() const { return impl_->stats(); }
const std::string& ExchangeLlmClient::folder() const { return impl_->folder(); }
std::vector<std::string> ExchangeLlmClient::requested() const { return impl_->requested(); }

}  // namespace ksearch
