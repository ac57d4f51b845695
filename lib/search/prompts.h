// Rendering of the prompt templates: {{name}} substitution and the text
// forms of a problem, a kernel, an evaluation and the idea history that the
// templates receive.
#ifndef KSEARCH_SEARCH_PROMPTS_H_
#define KSEARCH_SEARCH_PROMPTS_H_

#include <map>
#include <string>
#include <string_view>

#include "ksearch/evaluation.h"
#include "ksearch/generator.h"
#include "ksearch/problem.h"
#include "ksearch/strategies.h"

namespace ksearch::internal {

// The built-in templates (generated from prompts/*.md at configure time).
extern const char* const kBuiltinPrompt_system;
extern const char* const kBuiltinPrompt_ideas;
extern const char* const kBuiltinPrompt_branch;
extern const char* const kBuiltinPrompt_repair;
extern const char* const kBuiltinPrompt_contract;
extern const char* const kBuiltinPrompt_categories;

// Replaces every {{name}} by values[name]; a name without a value renders as
// nothing (Validate has rejected names a template may not use).
std::string RenderTemplate(std::string_view text, const std::map<std::string, std::string>& values);

// The problem's text for a model, with its dims and tensors.
std::string RenderProblem(const Problem& problem);
// Source in a ```cuda block and plan in a ```json block.
std::string RenderKernel(const Candidate& candidate);
// Status, time, speedup, roofline fraction, resources, checks not run; for a
// failure also the message, the compile log (cut) or the mismatch report.
std::string RenderEvaluation(const Evaluation& evaluation);
// What a timed kernel achieved against the device: bandwidth and throughput
// from the problem's declared bytes and flops (as fractions of the measured
// peaks), and each launch's grid, block, resident blocks per SM with the
// resource that limits them, theoretical occupancy and waves. Empty for an
// untimed entry on an unknown device.
std::string RenderPerformance(const HistoryEntry& entry, const Problem& problem);
// RenderKernel + RenderEvaluation + RenderPerformance.
std::string RenderEntry(const HistoryEntry& entry, const Problem& problem);
// The ideas of `history` with their outcomes, at most `max_ideas`: those on
// `parent_id` first, each group most recent first. "(none yet)" when empty.
std::string RenderIdeaHistory(const SearchHistory* history, const std::string& parent_id,
                              int max_ideas);
// "NVIDIA H200 (sm_90)" (the arch alone when compile-only), then one line
// each: SM count; shared memory, registers and threads per SM and per block
// and the arch's features (clusters, TMA, wgmma…) from a table by compute
// capability; L2 size; measured bandwidth, fp32 FMA and tensor-core peaks where
// known.
std::string RenderDevice(const DeviceInfo& device);
// The design choice that branch `branch` (0-based) of `branches` should vary,
// so that the branches of one idea diverge: tiling, memory path, parallel
// decomposition, instruction mix, latency hiding, a bold variant.
std::string DesignAxis(int branch, int branches);

}  // namespace ksearch::internal

#endif  // KSEARCH_SEARCH_PROMPTS_H_
