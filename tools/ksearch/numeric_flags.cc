#include "numeric_flags.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ksearch::cli {
namespace {

// A value as the message quotes it: a 300-digit argument is cut, so that
// the message stays one readable line.
std::string Quoted(const std::string& text) {
  constexpr size_t kLongest = 32;
  if (text.size() <= kLongest) return text;
  return text.substr(0, kLongest - 3) + "... (" + std::to_string(text.size()) + " characters)";
}

// A bound as the message writes it: "1", "0.5", "86400", "1e+30".
std::string FormatBound(double value) {
  char text[32];
  if (std::fabs(value) < 1e15 && value == std::floor(value)) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else {
    std::snprintf(text, sizeof(text), "%g", value);
  }
  return text;
}

// "an integer of at least 1", "a number above 0 and at most 86400".
std::string Expected(NumberType type, const Bounds& b) {
  std::string what = type == NumberType::kReal ? "a number" : "an integer";
  const bool has_min = std::isfinite(b.min), has_max = std::isfinite(b.max);
  if (has_min && has_max && b.min_inclusive && b.max_inclusive) {
    return what + " from " + FormatBound(b.min) + " to " + FormatBound(b.max);
  }
  if (has_min) what += (b.min_inclusive ? " of at least " : " above ") + FormatBound(b.min);
  if (has_min && has_max) what += " and";
  if (has_max) what += (b.max_inclusive ? " at most " : " below ") + FormatBound(b.max);
  return what;
}

bool WithinBounds(double value, const Bounds& b) {
  bool above_min = b.min_inclusive ? value >= b.min : value > b.min;
  bool below_max = b.max_inclusive ? value <= b.max : value < b.max;
  return above_min && below_max;
}

// Reads an integer of `type` from `text` (decimal digits, an optional sign),
// rewriting `text` as its canonical digits. Returns what is wrong, or "".
std::string ReadInteger(std::string& text, NumberType type, const Bounds& bounds, double* value) {
  std::string digits = text;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.erase(0, 1);
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    double real = 0.0;
    auto [end, ec] =
        std::from_chars(text.data() + (text[0] == '+'), text.data() + text.size(), real);
    if (ec == std::errc() && end == text.data() + text.size() && std::isfinite(real)) {
      return Quoted(text) + " is not an integer";
    }
    return Quoted(text) + " is not a number (expected an integer)";
  }
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  if (negative && type == NumberType::kUint64 && digits != "0") {
    return Quoted(text) + " is not allowed (expected an integer of at least 0)";
  }
  const std::string canonical = (negative && digits != "0" ? "-" : "") + digits;
  const char* first = canonical.data();
  const char* last = canonical.data() + canonical.size();
  bool fits = false;
  if (type == NumberType::kUint64) {
    uint64_t v = 0;
    fits = std::from_chars(first, last, v).ec == std::errc();
    *value = static_cast<double>(v);
  } else {
    int64_t v = 0;
    fits = std::from_chars(first, last, v).ec == std::errc() &&
           (type != NumberType::kInt32 ||
            (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()));
    *value = static_cast<double>(v);
  }
  if (!fits && (negative ? std::isfinite(bounds.min) : std::isfinite(bounds.max))) {
    return Quoted(text) + " is not allowed (expected " + Expected(type, bounds) + ")";
  }
  if (!fits) {
    std::string limit = type == NumberType::kUint64 ? std::to_string(UINT64_MAX)
                        : type == NumberType::kInt64
                            ? std::to_string(negative ? INT64_MIN : INT64_MAX)
                            : std::to_string(negative ? INT32_MIN : INT32_MAX);
    return Quoted(text) +
           (negative ? " is too small (the least this flag holds is "
                     : " is too large (the most this flag holds is ") +
           limit + ")";
  }
  text = canonical;
  return "";
}

// Reads a finite real number. Returns what is wrong, or "".
std::string ReadReal(const std::string& text, double* value) {
  const char* first = text.data() + (!text.empty() && text[0] == '+');
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, *value);
  if (end != last || (ec != std::errc() && ec != std::errc::result_out_of_range) || first == last) {
    return Quoted(text) + " is not a number";
  }
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves the value alone: an overflow, or an underflow to 0.
    return Quoted(text) + " is out of range (too large or too small for a double)";
  }
  if (!std::isfinite(*value)) return Quoted(text) + " is not allowed (expected a finite number)";
  return "";
}

}  // namespace

std::string CheckNumber(std::string& text, NumberType type, const Bounds& bounds) {
  if (text.empty()) return "an empty value is not a number";
  double value = 0.0;
  std::string wrong =
      type == NumberType::kReal ? ReadReal(text, &value) : ReadInteger(text, type, bounds, &value);
  if (!wrong.empty()) return wrong;
  if (!WithinBounds(value, bounds)) {
    return Quoted(text) + " is not allowed (expected " + Expected(type, bounds) + ")";
  }
  return "";
}

namespace {
constexpr char kNumberValidator[] = "ksearch-number";
}  // namespace

CLI::Validator Number(NumberType type, Bounds bounds) {
  // What --help shows after the type: "INT:>=1", "FLOAT:(0,86400]".
  std::string description;
  const bool has_min = std::isfinite(bounds.min), has_max = std::isfinite(bounds.max);
  if (has_min && has_max) {
    description = (bounds.min_inclusive ? "[" : "(") + FormatBound(bounds.min) + "," +
                  FormatBound(bounds.max) + (bounds.max_inclusive ? "]" : ")");
  } else if (has_min) {
    description = (bounds.min_inclusive ? ">=" : ">") + FormatBound(bounds.min);
  } else if (has_max) {
    description = (bounds.max_inclusive ? "<=" : "<") + FormatBound(bounds.max);
  }
  return CLI::Validator(
      [type, bounds](std::string& text) { return CheckNumber(text, type, bounds); }, description,
      kNumberValidator);
}

void RequireNumberChecks(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    const bool numeric = type.starts_with("INT") || type.starts_with("UINT") ||
                         type.starts_with("FLOAT") || type.starts_with("NUMBER");
    if (!numeric || option->get_expected_max() == 0) continue;  // flags take no value
    try {
      (void)const_cast<CLI::Option*>(option)->get_validator(kNumberValidator);
    } catch (const CLI::OptionNotFound&) {
      throw std::logic_error("ksearch " + app.get_name() + " " + option->get_name() +
                             " is numeric but not declared with AddNumber (numeric_flags.h)");
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    RequireNumberChecks(*sub);
  }
}

}  // namespace ksearch::cli
