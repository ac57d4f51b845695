// Fenced code blocks, after CommonMark: a fence is 3+ backticks or tildes
// indented by at most 3 spaces; it closes on a fence of the same character at
// least as long; content lines lose up to the opening fence's indentation.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "ksearch/kernel_blocks.h"

namespace ksearch {
namespace {

struct Fence {
  char character = 0;
  size_t length = 0;
  size_t indent = 0;
  std::string_view rest;  // after the fence characters
};

bool ParseFence(std::string_view line, Fence* fence) {
  size_t indent = 0;
  while (indent < line.size() && line[indent] == ' ') ++indent;
  if (indent > 3 || indent == line.size()) return false;
  char c = line[indent];
  if (c != '`' && c != '~') return false;
  size_t end = indent;
  while (end < line.size() && line[end] == c) ++end;
  if (end - indent < 3) return false;
  fence->character = c;
  fence->length = end - indent;
  fence->indent = indent;
  fence->rest = line.substr(end);
  // A backtick fence's info string may not contain backticks (else it is
  // inline code).
  return c != '`' || fence->rest.find('`') == std::string_view::npos;
}

bool IsBlank(std::string_view text) {
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string FirstWordLower(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size() && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  size_t end = begin;
  while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
         text[end] != '{') {
    ++end;
  }
  std::string word(text.substr(begin, end - begin));
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

bool IsSourceLanguage(std::string_view language) {
  return language == "cuda" || language == "cu" || language == "cuh" || language == "cpp" ||
         language == "c++" || language == "cxx" || language == "cc" || language == "c" ||
         language == "h" || language == "hpp";
}

std::string Lines(const std::vector<const FencedBlock*>& blocks) {
  std::string out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) out += i + 1 == blocks.size() ? " and " : ", ";
    out += std::to_string(blocks[i]->first_line);
  }
  return out;
}

// Picks the one block of a kind; `what` is "```cuda" or "```json".
StatusOr<std::string> TakeOne(const std::vector<FencedBlock>& all,
                              const std::vector<const FencedBlock*>& found, std::string_view what,
                              std::string_view role) {
  const std::string kind(what);
  if (found.empty()) {
    std::string message = "reply has no " + kind + " block (" + std::string(role) + ")";
    for (const FencedBlock& block : all) {
      if (block.language.empty()) {
        message += "; there is an untagged block at line " + std::to_string(block.first_line) +
                   ": tag it " + kind;
        break;
      }
    }
    return NotFoundError(message);
  }
  if (found.size() > 1) {
    return InvalidArgumentError("reply has " + std::to_string(found.size()) + " " + kind +
                                " blocks, at lines " + Lines(found) + "; expected exactly one (" +
                                std::string(role) + ")");
  }
  if (!found.front()->closed) {
    return OutOfRangeError("the " + kind + " block opened at line " +
                           std::to_string(found.front()->first_line) +
                           " is never closed: the reply was cut");
  }
  return found.front()->text;
}

}  // namespace

std::vector<FencedBlock> ExtractFencedBlocks(std::string_view markdown) {
  std::vector<FencedBlock> blocks;
  FencedBlock* open = nullptr;
  Fence opening;
  int line_number = 0;
  size_t position = 0;
  while (position < markdown.size()) {
    size_t newline = markdown.find('\n', position);
    size_t end = newline == std::string_view::npos ? markdown.size() : newline;
    std::string_view line = markdown.substr(position, end - position);
    position = newline == std::string_view::npos ? markdown.size() : newline + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;

    Fence fence;
    if (open == nullptr) {
      if (ParseFence(line, &fence)) {
        blocks.push_back(FencedBlock{FirstWordLower(fence.rest), "", line_number, false});
        open = &blocks.back();
        opening = fence;
      }
      continue;
    }
    if (ParseFence(line, &fence) && fence.character == opening.character &&
        fence.length >= opening.length && IsBlank(fence.rest)) {
      open->closed = true;
      open = nullptr;
      continue;
    }
    size_t strip = 0;
    while (strip < opening.indent && strip < line.size() && line[strip] == ' ') ++strip;
    open->text.append(line.substr(strip));
    open->text.push_back('\n');
  }
  return blocks;
}

