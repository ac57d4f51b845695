// The orchestrator side of the worker pool.
//
// All pool state lives on one thread, the loop thread, which runs the pool's
// io_context: socket reads and writes, timers (start-up limits, the
// per-evaluation watchdog, reaping) and the bookkeeping of the current
// Evaluate() call. The calling thread only compiles (on its own short-lived
// threads, posting each result to the loop) and waits. Keeping one owner for
// the state is what makes "exactly one evaluation per candidate, its own"
// easy to check: a candidate is either queued, held by one worker, or done.
//
// A worker holds candidates in the order they were sent; it answers
// "started" and then "result" for the front one. When a worker ends, the
// front candidate is blamed only if the worker had started it (or ended
// without saying why); everything else it held goes back to the queue as it
// was, in order.
#include "ksearch/worker_pool.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "cuda/compiler.h"
#include "cuda/candidate_compile.h"
#include "worker/messages.h"
#include "worker/pool_testing.h"
#include "worker/process.h"
#include "worker/protocol.h"

namespace ksearch {
namespace {

namespace asio = boost::asio;
using internal::Compiler;
using internal::CompileResult;
using namespace internal::worker;
using Clock = std::chrono::steady_clock;
using Socket = asio::local::stream_protocol::socket;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g s", s);
  return text;
}

// One candidate of the current Evaluate() call.
struct Task {
  const Candidate* candidate = nullptr;
  std::string content_hash;
  std::optional<CompileResult> compiled;  // empty until compiled, or when workers compile
  double compile_ms = 0.0;
  Clock::time_point queued_at;
  int deaths = 0;       // workers that ended while this was their front candidate
  std::string history;  // notes for the evaluation's details
  bool done = false;
};

struct Call {
  std::span<const Candidate> candidates;
  const std::atomic<bool>* cancel = nullptr;
  std::vector<Task> tasks;
  std::vector<Evaluation> results;
  std::deque<size_t> queue;  // compiled, waiting for a worker
  size_t remaining = 0;
  std::promise<void> finished;
};

// A candidate sent to a worker and not yet answered.
struct Held {
  uint64_t seq = 0;
  size_t task = 0;
  bool started = false;
  Clock::time_point started_at;
};

enum class SlotState {
  kOff,       // no process (before the first start, or left out)
  kStarting,  // spawned, init sent, waiting for ready
  kReady,     // judging
  kEnding,    // gone, leaving or being killed; waiting to reap it
};

// One GPU and the worker process currently serving it.
struct Slot {
  explicit Slot(asio::io_context& io, int gpu_ordinal)
      : gpu(gpu_ordinal),
        socket(io),
        start_timer(io),
        watchdog(io),
        reap_timer(io),
        restart_timer(io) {}

  int gpu;
  SlotState state = SlotState::kOff;
  uint64_t generation = 0;  // which process; stale handlers compare it
  pid_t pid = 0;
  Socket socket;
  FrameDecoder decoder;
  std::array<char, 64 * 1024> read_buffer{};
  std::deque<std::string> writes;  // frames not yet handed to the socket
  bool writing = false;
  // Changes whenever the queue is reset (a worker ended, a new process):
  // a write that completes afterwards belongs to the old queue.
  uint64_t write_epoch = 0;
  asio::steady_timer start_timer, watchdog, reap_timer, restart_timer;
  Clock::time_point spawned_at;
  std::deque<Held> held;
  std::optional<ReadyMessage> ready;
  double evaluation_timeout_seconds = 0.0;

  // Why the current process is ending, gathered until it is reaped.
  std::string end_reason;
  bool watchdog_fired = false;
  bool was_starting = false;
  std::optional<FatalMessage> fatal;
  std::optional<Status> start_error;  // the code a failed start reports
  std::string bye;
  Clock::time_point ending_since;
  bool kill_sent = false;

  int start_failures = 0;
  bool disabled = false;  // too many failed starts; retried at the next call
  Status last_error;
};

class WorkerPool final : public WorkerPoolEvaluator {
 public:
  WorkerPool(const Problem& problem, WorkerPoolOptions options, std::string binary,
             std::vector<std::string> worker_arguments)
      : problem_(problem),
        problem_json_(problem.ToJson()),
        options_(std::move(options)),
        binary_(std::move(binary)),
        worker_arguments_(std::move(worker_arguments)),
        work_(asio::make_work_guard(io_)) {
    compiler_ = std::make_unique<Compiler>(internal::CompilerOptionsFor(options_.evaluator));
    if (!options_.compile_in_workers) {
      compile_pool_ =
          std::make_unique<internal::ThreadPool>(internal::DefaultThreads(options_.compile_threads));
    }
  }

  ~WorkerPool() override {
    if (loop_.joinable()) {
      std::promise<void> stopped;
      std::future<void> wait = stopped.get_future();
      asio::post(io_, [this, &stopped] { Shutdown(&stopped); });
      wait.wait();
      work_.reset();
      io_.stop();
      loop_.join();
    }
  }

