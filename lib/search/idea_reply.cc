// Idea replies as models write them (see idea_reply.h): strict JSON first,
// then each salvage in turn, each named so that the run's notes say what
// was done to the reply.
#include "search/idea_reply.h"

#include <cctype>

#include "core/json_util.h"
#include "ksearch/kernel_blocks.h"

namespace ksearch::internal {
namespace {

std::string TrimRight(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::string TrimLeft(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size() && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  return std::string(text.substr(begin));
}

// The ideas of a parsed list: objects with "idea" (or "text", "description")
// and "category", or plain strings.
std::vector<ParsedIdea> IdeasOf(const std::vector<JsonNode>& items) {
  std::vector<ParsedIdea> out;
  for (const JsonNode& item : items) {
    ParsedIdea idea;
    if (item.IsString()) {
      idea.text = *item.String();
    } else if (item.IsObject()) {
      for (const char* key : {"idea", "text", "description"}) {
        auto field = item.Find(key);
        if (field.ok() && *field && (*field)->IsString()) {
          idea.text = *(*field)->String();
          break;
        }
      }
      auto category = item.Find("category");
      IdeaCategory parsed;
      if (category.ok() && *category && (*category)->IsString() &&
          ParseCategoryLoosely(*(*category)->String(), &parsed)) {
        idea.category = parsed;
      }
    }
    idea.text = TrimRight(std::move(idea.text));
    if (!idea.text.empty()) out.push_back(std::move(idea));
  }
  return out;
}

// The ideas of one JSON text, or why there are none.
StatusOr<std::vector<ParsedIdea>> IdeasOfJson(std::string_view text) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(text, "idea list"));
  JsonNode root = JsonNode::Root(*doc);
  if (root.IsObject()) {
    auto ideas = root.Find("ideas");
    if (!ideas.ok() || !*ideas) return root.Error("expected a list of ideas");
    root = **ideas;
  }
  KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, root.Array());
  std::vector<ParsedIdea> out = IdeasOf(items);
  if (out.empty()) return root.Error("the list holds no idea text");
  return out;
}

// A list cut short (the reply ended inside it): the text up to its last
// complete item, with the brackets that were open there closed. nullopt
// when the text is not cut, or no item is complete.
std::optional<std::string> CloseCutList(std::string_view text) {
  std::string open;  // the brackets open at i, outermost first
  size_t list_depth = 0;  // open.size() inside the idea list; 0 before it
  size_t cut = 0;
  std::string cut_open;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (list_depth > 0 && open.size() == list_depth) {
          cut = i + 1;  // a string item ended
          cut_open = open;
        }
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      open.push_back(c);
      if (c == '[' && list_depth == 0) list_depth = open.size();
    } else if (c == ']' || c == '}') {
      if (open.empty()) return std::nullopt;
      open.pop_back();
      if (list_depth > 0 && open.size() == list_depth) {
        cut = i + 1;  // an object item ended
        cut_open = open;
      }
      if (open.size() < list_depth) return std::nullopt;  // the list closed: not cut
    }
  }
  if (open.empty() || cut == 0) return std::nullopt;
  std::string closed(text.substr(0, cut));
  for (auto it = cut_open.rbegin(); it != cut_open.rend(); ++it) closed += *it == '[' ? ']' : '}';
  return closed;
}

// "**memory_access**: text", "[Memory access] text", "Compute: text" → the
// category and the text after it; the text unchanged when no label names a
// category.
ParsedIdea LabelledItem(std::string text) {
  ParsedIdea idea;
  std::string label, rest;
  for (const auto& [open, close] : {std::pair<std::string_view, std::string_view>{"**", "**"},
                                    {"__", "__"},
                                    {"[", "]"},
                                    {"`", "`"},
                                    {"*", "*"}}) {
    if (!text.starts_with(open)) continue;
    size_t end = text.find(close, open.size());
    if (end == std::string::npos) continue;
    label = text.substr(open.size(), end - open.size());
    rest = text.substr(end + close.size());
    break;
  }
  if (label.empty()) {
    // "Category: text", with a short label.
    size_t colon = text.find(':');
    if (colon != std::string::npos && colon <= 40) {
      label = text.substr(0, colon);
      rest = text.substr(colon);
    }
  }
  // "**Memory access:** text" puts the colon inside the label.
  while (!label.empty() && (label.back() == ':' || std::isspace(static_cast<unsigned char>(label.back())))) {
    label.pop_back();
  }
  IdeaCategory category;
  if (!label.empty() && ParseCategoryLoosely(label, &category)) {
    size_t begin = 0;
    while (begin < rest.size() &&
           (std::isspace(static_cast<unsigned char>(rest[begin])) || rest[begin] == ':' ||
            rest[begin] == '-' || rest[begin] == '.' || rest.compare(begin, 3, "—") == 0 ||
            rest.compare(begin, 3, "–") == 0)) {
      begin += (rest.compare(begin, 3, "—") == 0 || rest.compare(begin, 3, "–") == 0) ? 3 : 1;
    }
    idea.category = category;
    idea.text = rest.substr(begin);
  }
  if (idea.text.empty()) {
    idea.category.reset();
    idea.text = std::move(text);
  }
  return idea;
}

