// The ksearch-worker process: one GPU, one candidate at a time, blocking I/O
// on the socket its orchestrator passed as fd 3.
//
// The worker trusts nothing it runs: after a sticky CUDA error or a hang it
// reports the candidate, says why it leaves, and exits at once with _Exit (a
// dead context or a spinning kernel can block destructors and a normal exit);
// the orchestrator starts a fresh process with a fresh context.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "cuda/driver.h"
#include "eval/judge.h"
#include "ksearch/problem.h"
#include "ksearch/version.h"
#include "ksearch/worker_pool.h"
#include "cuda/candidate_compile.h"
#include "worker/messages.h"
#include "worker/protocol.h"

namespace ksearch::internal::worker {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitStartFailed = 2;
constexpr int kExitContextLost = 3;
constexpr int kExitProtocol = 4;
constexpr int kExitUsage = 64;

constexpr char kUsage[] = R"(usage: ksearch-worker --fd N [--gpu N] [--fake [FAKE OPTIONS]]

Judges candidates on one GPU for a ksearch orchestrator (WorkerPoolOptions,
docs/workers.md). Started by the library, not by hand: the orchestrator passes
one end of a socket pair as --fd and speaks the worker protocol on it.

  --fd N       the socket to the orchestrator (required)
  --gpu N      shown in process listings and logs; the GPU comes from the
               orchestrator's init message
  --version    print the ksearch version and the protocol version

Fake mode (tests of the orchestrator without a GPU): no CUDA is touched; the
verdict on each candidate is scripted by "fake:" directives in its source,
e.g. a line "// fake: sleep_ms=50 status=wrong_result". Directives:
  ok  status=NAME  sleep_ms=N      report NAME (default ok) after N ms
  crash                            report crashed (CUDA_ERROR_ILLEGAL_ADDRESS), exit
  timeout                          report timeout (launch watchdog), exit
  abort  segv  exit=N              die after "started" (abort(), SIGSEGV, _exit(N))
  hang                             never answer (the orchestrator's watchdog)
  die_once=PATH                    SIGKILL itself unless PATH exists (creates it)
  wait_file=PATH                   wait until PATH exists (a test's explicit step)
  garbage                          write bytes that are not a frame
  wrong_id                         answer for another candidate
  refuse                           leave without a result, as a broken evaluator
Fake options:
  --fake-start=fail|crash|hang     how start-up goes wrong (default: it works)
  --fake-start-delay-ms=N          start-up time
  --fake-devices=N                 GPUs the fake driver reports (default 1)
  --fake-protocol-version=N        answer in another protocol version
)";

struct Args {
  int fd = -1;
  int gpu = -1;
  bool fake = false;
  std::string fake_start;
  int fake_start_delay_ms = 0;
  int fake_devices = 1;
  uint16_t version = kProtocolVersion;
};

// What the judge says about one candidate and whether the process must end.
struct Outcome {
  Evaluation evaluation;
  bool send_result = true;
  std::string exit_reason;  // non-empty: report, say bye, exit
};

class Judge {
 public:
  virtual ~Judge() = default;
  virtual ReadyMessage Ready() = 0;
  virtual Outcome Run(const JudgeMessage& message) = 0;
};

// ---------------------------------------------------------------------------
// The real judge: the in-process evaluator on this process's GPU.

class GpuJudge final : public Judge {
 public:
  static StatusOr<std::unique_ptr<GpuJudge>> Create(const Problem& problem,
                                                    const EvaluatorOptions& options) {
    auto judge = std::unique_ptr<GpuJudge>(new GpuJudge(options));
    KSEARCH_ASSIGN_OR_RETURN(judge->evaluator_, CreateLocalEvaluator(problem, options));
    judge->compiler_ = std::make_unique<Compiler>(CompilerOptionsFor(options));
    return judge;
  }

  ReadyMessage Ready() override {
    ReadyMessage m;
    m.device = evaluator_->device();
    m.reference_timing = evaluator_->reference_timing();
    m.baseline_timing = evaluator_->baseline_timing();
    double reference_ms = m.reference_timing ? m.reference_timing->median_ms : 0.0;
    m.launch_watchdog_seconds = std::max(options_.watchdog_floor_seconds,
                                         options_.watchdog_reference_multiple * reference_ms / 1e3);
    if (auto driver = Driver(); driver.ok()) (*driver)->cuDeviceGetCount(&m.visible_devices);
    return m;
  }

  Outcome Run(const JudgeMessage& message) override {
    Outcome out;
    Evaluation& e = out.evaluation;
    e.candidate_id = message.candidate.id;
    e.content_hash = message.candidate.ContentHash();
    e.device = evaluator_->device();
    CompileResult compiled;
    if (message.compiled) {
      compiled = *message.compiled;
    } else {
      auto local = compiler_->Compile(RequestFor(message.candidate, evaluator_->device().CompileArch()));
      if (FillCompileFailure(local, &e)) {
        if (local.ok()) e.compile_ms = local->compile_ms;
        return out;
      }
      compiled = std::move(*local);
    }
    auto start = std::chrono::steady_clock::now();
    auto results =
        EvaluatePrecompiled(*evaluator_, std::span<const Candidate>(&message.candidate, 1),
                            std::span<const CompileResult>(&compiled, 1));
    if (!results.ok()) {
      out.send_result = false;
      out.exit_reason = "the judge could not run: " + results.status().message();
      return out;
    }
    e = std::move(results->front());
    // total = this process's judging + the compile, wherever it ran; the
    // orchestrator replaces the compile part with its own figure.
    double judge_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    e.compile_ms = compiled.compile_ms;
    e.compile_cached = compiled.cached;
    e.total_ms = judge_ms + e.compile_ms;
    if (e.status == EvalStatus::kCrashed) {
      out.exit_reason = "a sticky CUDA error (" + e.message + ")";
    } else if (e.status == EvalStatus::kTimeout) {
      out.exit_reason = "a kernel hung (" + e.message + ")";
    } else if (e.status == EvalStatus::kCancelled) {
      // Nobody cancels a worker's evaluation: the evaluator refused to work
      // (its context is gone). The candidate was not judged: it goes back to
      // the orchestrator's queue, not to the caller as cancelled.
      out.send_result = false;
      out.exit_reason = "the evaluator stopped working (" + e.message + ")";
    }
    return out;
  }

 private:
  explicit GpuJudge(EvaluatorOptions options) : options_(std::move(options)) {}
  EvaluatorOptions options_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<Compiler> compiler_;  // only when sources arrive instead of cubins
};

// ---------------------------------------------------------------------------
// The fake judge: scripted by the candidates, for CPU tests of the pool.

class FakeJudge final : public Judge {
 public:
  FakeJudge(const EvaluatorOptions& options, const Args& args, int fd)
      : options_(options), args_(args), fd_(fd) {
    device_.name = "fake GPU";
    device_.ordinal = options.device_ordinal;
    device_.cc_major = 9;
    device_.cc_minor = 0;
    device_.nvrtc_version = Compiler::NvrtcVersion();
    device_.multiprocessors = 132;
  }

  ReadyMessage Ready() override {
    ReadyMessage m;
    m.device = device_;
    m.reference_timing = TimingStats{0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 5};
    m.baseline_timing = m.reference_timing;
    m.launch_watchdog_seconds = options_.watchdog_floor_seconds;
    m.visible_devices = args_.fake_devices;
    return m;
  }

  Outcome Run(const JudgeMessage& message) override {
    Outcome out;
    Evaluation& e = out.evaluation;
    e.candidate_id = message.candidate.id;
    e.content_hash = message.candidate.ContentHash();
    e.device = device_;
    e.status = EvalStatus::kOk;
    e.message = "fake worker: ok";
    e.timing = TimingStats{0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 10};
    if (message.compiled) {
      e.compile_ms = message.compiled->compile_ms;
      e.compile_cached = message.compiled->cached;
      if (!message.compiled->ok || message.compiled->cubin.empty()) {
        // The orchestrator must never ship a failed compile to a GPU.
        e.status = EvalStatus::kLaunchError;
        e.message = "fake worker: received a candidate without a cubin";
      }
    }
    std::istringstream words(Directives(message.candidate.source));
    std::string word;
    while (words >> word) {
      std::string key = word.substr(0, word.find('='));
      std::string value =
          word.find('=') == std::string::npos ? "" : word.substr(word.find('=') + 1);
      if (key == "ok") {
      } else if (key == "sleep_ms") {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(value.c_str())));
        e.check_ms = std::atof(value.c_str());
      } else if (key == "wait_file") {
        while (::access(value.c_str(), F_OK) != 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      } else if (key == "status") {
        if (!ParseEvalStatus(value, &e.status))
          e.message = "fake worker: unknown status " + value;
        else
          e.message = "fake worker: scripted " + value;
      } else if (key == "crash") {
        e.status = EvalStatus::kCrashed;
        e.message =
            "kernel execution: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
            "encountered (fake)";
        out.exit_reason = "a sticky CUDA error (" + e.message + ")";
      } else if (key == "timeout") {
        e.status = EvalStatus::kTimeout;
        e.message = "the launch plan ran past the watchdog limit (fake)";
        out.exit_reason = "a kernel hung (" + e.message + ")";
      } else if (key == "abort") {
        std::abort();
      } else if (key == "segv") {
        // The default action, whatever handler a sanitizer installed: the
        // orchestrator must see a death by SIGSEGV.
        ::signal(SIGSEGV, SIG_DFL);
        ::raise(SIGSEGV);
      } else if (key == "hang") {
        for (;;) ::pause();
      } else if (key == "exit") {
        std::_Exit(std::atoi(value.c_str()));
      } else if (key == "die_once") {
        int marker = ::open(value.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (marker >= 0) {
          ::close(marker);
          ::raise(SIGKILL);
        }
      } else if (key == "garbage") {
        WriteAll(fd_, "this is not a frame").IgnoreError();
      } else if (key == "wrong_id") {
        e.candidate_id += "-someone-else";
        e.content_hash = "0000";
      } else if (key == "refuse") {
        out.send_result = false;
        out.exit_reason = "the evaluator stopped working (fake)";
      }
    }
    return out;
  }

 private:
  // The words after every "fake:" in the source, up to the end of its line.
  static std::string Directives(const std::string& source) {
    std::string out;
    for (size_t at = source.find("fake:"); at != std::string::npos;
         at = source.find("fake:", at + 5)) {
      size_t end = source.find('\n', at);
      out +=
          " " + source.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
    }
    return out;
  }

  EvaluatorOptions options_;
  Args args_;
  int fd_;
  DeviceInfo device_;
};

// ---------------------------------------------------------------------------

class Worker {
 public:
  explicit Worker(Args args) : args_(std::move(args)) {}

  int Run() {
    auto first = ReadFrame(args_.fd);
    if (!first.ok()) {
      // No orchestrator, or not one we understand: nothing to serve.
      if (first.status().code() == StatusCode::kUnavailable) return kExitOk;
      return Fail(first.status(), kExitProtocol);
    }
    auto init = DecodeInit(*first);
    if (!init.ok()) return Fail(init.status(), kExitProtocol);
    gpu_ = init->options.device_ordinal;
    auto problem = Problem::FromJson(init->problem_json, "", "the orchestrator's problem");
    if (!problem.ok()) return Fail(problem.status(), kExitStartFailed);
    if (args_.fake) {
      if (Status s = FakeStart(init->options); !s.ok()) return Fail(s, kExitStartFailed);
      judge_ = std::make_unique<FakeJudge>(init->options, args_, args_.fd);
    } else {
      auto judge = GpuJudge::Create(*problem, init->options);
      if (!judge.ok()) return Fail(judge.status(), kExitStartFailed);
      judge_ = std::move(*judge);
    }
    ReadyMessage ready = judge_->Ready();
    ready.pid = ::getpid();
    ready.version = std::string(Version());
    if (!Send(Encode(ready))) return kExitOk;
    return Serve();
  }

 private:
  int Serve() {
    while (true) {
      auto frame = ReadFrame(args_.fd);
      if (!frame.ok()) {
        if (frame.status().code() == StatusCode::kUnavailable) return kExitOk;
        return Fail(frame.status(), kExitProtocol);
      }
      if (frame->type == MessageType::kShutdown) return kExitOk;
      if (frame->type != MessageType::kJudge) {
        return Fail(InvalidArgumentError("unexpected '" + ToString(frame->type) + "' frame"),
                    kExitProtocol);
      }
      auto judge = DecodeJudge(*frame);
      if (!judge.ok()) return Fail(judge.status(), kExitProtocol);
      if (!Send(Encode(StartedMessage{judge->seq}))) return kExitOk;
      Outcome outcome = judge_->Run(*judge);
      if (outcome.send_result &&
          !Send(Encode(ResultMessage{judge->seq, std::move(outcome.evaluation)}))) {
        return kExitOk;
      }
      if (!outcome.exit_reason.empty()) {
        Send(Encode(ByeMessage{outcome.exit_reason}));
        Log("exiting after " + outcome.exit_reason);
        std::fflush(stderr);
        std::_Exit(kExitContextLost);
      }
    }
  }

  Status FakeStart(const EvaluatorOptions& options) {
    std::this_thread::sleep_for(std::chrono::milliseconds(args_.fake_start_delay_ms));
    if (args_.fake_start == "crash") std::abort();
    if (args_.fake_start == "hang") {
      for (;;) ::pause();
    }
    if (args_.fake_start == "fail")
      return FailedPreconditionError("fake worker: start-up failed as scripted");
    if (options.device_ordinal < 0 || options.device_ordinal >= args_.fake_devices) {
      return FailedPreconditionError("CUDA device " + std::to_string(options.device_ordinal) +
                                     " not found (" + std::to_string(args_.fake_devices) +
                                     " visible, fake)");
    }
    return Status::Ok();
  }

  // Sends a frame; false when the orchestrator is gone (then there is no one
  // to work for).
  bool Send(const Frame& frame) { return WriteFrame(args_.fd, frame, args_.version).ok(); }

  int Fail(const Status& status, int exit_code) {
    Log(status.ToString());
    Send(Encode(FatalMessage{status.code(), status.message()}));
    return exit_code;
  }

  void Log(const std::string& text) const {
    std::fprintf(stderr, "ksearch-worker[%d] gpu %d: %s\n", static_cast<int>(::getpid()),
                 gpu_ >= 0 ? gpu_ : args_.gpu, text.c_str());
  }

  Args args_;
  int gpu_ = -1;
  std::unique_ptr<Judge> judge_;
};

bool ParseInt(const char* text, int* out) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0') return false;
  *out = static_cast<int>(value);
  return true;
}

}  // namespace
}  // namespace ksearch::internal::worker