  Status Start();

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override;
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return reference_timing_; }
  std::optional<TimingStats> baseline_timing() const override { return baseline_timing_; }

  WorkerPoolStats stats() const override {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    return stats_;
  }
  std::vector<int> worker_pids() const override {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    return pids_;
  }
  std::vector<int> gpus() const override {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    return gpus_;
  }
  // Not OK while no worker can be started on any GPU (every slot gave up).
  Status health() const override {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    return health_;
  }

 private:
  // Everything below runs on the loop thread.
  void AddSlot(int gpu);
  // All first workers are ready: checks they agree and takes the pool's
  // device and reference figures from the first.
  Status FinishStartup();
  void StartSlot(Slot& slot);
  void Read(Slot& slot);
  void OnBytes(Slot& slot, uint64_t generation, const boost::system::error_code& ec, size_t n);
  void OnFrame(Slot& slot, Frame frame);
  void OnReady(Slot& slot, ReadyMessage ready);
  void OnStarted(Slot& slot, uint64_t seq);
  void OnResult(Slot& slot, ResultMessage result);
  void Send(Slot& slot, const Frame& frame);
  void WriteNext(Slot& slot);
  // Drops the frames not yet sent; a write still in flight completes on its
  // own and is then ignored.
  void ResetWrites(Slot& slot);
  // The process is gone or must go: kill it if `kill_now`, then reap it and
  // settle what it held (Settle).
  void EndWorker(Slot& slot, const std::string& reason, bool kill_now);
  void PollReap(Slot& slot, uint64_t generation);
  void Settle(Slot& slot, const std::string& how);
  void StartFailed(Slot& slot, const Status& status);
  void Dispatch();
  void Finish(size_t task, Evaluation evaluation);
  void CancelQueued(const std::string& why);
  bool Starved() const;
  std::string StarvedReason() const;
  void PollCancel();
  void OnCompiled(size_t task, StatusOr<CompileResult> compiled, double wall_ms);
  void BeginCall(Call* call);
  void Shutdown(std::promise<void>* stopped);
  void PublishPids();
  template <typename F>
  void UpdateStats(F&& update) {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    update(stats_);
  }

  const Problem problem_;
  const std::string problem_json_;
  const WorkerPoolOptions options_;
  const std::string binary_;
  const std::vector<std::string> worker_arguments_;  // test hooks (pool_testing.h)
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<internal::ThreadPool> compile_pool_;  // absent with compile_in_workers

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread loop_;
  std::mutex call_mutex_;  // one Evaluate at a time

  // Loop-thread state.
  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t next_seq_ = 1;
  Call* call_ = nullptr;
  std::optional<asio::steady_timer> cancel_timer_;
  bool shutting_down_ = false;
  std::promise<Status>* startup_ = nullptr;  // set while Start() waits
  bool discover_gpus_ = false;
  std::promise<void>* stopped_ = nullptr;

  // Set on the loop thread before Start() returns, read-only afterwards.
  DeviceInfo device_;
  std::optional<TimingStats> reference_timing_, baseline_timing_;
  std::string arch_;

  mutable std::mutex shared_mutex_;
  mutable Status health_;  // written by Starved(), read by health()
  WorkerPoolStats stats_;
  std::vector<int> pids_;
  std::vector<int> gpus_;
};

// ---------------------------------------------------------------------------
// Start-up

Status WorkerPool::Start() {
  loop_ = std::thread([this] { io_.run(); });
  std::promise<Status> started;
  std::future<Status> wait = started.get_future();
  asio::post(io_, [this, &started] {
    startup_ = &started;
    discover_gpus_ = options_.gpus.empty();
    // Without a list, the first worker says how many GPUs there are; the
    // orchestrator itself never initializes CUDA.
    if (discover_gpus_) {
      AddSlot(0);
    } else {
      for (int gpu : options_.gpus) AddSlot(gpu);
    }
    for (auto& slot : slots_) StartSlot(*slot);
  });
  return wait.get();
}

Status WorkerPool::FinishStartup() {
  const ReadyMessage& first = *slots_.front()->ready;
  for (const auto& slot : slots_) {
    const DeviceInfo& d = slot->ready->device;
    if (d.Arch() != first.device.Arch()) {
      return InvalidArgumentError(
          "GPUs of different archs: GPU " + std::to_string(slots_.front()->gpu) + " is " +
          first.device.Arch() + ", GPU " + std::to_string(slot->gpu) + " is " + d.Arch() +
          "; select GPUs of one arch (WorkerPoolOptions::gpus)");
    }
  }
  device_ = first.device;
  reference_timing_ = first.reference_timing;
  baseline_timing_ = first.baseline_timing;
  // As the in-process judge and the kernel cache compile (the front end's
  // one cache entry per kernel): the arch-specific feature set where the
  // capability has one.
  arch_ = device_.CompileArch();
  return Status::Ok();
}

