// A model's reply to an idea prompt, read as models really write it: the
// ```json list the prompt asks for, and when that is not quite what came
// back, what can be salvaged from it (comments and trailing commas, a list
// cut short, a numbered Markdown list instead of JSON).
#ifndef KSEARCH_SEARCH_IDEA_REPLY_H_
#define KSEARCH_SEARCH_IDEA_REPLY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/idea.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct ParsedIdea {
  std::optional<IdeaCategory> category;  // unset when the reply named none we know
  std::string text;
};

struct IdeaReply {
  std::vector<ParsedIdea> ideas;
  // What was salvaged, one line each ("removed comments and trailing commas
  // from the idea list", "the idea list was cut: kept its 3 complete ideas",
  // "read 4 ideas from a numbered list (no ```json block)").
  std::vector<std::string> repairs;
};

// The ideas of `reply`: the first ```json (also ```jsonc, ```json5 or
// untagged) block holding a list of {"category", "idea"} objects (or of
// strings, or {"ideas": [...]}), else the whole reply as JSON, else the
// items of a numbered Markdown list ("1. **memory_access**: …"). Errors:
// kInvalidArgument saying what is wrong, for the model to read.
[[nodiscard]] StatusOr<IdeaReply> ParseIdeaReply(std::string_view reply);

// "memory", "Memory access", "control flow and indexing",
// "parallelism/occupancy"… → the category. False when none fits.
bool ParseCategoryLoosely(std::string text, IdeaCategory* out);

}  // namespace ksearch::internal

#endif  // KSEARCH_SEARCH_IDEA_REPLY_H_
