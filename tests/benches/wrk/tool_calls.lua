-- wrk script: POST /v1/tool_calls with CALLS trivial echo calls per request
-- (default 1). Usage: CALLS=100 wrk -s tool_calls.lua http://127.0.0.1:8787
local calls = tonumber(os.getenv("CALLS") or "1")
local items = {}
for i = 1, calls do
  items[i] = string.format(
    '{"id":"c%d","type":"function","function":{"name":"echo","arguments":"{\\"text\\":\\"hi\\"}"}}', i)
end
wrk.method = "POST"
wrk.path = "/v1/tool_calls"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"tool_calls":[' .. table.concat(items, ",") .. ']}'

local failures = 0
response = function(status, headers, body)
  if status ~= 200 or string.find(body, '"error"', 1, true) then
    failures = failures + 1
  end
end

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "calls/s %.0f  requests/s %.0f  p50 %.0f us  p99 %.0f us  non-2xx or tool errors %d\n",
    summary.requests * calls / seconds, summary.requests / seconds,
    latency:percentile(50), latency:percentile(99),
    summary.errors.status + failures))
end
