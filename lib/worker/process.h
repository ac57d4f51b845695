// Starting, stopping and reaping worker processes.
//
// Workers are started with posix_spawn (vfork + exec in glibc): the child runs
// no code of the caller, so it never inherits a CUDA context or a lock held by
// another thread, whatever the caller initialized before. The socket pair is
// created close-on-exec; only the child's end is passed, as fd 3.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_WORKER_PROCESS_H_
#define KSEARCH_WORKER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "ksearch/status.h"

namespace ksearch::internal::worker {

// The file descriptor the child finds its end of the socket on.
inline constexpr int kChildSocketFd = 3;

struct SpawnedProcess {
  pid_t pid = 0;
  int fd = -1;  // the parent's end of the socket pair (close-on-exec), owned by the caller
};

// Starts `binary` with `arguments` (argv[1…]) in its own process group, with
// the signal mask cleared, and with this process's environment or, when
// `environment` is not null, only those "NAME=value" entries. Errors: kNotFound "worker binary missing: PATH …"
// when the file is absent or not executable; kInternal for socketpair or
// posix_spawn failures (errno text).
StatusOr<SpawnedProcess> Spawn(const std::string& binary,
                               const std::vector<std::string>& arguments,
                               const std::vector<std::string>* environment = nullptr);

// waitpid without blocking: true when the process has ended (and was
// reaped), with `description` set to how ("exited with code 3", "killed by
// signal 9 (SIGKILL)").
bool TryReap(pid_t pid, std::string* description);

// Sends SIGKILL; errors are ignored (the process may have ended already).
void Kill(pid_t pid);

// The worker binary search of FindWorkerBinary (worker_pool.h), with the list
// of places tried.
StatusOr<std::string> LocateWorkerBinary(const std::string& explicit_path);

// The same search for the compile helper, ksearch-compile
// (cuda/compile_helper.h): `explicit_path`, $KSEARCH_COMPILE_HELPER, the
// folders of the executable and of libksearch, the build tree, the install
// prefix. Errors: kNotFound "compile helper missing: …" with the places tried.
StatusOr<std::string> LocateCompileHelper(const std::string& explicit_path);

}  // namespace ksearch::internal::worker

#endif  // KSEARCH_WORKER_PROCESS_H_
