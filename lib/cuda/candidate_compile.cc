#include "cuda/candidate_compile.h"

#include <chrono>
#include <cstdlib>
#include <vector>

#include "core/plan_resolve.h"

namespace ksearch::internal {

std::string CubinCacheFolder(const std::string& compile_cache_dir) {
  if (compile_cache_dir == "off") return "";
  std::string root = compile_cache_dir;
  if (root.empty()) {
    if (const char* env = std::getenv("KSEARCH_CACHE_DIR"); env && *env) {
      if (std::string_view(env) == "off") return "";
      root = env;
    } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
      root = std::string(xdg) + "/ksearch";
    } else if (const char* home = std::getenv("HOME"); home && *home) {
      root = std::string(home) + "/.cache/ksearch";
    }
  }
  return root.empty() ? "" : root + "/cubin";
}

CompilerOptions CompilerOptionsFor(const EvaluatorOptions& options) {
  CompilerOptions c;
  c.cache_dir = CubinCacheFolder(options.compile_cache_dir);
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
  return FillCompileFailure(*compiled, e);
}

bool FillCompileFailure(const CompileResult& compiled, Evaluation* e) {
  if (compiled.ok) return false;
  e->resources = compiled.resources;
  e->status = compiled.timed_out ? EvalStatus::kTimeout : EvalStatus::kCompileError;
  e->message = compiled.timed_out ? "NVRTC did not finish within the compile time limit"
                                  : "NVRTC rejected the source";
  e->details = compiled.log;
  NoteUnsandboxed(compiled, e);
  return true;
}

void CompileEach(Compiler& compiler, TaskGroup& group, std::span<const Candidate> candidates,
                 std::span<const size_t> indices, const std::string& arch,
                 const std::atomic<bool>* stop, CompiledCallback done) {
  auto compile = [&compiler, candidates, arch, stop, done](size_t i) {
    if (stop && stop->load()) {
      done(i, CancelledError("cancelled before its compile"), 0.0);
      return;
    }
    auto start = std::chrono::steady_clock::now();
    StatusOr<CompileResult> compiled = compiler.Compile(RequestFor(candidates[i], arch));
    done(i, std::move(compiled),
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count());
  };
  for (size_t i : indices) group.Post([compile, i] { compile(i); });
}

void CompileEach(Compiler& compiler, TaskGroup& group, std::span<const Candidate> candidates,
                 const std::string& arch, const std::atomic<bool>* stop, CompiledCallback done) {
  std::vector<size_t> all(candidates.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  CompileEach(compiler, group, candidates, all, arch, stop, std::move(done));
}

}  // namespace ksearch::internal
