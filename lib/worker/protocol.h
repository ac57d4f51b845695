// The framing of the orchestrator <-> ksearch-worker protocol (docs/workers.md).
//
// A frame is a 16-byte header followed by a JSON document and an optional
// binary attachment (a cubin):
//
//   offset 0   4 bytes  magic "KSWP"
//   offset 4   u16      protocol version (kProtocolVersion), little-endian
//   offset 6   u16      message type (MessageType)
//   offset 8   u32      JSON length in bytes
//   offset 12  u32      attachment length in bytes
//
// Frames carry their version so that either side names a mismatch at the
// first frame instead of misreading the next bytes. Lengths are bounded, so a
// garbage header is rejected rather than read as a request for gigabytes.
//
// Thread safety: FrameDecoder is not thread-safe; the functions are.
#ifndef KSEARCH_WORKER_PROTOCOL_H_
#define KSEARCH_WORKER_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/status.h"

namespace ksearch::internal::worker {

inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr char kMagic[4] = {'K', 'S', 'W', 'P'};
inline constexpr uint32_t kMaxJsonBytes = 64u << 20;
inline constexpr uint32_t kMaxAttachmentBytes = 512u << 20;

enum class MessageType : uint16_t {
  kInit = 1,      // orchestrator -> worker: problem, options, device; first frame
  kReady = 2,     // worker -> orchestrator: device, reference timing
  kFatal = 3,     // worker -> orchestrator: could not start or cannot go on
  kJudge = 4,     // orchestrator -> worker: one candidate (+ cubin attachment)
  kStarted = 5,   // worker -> orchestrator: began judging a sequence number
  kResult = 6,    // worker -> orchestrator: the Evaluation of a sequence number
  kBye = 7,       // worker -> orchestrator: exiting after a sticky error or hang
  kShutdown = 8,  // orchestrator -> worker: exit now
  // The compile helper, ksearch-compile (cuda/compile_helper.h):
  kCompile = 9,    // caller -> helper: one source to compile
  kCompiled = 10,  // helper -> caller: the result (+ cubin attachment)
};
// "init", "ready", …; "unknown(N)" otherwise.
std::string ToString(MessageType type);

struct Frame {
  MessageType type = MessageType::kInit;
  std::string json;
  std::string attachment;
};

struct FrameHeader {
  uint16_t version = 0;
  MessageType type = MessageType::kInit;
  uint32_t json_bytes = 0;
  uint32_t attachment_bytes = 0;
};

// Serializes a frame. `version` is for tests that play a different build.
std::string EncodeFrame(const Frame& frame, uint16_t version = kProtocolVersion);

// Validates a header. Errors: kDataLoss for a wrong magic, an unknown type or
// a length past the limits ("not a ksearch worker frame …"); kFailedPrecondition
// for another protocol version ("protocol version mismatch: …").
StatusOr<FrameHeader> DecodeHeader(std::string_view header);

// Splits a byte stream into frames.
class FrameDecoder {
 public:
  // Appends bytes. Once an error is returned the decoder stays failed (the
  // stream cannot be resynchronized); frames completed before the bad bytes
  // are still returned by Next().
  Status Feed(std::string_view bytes);
  // The next complete frame, if any.
  std::optional<Frame> Next();
  // Call when the stream ended: kOk if it ended between frames, kDataLoss
  // ("truncated frame: …") if inside one.
  Status Finish() const;

 private:
  Status Parse();
  std::string buffer_;
  std::deque<Frame> ready_;
  Status error_;
};

// Blocking I/O on a stream socket or pipe, for the worker side. ReadFrame
// errors: kUnavailable "connection closed" on a clean end between frames,
// kDataLoss for a truncated or garbage frame, kFailedPrecondition for another
// version, kInternal for a read error (errno text).
StatusOr<Frame> ReadFrame(int fd);
// Writes the whole frame (MSG_NOSIGNAL on sockets: a closed peer is an error,
// not a SIGPIPE). Errors: kUnavailable with the errno text.
Status WriteFrame(int fd, const Frame& frame, uint16_t version = kProtocolVersion);
// Writes raw bytes (tests use it to send garbage).
Status WriteAll(int fd, std::string_view bytes);

}  // namespace ksearch::internal::worker

#endif  // KSEARCH_WORKER_PROTOCOL_H_