void WorkerPool::AddSlot(int gpu) {
  slots_.push_back(std::make_unique<Slot>(io_, gpu));
  std::lock_guard<std::mutex> lock(shared_mutex_);
  gpus_.push_back(gpu);
  pids_.push_back(0);
}

void WorkerPool::PublishPids() {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    pids_[i] = (s.state == SlotState::kReady || s.state == SlotState::kStarting)
                   ? static_cast<int>(s.pid)
                   : 0;
  }
}

void WorkerPool::StartSlot(Slot& slot) {
  if (shutting_down_) return;
  std::vector<std::string> arguments = {"--gpu", std::to_string(slot.gpu)};
  arguments.insert(arguments.end(), worker_arguments_.begin(), worker_arguments_.end());
  auto spawned = Spawn(binary_, arguments);
  if (!spawned.ok()) {
    StartFailed(slot, spawned.status());
    return;
  }
  ++slot.generation;
  slot.pid = spawned->pid;
  boost::system::error_code assigned;
  slot.socket = Socket(io_);
  slot.socket.assign(asio::local::stream_protocol(), spawned->fd, assigned);
  if (assigned) {
    ::close(spawned->fd);
    Kill(slot.pid);
    slot.state = SlotState::kEnding;
    slot.was_starting = true;
    slot.end_reason = "could not watch its socket: " + assigned.message();
    slot.ending_since = Clock::now();
    PollReap(slot, slot.generation);
    return;
  }
  slot.state = SlotState::kStarting;
  slot.decoder = FrameDecoder();
  ResetWrites(slot);
  slot.held.clear();
  slot.ready.reset();
  slot.end_reason.clear();
  slot.watchdog_fired = false;
  slot.was_starting = false;
  slot.fatal.reset();
  slot.start_error.reset();
  slot.bye.clear();
  slot.kill_sent = false;
  slot.spawned_at = Clock::now();
  UpdateStats([](WorkerPoolStats& s) { ++s.worker_starts; });
  PublishPids();
  EvaluatorOptions options = options_.evaluator;
  options.device_ordinal = slot.gpu;
  // A fresh process restarts a replay seed's sequence: give each process of
  // each GPU its own, so that no two of them judge candidates on the same
  // inputs (without a replay seed every process draws its own secrets).
  if (options.replay_input_seed != 0) {
    options.replay_input_seed +=
        0x9e3779b97f4a7c15ull * (slot.generation * 1024 + static_cast<uint64_t>(slot.gpu));
  }
  Send(slot, Encode(InitMessage{problem_json_, options}));
  Read(slot);
  uint64_t generation = slot.generation;
  slot.start_timer.expires_after(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.worker_start_timeout_seconds)));
  slot.start_timer.async_wait([this, &slot, generation](const boost::system::error_code& ec) {
    if (ec || slot.generation != generation || slot.state != SlotState::kStarting) return;
    std::string why = "did not become ready within " +
                      Seconds(options_.worker_start_timeout_seconds) +
                      " (WorkerPoolOptions::worker_start_timeout_seconds)";
    slot.start_error =
        DeadlineExceededError("the worker on GPU " + std::to_string(slot.gpu) + " " + why);
    EndWorker(slot, why, /*kill_now=*/true);
  });
}

void WorkerPool::StartFailed(Slot& slot, const Status& status) {
  slot.state = SlotState::kOff;
  slot.last_error = status;
  ++slot.start_failures;
  PublishPids();
  if (startup_ != nullptr) {
    // The first start of a pool fails fast with the worker's own reason: a
    // missing binary or driver will not fix itself by retrying.
    std::promise<Status>* startup = startup_;
    startup_ = nullptr;
    startup->set_value(
        status.WithContext("starting ksearch-worker for GPU " + std::to_string(slot.gpu)));
    return;
  }
  if (shutting_down_) return;
  if (slot.start_failures >= options_.max_start_failures ||
      status.code() == StatusCode::kNotFound) {
    slot.disabled = true;
    if (call_ && Starved()) CancelQueued(StarvedReason());
    return;
  }
  uint64_t generation = slot.generation;
  slot.restart_timer.expires_after(std::chrono::milliseconds(200 * slot.start_failures));
  slot.restart_timer.async_wait([this, &slot, generation](const boost::system::error_code& ec) {
    if (ec || slot.generation != generation || slot.state != SlotState::kOff) return;
    StartSlot(slot);
  });
}

// ---------------------------------------------------------------------------
// Socket

void WorkerPool::Read(Slot& slot) {
  uint64_t generation = slot.generation;
  slot.socket.async_read_some(
      asio::buffer(slot.read_buffer),
      [this, &slot, generation](const boost::system::error_code& ec, size_t n) {
        OnBytes(slot, generation, ec, n);
      });
}

