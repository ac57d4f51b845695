#include "baselines/fastest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace ksearch::internal {

StatusOr<Choice> ChooseFastest(size_t count, const TurnFunction& turn,
                               const ChoiceSchedule& schedule) {
  std::function<void(double)> rest = schedule.rest;
  if (!rest) {
    rest = [](double ms) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    };
  }
  // A turn, then the GPU's rest.
  auto turn_and_rest = [&](size_t i, int runs) -> StatusOr<float> {
    StatusOr<float> ms = turn(i, runs);
    if (ms.ok() && schedule.rest_ratio > 0)
      rest(static_cast<double>(schedule.rest_ratio) * static_cast<double>(*ms) * runs);
    return ms;
  };
  Choice choice;
  // Warm-up: every candidate's first turn tells whether it runs at all.
  float warm_ms = 0;
  for (size_t i = 0; i < count; ++i) {
    StatusOr<float> ms = turn_and_rest(i, 1);
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
      KSEARCH_ASSIGN_OR_RETURN(float ms, turn_and_rest(i, 1));
      warm_ms += ms;
    }
  }
  const size_t n = choice.ran.size();
  const size_t rounds = std::max<size_t>(n, static_cast<size_t>(std::max(schedule.min_rounds, 1)));
  std::vector<std::vector<float>> turns(n);
  for (size_t round = 0; round < rounds; ++round) {
    for (size_t place = 0; place < n; ++place) {
      const size_t j = (place + round) % n;
      KSEARCH_ASSIGN_OR_RETURN(float ms,
                               turn_and_rest(choice.ran[j], std::max(schedule.timed_runs, 1)));
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

int64_t L2FlushBytes(int64_t l2_bytes) { return 2 * std::max<int64_t>(l2_bytes, int64_t{8} << 20); }

StatusOr<DeviceBuffer> AllocateL2Flush(const DriverApi& api) {
  CUdevice device = 0;
  KSEARCH_CU(api.cuCtxGetDevice_v2(&device, nullptr), "cuCtxGetDevice");
  int l2 = 0;
  KSEARCH_CU(api.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device),
             "cuDeviceGetAttribute(L2_CACHE_SIZE)");
  return DeviceBuffer::Allocate(api, L2FlushBytes(l2));
}

TurnFunction EventTurns(const DriverApi& api, CUstream stream, CUevent start, CUevent end,
                        const DeviceBuffer* flush,
                        std::function<Status(size_t index, CUstream stream)> run) {
  auto flush_value = std::make_shared<unsigned>(0x5EED0000u);
  return [&api, stream, start, end, flush, flush_value, run = std::move(run)](
             size_t index, int runs) -> StatusOr<float> {
    KSEARCH_RETURN_IF_ERROR(run(index, stream));  // untimed: the switch to this candidate
    float total = 0;
    for (int r = 0; r < runs; ++r) {
      if (flush != nullptr) {
        KSEARCH_CU(api.cuMemsetD32Async(flush->ptr(), (*flush_value)++,
                                        static_cast<size_t>(flush->bytes() / 4), stream),
                   "cuMemsetD32Async(L2 flush)");
      }
      KSEARCH_CU(api.cuEventRecord(start, stream), "cuEventRecord");
      KSEARCH_RETURN_IF_ERROR(run(index, stream));
      KSEARCH_CU(api.cuEventRecord(end, stream), "cuEventRecord");
      // The host waits for each run, as the judge does: the GPU idles
      // between runs, which changes cuDNN's ranking (H200, 2026-12-03:
      // queued back to back, conv2d's algorithms 0 and 1 tied; waited for,
      // as the judge runs them, algorithm 1 was 2-8% slower).
      KSEARCH_CU(api.cuEventSynchronize(end), "cuEventSynchronize");
      float ms = 0;
      KSEARCH_CU(api.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
      total += ms;
    }
    return total / static_cast<float>(runs);
  };
}

namespace {

// Round to nearest even from a float's bits: bf16 is its top half; f16 keeps
// normal values only (the few normal(0, 1) draws below 2^-14 become zeros,
// which changes nothing that the choice measures).
uint16_t ToBf16Bits(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

uint16_t ToF16Bits(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 31) << 15;
  const int exponent = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  const uint32_t mantissa = u & 0x7FFFFFu, rest = mantissa & 0x1FFFu;
  uint32_t half = sign | static_cast<uint32_t>(exponent) << 10 | mantissa >> 13;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry may raise the exponent
  return static_cast<uint16_t>(half);
}

}  // namespace

Status FillNormal(const DriverApi& api, CUdeviceptr buffer, uint64_t count, DType type,
                  CUstream stream) {
  if (count == 0) return Status::Ok();
  if (type != DType::kBF16 && type != DType::kF16 && type != DType::kF32)
    return InvalidArgumentError("FillNormal: only bf16, f16 and f32 operands");
  const uint64_t bytes = type == DType::kF32 ? 4 : 2;
  constexpr uint64_t kBlock = uint64_t{1} << 21;  // values drawn, then copied over the rest
  const uint64_t block = std::min(count, kBlock);
  std::vector<unsigned char> host(static_cast<size_t>(block * bytes));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto uniform = [&state] {  // in (0, 1]
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (static_cast<double>(state >> 11) + 1.0) * 0x1.0p-53;
  };
  constexpr double kTwoPi = 6.283185307179586;
  for (uint64_t i = 0; i < block; ++i) {
    const float x =
        static_cast<float>(std::sqrt(-2.0 * std::log(uniform())) * std::cos(kTwoPi * uniform()));
    if (type == DType::kF32) {
      std::memcpy(&host[i * 4], &x, 4);
    } else {
      const uint16_t v = type == DType::kBF16 ? ToBf16Bits(x) : ToF16Bits(x);
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
