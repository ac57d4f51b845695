#include "worker/compile.h"

#include <cstdlib>

#include "core/plan_resolve.h"

namespace ksearch::internal::worker {
namespace {

// Kept identical to the in-process evaluator's choice, so that the
// orchestrator, the workers and CreateLocalEvaluator share one cache.
std::string DefaultCacheDir() {
  if (const char* env = std::getenv("KSEARCH_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/ksearch";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ksearch";
  return "";
}

}  // namespace

CompilerOptions CompilerOptionsFor(const EvaluatorOptions& options) {
  CompilerOptions c;
  c.cache_dir =
      options.compile_cache_dir == "off"
          ? ""
          : (options.compile_cache_dir.empty() ? DefaultCacheDir() : options.compile_cache_dir);
  if (!c.cache_dir.empty()) c.cache_dir += "/cubin";
  c.max_log_bytes = options.max_log_bytes;
  c.timeout_seconds = options.compile_timeout_seconds;
  c.allow_unsandboxed = options.allow_unsandboxed_compile;
  c.memory_limit_bytes = options.compile_memory_limit_bytes;
  return c;
}

void NoteUnsandboxed(const CompileResult& compiled, Evaluation* e) {
  if (compiled.unsandboxed) e->message += " [" + std::string(kUnsandboxedNote) + "]";
}

CompileRequest RequestFor(const Candidate& candidate, const std::string& arch) {
  std::vector<std::string> options = candidate.compile_options;
  for (std::string& define : ParamDefines(candidate.plan)) options.push_back(std::move(define));
  return CompileRequest{candidate.source, std::move(options), arch,
                        (candidate.id.empty() ? std::string("candidate") : candidate.id) + ".cu"};
}

bool FillCompileFailure(const StatusOr<CompileResult>& compiled, Evaluation* e) {
  if (!compiled.ok()) {
    e->status = EvalStatus::kCompileError;
    e->message = "NVRTC could not be used: " + compiled.status().message();
    return true;
  }
  if (compiled->ok) return false;
  e->resources = compiled->resources;
  e->status = compiled->timed_out ? EvalStatus::kTimeout : EvalStatus::kCompileError;
  e->message = compiled->timed_out ? "NVRTC did not finish within the compile time limit"
                                   : "NVRTC rejected the source";
  e->details = compiled->log;
  NoteUnsandboxed(*compiled, e);
  return true;
}

}  // namespace ksearch::internal::worker
