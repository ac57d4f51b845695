#include "cuda/compile_helper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <vector>

#include "cuda/sandbox.h"
#include "worker/process.h"
#include "worker/protocol.h"

namespace ksearch::internal {
namespace {

using Clock = std::chrono::steady_clock;
using worker::Frame;
using worker::MessageType;

constexpr char kUsage[] =
    "usage: ksearch-compile --fd N --arch sm_XY --include DIR [--memory-bytes N] "
    "[--cpu-seconds S]\n"
    "Compiles one candidate source in a confined process; started by the ksearch library,\n"
    "never by hand.\n";

std::string Errno(const std::string& call, int error) {
  return call + ": " + std::strerror(error);
}

// ---- The helper (child) side ----

struct HelperArgs {
  int fd = -1;
  std::string arch;
  std::string include;
  int64_t memory_bytes = 0;
  double cpu_seconds = 0.0;
};

bool ParseArgs(int argc, char** argv, HelperArgs* args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    std::string value = argv[++i];
    char* end = nullptr;
    if (arg == "--fd") {
      args->fd = static_cast<int>(std::strtol(value.c_str(), &end, 10));
    } else if (arg == "--arch") {
      args->arch = value;
    } else if (arg == "--include") {
      args->include = value;
    } else if (arg == "--memory-bytes") {
      args->memory_bytes = std::strtoll(value.c_str(), &end, 10);
    } else if (arg == "--cpu-seconds") {
      args->cpu_seconds = std::strtod(value.c_str(), &end);
    } else {
      return false;
    }
    if (end && *end != '\0') return false;
  }
  return args->fd >= 0 && !args->arch.empty() && !args->include.empty();
}

int SendFatal(int fd, const std::string& message) {
  Frame frame{MessageType::kFatal, boost::json::serialize(boost::json::object{
                                       {"code", "FAILED_PRECONDITION"}, {"message", message}})};
  worker::WriteFrame(fd, frame).IgnoreError();
  return 2;
}

// The helper's test mode: one action under the confinement.
std::string Probe(const std::string& action, const std::string& path) {
  if (action == "read" || action == "list") {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (action == "list" ? O_DIRECTORY : 0));
    if (fd < 0) return Errno("open", errno);
    char byte;
    ssize_t got = action == "read" ? ::read(fd, &byte, 1) : 0;
    int error = errno;
    ::close(fd);
    return got < 0 ? Errno("read", error) : "ok";
  }
  if (action == "create") {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("open", errno);
    ::close(fd);
    return "ok";
  }
  if (action == "socket") {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket", errno);
    ::close(fd);
    return "ok";
  }
  if (action == "fork") {
    pid_t pid = ::fork();
    if (pid < 0) return Errno("fork", errno);
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return "ok";
  }
  if (action == "env") return std::getenv(path.c_str()) ? "set" : "unset";
  if (action == "exec") {
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    ::execv(path.c_str(), argv);
    return Errno("execv", errno);
  }
  return "unknown probe action '" + action + "'";
}

// Answers one `compile` frame from the parent.
int Serve(int fd, int64_t fallback_log_bytes) {
  auto frame = worker::ReadFrame(fd);
  if (!frame.ok() || frame->type != MessageType::kCompile) return 4;
  boost::system::error_code ec;
  boost::json::value json = boost::json::parse(frame->json, ec);
  if (ec || !json.is_object()) return 4;
  const boost::json::object& o = json.as_object();
  auto text = [&](const char* key) {
    const boost::json::value* v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
  };
  Frame answer{MessageType::kCompiled, "", ""};
  if (std::string action = text("probe"); !action.empty()) {
    answer.json = boost::json::serialize(boost::json::object{{"probe", Probe(action, text("path"))}});
  } else {
    CompileRequest request;
    request.source = std::move(frame->attachment);
    request.arch = text("arch");
    request.name = text("name");
    if (const boost::json::value* options = o.if_contains("options"); options && options->is_array()) {
      for (const auto& option : options->as_array()) {
        if (option.is_string()) request.options.emplace_back(option.as_string());
      }
    }
    int64_t log_bytes = fallback_log_bytes;
    if (const boost::json::value* v = o.if_contains("max_log_bytes"); v && v->is_int64()) {
      log_bytes = v->as_int64();
    }
    CompileResult result = CompileWithNvrtc(request, log_bytes);
    answer.json = boost::json::serialize(CompileResultToJson(result));
    answer.attachment = std::move(result.cubin);
  }
  return worker::WriteFrame(fd, answer).ok() ? 0 : 4;
}