namespace {

bool Contains(std::string_view text, std::string_view piece) {
  return text.find(piece) != std::string_view::npos;
}

// One top-level piece of a translation unit: a preprocessor line, a
// declaration ending in ';', or a definition ending in its closing brace.
struct Chunk {
  std::string text;
  std::string header;  // for definitions: the text before the first '{'
  bool braced = false;
};

// Splits `source` at the top level, skipping over comments, strings and
// character literals so that their braces and semicolons do not count.
std::vector<Chunk> TopLevelChunks(std::string_view source) {
  std::vector<Chunk> out;
  Chunk current;
  int depth = 0;
  size_t i = 0;
  auto flush = [&] {
    bool blank = true;
    for (char c : current.text) blank = blank && std::isspace(static_cast<unsigned char>(c));
    if (!blank) {
      out.push_back(std::move(current));
    } else if (!out.empty()) {
      out.back().text += current.text;  // white space stays where it was
    }
    current = Chunk();
  };
  while (i < source.size()) {
    char c = source[i];
    // A preprocessor line at the top level is a chunk of its own (with its
    // continuation lines).
    if (depth == 0 && c == '#') {
      // The first non-blank character of its line (comments before it on
      // earlier lines end the chunk they belong to).
      // (Back over blanks only: a long line of '#'s costs no more than it.)
      bool line_start = true;
      for (size_t back = i; back > 0 && source[back - 1] != '\n'; --back) {
        if (source[back - 1] != ' ' && source[back - 1] != '\t') {
          line_start = false;
          break;
        }
      }
      if (line_start) {
        flush();
        size_t end = i;
        while (end < source.size()) {
          size_t newline = source.find('\n', end);
          if (newline == std::string_view::npos) {
            end = source.size();
            break;
          }
          end = newline + 1;
          if (newline == 0 || source[newline - 1] != '\\') break;
        }
        current.text = std::string(source.substr(i, end - i));
        flush();
        i = end;
        continue;
      }
    }
    if (c == '/' && i + 1 < source.size() && source[i + 1] == '/') {
      size_t end = source.find('\n', i);
      end = end == std::string_view::npos ? source.size() : end;
      current.text.append(source.substr(i, end - i));
      i = end;
      continue;
    }
    if (c == '/' && i + 1 < source.size() && source[i + 1] == '*') {
      size_t end = source.find("*/", i + 2);
      end = end == std::string_view::npos ? source.size() : end + 2;
      current.text.append(source.substr(i, end - i));
      i = end;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = i + 1;
      while (end < source.size() && source[end] != c) end += source[end] == '\\' ? 2 : 1;
      end = std::min(source.size(), end + 1);
      current.text.append(source.substr(i, end - i));
      i = end;
      continue;
    }
    current.text.push_back(c);
    ++i;
    if (c == '{') {
      if (depth == 0 && !current.braced) {
        current.braced = true;
        current.header = current.text.substr(0, current.text.size() - 1);
      }
      ++depth;
    } else if (c == '}') {
      depth = std::max(0, depth - 1);
      if (depth == 0) {
        // A trailing ';' (struct S {…};) belongs to the chunk.
        size_t j = i;
        while (j < source.size() && (source[j] == ' ' || source[j] == '\t')) ++j;
        if (j < source.size() && source[j] == ';') {
          current.text.append(source.substr(i, j + 1 - i));
          i = j + 1;
        }
        flush();
      }
    } else if (c == ';' && depth == 0) {
      flush();
    }
  }
  flush();
  return out;
}

// Header includes that exist only for host code (PyTorch extensions, the
// standard library's containers and streams): NVRTC has none of them.
bool IsHostInclude(std::string_view line) {
  if (!line.starts_with("#include") && !Contains(line, "# include")) return false;
  for (std::string_view host : {"torch/", "ATen/", "c10/", "pybind11", "<iostream>", "<vector>",
                                "<string>", "<map>", "<memory>", "<chrono>", "<fstream>",
                                "<sstream>", "<algorithm>", "<thrust/", "<cub/"}) {
    if (Contains(line, host)) return true;
  }
  return false;
}

bool MentionsHostTypes(std::string_view text) {
  for (std::string_view host : {"torch::", "at::", "c10::", "py::", "std::vector", "std::string",
                                "PYBIND11_MODULE", "TORCH_LIBRARY", "<<<", "cudaMalloc",
                                "cudaMemcpy", "cudaStream_t", "cudaDeviceSynchronize"}) {
    if (Contains(text, host)) return true;
  }
  return false;
}

// The name of a function defined by `header` ("… name(" → "name"): the
// identifier before the first parenthesis that is not an attribute's
// (__launch_bounds__(256), __cluster_dims__(2, 1, 1), __attribute__((…)),
// alignas(16), __align__(16)).
std::string FunctionName(std::string_view header) {
  static constexpr std::string_view kAttributes[] = {"__launch_bounds__", "__cluster_dims__",
                                                     "__attribute__", "__declspec", "alignas",
                                                     "__align__", "__maxnreg__"};
  size_t from = 0;
  for (;;) {
    size_t paren = header.find('(', from);
    if (paren == std::string_view::npos) return "";
    size_t end = paren;
    while (end > 0 && std::isspace(static_cast<unsigned char>(header[end - 1]))) --end;
    size_t begin = end;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(header[begin - 1])) ||
                         header[begin - 1] == '_')) {
      --begin;
    }
    std::string_view name = header.substr(begin, end - begin);
    if (std::find(std::begin(kAttributes), std::end(kAttributes), name) == std::end(kAttributes)) {
      return std::string(name);
    }
    // Past the attribute's balanced parentheses.
    int depth = 0;
    size_t i = paren;
    for (; i < header.size(); ++i) {
      if (header[i] == '(') ++depth;
      if (header[i] == ')' && --depth == 0) break;
    }
    if (i >= header.size()) return "";
    from = i + 1;
  }
}

