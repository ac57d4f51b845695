#include "baselines/fastest.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace ksearch::internal {

StatusOr<Choice> ChooseFastest(size_t count, const TurnFunction& turn,
                               const ChoiceSchedule& schedule) {
  Choice choice;
  // Warm-up: every candidate's first turn tells whether it runs at all.
  float warm_ms = 0;
  for (size_t i = 0; i < count; ++i) {
    StatusOr<float> ms = turn(i, 1);
    if (!ms.ok()) {
      choice.dropped.push_back(ms.status());
      continue;
    }
    choice.ran.push_back(i);
    warm_ms += *ms;
  }
  if (choice.ran.empty()) {
    return InternalError(
        "none of the " + std::to_string(count) + " candidates ran" +
        (choice.dropped.empty() ? std::string() : ": " + choice.dropped.front().message()));
  }
  for (int pass = 1; pass < schedule.max_warm_passes && warm_ms < schedule.warm_ms; ++pass) {
    for (size_t i : choice.ran) {
      KSEARCH_ASSIGN_OR_RETURN(float ms, turn(i, 1));
      warm_ms += ms;
    }
  }
  const size_t n = choice.ran.size();
  const size_t rounds = std::max<size_t>(n, static_cast<size_t>(std::max(schedule.min_rounds, 1)));
  std::vector<std::vector<float>> turns(n);
  for (size_t round = 0; round < rounds; ++round) {
    for (size_t place = 0; place < n; ++place) {
      const size_t j = (place + round) % n;
      KSEARCH_ASSIGN_OR_RETURN(float ms, turn(choice.ran[j], std::max(schedule.timed_runs, 1)));
      turns[j].push_back(ms);
    }
  }
  size_t best = 0;
  for (size_t j = 0; j < n; ++j) {
    std::sort(turns[j].begin(), turns[j].end());
    choice.median_ms.push_back(turns[j][turns[j].size() / 2]);
    if (choice.median_ms[j] < choice.median_ms[best]) best = j;
  }
  choice.best = choice.ran[best];
  return choice;
}

TurnFunction EventTurns(const DriverApi& api, CUstream stream, CUevent start, CUevent end,
                        std::function<Status(size_t index, CUstream stream)> run) {
  return
      [&api, stream, start, end, run = std::move(run)](size_t index, int runs) -> StatusOr<float> {
        KSEARCH_CU(api.cuEventRecord(start, stream), "cuEventRecord");
        for (int r = 0; r < runs; ++r) KSEARCH_RETURN_IF_ERROR(run(index, stream));
        KSEARCH_CU(api.cuEventRecord(end, stream), "cuEventRecord");
        KSEARCH_CU(api.cuEventSynchronize(end), "cuEventSynchronize");
        float ms = 0;
        KSEARCH_CU(api.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
        return ms / static_cast<float>(runs);
      };
}

Status FillPattern(const DriverApi& api, CUdeviceptr buffer, uint64_t count, DType type,
                   CUstream stream) {
  if (count == 0) return Status::Ok();
  if (type != DType::kBF16 && type != DType::kF16 && type != DType::kF32)
    return InvalidArgumentError("FillPattern: only bf16, f16 and f32 operands");
  const uint64_t bytes = type == DType::kF32 ? 4 : 2;
  constexpr uint64_t kBlockBytes = uint64_t{1} << 20;  // then copied over the rest
  const uint64_t block = std::min(count, kBlockBytes / bytes);
  std::vector<unsigned char> host(static_cast<size_t>(block * bytes));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (uint64_t i = 0; i < block; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const uint32_t sign = static_cast<uint32_t>(state >> 63);
    const uint32_t exponent = static_cast<uint32_t>((state >> 40) % 9);  // 2^-9 .. 2^-1
    const uint32_t mantissa = static_cast<uint32_t>(state >> 20);
    if (type == DType::kF32) {
      const uint32_t v = sign << 31 | (118 + exponent) << 23 | (mantissa & 0x7FFFFF);
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t v =
          type == DType::kBF16
              ? static_cast<uint16_t>(sign << 15 | (118 + exponent) << 7 | (mantissa & 0x7F))
              : static_cast<uint16_t>(sign << 15 | (6 + exponent) << 10 | (mantissa & 0x3FF));
      std::memcpy(&host[i * 2], &v, 2);
    }
  }
  KSEARCH_CU(api.cuMemcpyHtoD(buffer, host.data(), host.size()), "cuMemcpyHtoD");
  for (uint64_t done = block; done < count;) {
    const uint64_t copy = std::min(done, count - done);
    KSEARCH_CU(api.cuMemcpyDtoDAsync(buffer + done * bytes, buffer, copy * bytes, stream),
               "cuMemcpyDtoDAsync");
    done += copy;
  }
  return Status::Ok();
}

}  // namespace ksearch::internal
