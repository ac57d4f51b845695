// The compile front end: how every caller compiles a candidate — the local
// evaluator, the worker processes, the worker pool's and the queue's
// orchestrators, and the kernel cache. One request (options, -D defines,
// arch, file name), one cache folder, one verdict for a source that does not
// compile, and one way to compile a batch on a bounded pool, so that a kernel
// compiled anywhere hits the cache entry its judging left.
//
// Thread safety: stateless functions; CompileEach as documented there.
#ifndef KSEARCH_CUDA_CANDIDATE_COMPILE_H_
#define KSEARCH_CUDA_CANDIDATE_COMPILE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "core/thread_pool.h"
#include "cuda/compiler.h"
#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"

namespace ksearch::internal {

// The on-disk cubin cache folder for a compile_cache_dir option
// (EvaluatorOptions, KernelCache::Options): the "cubin" subfolder of the
// option, or when it is empty of $KSEARCH_CACHE_DIR, else
// $XDG_CACHE_HOME/ksearch, else ~/.cache/ksearch. "off" as the option or as
// $KSEARCH_CACHE_DIR (or no home at all) → "": no disk cache.
std::string CubinCacheFolder(const std::string& compile_cache_dir);

// CompilerOptions from EvaluatorOptions.
CompilerOptions CompilerOptionsFor(const EvaluatorOptions& options);

// What an evaluation whose candidate compiled without confinement says.
inline constexpr char kUnsandboxedNote[] =
    "compiled without confinement (--unsandboxed-compile)";

// Appends " [kUnsandboxedNote]" to the message when `compiled` ran
// unconfined (CompileResult::unsandboxed).
void NoteUnsandboxed(const CompileResult& compiled, Evaluation* evaluation);

// The request for `candidate` on `arch`: its compile options, then its plan's
// params as -D defines; the file name is the candidate's id + ".cu".
CompileRequest RequestFor(const Candidate& candidate, const std::string& arch);

// Fills the verdict of a candidate whose compile did not produce a cubin
// (kCompileError, or kTimeout past the compile limit; resources, log and the
// unsandboxed note with it) and returns true; false when `compiled` is ok. An
// error status (NVRTC itself unusable) is a kCompileError naming it.
bool FillCompileFailure(const StatusOr<CompileResult>& compiled, Evaluation* evaluation);
bool FillCompileFailure(const CompileResult& compiled, Evaluation* evaluation);

// Called once per candidate with its index, its compile and the wall time the
// compile took (a cache hit's is small).
using CompiledCallback =
    std::function<void(size_t index, StatusOr<CompileResult> compiled, double wall_ms)>;

// Compiles `candidates[i]` for every i in `indices` for `arch`, on `group`'s
// pool. `done` runs on a pool thread as each finishes; a candidate reached
// after `*stop` is set (when `stop` is given) is not compiled and gets
// kCancelled. Returns at once: wait on `group` before `compiler`,
// `candidates` or what `done` borrows goes away.
void CompileEach(Compiler& compiler, TaskGroup& group, std::span<const Candidate> candidates,
                 std::span<const size_t> indices, const std::string& arch,
                 const std::atomic<bool>* stop, CompiledCallback done);
// The same for every candidate.
void CompileEach(Compiler& compiler, TaskGroup& group, std::span<const Candidate> candidates,
                 const std::string& arch, const std::atomic<bool>* stop, CompiledCallback done);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_CANDIDATE_COMPILE_H_