// The items of the first numbered Markdown list outside code blocks
// ("1. text", "2) text"), each with its continuation lines.
std::vector<ParsedIdea> NumberedItems(std::string_view reply) {
  std::vector<std::string> items;
  bool in_fence = false, after_blank = false, listing = false;
  size_t start = 0;
  while (start <= reply.size()) {
    size_t end = reply.find('\n', start);
    if (end == std::string_view::npos) end = reply.size();
    std::string_view line = reply.substr(start, end - start);
    start = end + 1;
    std::string trimmed = TrimLeft(line);
    if (trimmed.starts_with("```") || trimmed.starts_with("~~~")) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) continue;
    const size_t indent = line.size() - trimmed.size();
    size_t digits = 0;
    while (digits < trimmed.size() && digits < 3 &&
           std::isdigit(static_cast<unsigned char>(trimmed[digits]))) {
      ++digits;
    }
    const bool item = indent <= 3 && digits > 0 && digits + 1 < trimmed.size() &&
                      (trimmed[digits] == '.' || trimmed[digits] == ')') &&
                      std::isspace(static_cast<unsigned char>(trimmed[digits + 1]));
    if (item) {
      items.push_back(TrimLeft(trimmed.substr(digits + 1)));
      listing = true;
      after_blank = false;
    } else if (trimmed.empty()) {
      after_blank = true;
    } else if (listing && !trimmed.starts_with("#") && (!after_blank || indent >= 2)) {
      items.back() += " " + TrimRight(trimmed);
      after_blank = false;
    } else if (listing) {
      break;  // the list is over
    }
  }
  std::vector<ParsedIdea> out;
  for (std::string& text : items) {
    ParsedIdea idea = LabelledItem(TrimRight(std::move(text)));
    if (!idea.text.empty()) out.push_back(std::move(idea));
  }
  return out;
}

}  // namespace

bool ParseCategoryLoosely(std::string text, IdeaCategory* out) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == ' ' || c == '-') c = '_';
  }
  if (ParseIdeaCategory(text, out)) return true;
  // "memory", "control flow and indexing", "parallelism/occupancy"…
  for (IdeaCategory c : kAllIdeaCategories) {
    std::string name(ToString(c));
    std::string head = name.substr(0, name.find('_'));
    if (text.rfind(head, 0) == 0) {
      *out = c;
      return true;
    }
  }
  return false;
}

StatusOr<IdeaReply> ParseIdeaReply(std::string_view reply) {
  std::vector<std::string> texts;
  for (const FencedBlock& b : ExtractFencedBlocks(reply)) {
    if (b.language == "json" || b.language == "jsonc" || b.language == "json5" ||
        b.language.empty()) {
      texts.push_back(b.text);
    }
  }
  if (texts.empty()) {
    // Some models answer with bare JSON.
    size_t first = reply.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && (reply[first] == '[' || reply[first] == '{')) {
      texts.emplace_back(reply.substr(first));
    }
  }
  IdeaReply out;
  Status first_error;
  for (const std::string& text : texts) {
    auto strict = IdeasOfJson(text);
    if (strict.ok()) {
      out.ideas = std::move(*strict);
      return out;
    }
    if (first_error.ok()) first_error = strict.status();
    const std::string cleaned = StripJsonComments(text);
    if (cleaned != text) {
      if (auto ideas = IdeasOfJson(cleaned); ideas.ok()) {
        out.ideas = std::move(*ideas);
        out.repairs.push_back("removed comments and trailing commas from the idea list");
        return out;
      }
    }
    if (std::optional<std::string> closed = CloseCutList(cleaned)) {
      if (auto ideas = IdeasOfJson(*closed); ideas.ok()) {
        out.ideas = std::move(*ideas);
        out.repairs.push_back("the idea list was cut: kept its " +
                              std::to_string(out.ideas.size()) + " complete " +
                              (out.ideas.size() == 1 ? "idea" : "ideas"));
        return out;
      }
    }
  }
  out.ideas = NumberedItems(reply);
  if (!out.ideas.empty()) {
    out.repairs.push_back("read " + std::to_string(out.ideas.size()) + " " +
                          (out.ideas.size() == 1 ? "idea" : "ideas") +
                          " from a numbered list" +
                          (texts.empty() ? " (no ```json block)" : " (the ```json block is unusable)"));
    return out;
  }
  if (first_error.ok()) {
    return InvalidArgumentError("reply has no ```json block with the idea list");
  }
  return InvalidArgumentError("reply's idea list is unusable: " + first_error.message());
}

}  // namespace ksearch::internal
