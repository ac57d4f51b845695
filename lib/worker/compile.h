// Compiling candidates outside the judge, as the in-process evaluator would:
// the same request (options, -D defines, arch, file name), the same cache
// folder, the same verdict for a source that does not compile.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_WORKER_COMPILE_H_
#define KSEARCH_WORKER_COMPILE_H_

#include <string>

#include "cuda/compiler.h"
#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"

namespace ksearch::internal::worker {

// CompilerOptions from EvaluatorOptions (cache folder as documented there).
CompilerOptions CompilerOptionsFor(const EvaluatorOptions& options);

// What an evaluation whose candidate compiled without confinement says.
inline constexpr char kUnsandboxedNote[] =
    "compiled without confinement (--unsandboxed-compile)";

// Appends " [kUnsandboxedNote]" to the message when `compiled` ran
// unconfined (CompileResult::unsandboxed).
void NoteUnsandboxed(const CompileResult& compiled, Evaluation* evaluation);

// The request CreateLocalEvaluator would make for `candidate` on `arch`.
CompileRequest RequestFor(const Candidate& candidate, const std::string& arch);

// Fills the verdict of a candidate whose compile did not produce a cubin
// (kCompileError, or kTimeout past the compile limit) and returns true; false
// when `compiled` is ok. An error status (NVRTC itself unusable) is a
// kCompileError naming it.
bool FillCompileFailure(const StatusOr<CompileResult>& compiled, Evaluation* evaluation);

}  // namespace ksearch::internal::worker

#endif  // KSEARCH_WORKER_COMPILE_H_