std::string TrimLeft(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size() && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  return std::string(text.substr(begin));
}

// `text` without the comments and white space it starts with: what a chunk
// declares is read from its code ("// … (x)\nstruct S {" is a struct).
std::string SkipLeadingComments(std::string_view text) {
  std::string out = TrimLeft(text);
  for (;;) {
    if (out.starts_with("//")) {
      size_t end = out.find('\n');
      out = end == std::string::npos ? std::string() : TrimLeft(std::string_view(out).substr(end + 1));
    } else if (out.starts_with("/*")) {
      size_t end = out.find("*/");
      out = end == std::string::npos ? std::string() : TrimLeft(std::string_view(out).substr(end + 2));
    } else {
      return out;
    }
  }
}

}  // namespace

std::string SanitizeKernelSource(std::string_view source, std::vector<std::string>* changes) {
  std::string out;
  for (Chunk& chunk : TopLevelChunks(source)) {
    const std::string text = SkipLeadingComments(chunk.text);
    if (text.empty() || text.starts_with("#")) {
      if (IsHostInclude(text)) {
        changes->push_back("dropped host include " + text.substr(0, text.find('\n')));
        continue;
      }
      out += chunk.text;
      continue;
    }
    const std::string header = SkipLeadingComments(chunk.braced ? chunk.header : chunk.text);
    const bool device = Contains(header, "__global__") || Contains(header, "__device__") ||
                        Contains(header, "constexpr");
    const bool function = chunk.braced && Contains(header, "(") &&
                          !header.starts_with("struct") && !header.starts_with("class") &&
                          !header.starts_with("namespace") && !header.starts_with("union") &&
                          !header.starts_with("enum") && !header.starts_with("extern \"C\"");
    // Host functions (main, launchers with <<<>>>, PyTorch bindings) can
    // never run in a candidate: the evaluator launches the kernels itself.
    if ((function && !device) || (!device && MentionsHostTypes(text)) ||
        text.starts_with("using namespace torch")) {
      std::string name = function ? FunctionName(header) : "";
      changes->push_back(name.empty() ? "dropped host code \"" + text.substr(0, 40) + "…\""
                                      : "dropped host function " + name + "()");
      continue;
    }
    if (chunk.braced && Contains(header, "__global__") && !Contains(header, "extern \"C\"") &&
        !header.starts_with("template")) {
      // The evaluator finds kernels by their unmangled names.
      changes->push_back("added extern \"C\" to kernel " + FunctionName(header) + "()");
      // Before the code, after the comments that lead the chunk.
      chunk.text.insert(chunk.text.size() - text.size(), "extern \"C\" ");
    }
    out += chunk.text;
  }
  // INFINITY and NAN come from math.h under nvcc; NVRTC's device headers do
  // not define them.
  for (auto [name, bits] : {std::pair<const char*, const char*>{"INFINITY", "0x7f800000"},
                            std::pair<const char*, const char*>{"NAN", "0x7fffffff"}}) {
    if (Contains(out, name) && !Contains(out, std::string("define ") + name)) {
      out = std::string("#ifndef ") + name + "\n#define " + name + " __int_as_float(" + bits +
            ")\n#endif\n" + out;
      changes->push_back(std::string("defined ") + name + " (NVRTC has no math.h)");
    }
  }
  return out;
}

