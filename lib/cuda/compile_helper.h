// Compiling one untrusted source in the confined helper process,
// ksearch-compile (tools/compile), and the helper's own body.
//
// The caller spawns the helper with posix_spawn (worker/process.h). The
// helper loads NVRTC and compiles a tiny kernel once, so that every library
// NVRTC needs is loaded, then confines itself (cuda/sandbox.h) to reading the
// toolkit's include folder, and only then reads the request: one `compile`
// frame of the worker protocol (worker/protocol.h) with options, arch and file
// name as JSON and the source as the attachment. It answers with one `compiled` frame (the CompileResult as
// JSON, the cubin attached) or a `fatal` frame, and exits. The caller kills
// it (SIGKILL) and reaps it at the compile time limit.
//
// Thread safety: CompileInHelper may be called concurrently (one helper per
// call).
#ifndef KSEARCH_CUDA_COMPILE_HELPER_H_
#define KSEARCH_CUDA_COMPILE_HELPER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cuda/compiler.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct HelperOptions {
  // ksearch-compile; empty: worker::LocateCompileHelper("").
  std::string binary;
  double timeout_seconds = 60.0;
  int64_t memory_limit_bytes = int64_t{4} << 30;
  int64_t max_log_bytes = 64 * 1024;
  // Called with the helper's pid once it runs (tests watch it).
  std::function<void(pid_t)> on_spawn;
};

// Compiles `request` in a confined helper. A compile past the time limit is
// killed and returned as timed_out; a helper that dies (the memory limit, a
// crash) is a failed compile with `helper_died` set and the cause in the log.
// Errors: kNotFound when the helper is missing, kFailedPrecondition when it
// could not confine itself or NVRTC would not start in it (its message),
// kInternal/kDataLoss for spawn or protocol failures.
StatusOr<CompileResult> CompileInHelper(const CompileRequest& request,
                                        const HelperOptions& options);

// For tests of the confinement itself: the helper confines itself as for a
// compile, then tries `action` on `path` instead of compiling, and reports
// "ok" or the error ("open: Permission denied"). Actions: "read" (open and
// read a file), "list" (open a folder), "create" (create a file), "socket",
// "fork", "exec" (`path` as a program), "env" ("set" or "unset": the
// environment variable `path`).
StatusOr<std::string> ProbeHelper(const std::string& action, const std::string& path,
                                  const HelperOptions& options);

// The body of ksearch-compile. Exit codes: 0 answered, 2 could not start or
// confine itself (after a `fatal` frame), 4 protocol error, 64 bad command
// line.
int CompileHelperMain(int argc, char** argv);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_COMPILE_HELPER_H_
