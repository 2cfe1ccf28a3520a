-- execute-step: POST /ap/v1/agent/tasks/{id}/steps {"input":"hi"}, id drawn at
-- random from IDS_FILE.
--   wrk ... http://HOST:PORT/ap/v1/agent/tasks -s bench/wrk/execute_step.lua -- IDS_FILE
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(dir .. "report.lua")

local ids, base
local body = '{"input":"hi"}'
local headers = { ["Content-Type"] = "application/json" }

setup = report.setup

function init(args)
  ids = report.load_ids(args[1])
  report.seed_random(tid)
  base = wrk.path .. "/"
end

function request()
  return wrk.format("POST", base .. ids[math.random(#ids)] .. "/steps", headers, body)
end

done = report.done