// ---- The caller (parent) side ----

// Runs one helper: spawns it, sends `request`, waits for the answer until
// the deadline. The helper is killed and reaped before this returns, whatever
// happened.
struct HelperRun {
  bool timed_out = false;
  std::optional<Frame> answer;
  std::string ended;  // how the helper ended, when it gave no answer
  bool killed = false;  // by a signal
};

StatusOr<HelperRun> RunHelper(const std::string& arch, const boost::json::object& request,
                              const std::string& source, const HelperOptions& options) {
  KSEARCH_ASSIGN_OR_RETURN(std::string binary, worker::LocateCompileHelper(options.binary));
  std::vector<std::string> arguments = {"--arch",
                                        arch,
                                        "--include",
                                        Compiler::CudaIncludeDirectory(),
                                        "--memory-bytes",
                                        std::to_string(options.memory_limit_bytes),
                                        "--cpu-seconds",
                                        std::to_string(std::ceil(options.timeout_seconds))};
  auto start = Clock::now();
  // The caller's environment (API keys among it) stays out of the helper.
  std::vector<std::string> environment;
  if (const char* path = std::getenv("LD_LIBRARY_PATH")) {
    environment.push_back(std::string("LD_LIBRARY_PATH=") + path);
  }
  KSEARCH_ASSIGN_OR_RETURN(worker::SpawnedProcess child,
                           worker::Spawn(binary, arguments, &environment));
  if (options.on_spawn) options.on_spawn(child.pid);
  ::fcntl(child.fd, F_SETFL, ::fcntl(child.fd, F_GETFL) | O_NONBLOCK);
  // The source travels as the attachment: its bytes need not be UTF-8.
  std::string out =
      worker::EncodeFrame(Frame{MessageType::kCompile, boost::json::serialize(request), source});
  size_t sent = 0;
  worker::FrameDecoder decoder;
  HelperRun run;
  Status failure;
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(options.timeout_seconds));
  char buffer[1 << 16];
  while (!run.answer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd p{child.fd, static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (ready < 0 && errno != EINTR) {
      failure = InternalError(Errno("poll", errno));
      break;
    }
    if (ready <= 0) continue;
    if ((p.revents & POLLOUT) && sent < out.size()) {
      ssize_t w = ::send(child.fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
      // A helper that ended early: its end of stream says the rest.
      if (w < 0 && errno != EAGAIN && errno != EINTR) sent = out.size();
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t r = ::read(child.fd, buffer, sizeof(buffer));
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) break;  // ended (or reset) without an answer
      if (Status fed = decoder.Feed(std::string_view(buffer, static_cast<size_t>(r))); !fed.ok()) {
        failure = DataLossError("ksearch-compile: " + fed.message());
        break;
      }
      run.answer = decoder.Next();
    }
  }
  ::close(child.fd);
  worker::Kill(child.pid);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    run.killed = true;
    const char* name = sigabbrev_np(sig);
    run.ended = "killed by signal " + std::to_string(sig) +
                (name ? " (SIG" + std::string(name) + ")" : std::string());
    // RLIMIT_CPU: the time limit in CPU seconds.
    if (!run.answer && sig == SIGXCPU) run.timed_out = true;
  } else if (WIFEXITED(status)) {
    run.ended = "exited with code " + std::to_string(WEXITSTATUS(status));
  }
  if (!failure.ok()) return failure;
  return run;
}

std::string MiB(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

StatusOr<HelperRun> Answered(const StatusOr<HelperRun>& run) {
  if (!run.ok() || !run->answer || run->answer->type != MessageType::kFatal) return run;
  boost::system::error_code ec;
  boost::json::value json = boost::json::parse(run->answer->json, ec);
  std::string message = "(unreadable fatal frame)";
  if (!ec && json.is_object()) {
    if (const auto* m = json.as_object().if_contains("message"); m && m->is_string()) {
      message = std::string(m->as_string());
    }
  }
  return FailedPreconditionError("ksearch-compile could not start: " + message);
}

}  // namespace

