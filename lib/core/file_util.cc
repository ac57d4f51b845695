#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace ksearch::internal {
namespace {

Status OsError(const std::string& what, const std::string& path, int error) {
  std::string message = path + ": " + what + ": " + std::strerror(error);
  if (error == ENOENT) return NotFoundError(message);
  if (error == EACCES || error == EPERM || error == EROFS) return PermissionDeniedError(message);
  if (error == ENOSPC || error == EDQUOT) return ResourceExhaustedError(message);
  return UnknownError(message);
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError("cannot open", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return OsError("cannot stat", path, error);
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": is a folder, expected a file");
  }
  if (static_cast<size_t>(info.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgumentError(path + ": " + std::to_string(info.st_size) +
                                " bytes is larger than the limit of " + std::to_string(max_bytes));
  }
  std::string contents;
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      return OsError("read failed", path, error);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
    if (contents.size() > max_bytes) {
      ::close(fd);
      return InvalidArgumentError(path + ": larger than the limit of " + std::to_string(max_bytes));
    }
  }
  ::close(fd);
  return contents;
}

namespace {

// Writes `contents` to a new temporary file beside `path` and flushes it.
StatusOr<std::string> WriteTemporary(const std::string& path, std::string_view contents) {
  std::random_device random;
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(random());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("cannot create", temp, errno);
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return OsError("write failed", temp, error);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int error = errno;
    ::unlink(temp.c_str());
    return OsError("flush failed", temp, error);
  }
  return temp;
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  KSEARCH_ASSIGN_OR_RETURN(std::string temp, WriteTemporary(path, contents));
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temp.c_str());
    return OsError("rename failed", path, error);
  }
  return Status::Ok();
}

Status WriteNewFileAtomically(const std::string& path, std::string_view contents) {
  KSEARCH_ASSIGN_OR_RETURN(std::string temp, WriteTemporary(path, contents));
  const int linked = ::link(temp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(temp.c_str());
  if (linked == 0) return Status::Ok();
  if (error == EEXIST) return AlreadyExistsError(path + ": already exists");
  return OsError("link failed", path, error);
}

std::string JoinPath(std::string_view directory, std::string_view relative) {
  if (relative.empty()) return std::string(directory);
  if (relative.front() == '/' || directory.empty()) return std::string(relative);
  std::string out(directory);
  if (out.back() != '/') out += '/';
  out += relative;
  return out;
}

}  // namespace ksearch::internal
