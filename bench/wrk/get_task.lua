-- get-task: GET /ap/v1/agent/tasks/{id}, id drawn at random from IDS_FILE.
--   wrk ... http://HOST:PORT/ap/v1/agent/tasks -s bench/wrk/get_task.lua -- IDS_FILE
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(dir .. "report.lua")

local ids, base

setup = report.setup

function init(args)
  ids = report.load_ids(args[1])
  report.seed_random(tid)
  base = wrk.path .. "/"
end

function request()
  return wrk.format("GET", base .. ids[math.random(#ids)])
end

done = report.done