std::string StripJsonComments(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
      end = std::min(json.size(), end + 1);
      out.append(json.substr(i, end - i));
      i = end - 1;
    } else if (c == '/' && i + 1 < json.size() && json[i + 1] == '/') {
      while (i < json.size() && json[i] != '\n') ++i;
      out.push_back('\n');
    } else if (c == '/' && i + 1 < json.size() && json[i + 1] == '*') {
      size_t end = json.find("*/", i + 2);
      i = end == std::string_view::npos ? json.size() : end + 1;
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  // A trailing comma before a closing bracket (another habit of hand-written
  // JSON) is dropped too.
  std::string cleaned;
  bool in_string = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (in_string) {
      if (out[i] == '\\' && i + 1 < out.size()) {
        cleaned.push_back(out[i++]);
      } else if (out[i] == '"') {
        in_string = false;
      }
    } else if (out[i] == '"') {
      in_string = true;
    } else if (out[i] == ',') {
      size_t j = i + 1;
      while (j < out.size() && std::isspace(static_cast<unsigned char>(out[j]))) ++j;
      if (j < out.size() && (out[j] == '}' || out[j] == ']')) continue;
    }
    cleaned.push_back(out[i]);
  }
  return cleaned;
}

StatusOr<KernelBlocks> ExtractKernelBlocks(std::string_view reply) {
  std::vector<FencedBlock> blocks = ExtractFencedBlocks(reply);
  std::vector<const FencedBlock*> sources;
  std::vector<const FencedBlock*> plans;
  for (const FencedBlock& block : blocks) {
    const bool kernel = Contains(block.text, "__global__");
    if (IsSourceLanguage(block.language) || (block.language.empty() && kernel)) {
      sources.push_back(&block);
    }
    if (block.language == "json" || block.language == "jsonc" || block.language == "json5" ||
        (block.language.empty() && !kernel && Contains(block.text, "\"launches\""))) {
      plans.push_back(&block);
    }
  }
  KernelBlocks out;
  FencedBlock merged;  // kernels split across blocks, joined
  // Several source blocks: keep those that define kernels (helpers and host
  // wrappers come in blocks of their own); kernels split across blocks are
  // joined, in order, when no kernel is defined twice; a kernel written again
  // (a corrected version) takes the last block that defines it.
  std::vector<const FencedBlock*> kernels;
  for (const FencedBlock* b : sources) {
    if (Contains(b->text, "__global__")) kernels.push_back(b);
  }
  if (sources.size() > 1 && !kernels.empty()) {
    std::set<std::string> names;
    bool redefined = false;
    for (const FencedBlock* b : kernels) {
      for (const Chunk& chunk : TopLevelChunks(b->text)) {
        if (chunk.braced && Contains(chunk.header, "__global__")) {
          redefined |= !names.insert(FunctionName(chunk.header)).second;
        }
      }
    }
    if (redefined) {
      sources = {kernels.back()};
      out.repairs.push_back("took the last of " + std::to_string(kernels.size()) +
                            " source blocks that define the same kernel");
    } else {
      // Device helpers in kernel-less blocks come along too.
      std::vector<const FencedBlock*> device;
      for (const FencedBlock* b : sources) {
        if (Contains(b->text, "__global__") || Contains(b->text, "__device__")) device.push_back(b);
      }
      if (device.size() > 1) {
        std::string joined;
        bool closed = true;
        for (const FencedBlock* b : device) {
          joined += b->text;
          closed = closed && b->closed;
        }
        out.repairs.push_back("joined " + std::to_string(device.size()) +
                              " source blocks, at lines " + Lines(device));
        merged = FencedBlock{"cuda", std::move(joined), device.front()->first_line, closed};
        sources = {&merged};
      } else {
        sources = device;
      }
    }
  }
  if (plans.size() > 1) {
    // The one that is a launch plan.
    std::vector<const FencedBlock*> with_launches;
    for (const FencedBlock* b : plans) {
      if (Contains(b->text, "\"launches\"")) with_launches.push_back(b);
    }
    if (!with_launches.empty()) plans = {with_launches.back()};
  }
  KSEARCH_ASSIGN_OR_RETURN(std::string source,
                           TakeOne(blocks, sources, "```cuda", "the kernel source"));
  KSEARCH_ASSIGN_OR_RETURN(std::string plan,
                           TakeOne(blocks, plans, "```json", "the launch plan"));
  out.cuda_source = SanitizeKernelSource(source, &out.repairs);
  out.launch_plan_json = StripJsonComments(plan);
  return out;
}

}  // namespace ksearch