void WorkerPool::OnBytes(Slot& slot, uint64_t generation, const boost::system::error_code& ec,
                         size_t n) {
  if (slot.generation != generation || slot.state == SlotState::kEnding ||
      slot.state == SlotState::kOff) {
    return;
  }
  if (ec) {
    Status end = slot.decoder.Finish();
    // A reset is how a process that died with unread input closes.
    bool closed = ec == asio::error::eof || ec == asio::error::connection_reset;
    std::string reason = closed ? "closed its socket" : "socket error: " + ec.message();
    if (!end.ok()) reason += " (" + end.message() + ")";
    EndWorker(slot, reason, /*kill_now=*/false);
    return;
  }
  Status fed = slot.decoder.Feed(std::string_view(slot.read_buffer.data(), n));
  // Frames that arrived whole before any garbage still count: a result sent
  // just before a worker went wrong belongs to its candidate.
  while (auto frame = slot.decoder.Next()) {
    OnFrame(slot, std::move(*frame));
    if (slot.generation != generation || slot.state == SlotState::kEnding) return;
  }
  if (!fed.ok()) {
    slot.start_error = fed;
    EndWorker(slot, "broke the protocol: " + fed.message(), /*kill_now=*/true);
    return;
  }
  Read(slot);
}

void WorkerPool::Send(Slot& slot, const Frame& frame) {
  slot.writes.push_back(EncodeFrame(frame));
  if (!slot.writing) WriteNext(slot);
}

void WorkerPool::WriteNext(Slot& slot) {
  if (slot.writes.empty()) {
    slot.writing = false;
    return;
  }
  slot.writing = true;
  // The frame in flight belongs to its write, not to the queue: a worker
  // that ends while the socket still sends it clears the queue (Settle),
  // which must not free the bytes under the write or pop a frame for it.
  auto frame = std::make_shared<std::string>(std::move(slot.writes.front()));
  slot.writes.pop_front();
  const uint64_t epoch = slot.write_epoch;
  asio::async_write(slot.socket, asio::buffer(*frame),
                    [this, &slot, frame, epoch](const boost::system::error_code& ec, size_t) {
                      if (slot.write_epoch != epoch) return;  // the queue was reset since
                      if (ec) {
                        // Also reached after EndWorker closed the socket: a no-op then.
                        EndWorker(slot, "stopped reading its socket: " + ec.message(),
                                  /*kill_now=*/false);
                        return;
                      }
                      WriteNext(slot);
                    });
}

void WorkerPool::ResetWrites(Slot& slot) {
  slot.writes.clear();
  slot.writing = false;
  ++slot.write_epoch;
}

// ---------------------------------------------------------------------------
// Messages

void WorkerPool::OnFrame(Slot& slot, Frame frame) {
  auto violation = [&](const std::string& what) {
    EndWorker(slot, "broke the protocol: " + what, /*kill_now=*/true);
  };
  switch (frame.type) {
    case MessageType::kReady: {
      if (slot.state != SlotState::kStarting) return violation("'ready' after start-up");
      auto ready = DecodeReady(frame);
      if (!ready.ok()) return violation(ready.status().message());
      return OnReady(slot, std::move(*ready));
    }
    case MessageType::kFatal: {
      auto fatal = DecodeFatal(frame);
      if (!fatal.ok()) return violation(fatal.status().message());
      slot.fatal = *fatal;
      EndWorker(slot, "reported: " + fatal->message, /*kill_now=*/false);
      return;
    }
    case MessageType::kStarted: {
      auto started = DecodeStarted(frame);
      if (!started.ok()) return violation(started.status().message());
      return OnStarted(slot, started->seq);
    }
    case MessageType::kResult: {
      auto result = DecodeResult(frame);
      if (!result.ok()) return violation(result.status().message());
      return OnResult(slot, std::move(*result));
    }
    case MessageType::kBye: {
      auto bye = DecodeBye(frame);
      if (!bye.ok()) return violation(bye.status().message());
      // Nothing follows a bye; what the worker still holds is settled once
      // it is reaped (killed if it has not left in 2 s).
      slot.bye = bye->reason;
      EndWorker(slot, "left after " + bye->reason, /*kill_now=*/false);
      return;
    }
    case MessageType::kInit:
    case MessageType::kJudge:
    case MessageType::kShutdown:
      return violation("sent a '" + ToString(frame.type) +
                       "' frame, which only the orchestrator sends");
    case MessageType::kCompile:
    case MessageType::kCompiled:
      return violation("sent a '" + ToString(frame.type) +
                       "' frame, which only the compile helper's caller and the helper send");
  }
}

