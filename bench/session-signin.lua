-- wrk script for bench/session's set-up: signs each pre-minted ID token in once (threads split the list)
-- and appends the session token of each answer to ARGS[2].THREAD_ID. Session tokens are secrets: they go to
-- the bench's private folder only, never to the output.
local tokens = {}
local share = {}
local next_index = 1
local answered = 0
local out
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

function init(args)
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  local n = tonumber(args[3])
  for i = id + 1, #tokens, n do share[#share + 1] = tokens[i] end
  out = assert(io.open(args[2] .. "." .. id, "w"))
end

function request()
  -- Once this thread's share is used up, further requests (other connections still in flight) sign its
  -- first user in again: a harmless extra session.
  local token = share[next_index] or share[1]
  next_index = next_index + 1
  return wrk.format("POST", "/tokensignin", {["Content-Type"] = "application/json"}, '{"idToken":"' .. token .. '"}')
end

function response(status, headers, body)
  answered = answered + 1
  if answered > #share then return end
  local session = body:match('"token":"([%w_%-]+)"')
  if status == 200 and session then out:write(session, "\n") end
  if answered == #share then
    out:close()
    wrk.thread:stop()
  end
end
