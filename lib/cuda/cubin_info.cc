#include "cuda/cubin_info.h"

#include <algorithm>
#include <set>

namespace ksearch::internal {
namespace {

// Record formats (the first byte of every .nv.info record). NVAL, BVAL and
// HVAL records are four bytes: format, attribute, a 16-bit value (unused for
// NVAL). SVAL records carry a 16-bit length and that many bytes.
constexpr uint8_t kFormatNval = 0x01;
constexpr uint8_t kFormatBval = 0x02;
constexpr uint8_t kFormatHval = 0x03;
constexpr uint8_t kFormatSval = 0x04;

// Attributes (the second byte) and their payloads.
// SVAL: u32 symbol, u16 offset, u16 size.
constexpr uint8_t kParamCbank = 0x0a;
// SVAL: u32 index, u16 ordinal, u16 offset, u32 flags with the size in bits 18..31.
constexpr uint8_t kKparamInfo = 0x17;
// HVAL: bytes of the parameter block.
constexpr uint8_t kCbankParamSize = 0x19;
// SVAL: u32 index, u16 ordinal, u16 offset, u16 size, u16 flags.
constexpr uint8_t kKparamInfoV2 = 0x45;
// SVAL: u32 x, u32 y, u32 z: the __cluster_dims__ the kernel was compiled
// with (EIATTR_CTA_PER_CLUSTER, beside an EIATTR_EXPLICIT_CLUSTER NVAL; read
// from ptxas 13.0 cubins for sm_90).
constexpr uint8_t kCtaPerCluster = 0x3d;

constexpr std::string_view kInfoPrefix = ".nv.info.";

// Little-endian reads of `n` bytes at `at`; false when they are not all
// inside `data`.
bool Read(std::string_view data, uint64_t at, int n, uint64_t* value) {
  if (at > data.size() || static_cast<uint64_t>(n) > data.size() - at) return false;
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<uint8_t>(data[at + static_cast<uint64_t>(i)]);
  }
  *value = v;
  return true;
}

struct Section {
  uint64_t name = 0;  // offset into the section name table
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

constexpr uint32_t kSectionNobits = 8;

// The bytes of `s`, or an error when they lie outside the file.
StatusOr<std::string_view> Contents(std::string_view cubin, const Section& s, size_t index) {
  if (s.type == kSectionNobits) {
    return InvalidArgumentError("section " + std::to_string(index) + " has no data");
  }
  if (s.offset > cubin.size() || s.size > cubin.size() - s.offset) {
    return InvalidArgumentError("section " + std::to_string(index) +
                                " lies past the end of the cubin");
  }
  return cubin.substr(s.offset, s.size);
}

// One parameter as a record describes it.
struct ParamRecord {
  uint64_t ordinal = 0;
  KernelParam param;
};

// Decodes the records of one `.nv.info.<kernel>` section.
StatusOr<KernelSignature> ReadInfoSection(std::string_view name, std::string_view info) {
  KernelSignature signature;
  signature.name = std::string(name);
  auto error = [&](const std::string& what) {
    return InvalidArgumentError("the parameter table of kernel '" + signature.name + "': " + what);
  };
  std::vector<ParamRecord> records;
  int64_t cbank_bytes = -1;
  uint64_t at = 0;
  while (at < info.size()) {
    uint64_t format = 0, attribute = 0, value = 0;
    if (!Read(info, at, 1, &format) || !Read(info, at + 1, 1, &attribute) ||
        !Read(info, at + 2, 2, &value)) {
      return error("a record is cut off at byte " + std::to_string(at));
    }
    if (format == kFormatNval || format == kFormatBval || format == kFormatHval) {
      if (attribute == kCbankParamSize && format == kFormatHval) {
        signature.param_bytes = static_cast<int64_t>(value);
      }
      at += 4;
      continue;
    }
    if (format != kFormatSval) {
      return error("unknown record format " + std::to_string(format) + " at byte " +
                   std::to_string(at));
    }
    const uint64_t payload = at + 4;
    if (value > info.size() - payload) {
      return error("a record of " + std::to_string(value) + " bytes at byte " + std::to_string(at) +
                   " runs past the end of the section");
    }
    std::string_view data = info.substr(payload, value);
    if (attribute == kKparamInfo || attribute == kKparamInfoV2) {
      uint64_t ordinal = 0, offset = 0, flags = 0;
      if (!Read(data, 4, 2, &ordinal) || !Read(data, 6, 2, &offset) || !Read(data, 8, 4, &flags)) {
        return error("a parameter record of " + std::to_string(value) + " bytes (expected 12)");
      }
      // The first version keeps the size in the top 14 bits of the flags.
      uint64_t size = attribute == kKparamInfo ? flags >> 18 : flags & 0xffff;
      records.push_back(
          {ordinal, KernelParam{static_cast<int64_t>(offset), static_cast<int64_t>(size)}});
    } else if (attribute == kCtaPerCluster) {
      uint64_t dims[3] = {};
      for (int d = 0; d < 3; ++d) {
        if (!Read(data, 4 * static_cast<uint64_t>(d), 4, &dims[d]) || dims[d] < 1 ||
            dims[d] > 1024) {
          return error("a cluster record of " + std::to_string(value) +
                       " bytes that does not hold three sizes");
        }
        signature.cluster_dims[d] = static_cast<uint32_t>(dims[d]);
      }
    } else if (attribute == kParamCbank) {
      uint64_t bytes = 0;
      if (!Read(data, 6, 2, &bytes)) {
        return error("a constant bank record of " + std::to_string(value) + " bytes");
      }
      cbank_bytes = static_cast<int64_t>(bytes);
    }
    at = payload + value;
  }
  if (cbank_bytes >= 0 && signature.param_bytes != 0 && cbank_bytes != signature.param_bytes) {
    return error("the parameter block is " + std::to_string(signature.param_bytes) +
                 " bytes in one record and " + std::to_string(cbank_bytes) + " in another");
  }
  if (signature.param_bytes == 0) signature.param_bytes = std::max<int64_t>(cbank_bytes, 0);
  std::sort(records.begin(), records.end(),
            [](const ParamRecord& a, const ParamRecord& b) { return a.ordinal < b.ordinal; });
  int64_t end_of_previous = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const ParamRecord& r = records[i];
    if (r.ordinal != i) {
      return error("parameter ordinals are not 0.." + std::to_string(records.size() - 1) +
                   " (found " + std::to_string(r.ordinal) + " at position " + std::to_string(i) +
                   ")");
    }
    if (r.param.size <= 0 || r.param.offset < end_of_previous ||
        (signature.param_bytes > 0 && r.param.offset + r.param.size > signature.param_bytes)) {
      return error("parameter " + std::to_string(i) + " (offset " + std::to_string(r.param.offset) +
                   ", " + std::to_string(r.param.size) +
                   " bytes) does not fit the parameter block");
    }
    end_of_previous = r.param.offset + r.param.size;
    signature.params.push_back(r.param);
  }
  if (!signature.params.empty() && signature.param_bytes == 0) {
    return error("parameters without a parameter block size");
  }
  return signature;
}

}  // namespace