void WorkerPool::OnReady(Slot& slot, ReadyMessage ready) {
  slot.start_timer.cancel();
  if (!arch_.empty() && ready.device.CompileArch() != arch_) {
    slot.fatal = FatalMessage{StatusCode::kInvalidArgument,
                              "GPU " + std::to_string(slot.gpu) + " is " + ready.device.Arch() +
                                  " but the pool compiles for " + arch_};
    EndWorker(slot, slot.fatal->message, /*kill_now=*/true);
    return;
  }
  double launch = ready.launch_watchdog_seconds;
  slot.evaluation_timeout_seconds =
      options_.evaluation_timeout_seconds > 0
          ? options_.evaluation_timeout_seconds
          : std::max(options_.evaluation_timeout_floor_seconds,
                     10.0 * launch + 2.0 * options_.evaluator.max_timing_seconds +
                         options_.evaluator.max_warmup_seconds);
  int visible = ready.visible_devices;
  slot.ready = std::move(ready);
  slot.state = SlotState::kReady;
  slot.start_failures = 0;
  slot.disabled = false;
  double start_ms = MsBetween(slot.spawned_at, Clock::now());
  UpdateStats([start_ms](WorkerPoolStats& s) { s.worker_start_ms += start_ms; });
  PublishPids();
  if (startup_ != nullptr) {
    if (discover_gpus_) {
      discover_gpus_ = false;
      size_t first_new = slots_.size();
      for (int gpu = 1; gpu < visible; ++gpu) AddSlot(gpu);
      for (size_t i = first_new; i < slots_.size(); ++i) StartSlot(*slots_[i]);
      if (startup_ == nullptr) return;  // one of them failed at once
    }
    bool all = std::all_of(slots_.begin(), slots_.end(),
                           [](const auto& s) { return s->state == SlotState::kReady; });
    if (all) {
      std::promise<Status>* startup = startup_;
      startup_ = nullptr;
      startup->set_value(FinishStartup());
    }
    return;
  }
  Dispatch();
}

void WorkerPool::OnStarted(Slot& slot, uint64_t seq) {
  auto it =
      std::find_if(slot.held.begin(), slot.held.end(), [](const Held& h) { return !h.started; });
  if (it != slot.held.begin() || it == slot.held.end() || it->seq != seq) {
    EndWorker(slot,
              "broke the protocol: 'started' for sequence " + std::to_string(seq) +
                  ", which is not the next candidate it holds",
              /*kill_now=*/true);
    return;
  }
  it->started = true;
  it->started_at = Clock::now();
  if (call_) {
    double wait_ms = MsBetween(call_->tasks[it->task].queued_at, it->started_at);
    UpdateStats([wait_ms](WorkerPoolStats& s) { s.queue_wait_ms += wait_ms; });
  }
  uint64_t generation = slot.generation;
  slot.watchdog.expires_after(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(slot.evaluation_timeout_seconds)));
  slot.watchdog.async_wait([this, &slot, generation, seq](const boost::system::error_code& ec) {
    if (ec || slot.generation != generation || slot.held.empty() || slot.held.front().seq != seq)
      return;
    if (slot.state == SlotState::kEnding || slot.state == SlotState::kOff) return;
    slot.watchdog_fired = true;
    UpdateStats([](WorkerPoolStats& s) { ++s.watchdog_kills; });
    EndWorker(slot,
              "gave no result within the per-evaluation watchdog of " +
                  Seconds(slot.evaluation_timeout_seconds),
              /*kill_now=*/true);
  });
}

void WorkerPool::OnResult(Slot& slot, ResultMessage result) {
  if (slot.held.empty() || !slot.held.front().started || slot.held.front().seq != result.seq ||
      !call_) {
    EndWorker(slot,
              "broke the protocol: a result for sequence " + std::to_string(result.seq) +
                  ", which it was not judging",
              /*kill_now=*/true);
    return;
  }
  Task& task = call_->tasks[slot.held.front().task];
  Evaluation& e = result.evaluation;
  if (e.candidate_id != task.candidate->id || e.content_hash != task.content_hash) {
    // Never attribute a verdict to a candidate it may not belong to.
    EndWorker(slot,
              "answered for candidate '" + e.candidate_id + "' (content " + e.content_hash +
                  ") while judging '" + task.candidate->id + "'",
              /*kill_now=*/true);
    return;
  }
  slot.watchdog.cancel();
  size_t index = slot.held.front().task;
  slot.held.pop_front();
  if (task.compiled) {
    // The worker timed only its own part; the compile happened here.
    double judge_ms = std::max(0.0, e.total_ms - e.compile_ms);
    e.compile_ms = task.compile_ms;
    e.compile_cached = task.compiled->cached;
    e.total_ms = judge_ms + e.compile_ms;
    NoteUnsandboxed(*task.compiled, &e);
  }
  double check_ms = e.check_ms, timing_ms = e.timing_ms;
  UpdateStats([check_ms, timing_ms](WorkerPoolStats& s) {
    ++s.judged;
    s.check_ms += check_ms;
    s.timing_ms += timing_ms;
  });
  Finish(index, std::move(e));
  Dispatch();
}

// ---------------------------------------------------------------------------
// Ends of workers

void WorkerPool::EndWorker(Slot& slot, const std::string& reason, bool kill_now) {
  if (slot.state == SlotState::kEnding || slot.state == SlotState::kOff) return;
  slot.was_starting = slot.state == SlotState::kStarting;
  slot.state = SlotState::kEnding;
  slot.end_reason = reason;
  slot.ending_since = Clock::now();
  slot.start_timer.cancel();
  slot.watchdog.cancel();
  boost::system::error_code ignored;
  slot.socket.close(ignored);
  if (kill_now) {
    Kill(slot.pid);
    slot.kill_sent = true;
  }
  PublishPids();
  PollReap(slot, slot.generation);
}

