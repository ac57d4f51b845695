// Shared by the queue tests and the queue benchmark: a private redis-server
// on a free loopback port, and fake queue workers as child processes.
#ifndef KSEARCH_TESTS_QUEUE_QUEUE_TEST_UTIL_H_
#define KSEARCH_TESTS_QUEUE_QUEUE_TEST_UTIL_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/queue.h"
#include "queue/redis.h"

extern char** environ;

namespace ksearch::testing {

// The first executable called `name` on $PATH (or /usr/bin, /usr/sbin), or "".
inline std::string FindOnPath(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/bin:/usr/sbin";
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find(':', at);
    if (end == std::string::npos) end = path.size();
    std::string candidate = path.substr(at, end - at) + "/" + name;
    if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// Spawns argv[0] with the given arguments; returns the pid (0 on failure).
// `quiet`: stdout to /dev/null, so that a child outliving a crashed test
// does not hold the test's output pipe open.
inline pid_t Spawn(const std::vector<std::string>& argv, bool quiet = false) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  if (quiet) {
    ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  int failed = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  return failed ? 0 : pid;
}

inline void KillAndWait(pid_t pid, int signal) {
  if (pid <= 0) return;
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// A TCP port nobody listened on a moment ago (the kernel's choice).
inline int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  int port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

// A redis-server of our own: loopback only, its own folder, the append-only
// file on and written through on every command, so that a SIGKILL loses
// nothing that was acknowledged.
class RedisServer {
 public:
  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() {
    Kill(SIGKILL);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  static std::string Binary() { return FindOnPath("redis-server"); }

  // Empty on success, else why not.
  std::string Start() {
    if (Binary().empty()) return "redis-server is not installed (apt-get install redis-server)";
    if (dir_.empty()) {
      std::string templ =
          (std::filesystem::temp_directory_path() / "ksearch-redis-XXXXXX").string();
      if (!::mkdtemp(templ.data())) return "mkdtemp failed";
      dir_ = templ;
      port_ = FreeLoopbackPort();
    }
    pid_ = Spawn({Binary(), "--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_,
                  "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize",
                  "no", "--logfile", dir_ + "/redis.log"},
                 /*quiet=*/true);
    if (pid_ == 0) return "cannot start " + Binary();
    QueueOptions options = Options();
    options.reconnect_timeout_seconds = 10;
    for (int i = 0; i < 200; ++i) {
      auto redis = internal::queue::Redis::Connect(options);
      if (redis.ok() && (*redis)->Command({"PING"}).ok()) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return "redis-server did not answer on port " + std::to_string(port_);
  }

  void Kill(int signal) {
    KillAndWait(pid_, signal);
    pid_ = 0;
  }

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  QueueOptions Options() const {
    QueueOptions options;
    options.url = url();
    options.reconnect_timeout_seconds = 30;
    options.connect_timeout_seconds = 2;
    return options;
  }
  std::unique_ptr<internal::queue::Redis> Client() const {
    auto redis = internal::queue::Redis::Connect(Options());
    return redis.ok() ? std::move(*redis) : nullptr;
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// A fake queue worker process (tests/queue/fake_queue_worker.cc).
class FakeWorker {
 public:
  FakeWorker(std::string binary, std::vector<std::string> args)
      : binary_(std::move(binary)), args_(std::move(args)) {}
  FakeWorker(FakeWorker&& other) noexcept
      : binary_(std::move(other.binary_)), args_(std::move(other.args_)), pid_(other.pid_) {
    other.pid_ = 0;
  }
  ~FakeWorker() { Stop(); }

  bool Start() {
    std::vector<std::string> argv = {binary_};
    argv.insert(argv.end(), args_.begin(), args_.end());
    pid_ = Spawn(argv);
    return pid_ != 0;
  }
  void Stop() {
    KillAndWait(pid_, SIGTERM);
    pid_ = 0;
  }
  // True (and reaped) when the process has ended.
  bool Ended() {
    if (pid_ == 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return true;
    }
    return false;
  }
  pid_t pid() const { return pid_; }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  pid_t pid_ = 0;
};

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_QUEUE_QUEUE_TEST_UTIL_H_
