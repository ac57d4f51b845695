// What travels through the queue: the job entry's fields, the candidate as
// JSON, and the Lua scripts that make enqueueing and publishing atomic and
// safe to repeat (a command resent after a lost reply changes nothing).
//
// Thread safety: stateless functions and constants.
#ifndef KSEARCH_QUEUE_JOB_H_
#define KSEARCH_QUEUE_JOB_H_

#include <string>
#include <string_view>

#include "ksearch/candidate.h"
#include "ksearch/status.h"

namespace ksearch::internal::queue {

std::string CandidateToJson(const Candidate& candidate);
StatusOr<Candidate> CandidateFromJson(std::string_view json, std::string_view origin);

// A job's id within its run: the candidate id and its content, so that a
// restarted orchestrator finds the same ids for the same candidates.
std::string JobId(const Candidate& candidate, const std::string& content_hash);

// Microseconds since the epoch, the clock enqueue and publish times use.
int64_t UnixMicros();

// KEYS: results hash, queued set, jobs stream. ARGV: job id, then the entry's
// field/value pairs. Returns 1 enqueued, 0 already queued by this run, 2 a
// result is already stored.
inline constexpr char kEnqueueScript[] = R"lua(
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 2 end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('XADD', KEYS[3], '*', unpack(fields))
return 1
)lua";

// KEYS: results hash, workers hash, done stream, duplicates counter, jobs
// stream. ARGV: job id, evaluation JSON, worker name, group, entry id.
// Returns 1 stored, 0 dropped as a duplicate. The job is acknowledged and
// deleted from its stream either way.
inline constexpr char kPublishScript[] = R"lua(
local fresh = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
if fresh == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  redis.call('XADD', KEYS[3], '*', 'job', ARGV[1])
elseif redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[3] then
  redis.call('INCR', KEYS[4])
end
redis.call('XACK', KEYS[5], ARGV[4], ARGV[5])
redis.call('XDEL', KEYS[5], ARGV[5])
return fresh
)lua";

// KEYS: jobs stream. ARGV: group, consumer, entry id. Resets the idle time of
// a job this consumer still holds (XCLAIM JUSTID does not count a delivery);
// a job another worker took over meanwhile is left alone. Returns 1 or 0.
inline constexpr char kHeartbeatScript[] = R"lua(
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 1 and p[1][2] == ARGV[2] then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
  return 1
end
return 0
)lua";

}  // namespace ksearch::internal::queue

#endif  // KSEARCH_QUEUE_JOB_H_