void WorkerPool::PollReap(Slot& slot, uint64_t generation) {
  std::string how;
  if (TryReap(slot.pid, &how)) {
    Settle(slot, how);
    return;
  }
  double waited_ms = MsBetween(slot.ending_since, Clock::now());
  // A worker that closed its socket is on its way out; give it a moment to
  // finish (a context teardown after a hang takes a while) before SIGKILL.
  if (!slot.kill_sent && waited_ms > 2000.0) {
    Kill(slot.pid);
    slot.kill_sent = true;
  }
  if (waited_ms > 20000.0) {
    // Not reaped 18 s after SIGKILL (stuck in the driver): settle without it;
    // the zombie is reaped by init when this process ends.
    Settle(slot, "did not end after SIGKILL (pid " + std::to_string(slot.pid) + ")");
    return;
  }
  slot.reap_timer.expires_after(std::chrono::milliseconds(waited_ms < 100 ? 2 : 20));
  slot.reap_timer.async_wait([this, &slot, generation](const boost::system::error_code& ec) {
    if (ec || slot.generation != generation || slot.state != SlotState::kEnding) return;
    PollReap(slot, generation);
  });
}

void WorkerPool::Settle(Slot& slot, const std::string& how) {
  std::string gpu = "GPU " + std::to_string(slot.gpu);
  std::string process = "the worker on " + gpu + " (pid " + std::to_string(slot.pid) + ")";
  slot.state = SlotState::kOff;
  slot.pid = 0;
  ResetWrites(slot);
  PublishPids();
  if (shutting_down_) {
    if (stopped_ && std::all_of(slots_.begin(), slots_.end(),
                                [](const auto& s) { return s->state == SlotState::kOff; })) {
      std::promise<void>* stopped = stopped_;
      stopped_ = nullptr;
      stopped->set_value();
    }
    return;
  }
  if (slot.was_starting) {
    Status status =
        UnavailableError(process + " " + slot.end_reason + " (" + how + ") before it was ready");
    if (slot.start_error) status = Status(slot.start_error->code(), slot.start_error->message());
    if (slot.fatal) status = Status(slot.fatal->code, slot.fatal->message);
    StartFailed(slot, status);
    return;
  }
  UpdateStats([](WorkerPoolStats& s) { ++s.worker_exits; });
  std::deque<Held> held = std::move(slot.held);
  slot.held.clear();
  std::string ended = process + " " + slot.end_reason + " (" + how + ")";
  if (!held.empty() && call_) {
    const size_t front = held.front().task;
    const bool started = held.front().started;
    Task& task = call_->tasks[front];
    if (slot.watchdog_fired && started) {
      Evaluation e;
      e.candidate_id = task.candidate->id;
      e.content_hash = task.content_hash;
      e.status = EvalStatus::kTimeout;
      e.message = "no result within the per-evaluation watchdog of " +
                  Seconds(slot.evaluation_timeout_seconds) +
                  " (the launch watchdog did not catch it); " + process +
                  " was killed and replaced";
      e.details = task.history + ended;
      held.pop_front();
      Finish(front, std::move(e));
    } else if (started || slot.bye.empty()) {
      // Blame the candidate it was judging, but give it another worker: a
      // SIGKILL from outside or the OOM killer is not the candidate's doing.
      ++task.deaths;
      task.history += "attempt " + std::to_string(task.deaths) + ": " + ended + "\n";
      if (task.deaths > options_.retries_after_worker_death) {
        Evaluation e;
        e.candidate_id = task.candidate->id;
        e.content_hash = task.content_hash;
        e.status = EvalStatus::kCrashed;
        e.message =
            process + " ended while judging this candidate (" + how + ")" +
            (task.deaths > 1 ? " (" + std::to_string(task.deaths) + " workers in a row)" : "") +
            (slot.bye.empty() ? "" : ": " + slot.bye) + "; it was replaced";
        e.details = task.history;
        held.pop_front();
        Finish(front, std::move(e));
      }
    }
    UpdateStats([n = held.size()](WorkerPoolStats& s) { s.requeued += static_cast<int64_t>(n); });
    for (auto it = held.rbegin(); call_ && it != held.rend(); ++it)
      call_->queue.push_front(it->task);
  }
  slot.bye.clear();
  slot.fatal.reset();
  StartSlot(slot);
  Dispatch();
}

// ---------------------------------------------------------------------------
// Scheduling

