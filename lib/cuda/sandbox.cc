#include "cuda/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>

#include "ksearch/evaluator.h"

namespace ksearch::internal {
namespace {

// Landlock's ABI, spelled out here rather than taken from <linux/landlock.h>:
// the build machine's headers may be older than the kernel that runs us, and
// the structures are versioned by size.
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsAllV1 = (1ull << 13) - 1;  // execute … make_sym
constexpr uint64_t kFsRefer = 1ull << 13;        // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;     // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;     // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0;      // ABI 4
constexpr uint64_t kNetConnectTcp = 1ull << 1;   // ABI 4
constexpr uint64_t kScopeAbstractUnix = 1ull << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ull << 1;        // ABI 6

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

std::string Errno(const std::string& call, int error) {
  return call + ": " + std::strerror(error);
}

// The ruleset for `abi`: every access right that version knows is handled
// (denied unless a rule allows it); its size is the one that version reads.
RulesetAttr RulesetFor(int abi, size_t* size) {
  RulesetAttr attr{kFsAllV1, 0, 0};
  *size = offsetof(RulesetAttr, handled_access_net);
  if (abi >= 2) attr.handled_access_fs |= kFsRefer;
  if (abi >= 3) attr.handled_access_fs |= kFsTruncate;
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    *size = offsetof(RulesetAttr, scoped);
  }
  if (abi >= 5) attr.handled_access_fs |= kFsIoctlDev;
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    *size = sizeof(RulesetAttr);
  }
  return attr;
}

