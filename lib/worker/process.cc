#include "worker/process.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ksearch/worker_pool.h"

extern char** environ;

namespace ksearch::internal::worker {
namespace {

std::string Errno(const char* call, int error) {
  return std::string(call) + ": " + std::strerror(error);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string DirectoryOf(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

// The folder of the shared object that holds this function (libksearch.so).
std::string LibraryDirectory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&LibraryDirectory), &info) == 0 || !info.dli_fname)
    return "";
  std::error_code ec;
  auto path = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? "" : path.parent_path().string();
}

// One helper binary's search: what it is called and how the user names it.
struct BinarySearch {
  const char* what;    // "worker binary"
  const char* name;    // "ksearch-worker"
  const char* env;     // "KSEARCH_WORKER"
  const char* option;  // "WorkerPoolOptions::worker_binary"
  const char* build_path;
  const char* install_path;
};

StatusOr<std::string> LocateBinary(const BinarySearch& search, const std::string& explicit_path) {
  const std::string what = search.what;
  if (!explicit_path.empty()) {
    if (IsExecutableFile(explicit_path)) return explicit_path;
    return NotFoundError(what + " missing: '" + explicit_path + "' is not an executable file (" +
                         search.option + ")");
  }
  if (const char* env = std::getenv(search.env); env && *env) {
    if (IsExecutableFile(env)) return std::string(env);
    return NotFoundError(what + " missing: $" + search.env + "='" + std::string(env) +
                         "' is not an executable file");
  }
  std::vector<std::string> places;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) places.push_back(DirectoryOf(self.string()) + "/" + search.name);
  std::string lib = LibraryDirectory();
  if (!lib.empty()) {
    places.push_back(lib + "/" + search.name);
    places.push_back(lib + "/../bin/" + search.name);
  }
#if defined(KSEARCH_BUILD_LIB_DIR)
  // A library in its build tree uses the binaries built with it, not older
  // installed ones.
  std::error_code build_ec;
  if (search.build_path && !lib.empty() &&
      std::filesystem::equivalent(lib, KSEARCH_BUILD_LIB_DIR, build_ec)) {
    places.push_back(search.build_path);
  }
#endif
  if (search.install_path) places.push_back(search.install_path);
  for (const std::string& place : places) {
    if (IsExecutableFile(place)) return place;
  }
  std::string tried;
  for (const std::string& place : places) tried += "\n  " + place;
  return NotFoundError(what + " missing: no executable " + search.name + " found; set $" +
                       search.env + " or " + search.option + ". Tried:" + tried);
}

// Set by lib/worker/CMakeLists.txt on this file; other builds go without.
#ifndef KSEARCH_BUILD_WORKER_PATH
#define KSEARCH_BUILD_WORKER_PATH nullptr
#define KSEARCH_BUILD_COMPILE_PATH nullptr
#endif
#ifndef KSEARCH_INSTALL_WORKER_PATH
#define KSEARCH_INSTALL_WORKER_PATH nullptr
#define KSEARCH_INSTALL_COMPILE_PATH nullptr
#endif

}  // namespace

StatusOr<std::string> LocateWorkerBinary(const std::string& explicit_path) {
  return LocateBinary({"worker binary", "ksearch-worker", "KSEARCH_WORKER",
                       "WorkerPoolOptions::worker_binary", KSEARCH_BUILD_WORKER_PATH,
                       KSEARCH_INSTALL_WORKER_PATH},
                      explicit_path);
}

StatusOr<std::string> LocateCompileHelper(const std::string& explicit_path) {
  return LocateBinary({"compile helper", "ksearch-compile", "KSEARCH_COMPILE_HELPER",
                       "CompilerOptions::helper_binary", KSEARCH_BUILD_COMPILE_PATH,
                       KSEARCH_INSTALL_COMPILE_PATH},
                      explicit_path);
}

StatusOr<SpawnedProcess> Spawn(const std::string& binary,
                               const std::vector<std::string>& arguments,
                               const std::vector<std::string>* environment) {
  if (!IsExecutableFile(binary)) {
    return NotFoundError("worker binary missing: '" + binary + "' is not an executable file");
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return InternalError(Errno("socketpair", errno));
  }
  int parent_fd = fds[0], child_fd = fds[1];
  // dup2 onto the same number would keep close-on-exec set: move it first.
  if (child_fd == kChildSocketFd) {
    int moved = ::fcntl(child_fd, F_DUPFD_CLOEXEC, kChildSocketFd + 1);
    ::close(child_fd);
    if (moved < 0) {
      ::close(parent_fd);
      return InternalError(Errno("fcntl(F_DUPFD_CLOEXEC)", errno));
    }
    child_fd = moved;
  }
  std::vector<std::string> argv_storage = {binary, "--fd", std::to_string(kChildSocketFd)};
  argv_storage.insert(argv_storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (environment) {
    for (const std::string& entry : *environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, child_fd, kChildSocketFd);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
  // Descriptors the application left inheritable stay out of the worker.
  posix_spawn_file_actions_addclosefrom_np(&actions, kChildSocketFd + 1);
#endif
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // Own process group: a terminal's Ctrl-C goes to the caller, which stops
  // its workers in order, instead of killing them under it.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  int error = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(),
                            environment ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(child_fd);
  if (error != 0) {
    ::close(parent_fd);
    if (error == ENOENT || error == EACCES || error == ENOEXEC) {
      return NotFoundError("worker binary missing: cannot execute '" + binary +
                           "': " + std::strerror(error));
    }
    return InternalError(Errno("posix_spawn", error));
  }
  return SpawnedProcess{pid, parent_fd};
}

bool TryReap(pid_t pid, std::string* description) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == 0) return false;
  if (r < 0) {
    // ECHILD: reaped elsewhere (a SIGCHLD handler of the application).
    *description = "ended (exit status unavailable: " + std::string(std::strerror(errno)) + ")";
    return true;
  }
  if (WIFEXITED(status)) {
    *description = "exited with code " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    *description = "killed by signal " + std::to_string(sig) +
                   (name ? " (SIG" + std::string(name) + ")" : std::string());
  } else {
    *description = "ended (wait status " + std::to_string(status) + ")";
  }
  return true;
}

void Kill(pid_t pid) {
  if (pid > 0) ::kill(pid, SIGKILL);
}

}  // namespace ksearch::internal::worker

namespace ksearch {

StatusOr<std::string> FindWorkerBinary(const std::string& explicit_path) {
  return internal::worker::LocateWorkerBinary(explicit_path);
}

}  // namespace ksearch