void WorkerPool::Dispatch() {
  if (!call_) return;
  if (call_->cancel && call_->cancel->load()) {
    CancelQueued("the search stopped before this candidate was judged");
    return;
  }
  while (!call_->queue.empty()) {
    Slot* best = nullptr;
    for (auto& slot : slots_) {
      if (slot->state != SlotState::kReady) continue;
      if (static_cast<int>(slot->held.size()) > options_.prefetch_per_worker) continue;
      if (!best || slot->held.size() < best->held.size()) best = slot.get();
    }
    if (!best) break;
    size_t index = call_->queue.front();
    call_->queue.pop_front();
    Task& task = call_->tasks[index];
    JudgeMessage message;
    message.seq = next_seq_++;
    message.candidate = *task.candidate;
    message.compiled = task.compiled;
    best->held.push_back(Held{message.seq, index, false, {}});
    Send(*best, Encode(message));
  }
  if (Starved()) CancelQueued(StarvedReason());
}

// Also publishes the answer as health(): every place that asks whether the
// pool is starved keeps that in step, without a second rule.
bool WorkerPool::Starved() const {
  bool starved =
      std::all_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->disabled; });
  std::lock_guard<std::mutex> lock(shared_mutex_);
  health_ = starved ? UnavailableError(StarvedReason()) : Status::Ok();
  return starved;
}

std::string WorkerPool::StarvedReason() const {
  std::string why = "not judged: no worker could be started on any GPU";
  for (const auto& s : slots_) {
    why += "; GPU " + std::to_string(s->gpu) + ": " + s->last_error.message();
  }
  return why;
}

void WorkerPool::CancelQueued(const std::string& why) {
  if (!call_) return;
  std::deque<size_t> queue = std::move(call_->queue);
  call_->queue.clear();
  for (size_t index : queue) {
    Evaluation e;
    e.candidate_id = call_->tasks[index].candidate->id;
    e.content_hash = call_->tasks[index].content_hash;
    e.status = EvalStatus::kCancelled;
    e.message = why;
    e.details = call_->tasks[index].history;
    Finish(index, std::move(e));
    if (!call_) return;
  }
}

void WorkerPool::Finish(size_t index, Evaluation e) {
  Task& task = call_->tasks[index];
  if (task.done) return;  // cannot happen: a task is held by one worker at a time
  task.done = true;
  if (e.device.name.empty()) e.device = device_;
  e.relaxed_tolerance =
      e.relaxed_tolerance || problem_.tolerance.policy == TolerancePolicy::kRelaxed;
  if (e.status == EvalStatus::kOk && !task.history.empty()) {
    e.details += (e.details.empty() ? "" : "\n") +
                 std::string("judged again after its worker ended:\n") + task.history;
  }
  call_->results[index] = std::move(e);
  UpdateStats([](WorkerPoolStats& s) { ++s.candidates; });
  if (--call_->remaining == 0) {
    Call* call = call_;
    call_ = nullptr;
    if (cancel_timer_) cancel_timer_->cancel();
    call->finished.set_value();
  }
}

void WorkerPool::PollCancel() {
  if (!call_) return;
  if (call_->cancel && call_->cancel->load()) Dispatch();
  if (!call_) return;
  cancel_timer_->expires_after(std::chrono::milliseconds(20));
  cancel_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) PollCancel();
  });
}

void WorkerPool::OnCompiled(size_t index, StatusOr<CompileResult> compiled, double wall_ms) {
  if (!call_) return;
  Task& task = call_->tasks[index];
  if (!compiled.ok() && compiled.status().code() == StatusCode::kCancelled) {
    Evaluation e;
    e.candidate_id = task.candidate->id;
    e.content_hash = task.content_hash;
    e.status = EvalStatus::kCancelled;
    e.message = "the search stopped before this candidate was judged";
    Finish(index, std::move(e));
    return;
  }
  UpdateStats([wall_ms](WorkerPoolStats& s) {
    ++s.compiles;
    s.compile_ms += wall_ms;
  });
  Evaluation failure;
  failure.candidate_id = task.candidate->id;
  failure.content_hash = task.content_hash;
  if (FillCompileFailure(compiled, &failure)) {
    // No GPU needed to say so.
    failure.compile_ms = compiled.ok() ? compiled->compile_ms : wall_ms;
    failure.total_ms = failure.compile_ms;
    Finish(index, std::move(failure));
    return;
  }
  task.compile_ms = compiled->cached ? wall_ms : compiled->compile_ms;
  task.compiled = std::move(*compiled);
  task.queued_at = Clock::now();
  call_->queue.push_back(index);
  Dispatch();
}

void WorkerPool::BeginCall(Call* call) {
  call_ = call;
  for (auto& slot : slots_) {
    if (slot->disabled) {
      // A new call tries again: the binary may be back, the GPU reset.
      slot->disabled = false;
      slot->start_failures = 0;
      if (slot->state == SlotState::kOff) StartSlot(*slot);
    }
  }
  if (!cancel_timer_) cancel_timer_.emplace(io_);
  if (call->cancel) PollCancel();
  if (options_.compile_in_workers) {
    for (size_t i = 0; i < call->tasks.size(); ++i) {
      call->tasks[i].queued_at = Clock::now();
      call->queue.push_back(i);
    }
  }
  Dispatch();
}