// A new ruleset handling everything this kernel's Landlock knows (its file
// descriptor), or why there is none.
StatusOr<int> CreateRuleset() {
  std::string why;
  int abi = LandlockAbi(&why);
  if (abi < 1) return FailedPreconditionError(why);
  size_t size = 0;
  RulesetAttr attr = RulesetFor(abi, &size);
  int ruleset = static_cast<int>(::syscall(__NR_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return FailedPreconditionError(Errno("Landlock: landlock_create_ruleset", errno));
  return ruleset;
}

Status ApplyLandlock(const std::vector<std::string>& readable_dirs) {
  KSEARCH_ASSIGN_OR_RETURN(int ruleset, CreateRuleset());
  for (const std::string& dir : readable_dirs) {
    int fd = ::open(dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY);
    if (fd < 0) {
      int error = errno;
      ::close(ruleset);
      return FailedPreconditionError(Errno("open(\"" + dir + "\", O_PATH)", error));
    }
    PathBeneathAttr rule{kFsReadFile | kFsReadDir, fd};
    long added = ::syscall(__NR_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0);
    int error = errno;
    ::close(fd);
    if (added != 0) {
      ::close(ruleset);
      return FailedPreconditionError(Errno("landlock_add_rule(\"" + dir + "\")", error));
    }
  }
  long restricted = ::syscall(__NR_landlock_restrict_self, ruleset, 0);
  int error = errno;
  ::close(ruleset);
  if (restricted != 0) return FailedPreconditionError(Errno("landlock_restrict_self", error));
  return Status::Ok();
}

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kAuditArch = 0;  // no filter for this architecture: confinement fails
#endif

// A seccomp program, built as a list of checks on the syscall number; each
// check that matches returns at once, so that no jump crosses another check.
class FilterBuilder {
 public:
  FilterBuilder() {
    // Another architecture's calling convention (x32, ia32 on x86_64) would
    // reinterpret the numbers below: kill.
    Load(offsetof(seccomp_data, arch));
    Jump(BPF_JEQ, kAuditArch, 1, 0);
    Return(SECCOMP_RET_KILL_PROCESS);
    LoadNr();
#if defined(__x86_64__)
    Jump(BPF_JGE, 0x40000000u, 0, 1);  // __X32_SYSCALL_BIT
    Return(SECCOMP_RET_KILL_PROCESS);
#endif
  }

  // nr → fail with `error`.
  void Deny(long nr, int error = EPERM) {
    Jump(BPF_JEQ, static_cast<uint32_t>(nr), 0, 1);
    Return(SECCOMP_RET_ERRNO | static_cast<uint32_t>(error));
  }
  // nr with any of `bits` set in argument `arg` (its low 32 bits) → EPERM.
  void DenyIfAnyBit(long nr, int arg, uint32_t bits) { CheckArg(nr, arg, BPF_JSET, bits, false); }
  // nr without all of `bits` in argument `arg` → EPERM.
  void DenyUnlessBit(long nr, int arg, uint32_t bits) { CheckArg(nr, arg, BPF_JSET, bits, true); }
  // nr with argument `arg` other than `value` → EPERM.
  void DenyUnlessEqual(long nr, int arg, uint32_t value) {
    CheckArg(nr, arg, BPF_JEQ, value, true);
  }

  std::vector<sock_filter> Finish() {
    Return(SECCOMP_RET_ALLOW);
    return std::move(program_);
  }

 private:
  static uint32_t ArgOffset(int arg) {
    // The low half of the 64-bit argument (little-endian on both targets).
    return static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * static_cast<size_t>(arg));
  }
  void Load(uint32_t offset) {
    program_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
  }
  void LoadNr() { Load(offsetof(seccomp_data, nr)); }
  void Jump(uint16_t op, uint32_t k, uint8_t jt, uint8_t jf) {
    program_.push_back(BPF_JUMP(static_cast<uint16_t>(BPF_JMP | op | BPF_K), k, jt, jf));
  }
  void Return(uint32_t value) { program_.push_back(BPF_STMT(BPF_RET | BPF_K, value)); }
  // For nr: allow when `op k` holds for the argument (allow_on_match) or
  // when it does not (!allow_on_match); deny otherwise.
  void CheckArg(long nr, int arg, uint16_t op, uint32_t k, bool allow_on_match) {
    constexpr uint32_t kAllow = SECCOMP_RET_ALLOW, kDeny = SECCOMP_RET_ERRNO | EPERM;
    Jump(BPF_JEQ, static_cast<uint32_t>(nr), 0, 4);
    Load(ArgOffset(arg));
    Jump(op, k, 0, 1);
    Return(allow_on_match ? kAllow : kDeny);
    Return(allow_on_match ? kDeny : kAllow);
  }
  std::vector<sock_filter> program_;
};

Status ApplySeccomp() {
  if (kAuditArch == 0) {
    return FailedPreconditionError("seccomp: no filter is written for this CPU architecture");
  }
  FilterBuilder f;
  // No network, no other processes, no new programs.
  for (long nr : {SYS_socket, SYS_socketpair, SYS_connect, SYS_bind, SYS_listen, SYS_accept,
                  SYS_accept4, SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv,
                  SYS_process_vm_writev, SYS_pidfd_open, SYS_pidfd_getfd, SYS_kill, SYS_tkill,
                  SYS_setns, SYS_unshare}) {
    f.Deny(nr);
  }
#ifdef SYS_fork
  f.Deny(SYS_fork);
  f.Deny(SYS_vfork);
#endif
  // Threads only: clone without CLONE_THREAD would be a new process. clone3
  // passes its flags in memory the filter cannot read; ENOSYS makes glibc
  // fall back to clone.
  f.DenyUnlessBit(SYS_clone, 0, CLONE_THREAD);
  f.Deny(SYS_clone3, ENOSYS);
  // Signals to this process only (abort, raise).
  f.DenyUnlessEqual(SYS_tgkill, 0, static_cast<uint32_t>(::getpid()));
  // Files: read-only opens; nothing created, removed, renamed or changed.
  constexpr uint32_t kWriting = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  f.DenyIfAnyBit(SYS_openat, 2, kWriting);
  f.Deny(SYS_openat2, ENOSYS);
#ifdef SYS_open
  f.DenyIfAnyBit(SYS_open, 1, kWriting);
  for (long nr : {SYS_creat, SYS_link, SYS_symlink, SYS_unlink, SYS_rename, SYS_mkdir, SYS_rmdir,
                  SYS_mknod, SYS_chmod, SYS_chown, SYS_lchown, SYS_truncate}) {
    f.Deny(nr);
  }
#endif
  for (long nr : {SYS_linkat, SYS_symlinkat, SYS_unlinkat, SYS_renameat, SYS_renameat2,
                  SYS_mkdirat, SYS_mknodat, SYS_fchmodat, SYS_fchownat, SYS_open_by_handle_at,
                  SYS_name_to_handle_at, SYS_memfd_create, SYS_io_uring_setup,
                  SYS_userfaultfd}) {
    f.Deny(nr);
  }
  // Mounts, privileges and kernel administration.
  for (long nr : {SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_open_tree,
                  SYS_move_mount, SYS_fsopen, SYS_fsmount, SYS_fspick, SYS_mount_setattr,
                  SYS_bpf, SYS_perf_event_open, SYS_keyctl, SYS_add_key, SYS_request_key,
                  SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_kexec_load,
                  SYS_kexec_file_load, SYS_reboot, SYS_swapon, SYS_swapoff, SYS_sethostname,
                  SYS_setdomainname, SYS_settimeofday, SYS_clock_settime, SYS_adjtimex,
                  SYS_clock_adjtime, SYS_acct, SYS_quotactl, SYS_setuid, SYS_setgid,
                  SYS_setreuid, SYS_setregid, SYS_setresuid, SYS_setresgid, SYS_setgroups,
                  SYS_capset, SYS_personality, SYS_fanotify_init}) {
    f.Deny(nr);
  }
  std::vector<sock_filter> program = f.Finish();
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
    return FailedPreconditionError(Errno("seccomp(SECCOMP_SET_MODE_FILTER)", errno));
  }
  return Status::Ok();
}

