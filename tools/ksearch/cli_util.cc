#include "cli_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/evaluation_json.h"
#include "core/file_util.h"

namespace ksearch::cli {

StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseDims(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--dims: expected NAME=VALUE[,NAME=VALUE…], got '" + part + "'");
    }
    std::string value = part.substr(eq + 1);
    if (std::string wrong = CheckNumber(value, NumberType::kInt64, Bounds{}); !wrong.empty()) {
      return InvalidArgumentError("--dims: " + wrong + " (in '" + part.substr(0, eq) + "=')");
    }
    out.emplace_back(part.substr(0, eq), std::stoll(value));
  }
  return out;
}

StatusOr<Problem> LoadWithDims(const std::string& name, const std::string& dims) {
  KSEARCH_ASSIGN_OR_RETURN(Problem problem, LoadProblem(name));
  if (dims.empty()) return problem;
  KSEARCH_ASSIGN_OR_RETURN(auto overrides, ParseDims(dims));
  auto resized = problem.WithDims(overrides);
  if (!resized.ok()) return resized.status().WithContext("--dims");
  return resized;
}

StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& flag) {
  auto text = internal::ReadFile(path, kMaxInputBytes);
  if (!text.ok()) return text.status().WithContext(flag);
  return text;
}

Status CheckInputFile(const std::string& path, const std::string& flag, size_t max_bytes) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    std::string message = flag + ": " + path + ": " + std::strerror(error);
    return error == EACCES ? PermissionDeniedError(message) : NotFoundError(message);
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgumentError(flag + ": " + path + ": not a regular file");
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return InvalidArgumentError(flag + ": " + path + ": " + std::to_string(info.st_size) +
                                " bytes is larger than the limit of " + std::to_string(max_bytes));
  }
  return Status::Ok();
}

CLI::Option* AddCacheDirOption(CLI::App& cmd, std::string& cache_dir) {
  auto usable = [](const std::string& folder) -> std::string {
    if (folder.empty() || folder == "off") return "";
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (!ec && ::access(folder.c_str(), W_OK | X_OK) != 0) {
      ec = std::error_code(errno, std::generic_category());
    }
    if (!ec) return "";
    return folder + ": the compile cache cannot be kept there (" + ec.message() +
           "); choose another folder, or 'off'";
  };
  return cmd.add_option("--cache-dir", cache_dir, "compile cache folder ('off' to disable)")
      ->envname("KSEARCH_CACHE_DIR")
      ->check(CLI::Validator(usable, "FOLDER"));
}

CLI::Option* AddArchOption(CLI::App& cmd, std::string& arch, const std::string& help) {
  auto known = [](const std::string& text) -> std::string {
    int major = 0, minor = 0;
    if (internal::ParseArch(text, &major, &minor)) return "";
    return text + " is not a GPU architecture (expected sm_XY, e.g. sm_90 or sm_90a)";
  };
  return cmd.add_option("--arch", arch, help)->check(CLI::Validator(known, "sm_XY"));
}

}  // namespace ksearch::cli