std::vector<int64_t> ParamSizes(const KernelSignature& signature) {
  std::vector<int64_t> sizes;
  for (const KernelParam& p : signature.params) sizes.push_back(p.size);
  return sizes;
}

StatusOr<std::vector<KernelSignature>> ReadKernelSignatures(std::string_view cubin) {
  constexpr uint64_t kHeaderBytes = 64;
  constexpr uint64_t kSectionHeaderBytes = 64;
  if (cubin.size() < kHeaderBytes || cubin.substr(0, 4) != "\177ELF") {
    return InvalidArgumentError("not an ELF file (" + std::to_string(cubin.size()) + " bytes)");
  }
  if (cubin[4] != 2 || cubin[5] != 1) {
    return InvalidArgumentError("not a little-endian 64-bit ELF file");
  }
  uint64_t section_headers = 0, entry_bytes = 0, count = 0, names_index = 0;
  Read(cubin, 0x28, 8, &section_headers);
  Read(cubin, 0x3a, 2, &entry_bytes);
  Read(cubin, 0x3c, 2, &count);
  Read(cubin, 0x3e, 2, &names_index);
  if (count == 0 || entry_bytes < kSectionHeaderBytes) {
    return InvalidArgumentError("the ELF file has no readable section headers (" +
                                std::to_string(count) + " of " + std::to_string(entry_bytes) +
                                " bytes)");
  }
  if (section_headers > cubin.size() || count * entry_bytes > cubin.size() - section_headers) {
    return InvalidArgumentError("the section headers lie past the end of the cubin");
  }
  if (names_index >= count) {
    return InvalidArgumentError("the section name table index " + std::to_string(names_index) +
                                " is not a section");
  }
  std::vector<Section> sections(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t at = section_headers + i * entry_bytes, type = 0;
    Read(cubin, at, 4, &sections[i].name);
    Read(cubin, at + 4, 4, &type);
    Read(cubin, at + 0x18, 8, &sections[i].offset);
    Read(cubin, at + 0x20, 8, &sections[i].size);
    sections[i].type = static_cast<uint32_t>(type);
  }
  KSEARCH_ASSIGN_OR_RETURN(std::string_view names,
                           Contents(cubin, sections[names_index], names_index));
  std::vector<KernelSignature> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].name >= names.size()) {
      return InvalidArgumentError("the name of section " + std::to_string(i) +
                                  " lies outside the name table");
    }
    std::string_view name = names.substr(sections[i].name);
    size_t end = name.find('\0');
    if (end == std::string_view::npos) {
      return InvalidArgumentError("the name of section " + std::to_string(i) +
                                  " is not terminated");
    }
    name = name.substr(0, end);
    if (name.size() <= kInfoPrefix.size() || name.substr(0, kInfoPrefix.size()) != kInfoPrefix)
      continue;
    std::string_view kernel = name.substr(kInfoPrefix.size());
    KSEARCH_ASSIGN_OR_RETURN(std::string_view info, Contents(cubin, sections[i], i));
    KSEARCH_ASSIGN_OR_RETURN(KernelSignature signature, ReadInfoSection(kernel, info));
    if (!seen.insert(signature.name).second) {
      return InvalidArgumentError("kernel '" + signature.name + "' has two parameter tables");
    }
    out.push_back(std::move(signature));
  }
  return out;
}

}  // namespace ksearch::internal