StatusOr<CompileResult> CompileInHelper(const CompileRequest& request,
                                        const HelperOptions& options) {
  boost::json::array flags;
  for (const std::string& o : request.options) flags.emplace_back(o);
  boost::json::object body{{"options", std::move(flags)},
                           {"arch", request.arch},
                           {"name", request.name},
                           {"max_log_bytes", options.max_log_bytes}};
  auto start = Clock::now();
  KSEARCH_ASSIGN_OR_RETURN(HelperRun run, Answered(RunHelper(request.arch, body, request.source, options)));
  CompileResult result;
  if (run.timed_out) {
    result.timed_out = true;
    result.compile_ms = options.timeout_seconds * 1000.0;
    result.log = "ksearch: NVRTC did not finish within " + std::to_string(options.timeout_seconds) +
                 " s; the compile process was killed";
    return result;
  }
  if (!run.answer) {
    result.helper_died = true;
    result.compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    result.log = "ksearch: the compile process gave no result (" + run.ended + ")";
    if (run.killed) {
      result.log += " (over its memory limit of " + MiB(options.memory_limit_bytes) +
                    ", or NVRTC crashed)";
    }
    return result;
  }
  StatusOr<CompileResult> answered =
      run.answer->type == MessageType::kCompiled
          ? CompileResultFromJson(run.answer->json, "ksearch-compile's answer")
          : StatusOr<CompileResult>(InternalError("not a compiled frame"));
  if (!answered.ok()) {
    return DataLossError("ksearch-compile answered with an unreadable '" +
                         worker::ToString(run.answer->type) + "' frame (" +
                         answered.status().message() + ")");
  }
  result = std::move(*answered);
  // The helper escaped and bounded it already; the caller does not take its
  // word for it. A file the ruleset hides reads as one that is not there:
  // the log does not tell which paths exist outside the toolkit.
  static const std::regex kDenied(R"((cannot open source file "[^"\n]*"): Permission denied)");
  result.log = std::regex_replace(EscapeLog(result.log), kDenied, "$1");
  if (static_cast<int64_t>(result.log.size()) > 2 * options.max_log_bytes + 4096) {
    result.log.resize(static_cast<size_t>(2 * options.max_log_bytes));
  }
  if (result.ok) result.cubin = std::move(run.answer->attachment);
  if (result.ok && result.cubin.empty()) {
    return DataLossError("ksearch-compile reported success without a cubin");
  }
  return result;
}

StatusOr<std::string> ProbeHelper(const std::string& action, const std::string& path,
                                  const HelperOptions& options) {
  boost::json::object body{{"probe", action}, {"path", path}};
  KSEARCH_ASSIGN_OR_RETURN(HelperRun run, Answered(RunHelper("sm_90", body, "", options)));
  if (!run.answer) return UnavailableError("ksearch-compile " + run.ended + " without an answer");
  boost::system::error_code ec;
  boost::json::value json = boost::json::parse(run.answer->json, ec);
  if (ec || !json.is_object() || !json.as_object().contains("probe")) {
    return DataLossError("ksearch-compile answered the probe with an unreadable frame");
  }
  return std::string(json.as_object().at("probe").as_string());
}

int CompileHelperMain(int argc, char** argv) {
  HelperArgs args;
  if (!ParseArgs(argc, argv, &args)) {
    ::write(2, kUsage, sizeof(kUsage) - 1);
    return 64;
  }
  struct stat st {};
  if (::fstat(args.fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    ::write(2, kUsage, sizeof(kUsage) - 1);
    return 64;
  }
  // Nothing NVRTC prints reaches a terminal; the answer goes on the socket.
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int target : {0, 1, 2}) ::dup2(null, target);
    if (null > 2) ::close(null);
  }
  // Everything NVRTC loads (libnvrtc-builtins, libcuda where present) is
  // loaded now, while files can still be opened. Where this fails (an arch
  // NVRTC does not know), the real compile fails alike and its log says why.
  CompileRequest warm{"extern \"C\" __global__ void ksearch_warm_up() {}", {}, args.arch,
                      "ksearch_warm_up.cu"};
  CompileWithNvrtc(warm, 4096);
  // Relative includes resolve against a folder the ruleset does not allow.
  if (::chdir("/") != 0) return SendFatal(args.fd, Errno("chdir(\"/\")", errno));
  ConfinementLimits limits{args.memory_bytes, args.cpu_seconds};
  if (Status confined = ConfineThisProcess({args.include}, limits); !confined.ok()) {
    return SendFatal(args.fd, confined.message());
  }
  return Serve(args.fd, 64 * 1024);
}

}  // namespace ksearch::internal
