-- Shared by the bench/wrk/*.lua scripts: loads task ids and prints the result
-- line that bench/run.sh parses.

local M = {}

-- Reads a file of task ids (one a line) into a list; errors out when empty.
function M.load_ids(path)
  assert(path, "no ids file given (wrk ... URL -- IDS_FILE)")
  local ids = {}
  local f = assert(io.open(path, "r"))
  for line in f:lines() do
    if line ~= "" then ids[#ids + 1] = line end
  end
  f:close()
  assert(#ids > 0, "no ids in " .. path)
  return ids
end

-- A different random sequence per thread (setup() numbers the threads).
function M.seed_random(tid)
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
end

-- wrk's done(): one parseable line. Latencies in ms (wrk measures in us).
function M.done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f mean_ms=%.3f non2xx=%d connect_err=%d read_err=%d write_err=%d timeouts=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000,
    e.status, e.connect, e.read, e.write, e.timeout))
end

-- Numbers wrk's threads so each seeds its own random sequence.
local threads = 0
function M.setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

return M