Status SetLimit(int resource, const char* name, rlim_t soft, rlim_t hard) {
  rlimit limit{soft, hard};
  if (::setrlimit(resource, &limit) != 0) {
    return FailedPreconditionError(Errno(std::string("setrlimit(") + name + ")", errno));
  }
  return Status::Ok();
}

// The address space mapped now (VmSize), in bytes; 0 if unknown.
int64_t MappedBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long pages = 0;
  int read = std::fscanf(f, "%lld", &pages);
  std::fclose(f);
  return read == 1 ? pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

Status ApplyLimits(const ConfinementLimits& limits) {
  KSEARCH_RETURN_IF_ERROR(SetLimit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0));
  KSEARCH_RETURN_IF_ERROR(SetLimit(RLIMIT_FSIZE, "RLIMIT_FSIZE", 0, 0));
  if (limits.memory_bytes > 0) {
    // RLIMIT_AS counts address space, not memory: what the process has
    // mapped already (NVRTC, and with a driver installed libcuda, which
    // reserves tens of GiB of address space it never touches) comes on top
    // of the budget for the compile itself.
    rlim_t bytes = static_cast<rlim_t>(MappedBytes() + limits.memory_bytes);
    KSEARCH_RETURN_IF_ERROR(SetLimit(RLIMIT_AS, "RLIMIT_AS", bytes, bytes));
  }
  if (limits.cpu_seconds > 0) {
    // RLIMIT_CPU counts from the start of the process: add what it used.
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    double used = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + 1.0;
    rlim_t soft = static_cast<rlim_t>(std::ceil(used + limits.cpu_seconds));
    KSEARCH_RETURN_IF_ERROR(SetLimit(RLIMIT_CPU, "RLIMIT_CPU", soft, soft + 1));
  }
  return Status::Ok();
}

Status DropCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, data) != 0) {
    return FailedPreconditionError(Errno("capset", errno));
  }
  return Status::Ok();
}

}  // namespace

int LandlockAbi(std::string* why) {
  long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  if (abi >= 1) return static_cast<int>(abi);
  if (why) {
    int error = errno;
    if (error == ENOSYS) {
      *why = "Landlock is not supported by this kernel (Linux 5.13 or later is needed)";
    } else if (error == EOPNOTSUPP) {
      *why = "Landlock is disabled in this kernel (it is not in the lsm= boot parameter)";
    } else {
      *why = Errno("landlock_create_ruleset (blocked, e.g. by a container's seccomp profile)",
                   error);
    }
  }
  return 0;
}

Status ConfinementAvailable() {
  KSEARCH_ASSIGN_OR_RETURN(int ruleset, CreateRuleset());
  ::close(ruleset);
  if (kAuditArch == 0) {
    return FailedPreconditionError("seccomp: no filter is written for this CPU architecture");
  }
  return Status::Ok();
}

Status ConfineThisProcess(const std::vector<std::string>& readable_dirs,
                          const ConfinementLimits& limits) {
  KSEARCH_RETURN_IF_ERROR(ApplyLimits(limits));
  KSEARCH_RETURN_IF_ERROR(DropCapabilities());
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return FailedPreconditionError(Errno("prctl(PR_SET_NO_NEW_PRIVS)", errno));
  }
  KSEARCH_RETURN_IF_ERROR(ApplyLandlock(readable_dirs));
  return ApplySeccomp();
}

}  // namespace ksearch::internal

namespace ksearch {

bool CompileConfinementAvailable(std::string* why) {
  Status available = internal::ConfinementAvailable();
  if (!available.ok() && why) *why = available.message();
  return available.ok();
}

}  // namespace ksearch
