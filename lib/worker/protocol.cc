#include "worker/protocol.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ksearch::internal::worker {
namespace {

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t GetU(std::string_view bytes, size_t offset, int width) {
  uint32_t v = 0;
  for (int i = 0; i < width; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + static_cast<size_t>(i)]))
         << (8 * i);
  }
  return v;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes.substr(0, 16)) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02x", c);
    out += hex;
  }
  return out;
}

}  // namespace

std::string ToString(MessageType type) {
  switch (type) {
    case MessageType::kInit:
      return "init";
    case MessageType::kReady:
      return "ready";
    case MessageType::kFatal:
      return "fatal";
    case MessageType::kJudge:
      return "judge";
    case MessageType::kStarted:
      return "started";
    case MessageType::kResult:
      return "result";
    case MessageType::kBye:
      return "bye";
    case MessageType::kShutdown:
      return "shutdown";
    case MessageType::kCompile:
      return "compile";
    case MessageType::kCompiled:
      return "compiled";
  }
  return "unknown(" + std::to_string(static_cast<int>(type)) + ")";
}

std::string EncodeFrame(const Frame& frame, uint16_t version) {
  std::string out;
  out.reserve(kHeaderBytes + frame.json.size() + frame.attachment.size());
  out.append(kMagic, sizeof(kMagic));
  PutU16(out, version);
  PutU16(out, static_cast<uint16_t>(frame.type));
  PutU32(out, static_cast<uint32_t>(frame.json.size()));
  PutU32(out, static_cast<uint32_t>(frame.attachment.size()));
  out += frame.json;
  out += frame.attachment;
  return out;
}

StatusOr<FrameHeader> DecodeHeader(std::string_view header) {
  if (header.size() < kHeaderBytes) {
    return DataLossError("truncated frame header: " + std::to_string(header.size()) + " of " +
                         std::to_string(kHeaderBytes) + " bytes");
  }
  if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLossError("not a ksearch worker frame (bytes " + Printable(header) +
                         "; expected the magic \"KSWP\")");
  }
  FrameHeader h;
  h.version = static_cast<uint16_t>(GetU(header, 4, 2));
  if (h.version != kProtocolVersion) {
    return FailedPreconditionError(
        "protocol version mismatch: the peer speaks ksearch worker protocol version " +
        std::to_string(h.version) + ", this build speaks " + std::to_string(kProtocolVersion) +
        " (ksearch-worker must come from the same ksearch build as the library)");
  }
  uint32_t type = GetU(header, 6, 2);
  if (type < static_cast<uint32_t>(MessageType::kInit) ||
      type > static_cast<uint32_t>(MessageType::kCompiled)) {
    return DataLossError("unknown worker message type " + std::to_string(type));
  }
  h.type = static_cast<MessageType>(type);
  h.json_bytes = GetU(header, 8, 4);
  h.attachment_bytes = GetU(header, 12, 4);
  if (h.json_bytes > kMaxJsonBytes || h.attachment_bytes > kMaxAttachmentBytes) {
    return DataLossError("worker frame too large (" + std::to_string(h.json_bytes) +
                         " B of JSON, " + std::to_string(h.attachment_bytes) +
                         " B attached; limits " + std::to_string(kMaxJsonBytes) + " and " +
                         std::to_string(kMaxAttachmentBytes) + ")");
  }
  return h;
}

Status FrameDecoder::Feed(std::string_view bytes) {
  if (!error_.ok()) return error_;
  buffer_.append(bytes);
  error_ = Parse();
  return error_;
}

Status FrameDecoder::Parse() {
  size_t offset = 0;
  while (buffer_.size() - offset >= kHeaderBytes) {
    std::string_view rest(buffer_.data() + offset, buffer_.size() - offset);
    KSEARCH_ASSIGN_OR_RETURN(FrameHeader h, DecodeHeader(rest.substr(0, kHeaderBytes)));
    size_t total = kHeaderBytes + size_t{h.json_bytes} + size_t{h.attachment_bytes};
    if (rest.size() < total) break;
    Frame frame;
    frame.type = h.type;
    frame.json.assign(rest.substr(kHeaderBytes, h.json_bytes));
    frame.attachment.assign(rest.substr(kHeaderBytes + h.json_bytes, h.attachment_bytes));
    ready_.push_back(std::move(frame));
    offset += total;
  }
  buffer_.erase(0, offset);
  // A partial header can already be judged: garbage fails at once rather than
  // after the peer sends 16 bytes.
  if (!buffer_.empty() && buffer_.size() < kHeaderBytes) {
    size_t n = std::min(buffer_.size(), sizeof(kMagic));
    if (std::memcmp(buffer_.data(), kMagic, n) != 0) {
      return DataLossError("not a ksearch worker frame (bytes " + Printable(buffer_) +
                           "; expected the magic \"KSWP\")");
    }
  }
  return Status::Ok();
}