void WorkerPool::Shutdown(std::promise<void>* stopped) {
  shutting_down_ = true;
  stopped_ = stopped;
  for (auto& slot : slots_) {
    slot->restart_timer.cancel();
    if (slot->state == SlotState::kStarting || slot->state == SlotState::kReady) {
      // Ask politely; the reaper kills it if it has not left in 2 s.
      Send(*slot, ShutdownFrame());
      slot->was_starting = false;
      slot->state = SlotState::kEnding;
      slot->end_reason = "was shut down";
      slot->ending_since = Clock::now();
      slot->start_timer.cancel();
      slot->watchdog.cancel();
      // Keep the socket open until the worker reads the shutdown; a hung one
      // is killed by PollReap.
      PollReap(*slot, slot->generation);
    }
  }
  if (stopped_ && std::all_of(slots_.begin(), slots_.end(),
                              [](const auto& s) { return s->state == SlotState::kOff; })) {
    stopped_ = nullptr;
    stopped->set_value();
  }
}

// ---------------------------------------------------------------------------
// The caller's side

std::vector<Evaluation> WorkerPool::Evaluate(std::span<const Candidate> candidates,
                                             const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (candidates.empty()) return {};
  Call call;
  call.candidates = candidates;
  call.cancel = cancel;
  call.tasks.resize(candidates.size());
  call.results.resize(candidates.size());
  call.remaining = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    call.tasks[i].candidate = &candidates[i];
    call.tasks[i].content_hash = candidates[i].ContentHash();
  }
  std::future<void> finished = call.finished.get_future();
  // Begun before any compile result is posted, so that none arrives first.
  std::promise<void> begun;
  asio::post(io_, [this, &call, &begun] {
    BeginCall(&call);
    begun.set_value();
  });
  begun.get_future().wait();

  // Compiles run here, on CPU threads, while workers judge what is ready.
  std::optional<internal::TaskGroup> compiles;
  if (compile_pool_) {
    compiles.emplace(*compile_pool_);
    internal::CompileEach(*compiler_, *compiles, candidates, arch_, cancel,
                          [this](size_t i, StatusOr<CompileResult> compiled, double wall_ms) {
                            asio::post(io_, [this, i, compiled = std::move(compiled),
                                             wall_ms]() mutable {
                              OnCompiled(i, std::move(compiled), wall_ms);
                            });
                          });
  }
  finished.wait();
  if (compiles) compiles->Wait();
  return std::move(call.results);
}

}  // namespace

StatusOr<std::unique_ptr<WorkerPoolEvaluator>> CreateWorkerPoolEvaluator(
    const Problem& problem, const WorkerPoolOptions& options) {
  return internal::CreateWorkerPoolEvaluator(problem, options, {});
}

StatusOr<std::unique_ptr<WorkerPoolEvaluator>> internal::CreateWorkerPoolEvaluator(
    const Problem& problem, const WorkerPoolOptions& options,
    std::vector<std::string> worker_arguments) {
  if (options.evaluator.compile_only) {
    return InvalidArgumentError(
        "the worker pool does not do compile-only evaluation (CreateLocalEvaluator does, without a "
        "GPU)");
  }
  for (size_t i = 0; i < options.gpus.size(); ++i) {
    if (options.gpus[i] < 0) {
      return InvalidArgumentError("GPU ordinal " + std::to_string(options.gpus[i]) +
                                  " is negative");
    }
    if (std::count(options.gpus.begin(), options.gpus.end(), options.gpus[i]) > 1) {
      return InvalidArgumentError("GPU " + std::to_string(options.gpus[i]) +
                                  " is listed twice (one worker per GPU: one timing lane)");
    }
  }
  if (options.prefetch_per_worker < 0 || options.retries_after_worker_death < 0 ||
      options.max_start_failures < 1 || options.worker_start_timeout_seconds <= 0) {
    return InvalidArgumentError(
        "WorkerPoolOptions: prefetch_per_worker and retries_after_worker_death must be >= 0, "
        "max_start_failures >= 1, worker_start_timeout_seconds > 0");
  }
  KSEARCH_RETURN_IF_ERROR(problem.Validate().WithContext("problem '" + problem.name + "'"));
  KSEARCH_ASSIGN_OR_RETURN(std::string binary, LocateWorkerBinary(options.worker_binary));
  // Where the candidates compile (here or in the workers, on this machine):
  // refused now rather than per candidate.
  KSEARCH_RETURN_IF_ERROR(
      internal::CheckUntrustedCompiles(internal::CompilerOptionsFor(options.evaluator)));
  auto pool = std::make_unique<WorkerPool>(problem, options, std::move(binary),
                                           std::move(worker_arguments));
  KSEARCH_RETURN_IF_ERROR(pool->Start());
  return std::unique_ptr<WorkerPoolEvaluator>(std::move(pool));
}

}  // namespace ksearch
