// A kernel out of a model's reply: the fenced blocks of a Markdown text, the
// CUDA source and launch plan among them (salvaged as models really write
// them), and the clean-ups applied to each.
#ifndef KSEARCH_KERNEL_BLOCKS_H_
#define KSEARCH_KERNEL_BLOCKS_H_

#include <string>
#include <string_view>
#include <vector>

#include "ksearch/status.h"

namespace ksearch {

// One fenced code block (``` or ~~~, CommonMark rules: the closing fence is at
// least as long as the opening one).
struct FencedBlock {
  std::string language;  // the info string's first word, lower-case ("cuda", "json", "")
  std::string text;      // the lines between the fences, each ending in '\n'
  int first_line = 0;    // 1-based line of the opening fence
  bool closed = true;    // false when the reply ended inside the block
};

// Every fenced block of `markdown`, in order.
std::vector<FencedBlock> ExtractFencedBlocks(std::string_view markdown);

// What a language model returns for a candidate: a ```cuda block (also
// accepted: ```cu, ```cuh, ```cpp, ```c++, ```cc, ```c, ```h, ```hpp, and an
// untagged block that defines a __global__ function) and a ```json launch
// plan (also ```jsonc, or an untagged block with "launches").
struct KernelBlocks {
  std::string cuda_source;
  std::string launch_plan_json;
  // What was salvaged, one line each ("added extern \"C\" to kernel k()",
  // "dropped host function main()", "joined 2 source blocks, at lines 3 and 20").
  std::vector<std::string> repairs;
};

// Takes the source and the plan from `reply` as models really write them.
// Several source blocks: those defining kernels are kept; kernels split
// across blocks are joined; a kernel defined twice takes the last block.
// Several plan blocks: the last one with "launches". The source goes through
// SanitizeKernelSource, the plan through StripJsonComments. Errors:
// kNotFound ("no ```cuda block", mentioning an untagged block if there is
// one), kInvalidArgument ("2 ```cuda blocks, at lines 3 and 40; expected
// exactly one", when no block defines a kernel), kOutOfRange (a block opened
// but never closed: the reply was cut). Each message says which block.
[[nodiscard]] StatusOr<KernelBlocks> ExtractKernelBlocks(std::string_view reply);

// Makes a model's source one NVRTC translation unit: drops host-only
// includes (torch/, ATen/, pybind11, <iostream>, <vector>…), top-level
// functions that are neither __global__ nor __device__ (main(), launchers
// with <<<>>>, PyTorch bindings) and declarations naming host types; adds
// extern "C" to non-template kernels without it (the evaluator looks kernels
// up by their unmangled names). Appends one line per change to `changes`.
std::string SanitizeKernelSource(std::string_view source, std::vector<std::string>* changes);

// JSON as models write it, made strict: // and /* */ comments outside strings
// and trailing commas before a closing bracket are removed.
std::string StripJsonComments(std::string_view json);

}  // namespace ksearch

#endif  // KSEARCH_KERNEL_BLOCKS_H_