namespace ksearch {

int WorkerProcessMain(int argc, char** argv) {
  using namespace internal::worker;
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag, int* out) {
      std::string prefix = std::string(flag) + "=";
      if (arg.rfind(prefix, 0) == 0) return ParseInt(arg.c_str() + prefix.size(), out);
      return arg == flag && i + 1 < argc && ParseInt(argv[++i], out);
    };
    int number = 0;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    } else if (arg == "--version") {
      std::printf("ksearch-worker %s (worker protocol %d)\n", std::string(Version()).c_str(),
                  static_cast<int>(kProtocolVersion));
      return kExitOk;
    } else if (arg == "--fake") {
      args.fake = true;
    } else if (arg.rfind("--fake-start=", 0) == 0) {
      args.fake_start = arg.substr(std::strlen("--fake-start="));
    } else if (value("--fd", &args.fd) || value("--gpu", &args.gpu) ||
               value("--fake-start-delay-ms", &args.fake_start_delay_ms) ||
               value("--fake-devices", &args.fake_devices)) {
    } else if (value("--fake-protocol-version", &number)) {
      args.version = static_cast<uint16_t>(number);
    } else {
      std::fprintf(stderr, "ksearch-worker: unknown argument '%s'\n%s", arg.c_str(), kUsage);
      return kExitUsage;
    }
  }
  if (args.fd < 0 || ::fcntl(args.fd, F_GETFD) < 0) {
    std::fprintf(stderr,
                 "ksearch-worker: --fd must name an open socket to the orchestrator; this program "
                 "is started by the ksearch library (WorkerPoolOptions), not by hand\n");
    return kExitUsage;
  }
  // Standard output is the orchestrator's (a terminal, a --json document):
  // nothing a kernel prints may reach it. The evaluator captures device
  // output per evaluation; anything outside that goes nowhere.
  std::fflush(stdout);
  if (int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null_fd >= 0) {
    ::dup2(null_fd, STDOUT_FILENO);
    ::close(null_fd);
  }
  // A closed socket is an error to handle, not a signal that kills.
  ::signal(SIGPIPE, SIG_IGN);
  // The pool starts workers from its event-loop thread, which lives as long
  // as the pool: a worker never outlives an orchestrator that was killed, so
  // no orphan keeps a GPU busy.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return Worker(std::move(args)).Run();
}

}  // namespace ksearch
