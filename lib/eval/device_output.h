// Captures what kernels print (device printf) while the judge runs them.
//
// The driver writes device printf output to the process's standard output
// at synchronization points. While a capture is active, file descriptor 1 is
// a memory file: what lands there is kept up to a bound (the rest is counted
// and dropped) and handed back with the evaluation, so a kernel's output
// never reaches the caller's terminal or a --json document. Stdio's stdout
// is flushed at both ends so the caller's own buffered text is not mixed in.
//
// Thread safety: one capture per process at a time (it owns fd 1 while
// active); other threads printing to stdout meanwhile are captured too.
#ifndef KSEARCH_EVAL_DEVICE_OUTPUT_H_
#define KSEARCH_EVAL_DEVICE_OUTPUT_H_

#include <cstdint>
#include <string>

namespace ksearch::internal {

class DeviceOutputCapture {
 public:
  // `max_bytes`: how much of the output is kept.
  explicit DeviceOutputCapture(int64_t max_bytes);
  ~DeviceOutputCapture();
  DeviceOutputCapture(const DeviceOutputCapture&) = delete;
  DeviceOutputCapture& operator=(const DeviceOutputCapture&) = delete;

  // Points fd 1 at the memory file (no-op when it could not be created).
  void Begin();
  // Keeps the first bytes and drops the rest written so far (call it after
  // each synchronization so the memory file stays small).
  void Poll();
  // Restores fd 1 and returns what was kept, control characters escaped,
  // with a note when output was dropped. Empty when nothing was printed.
  std::string End();

 private:
  int64_t max_bytes_;
  int memory_fd_ = -1;
  int saved_fd_ = -1;
  bool active_ = false;
  std::string kept_;
  int64_t dropped_ = 0;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_DEVICE_OUTPUT_H_