std::optional<Frame> FrameDecoder::Next() {
  if (ready_.empty()) return std::nullopt;
  Frame frame = std::move(ready_.front());
  ready_.pop_front();
  return frame;
}

Status FrameDecoder::Finish() const {
  if (!error_.ok()) return error_;
  if (buffer_.empty()) return Status::Ok();
  if (buffer_.size() < kHeaderBytes) {
    return DataLossError("truncated frame: the stream ended " + std::to_string(buffer_.size()) +
                         " bytes into a " + std::to_string(kHeaderBytes) + "-byte header");
  }
  auto h = DecodeHeader(std::string_view(buffer_).substr(0, kHeaderBytes));
  if (!h.ok()) return h.status();
  size_t total = kHeaderBytes + size_t{h->json_bytes} + size_t{h->attachment_bytes};
  return DataLossError("truncated frame: the stream ended after " + std::to_string(buffer_.size()) +
                       " of " + std::to_string(total) + " bytes of a '" + ToString(h->type) +
                       "' frame");
}

namespace {

// Reads exactly `n` bytes. Returns the number read before a clean end of
// stream (less than n), or an error.
StatusOr<size_t> ReadExactly(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      return InternalError(std::string("read: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

StatusOr<Frame> ReadFrame(int fd) {
  char header[kHeaderBytes];
  KSEARCH_ASSIGN_OR_RETURN(size_t got, ReadExactly(fd, header, kHeaderBytes));
  if (got == 0) return UnavailableError("connection closed");
  if (got < kHeaderBytes) {
    // A short prefix of a real header is a cut; anything else is garbage.
    if (std::memcmp(header, kMagic, std::min(got, sizeof(kMagic))) != 0) {
      return DataLossError("not a ksearch worker frame (bytes " +
                           Printable(std::string_view(header, got)) +
                           "; expected the magic \"KSWP\")");
    }
    return DataLossError("truncated frame: the stream ended " + std::to_string(got) +
                         " bytes into a " + std::to_string(kHeaderBytes) + "-byte header");
  }
  KSEARCH_ASSIGN_OR_RETURN(FrameHeader h, DecodeHeader(std::string_view(header, kHeaderBytes)));
  Frame frame;
  frame.type = h.type;
  frame.json.resize(h.json_bytes);
  frame.attachment.resize(h.attachment_bytes);
  size_t body = size_t{h.json_bytes} + size_t{h.attachment_bytes};
  KSEARCH_ASSIGN_OR_RETURN(size_t json_got, ReadExactly(fd, frame.json.data(), h.json_bytes));
  size_t attachment_got = 0;
  if (json_got == h.json_bytes) {
    KSEARCH_ASSIGN_OR_RETURN(attachment_got,
                             ReadExactly(fd, frame.attachment.data(), h.attachment_bytes));
  }
  if (json_got + attachment_got < body) {
    return DataLossError("truncated frame: the stream ended after " +
                         std::to_string(kHeaderBytes + json_got + attachment_got) + " of " +
                         std::to_string(kHeaderBytes + body) + " bytes of a '" + ToString(h.type) +
                         "' frame");
  }
  return frame;
}

Status WriteAll(int fd, std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t w = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd, bytes.data() + sent, bytes.size() - sent);
    if (w < 0) {
      if (errno == EINTR) continue;
      return UnavailableError(std::string("write to the worker socket: ") + std::strerror(errno));
    }
    sent += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status WriteFrame(int fd, const Frame& frame, uint16_t version) {
  return WriteAll(fd, EncodeFrame(frame, version));
}

}  // namespace ksearch::internal::worker
