// Small file helpers whose errors name the path and the OS reason.
#ifndef KSEARCH_CORE_FILE_UTIL_H_
#define KSEARCH_CORE_FILE_UTIL_H_

#include <string>
#include <string_view>

#include "ksearch/status.h"

namespace ksearch::internal {

// Errors: kNotFound (missing), kPermissionDenied, kInvalidArgument (a folder,
// or larger than max_bytes), kUnknown for other OS errors.
StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes = 64u << 20);
// Writes atomically: a temporary file beside `path`, fsync, rename.
Status WriteFileAtomically(const std::string& path, std::string_view contents);
// The same, but never replaces a file already at `path` (kAlreadyExists
// then): the temporary file is linked to `path`, which fails when the name
// is taken, even by a writer that got there a moment earlier.
Status WriteNewFileAtomically(const std::string& path, std::string_view contents);
// `relative` joined to `directory` unless it is absolute.
std::string JoinPath(std::string_view directory, std::string_view relative);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_FILE_UTIL_H_
