// A recorded run for people: a self-contained HTML report, and JSON text
// indented for reading (what `ksearch report` and `ksearch show` print).
#ifndef KSEARCH_RUN_REPORT_H_
#define KSEARCH_RUN_REPORT_H_

#include <string>
#include <string_view>

#include "ksearch/store.h"

namespace ksearch {

// A self-contained HTML page (no network, no external file) about a run: the
// speedup of the best kernel per round as an inline SVG chart, the idea tree
// with each idea's outcome, the best kernel's source and evaluation, failure
// counts by status, tokens and cost.
std::string RunReportHtml(const RunHistory& history);

// JSON text indented for people, two spaces a level; short arrays of numbers
// or strings stay on one line. Text that does not parse is returned as is.
std::string IndentJson(std::string_view json);

}  // namespace ksearch

#endif  // KSEARCH_RUN_REPORT_H_
