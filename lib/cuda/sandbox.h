// Operating-system confinement of the compile helper (ksearch-compile):
// a Landlock ruleset that lets the process read only the given folders and
// write nowhere, a seccomp filter as a second wall, resource limits, no new
// privileges and no capabilities. docs/evaluation.md, "What is confined and
// how", describes what each part stops.
//
// Thread safety: LandlockAbi and ConfinementAvailable may be called from any
// thread; ConfineThisProcess only from a single-threaded process (the helper),
// which it changes for the rest of its life.
#ifndef KSEARCH_CUDA_SANDBOX_H_
#define KSEARCH_CUDA_SANDBOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ksearch/status.h"

namespace ksearch::internal {

struct ConfinementLimits {
  int64_t memory_bytes = 0;  // RLIMIT_AS; 0 leaves it unchanged
  double cpu_seconds = 0.0;  // RLIMIT_CPU from now; 0 leaves it unchanged
};

// The Landlock ABI version this kernel offers, or 0 where Landlock is
// missing, disabled or blocked (`why` then says which, in one line).
int LandlockAbi(std::string* why = nullptr);

// Ok where a process can be confined here (Landlock ABI ≥ 1 and a ruleset can
// be created); otherwise kFailedPrecondition with a one-line reason.
Status ConfinementAvailable();

// Confines the calling process for good: resource limits (RLIMIT_AS,
// RLIMIT_CPU, no core files, no file growth), no capabilities, no_new_privs,
// a Landlock ruleset under which only files and folders beneath
// `readable_dirs` can be opened, read-only, and a seccomp filter denying
// sockets, exec, process creation (threads stay allowed), ptrace, writes
// through open, mounts, namespaces and kernel administration. Errors
// (kFailedPrecondition) name the failing call; after an error the process is
// partly confined and should only report and exit.
Status ConfineThisProcess(const std::vector<std::string>& readable_dirs,
                          const ConfinementLimits& limits);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_SANDBOX_H_
