-- create-task: POST /ap/v1/agent/tasks with a fixed body.
--   wrk ... http://HOST:PORT/ap/v1/agent/tasks -s bench/wrk/create_task.lua
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(dir .. "report.lua")

wrk.method = "POST"
wrk.body = '{"input":"hello","additional_input":{"n":1}}'
wrk.headers["Content-Type"] = "application/json"

done = report.done
