// Fenced code blocks, after CommonMark: a fence is 3+ backticks or tildes
// indented by at most 3 spaces; it closes on a fence of the same character at
// least as long; content lines lose up to the opening fence's indentation.
#include <cctype>
#include <string>
#include <vector>

#include "ksearch/llm.h"

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
         language == "c++";
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

StatusOr<KernelBlocks> ExtractKernelBlocks(std::string_view reply) {
  std::vector<FencedBlock> blocks = ExtractFencedBlocks(reply);
  std::vector<const FencedBlock*> sources;
  std::vector<const FencedBlock*> plans;
  for (const FencedBlock& block : blocks) {
    if (IsSourceLanguage(block.language)) sources.push_back(&block);
    if (block.language == "json") plans.push_back(&block);
  }
  KernelBlocks out;
  KSEARCH_ASSIGN_OR_RETURN(out.cuda_source,
                           TakeOne(blocks, sources, "```cuda", "the kernel source"));
  KSEARCH_ASSIGN_OR_RETURN(out.launch_plan_json,
                           TakeOne(blocks, plans, "```json", "the launch plan"));
  return out;
}

}  // namespace ksearch
