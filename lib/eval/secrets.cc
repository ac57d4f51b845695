#include "eval/secrets.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ksearch::internal {
namespace {

// getrandom for a few bytes from the kernel's pool: it blocks only until
// the pool is first initialized and is not interrupted for requests of up
// to 256 bytes once it is; EINTR before that is retried.
bool ReadSystemRandom(uint64_t* out) {
  for (;;) {
    ssize_t n = getrandom(out, sizeof(*out), 0);
    if (n == static_cast<ssize_t>(sizeof(*out))) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

uint64_t SplitMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Status JudgeSecrets::CheckAvailable() {
  uint64_t probe = 0;
  if (ReadSystemRandom(&probe)) return Status::Ok();
  return FailedPreconditionError(std::string("the judge needs the operating system's randomness (getrandom: ") +
                                 std::strerror(errno) + "); without it a kernel could predict its inputs");
}

uint64_t JudgeSecrets::Next() {
  if (replay_seed_ != 0) return SplitMix(replay_seed_ + 0x9e3779b97f4a7c15ull * ++counter_);
  uint64_t value = 0;
  if (!ReadSystemRandom(&value)) {
    // CheckAvailable passed when the evaluator started: the kernel's pool
    // does not go away. Judging on with a guessable value would be worse
    // than stopping.
    std::fprintf(stderr, "ksearch: getrandom failed after it had worked (%s); the judge cannot go on\n",
                 std::strerror(errno));
    std::abort();
  }
  return value;
}

bool JudgeSecrets::Chance(double p) {
  if (!(p > 0.0)) return false;
  if (p >= 1.0) return true;
  // 53 random bits as a uniform value in [0, 1).
  double u = static_cast<double>(Next() >> 11) * 0x1p-53;
  return u < p;
}

}  // namespace ksearch::internal
