// The one rule for every numeric flag of every subcommand (docs/cli.md,
// "Flags"): the value reads completely as the flag's type (an integer flag
// takes decimal digits only; a real flag a finite number, never nan or inf),
// fits that type, and lies within the flag's bounds. A value that does not
// is exit 2, before anything runs, with a message that names the flag, the
// value and what was expected.
#ifndef KSEARCH_TOOLS_NUMERIC_FLAGS_H_
#define KSEARCH_TOOLS_NUMERIC_FLAGS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace ksearch::cli {

// Upper bounds of flags that become clock durations (a larger value would
// overflow them) or GPU ordinals.
inline constexpr double kSecondsInAnHour = 3600.0;
inline constexpr double kSecondsInADay = 86400.0;
inline constexpr double kMaxGpuOrdinal = 1023.0;

// The values a numeric flag accepts, besides those its type cannot hold.
struct Bounds {
  double min = -std::numeric_limits<double>::infinity();
  bool min_inclusive = true;
  double max = std::numeric_limits<double>::infinity();
  bool max_inclusive = true;
};
inline Bounds AtLeast(double min) { return {min, true}; }
inline Bounds Above(double min) { return {min, false}; }
inline Bounds Between(double min, double max) { return {min, true, max, true}; }
// Above 0 and at most `max`.
inline Bounds PositiveUpTo(double max) { return {0.0, false, max, true}; }

// The type a flag's value is read as.
enum class NumberType { kInt32, kInt64, kUint64, kReal };

// Checks `text`, a value of a flag of `type`: "" when it is good, else what
// is wrong, as CLI11 prints it after the flag's name ("1.5 is not an
// integer", "0 is not allowed (expected an integer of at least 1)"). A good
// integer is rewritten as plain decimal digits, since CLI11 would read "010"
// as octal and "0x10" as hexadecimal.
std::string CheckNumber(std::string& text, NumberType type, const Bounds& bounds);

// The NumberType of a flag bound to a T (std::optional<T> and std::vector<T>
// too: a vector's every element is checked).
template <typename T>
constexpr NumberType NumberTypeOf() {
  if constexpr (std::is_floating_point_v<T>) {
    return NumberType::kReal;
  } else if constexpr (std::is_unsigned_v<T>) {
    return NumberType::kUint64;
  } else if constexpr (sizeof(T) <= 4) {
    return NumberType::kInt32;
  } else {
    return NumberType::kInt64;
  }
}

// CheckNumber as a CLI11 validator, for a flag of `type`.
CLI::Validator Number(NumberType type, Bounds bounds);

// Adds a numeric flag with its bounds: the only way ksearch declares one.
template <typename T>
CLI::Option* AddNumber(CLI::App& cmd, const std::string& name, T& value, const std::string& help,
                       Bounds bounds) {
  return cmd.add_option(name, value, help)->transform(Number(NumberTypeOf<T>(), bounds));
}
template <typename T>
CLI::Option* AddNumber(CLI::App& cmd, const std::string& name, std::optional<T>& value,
                       const std::string& help, Bounds bounds) {
  return cmd.add_option(name, value, help)->transform(Number(NumberTypeOf<T>(), bounds));
}
template <typename T>
CLI::Option* AddNumber(CLI::App& cmd, const std::string& name, std::vector<T>& value,
                       const std::string& help, Bounds bounds) {
  return cmd.add_option(name, value, help)->transform(Number(NumberTypeOf<T>(), bounds));
}
// A flag kept as text (a budget a resume records as given) but checked as a
// number of `type`.
inline CLI::Option* AddNumberText(CLI::App& cmd, const std::string& name, std::string& value,
                                  const std::string& help, NumberType type, Bounds bounds) {
  return cmd.add_option(name, value, help)->transform(Number(type, bounds));
}

// Throws std::logic_error naming the first option of `app` or of any of its
// subcommands that CLI11 reads as a number but that was not declared with
// AddNumber: a flag that would escape the rule above. main() calls it before
// parsing, so every CLI test fails on such a flag.
void RequireNumberChecks(const CLI::App& app);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_NUMERIC_FLAGS_H_
