#include "eval/device_output.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ksearch::internal {
namespace {

// Printable ASCII, newline and tab as they are; every other byte as \xNN.
std::string Escaped(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
    } else {
      char code[5];
      std::snprintf(code, sizeof(code), "\\x%02x", c);
      out += code;
    }
  }
  return out;
}

}  // namespace

DeviceOutputCapture::DeviceOutputCapture(int64_t max_bytes) : max_bytes_(max_bytes) {
  memory_fd_ = ::memfd_create("ksearch-device-output", MFD_CLOEXEC);
}

DeviceOutputCapture::~DeviceOutputCapture() {
  if (active_) End();
  if (memory_fd_ >= 0) ::close(memory_fd_);
}

void DeviceOutputCapture::Begin() {
  if (active_ || memory_fd_ < 0) return;
  std::fflush(stdout);
  saved_fd_ = ::dup(STDOUT_FILENO);
  if (saved_fd_ < 0) return;
  if (::ftruncate(memory_fd_, 0) != 0 || ::lseek(memory_fd_, 0, SEEK_SET) != 0 ||
      ::dup2(memory_fd_, STDOUT_FILENO) < 0) {
    ::close(saved_fd_);
    saved_fd_ = -1;
    return;
  }
  kept_.clear();
  dropped_ = 0;
  active_ = true;
}

void DeviceOutputCapture::Poll() {
  if (!active_) return;
  std::fflush(stdout);
  struct stat st {};
  if (::fstat(memory_fd_, &st) != 0 || st.st_size == 0) return;
  int64_t size = static_cast<int64_t>(st.st_size);
  int64_t room = max_bytes_ - static_cast<int64_t>(kept_.size());
  if (room > 0) {
    std::string chunk(static_cast<size_t>(std::min(room, size)), '\0');
    ssize_t got = ::pread(memory_fd_, chunk.data(), chunk.size(), 0);
    if (got > 0) kept_.append(chunk.data(), static_cast<size_t>(got));
    dropped_ += size - std::max<int64_t>(got, 0);
  } else {
    dropped_ += size;
  }
  // fd 1 shares this file's offset: rewinding here rewinds the writer too.
  if (::ftruncate(memory_fd_, 0) == 0) ::lseek(memory_fd_, 0, SEEK_SET);
}

std::string DeviceOutputCapture::End() {
  if (!active_) return "";
  Poll();
  std::fflush(stdout);
  ::dup2(saved_fd_, STDOUT_FILENO);
  ::close(saved_fd_);
  saved_fd_ = -1;
  active_ = false;
  std::string log = Escaped(kept_);
  if (dropped_ > 0) {
    log += "\n[ksearch: device output truncated: " + std::to_string(dropped_) +
           " more bytes were dropped]\n";
  }
  return log;
}

}  // namespace ksearch::internal
