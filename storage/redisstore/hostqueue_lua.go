package redisstore

import "github.com/redis/go-redis/v9"

// The host queue's scripts share one key list (Store.hqKeys) and one ARGV
// head (Store.hqArgs): ARGV[1] the cluster flag of countReplicas, ARGV[2]
// the key prefix of the hosts' sorted sets, ARGV[3] that of the consumers'
// lease sets, ARGV[4] the stream's group; each script's own arguments
// follow from ARGV[5]. Every key a script touches carries the partition's
// hash tag (the hosts' and consumers' keys too, as their names follow the
// prefixes), so each script runs in one slot.
//
// Layout, besides the stream's keys (queue, leases, expiry, delayed):
//
//	E hq:e  HASH entry ID -> "<priority>:<len(host)>:<host><data>"
//	L hq:l  HASH entry ID -> "<token>:<deliveries>:<consumer>" while leased,
//	        ":<deliveries>:<not-before, caller's ms>" once released
//	X hq:x  ZSET entry IDs leased, by lease deadline (server ms)
//	D hq:d  ZSET entry IDs released with a not-before, by it (server ms)
//	F hq:f  ZSET pending entry IDs (score 0: by ID, which is push order)
//	hq:h:<host>  ZSET the host's pending entry IDs, by minus the priority
//	        (then by ID: push order)
//	A hq:a  ZSET hosts with pending entries, member "<head ID><host>",
//	        by minus the head's priority (then by head ID)
//	R hq:r  ZSET the hosts of A believed ready, same members
//	W hq:w  ZSET hosts waiting for their ready time, by it (caller's ms)
//	B hq:b  ZSET hosts found at their per-host limit, by leased count
//	T hq:t  HASH host -> ready time (caller's ms)
//	N hq:n  HASH host -> leased count (absent when 0)
//	hq:o:<consumer>  SET entry IDs leased by that consumer
//	LAST lastid  STRING the last ID a push issued
//
// An entry ID is "<ms, 13 digits>-<seq, 6 digits>": fixed width, so that
// the sorted sets order IDs as strings in push order, and comparable with
// the stream's IDs, which the scripts parse.
//
// A host with pending entries is in exactly one of R, W and B: R when it
// may give entries (LeaseHosts checks its ready time and limit when it
// comes to it, and moves it to W or B when they hold it back), W until its
// ready time, B until one of its leases ends or a call allows more. A host
// with nothing pending and nothing leased keeps only its ready time, in T
// and W, until that time passes.
//
// Each command a script calls costs the server a few µs whatever it
// moves, about what the data costs, so the scripts call Redis once or
// twice per host they touch (its sorted set) and move the hosts between A,
// R, W, B, T and N in one call per key (TestHostQueueCallsPerHost counts
// them; BenchmarkHostQueueBroad gives the server's CPU per entry). The
// sources of the scripts that run per page (hq*Src) are constants, so
// that the test can count their calls.
const hqPrelude = luaPrelude + countReplicas + `
local Q, SL, SX, SD, LAST = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local E, L, X, D, F = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local A, R, W, B, T, N, O = KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local HP, OP, GROUP = ARGV[2], ARGV[3], ARGV[4]

local function num(v)
	if v then return tonumber(v) end
	return nil
end
local function idparts(id)
	local d = string.find(id, '-', 1, true)
	return tonumber(string.sub(id, 1, d - 1)), tonumber(string.sub(id, d + 1))
end
local function fid(ms, seq) return string.format('%013d-%06d', ms, seq) end
-- unrec splits an entry record: priority, host, and where the data starts.
local function unrec(r)
	local a = string.find(r, ':', 1, true)
	local b = string.find(r, ':', a + 1, true)
	local hl = tonumber(string.sub(r, a + 1, b - 1))
	return tonumber(string.sub(r, 1, a - 1)), string.sub(r, b + 1, b + hl), b + hl + 1
end
-- lrec splits a lease record: token, deliveries, and the rest.
local function lrec(v)
	local a = string.find(v, ':', 1, true)
	local b = string.find(v, ':', a + 1, true)
	return string.sub(v, 1, a - 1), tonumber(string.sub(v, a + 1, b - 1)), string.sub(v, b + 1)
end
local function hkey(h) return HP .. h end
-- batch calls a variadic command on key with the elements of list, a
-- thousand at a time (Lua's unpack has a limit).
local function batch(cmd, key, list)
	for i = 1, #list, 1000 do
		redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
	end
end
-- mget returns the values of fields ids of hash key, false for those
-- missing, in the order of ids.
local function mget(key, ids)
	local out = {}
	for i = 1, #ids, 1000 do
		local r = redis.call('HMGET', key, unpack(ids, i, math.min(i + 999, #ids)))
		for j = 1, #r do out[i + j - 1] = r[j] end
	end
	return out
end
-- mscore returns the scores of members ms of sorted set key, false for
-- those missing, in the order of ms: with ZMSCORE, or one ZSCORE per
-- member on a server older than 6.2, which lacks it.
local function mscore(key, ms)
	local out = {}
	for i = 1, #ms, 1000 do
		local r = redis.pcall('ZMSCORE', key, unpack(ms, i, math.min(i + 999, #ms)))
		if r.err then
			r = {}
			for j = i, math.min(i + 999, #ms) do r[#r + 1] = redis.call('ZSCORE', key, ms[j]) end
		end
		for j = 1, #r do out[i + j - 1] = r[j] end
	end
	return out
end
local function head(h)
	local r = redis.call('ZRANGE', hkey(h), 0, 0, 'WITHSCORES')
	return r[1], r[2]
end
local function leased(h) return tonumber(redis.call('HGET', N, h) or '0') end

-- reindex moves a host's members of A and R to its head, old being its
-- head before its pending entries changed. A host that gains entries goes
-- to R unless it waits (W); one that has none left leaves A, R and B.
local function reindex(h, old)
	local id, sc = head(h)
	if id == old then return end
	local inR = 0
	if old then
		redis.call('ZREM', A, old .. h)
		inR = redis.call('ZREM', R, old .. h)
	end
	if not id then
		redis.call('ZREM', B, h)
		return
	end
	redis.call('ZADD', A, sc, id .. h)
	if inR == 1 or (not old and not redis.call('ZSCORE', W, h) and not redis.call('ZSCORE', B, h)) then
		redis.call('ZADD', R, sc, id .. h)
	end
end

-- idle queues the ready time of a host left with nothing pending or
-- leased in W, which forgets it once it passes.
local function idle(h)
	if redis.call('EXISTS', hkey(h)) == 0 and not redis.call('HGET', N, h) then
		local t = redis.call('HGET', T, h)
		if t then redis.call('ZADD', W, t, h) end
	end
end

-- freeSlots ends k of a host's leases: a blocked host may give again.
local function freeSlots(h, k)
	if redis.call('HINCRBY', N, h, -k) <= 0 then redis.call('HDEL', N, h) end
	if redis.call('ZREM', B, h) == 1 then
		local hid, sc = head(h)
		if hid then redis.call('ZADD', R, sc, hid .. h) end
	end
end
local function unhold(id, h, owner)
	redis.call('ZREM', X, id)
	redis.call('SREM', OP .. owner, id)
	freeSlots(h, 1)
end

-- requeue puts an entry back among its host's pending ones, in its place.
local function requeue(id)
	local r = redis.call('HGET', E, id)
	if not r then return end
	local prio, h = unrec(r)
	local old = head(h)
	redis.call('ZADD', hkey(h), -prio, id)
	redis.call('ZADD', F, 0, id)
	reindex(h, old)
end

-- due requeues the released entries whose not-before passed, expire those
-- whose lease ran out (taken over: the old lease ID stops working).
local function due(snow)
	for _, id in ipairs(redis.call('ZRANGEBYSCORE', D, '-inf', snow, 'LIMIT', 0, 1000)) do
		redis.call('ZREM', D, id)
		requeue(id)
	end
end
local function expire(snow)
	for _, id in ipairs(redis.call('ZRANGEBYSCORE', X, '-inf', snow, 'LIMIT', 0, 1000)) do
		local v, r = redis.call('HGET', L, id), redis.call('HGET', E, id)
		if v and r then
			local _, d, owner = lrec(v)
			local _, h = unrec(r)
			unhold(id, h, owner)
			redis.call('HSET', L, id, ':' .. d .. ':')
			requeue(id)
		else
			redis.call('ZREM', X, id)
		end
	end
end

-- streamLane lists up to k pending entries of the stream (host "",
-- priority 0) in ID order: those delivered before and ready again
-- (old = true: expired leases, due releases), then new ones with their data.
local function streamLane(snow, k)
	local list = {}
	if k <= 0 or redis.call('EXISTS', Q) == 0 then return list end
	local cands = redis.call('ZRANGEBYSCORE', SX, '-inf', snow, 'LIMIT', 0, 1000)
	for _, id in ipairs(redis.call('ZRANGEBYSCORE', SD, '-inf', snow, 'LIMIT', 0, 1000)) do
		cands[#cands + 1] = id
	end
	local keyed = {}
	for i, id in ipairs(cands) do
		local m, s = idparts(id)
		keyed[i] = {id = id, m = m, s = s, old = true}
	end
	table.sort(keyed, function(a, b)
		if a.m ~= b.m then return a.m < b.m end
		return a.s < b.s
	end)
	for i = 1, math.min(#keyed, k) do list[i] = keyed[i] end
	if #list < k then
		local last = '0-0'
		for _, g in ipairs(redis.call('XINFO', 'GROUPS', Q)) do
			if field(g, 'name') == GROUP then last = field(g, 'last-delivered-id') end
		end
		for _, e in ipairs(redis.call('XRANGE', Q, '(' .. last, '+', 'COUNT', k - #list)) do
			local m, s = idparts(e[1])
			list[#list + 1] = {id = e[1], m = m, s = s, old = false, data = field(e[2], 'd')}
		end
	end
	return list
end
`

// hqPushAt defines pushAt, the push of hqPushScript and
// hqPushUnvisitedScript.
const hqPushAt = `
-- reheads is reindex for hosts that gained entries, batched: one call per
-- sorted set and not four per host. Each item is {h, old (the host's head
-- before, nil when it had none), id, sc (its new head and score)}. A host
-- that had no head goes to R unless it waits (W) or is at its limit (B).
local function reheads(items)
	if #items == 0 then return end
	local olds, oldAt, news, newAt = {}, {}, {}, {}
	for i, x in ipairs(items) do
		if x.old then
			olds[#olds + 1] = x.old .. x.h
			oldAt[#olds] = i
		else
			news[#news + 1] = x.h
			newAt[#news] = i
		end
	end
	local inR, inW, inB = mscore(R, olds), mscore(W, news), mscore(B, news)
	local toR, rrem = {}, {}
	for j, i in ipairs(oldAt) do
		if inR[j] then
			toR[i] = true
			rrem[#rrem + 1] = olds[j]
		end
	end
	for j, i in ipairs(newAt) do
		if not inW[j] and not inB[j] then toR[i] = true end
	end
	local aadd, radd = {}, {}
	for i, x in ipairs(items) do
		aadd[#aadd + 1] = x.sc
		aadd[#aadd + 1] = x.id .. x.h
		if toR[i] then
			radd[#radd + 1] = x.sc
			radd[#radd + 1] = x.id .. x.h
		end
	end
	batch('ZREM', A, olds)
	batch('ZREM', R, rrem)
	batch('ZADD', A, aadd)
	batch('ZADD', R, radd)
end
-- pushAt appends, all or none, the entries whose host, priority and data
-- are ARGV[i], ARGV[i + 1] and ARGV[i + 2] for each i of at, with IDs from
-- the server's clock, or, when proposed, the IDs proposed in ARGV[i + 3]
-- unless the partition issued a later one. An entry of host "" and
-- priority 0 is appended to the stream, as Push does; the others go to
-- their hosts. It returns false, pushing nothing, when they do not all
-- fit in max (0: no limit).
local function pushAt(max, at, proposed)
	if #at == 0 then return true end
	if max > 0 and redis.call('XLEN', Q) + redis.call('HLEN', E) + #at > max then
		return false
	end
	local ms, seq = 0, -1
	if not proposed then ms = nowms() end
	local last = redis.call('GET', LAST)
	if not last then
		local e = redis.call('XREVRANGE', Q, '+', '-', 'COUNT', 1)
		if e[1] then last = e[1][1] end
	end
	if last then
		local lm, ls = idparts(last)
		if lm > ms or (lm == ms and ls > seq) then ms, seq = lm, ls end
	end
	local touched, best, ensured = {}, {}, false
	local eargs, fargs, hargs = {}, {}, {}
	for _, i in ipairs(at) do
		local h, p, data = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
		local pm, ps
		if proposed then pm, ps = idparts(ARGV[i + 3]) end
		if pm and (pm > ms or (pm == ms and ps > seq)) then
			ms, seq = pm, ps
		else
			seq = seq + 1
			if seq > 999999 then ms, seq = ms + 1, 0 end
		end
		if h == '' and p == 0 then
			if not ensured then
				ensure(Q, GROUP)
				ensured = true
			end
			local r = redis.pcall('XADD', Q, ms .. '-' .. seq, 'd', data)
			if type(r) == 'table' and r.err then
				ms, seq = idparts(redis.call('XADD', Q, '*', 'd', data))
			end
		else
			local id = fid(ms, seq)
			if touched[h] == nil then
				local hid, sc = head(h)
				touched[h] = {id = hid, sc = sc}
				hargs[h] = {}
			end
			-- The best entry pushed to h: the first of the highest priority.
			local b = best[h]
			if not b or p > b.p then best[h] = {id = id, p = p} end
			local hl = hargs[h]
			hl[#hl + 1] = -p
			hl[#hl + 1] = id
			eargs[#eargs + 1] = id
			eargs[#eargs + 1] = ARGV[i + 1] .. ':' .. #h .. ':' .. h .. data
			fargs[#fargs + 1] = 0
			fargs[#fargs + 1] = id
		end
	end
	batch('HSET', E, eargs)
	batch('ZADD', F, fargs)
	for h, hl in pairs(hargs) do batch('ZADD', hkey(h), hl) end
	redis.call('SET', LAST, ms .. '-' .. seq)
	-- A host's head changes when its best entry pushed comes before the
	-- head it had (by score, then ID).
	local items = {}
	for h, t in pairs(touched) do
		local b = best[h]
		local osc = num(t.sc)
		if not t.id or -b.p < osc or (-b.p == osc and b.id < t.id) then
			items[#items + 1] = {h = h, old = t.id, id = b.id, sc = -b.p}
		end
	end
	reheads(items)
	return true
end
`

// hqPushScript: ARGV[5] maxSize, [6] the stride of the entries that
// follow: 3 for host/priority/data triples, whose IDs the server's clock
// gives, 4 when each triple is followed by a proposed ID (a partitioned
// frontier's, from the pushing process's clock), taken unless the
// partition issued a later one (see pushAt). Returns {1, replicas}, or
// {0, replicas} when the entries do not all fit (nothing is pushed).
const hqPushSrc = hqPrelude + hqPushAt + `
local stride = tonumber(ARGV[6])
local at = {}
for i = 7, #ARGV, stride do at[#at + 1] = i end
if not pushAt(tonumber(ARGV[5]), at, stride == 4) then return {0, replicas} end
return {1, replicas}
`

var hqPushScript = redis.NewScript(hqPushSrc)

// hqPushUnvisitedScript is pushUnvisitedScript for hosted entries: KEYS
// as hqKeys, then the visited set of each entry; ARGV[5] maxSize, then per
// entry its member of the visited set, host, priority and data, in the
// order of KEYS[18:]. The entries whose members are absent are pushed as
// hqPushScript pushes (IDs from the server's clock). Returns {full,
// pushed..., replicas}: full is 1 when those would not all fit (nothing is
// pushed), and pushed[i] is 1 when the i-th entry was not visited.
const hqPushUnvisitedSrc = hqPrelude + hqPushAt + `
local out, at = {0}, {}
for k = 18, #KEYS do
	local i = 6 + (k - 18) * 4
	if redis.call('SISMEMBER', KEYS[k], ARGV[i]) == 1 then
		out[#out + 1] = 0
	else
		out[#out + 1] = 1
		at[#at + 1] = i + 1
	end
end
if not pushAt(tonumber(ARGV[5]), at, false) then
	out[1] = 1
end
out[#out + 1] = replicas
return out
`

var hqPushUnvisitedScript = redis.NewScript(hqPushUnvisitedSrc)

// hqLeaseCommon takes entries for the lease scripts, which set tok, me,
// snow and ttl: a hosted entry (its host's sorted set is trimmed by the
// caller), or one of the stream's (a new one is only counted, and read
// with XREADGROUP at the end by grantNew).
const hqLeaseCommon = `
-- readyOf returns a host's stored ready time (caller's ms) as a string,
-- "" when none: the last field of a lease row. Host "" has none.
local readyCache = {}
local function readyOf(h)
	if h == '' then return '' end
	local t = readyCache[h]
	if t == nil then
		t = redis.call('HGET', T, h) or ''
		readyCache[h] = t
	end
	return t
end
local hostedRows = {}
local function takeHosted(id, h, prio, out)
	out[#out + 1] = false
	hostedRows[#hostedRows + 1] = {row = #out, id = id, h = h, p = prio}
end
-- grantHosted leases the hosted entries taken (their hosts' sorted sets
-- are trimmed by the caller) and fills their rows.
local function grantHosted(out)
	if #hostedRows == 0 then return end
	local ids = {}
	for i, x in ipairs(hostedRows) do ids[i] = x.id end
	local prev, recs = mget(L, ids), mget(E, ids)
	local largs, xargs = {}, {}
	for i, x in ipairs(hostedRows) do
		local d = 1
		if prev[i] then
			local _, dd = lrec(prev[i])
			d = dd + 1
		end
		largs[#largs + 1] = x.id
		largs[#largs + 1] = tok .. ':' .. d .. ':' .. me
		xargs[#xargs + 1] = snow + ttl
		xargs[#xargs + 1] = x.id
		local _, _, at = unrec(recs[i])
		out[x.row] = {'h', x.id, string.sub(recs[i], at), d, x.h, x.p, readyOf(x.h)}
	end
	batch('HSET', L, largs)
	batch('ZADD', X, xargs)
	batch('SADD', O, ids)
	batch('ZREM', F, ids)
end
local newRows = {}
local function takeStream(c, out)
	if not c.old then
		out[#out + 1] = false
		newRows[#newRows + 1] = #out
		return true
	end
	local prev = redis.call('HGET', SL, c.id)
	redis.call('ZREM', SX, c.id)
	redis.call('ZREM', SD, c.id)
	local e = redis.call('XCLAIM', Q, GROUP, me, 0, c.id)[1]
	if e and e[2] then
		local d = 0
		if prev then d = tonumber(string.sub(prev, string.find(prev, ':', 1, true) + 1)) end
		redis.call('HSET', SL, c.id, tok .. ':' .. (d + 1))
		redis.call('ZADD', SX, snow + ttl, c.id)
		out[#out + 1] = {'s', c.id, field(e[2], 'd'), d + 1, '', 0, ''}
		return true
	end
	redis.call('HDEL', SL, c.id)
	return false
end
local function grantNew(out)
	if #newRows == 0 then return out end
	local res = redis.call('XREADGROUP', 'GROUP', GROUP, me, 'COUNT', #newRows, 'STREAMS', Q, '>')
	if res then
		for j, e in ipairs(res[1][2]) do
			redis.call('HSET', SL, e[1], tok .. ':1')
			redis.call('ZADD', SX, snow + ttl, e[1])
			if newRows[j] then out[newRows[j]] = {'s', e[1], field(e[2], 'd'), 1, '', 0, ''} end
		end
	end
	local rows = {}
	for _, r in ipairs(out) do
		if r then rows[#rows + 1] = r end
	end
	return rows
end
`

// hqLeaseHostsScript: ARGV[5] now (the caller's ms), [6] n, [7] perHost,
// [8] ttl ms, [9] token, [10] consumer, [11] "1" to peek: list the keys
// {priority, ms, seq} of the entries a lease would take, taking none (a
// partitioned frontier merges the partitions' lists, then leases). Returns
// rows {kind ("h" hosted, "s" stream), ID, data, deliveries, host,
// priority, the host's ready time in ms or ""} in lease order.
//
// Hosts come from R in order, merged in a heap with the entries of the
// hosts already opened (and the stream's, host "" at priority 0), so that
// the entries are taken best first across hosts, each host giving at most
// its quota. R is read by rank and changed only at the end, so its order
// holds while the loop reads it.
const hqLeaseHostsSrc = hqPrelude + `
local cnow, n, per, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local tok, me, peek = ARGV[9], ARGV[10], ARGV[11] == '1'
local snow = nowms()
` + hqLeaseCommon + `
due(snow)
expire(snow)

-- The hosts' leased counts, read a page of R at a time with their ready
-- times (readyCache): a call per page and not two per host.
local leasedCache = {}
local function leasedOf(h)
	local c = leasedCache[h]
	if c == nil then
		c = leased(h)
		leasedCache[h] = c
	end
	return c
end
local function prefetch(hs)
	if #hs == 0 then return end
	local ts, ns = mget(T, hs), mget(N, hs)
	for i, h in ipairs(hs) do
		readyCache[h] = ts[i] or ''
		leasedCache[h] = tonumber(ns[i] or '0')
	end
end

-- promote moves hosts out of key (W or B) into R at their heads, with
-- one call per host (its head) and the rest batched. It returns the hosts
-- that have no pending entry.
local function promote(key, hs)
	local none = {}
	if #hs == 0 then return none end
	batch('ZREM', key, hs)
	local radd = {}
	for _, h in ipairs(hs) do
		local id, sc = head(h)
		if id then
			radd[#radd + 1] = sc
			radd[#radd + 1] = id .. h
		else
			none[#none + 1] = h
		end
	end
	batch('ZADD', R, radd)
	return none
end
do
	-- A host without entries forgets its ready time once it passed,
	-- unless it still holds leases.
	local none = promote(W, redis.call('ZRANGEBYSCORE', W, '-inf', cnow, 'LIMIT', 0, 1000))
	local ns, forget = mget(N, none), {}
	for i, h in ipairs(none) do
		if not ns[i] then forget[#forget + 1] = h end
	end
	batch('HDEL', T, forget)
end
if per > 0 then
	promote(B, redis.call('ZRANGEBYSCORE', B, '-inf', '(' .. per, 'LIMIT', 0, 1000))
else
	promote(B, redis.call('ZRANGE', B, 0, 999))
end

-- Host "" (entries whose host the store was not told) has no ready
-- time and no per-host limit.
local function waits(h)
	local t = num(readyOf(h))
	if t and t > cnow then return t end
	return nil
end
local unlimited = {v = math.huge}
local function quota(h)
	if per <= 0 or h == '' then return unlimited end
	return {v = per - leasedOf(h)}
end

local heap = {}
local function before(a, b)
	if a.p ~= b.p then return a.p > b.p end
	if a.m ~= b.m then return a.m < b.m end
	return a.s < b.s
end
local function hpush(x)
	heap[#heap + 1] = x
	local i = #heap
	while i > 1 do
		local j = math.floor(i / 2)
		if not before(heap[i], heap[j]) then break end
		heap[i], heap[j] = heap[j], heap[i]
		i = j
	end
end
local function hpop()
	local top = heap[1]
	heap[1] = heap[#heap]
	heap[#heap] = nil
	local i = 1
	while true do
		local l, r, m = 2 * i, 2 * i + 1, i
		if l <= #heap and before(heap[l], heap[m]) then m = l end
		if r <= #heap and before(heap[r], heap[m]) then m = r end
		if m == i then break end
		heap[i], heap[m] = heap[m], heap[i]
		i = m
	end
	return top
end
local function offer(src)
	local c = src.list[src.i]
	if c and src.q.v > 0 then
		c.src = src
		hpush(c)
	end
end

do
	local list = streamLane(snow, n)
	for _, c in ipairs(list) do c.p = 0 end
	offer({stream = true, list = list, i = 1, q = quota(''), h = ''})
end

-- R is read a page at a time: as many hosts as entries are asked for
-- (each ready host gives one at least), 8 at least, 64 at most.
local rsize = math.max(8, math.min(64, n))
local rpage, rpi, rpos, rdone = {}, 1, 0, false
local function nextR()
	if rpi > #rpage then
		if rdone then return nil end
		rpage = redis.call('ZRANGE', R, rpos, rpos + rsize - 1, 'WITHSCORES')
		rpos, rpi = rpos + rsize, 1
		if #rpage < 2 * rsize then rdone = true end
		if #rpage == 0 then return nil end
		local hs = {}
		for i = 1, #rpage, 2 do
			local h = string.sub(rpage[i], 21)
			if h ~= '' then hs[#hs + 1] = h end
		end
		prefetch(hs)
	end
	local mem, sc = rpage[rpi], rpage[rpi + 1]
	rpi = rpi + 2
	local m, s = idparts(string.sub(mem, 1, 20))
	return {p = -tonumber(sc), m = m, s = s, mem = mem, h = string.sub(mem, 21)}
end

local out, srcs, moves = {}, {}, {}
local rc = nextR()
while #out < n do
	local top = heap[1]
	if rc and (not top or before(rc, top)) then
		local h = rc.h
		local t = waits(h)
		if t then
			moves[#moves + 1] = {rc.mem, h, W, t}
		else
			local q = quota(h)
			if q.v <= 0 then
				if h ~= '' then moves[#moves + 1] = {rc.mem, h, B, leasedOf(h)} end
			else
				-- One entry more than the host may give: the head it is
				-- left with, so that R and A learn it without another call.
				local want = math.min(q.v, n - #out)
				local z = redis.call('ZRANGE', hkey(h), 0, want, 'WITHSCORES')
				local list = {}
				for i = 1, math.min(#z, 2 * want), 2 do
					local m, s = idparts(z[i])
					list[#list + 1] = {id = z[i], sc = z[i + 1], p = -tonumber(z[i + 1]), m = m, s = s}
				end
				local after = false
				if #z > 2 * want then after = {id = z[2 * want + 1], sc = z[2 * want + 2]} end
				local src = {list = list, i = 1, q = q, h = h, mem = rc.mem, taken = 0, after = after}
				srcs[#srcs + 1] = src
				offer(src)
			end
		end
		rc = nextR()
	elseif top then
		hpop()
		local src = top.src
		if src.q.v > 0 then
			src.i = src.i + 1
			local took = true
			if peek then
				out[#out + 1] = {top.p, top.m, top.s}
			elseif src.stream then
				took = takeStream(top, out)
			else
				takeHosted(top.id, src.h, top.p, out)
			end
			if took then src.q.v = src.q.v - 1 end
			if not src.stream then src.taken = src.taken + 1 end
			offer(src)
		end
	else
		break
	end
end

-- The hosts that gave entries move in A and R (or to B, at their limit)
-- to the heads they are left with, in batched calls.
local rrem = {}
if not peek then
	local arem, aadd, radd, badd, nset = {}, {}, {}, {}, {}
	for _, src in ipairs(srcs) do
		local h, first = src.h, src.list[1]
		if not first then
			arem[#arem + 1] = src.mem
			rrem[#rrem + 1] = src.mem
		elseif src.taken > 0 then
			redis.call('ZREMRANGEBYRANK', hkey(h), 0, src.taken - 1)
			local now = leasedOf(h) + src.taken
			nset[#nset + 1] = h
			nset[#nset + 1] = now
			arem[#arem + 1] = first.id .. h
			rrem[#rrem + 1] = first.id .. h
			local nx = src.list[src.taken + 1] or src.after
			if nx then
				aadd[#aadd + 1] = nx.sc
				aadd[#aadd + 1] = nx.id .. h
				if per > 0 and h ~= '' and now >= per then
					badd[#badd + 1] = now
					badd[#badd + 1] = h
				else
					radd[#radd + 1] = nx.sc
					radd[#radd + 1] = nx.id .. h
				end
			end
		end
	end
	batch('ZREM', A, arem)
	batch('ZADD', A, aadd)
	batch('HSET', N, nset)
	batch('ZADD', B, badd)
	grantHosted(out)
	out = grantNew(out)
	-- R's removals go with the moves' below, then its additions.
	for _, mv in ipairs(moves) do rrem[#rrem + 1] = mv[1] end
	batch('ZREM', R, rrem)
	batch('ZADD', R, radd)
else
	for _, mv in ipairs(moves) do rrem[#rrem + 1] = mv[1] end
	batch('ZREM', R, rrem)
end
local wadd, badd = {}, {}
for _, mv in ipairs(moves) do
	local l = wadd
	if mv[3] == B then l = badd end
	l[#l + 1] = mv[4]
	l[#l + 1] = mv[2]
end
batch('ZADD', W, wadd)
batch('ZADD', B, badd)
return out
`

var hqLeaseHostsScript = redis.NewScript(hqLeaseHostsSrc)

// hqLeaseScript is Lease over both kinds of entries: ARGV[5] n, [6] ttl
// ms, [7] token, [8] consumer, [9] "1" to peek: list the IDs {ms, seq}
// of the entries a lease would take, taking none. Returns rows as
// hqLeaseHostsScript's, in push order.
//
// Without hosted entries it is the stream's lease of earlier versions:
// entries already delivered once (in the group's pending list) are older
// than any new entry, so the ready ones among them (expired leases, due
// releases) go first, lowest stream ID first; new entries fill the rest.
var hqLeaseScript = redis.NewScript(hqPrelude + `
local n, ttl, tok, me, peek = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9] == '1'
local snow = nowms()
` + hqLeaseCommon + `
if not peek and redis.call('EXISTS', E) == 0 then
	ensure(Q, GROUP)
	local cands = redis.call('ZRANGEBYSCORE', SX, '-inf', snow, 'LIMIT', 0, 1000)
	for _, id in ipairs(redis.call('ZRANGEBYSCORE', SD, '-inf', snow, 'LIMIT', 0, 1000)) do
		cands[#cands + 1] = id
	end
	table.sort(cands, function(a, b)
		local am, as = idparts(a)
		local bm, bs = idparts(b)
		if am ~= bm then return am < bm end
		return as < bs
	end)
	local out = {}
	for _, id in ipairs(cands) do
		if #out >= n then break end
		takeStream({id = id, old = true}, out)
	end
	if #out < n then
		local res = redis.call('XREADGROUP', 'GROUP', GROUP, me, 'COUNT', n - #out, 'STREAMS', Q, '>')
		if res then
			for _, e in ipairs(res[1][2]) do
				redis.call('HSET', SL, e[1], tok .. ':1')
				redis.call('ZADD', SX, snow + ttl, e[1])
				out[#out + 1] = {'s', e[1], field(e[2], 'd'), 1, '', 0, ''}
			end
		end
	end
	return out
end
due(snow)
expire(snow)
local lane = streamLane(snow, n)
local hosted = redis.call('ZRANGE', F, 0, n - 1)
local out, li, hi = {}, 1, 1
local touched, taken = {}, {}
while #out < n do
	local c, hid = lane[li], hosted[hi]
	local useHosted = false
	if hid then
		if not c then
			useHosted = true
		else
			local m, s = idparts(hid)
			useHosted = m < c.m or (m == c.m and s < c.s)
		end
	end
	if peek then
		if useHosted then
			hi = hi + 1
			out[#out + 1] = {idparts(hid)}
		elseif c then
			li = li + 1
			out[#out + 1] = {c.m, c.s}
		else
			break
		end
	elseif useHosted then
		hi = hi + 1
		local prio, h = unrec(redis.call('HGET', E, hid))
		if touched[h] == nil then
			touched[h] = head(h) or false
			taken[h] = {}
		end
		table.insert(taken[h], hid)
		takeHosted(hid, h, prio, out)
	elseif c then
		li = li + 1
		takeStream(c, out)
	else
		break
	end
end
if peek then return out end
for h, old in pairs(touched) do
	batch('ZREM', hkey(h), taken[h])
	local now = redis.call('HINCRBY', N, h, #taken[h])
	reindex(h, old or nil)
	if redis.call('ZSCORE', B, h) then redis.call('ZADD', B, now, h) end
end
grantHosted(out)
return grantNew(out)
`)

// hqAckScript is ackPagesScript over both kinds of lease: KEYS as
// hqKeys, then one pages hash per page; ARGV[5] the number of ID/token
// pairs, the pairs (a hosted entry's ID starts with "h"), then per page
// the 0-based index of its pair, its field and its value. Returns the
// indexes of pairs whose lease is not held, then replicas.
const hqAckSrc = hqPrelude + `
local np = tonumber(ARGV[5])
local acked, hp, seen = {}, {}, {}
for i = 0, np - 1 do
	local id, tok = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
	if string.sub(id, 1, 1) == 'h' then
		id = string.sub(id, 2)
		if not seen[id] and tok ~= '' then
			seen[id] = true
			hp[#hp + 1] = {i = i, id = id, tok = tok}
		end
	else
		local cur = redis.call('HGET', SL, id)
		if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
			redis.call('XACK', Q, GROUP, id)
			redis.call('XDEL', Q, id)
			redis.call('HDEL', SL, id)
			redis.call('ZREM', SX, id)
			redis.call('ZREM', SD, id)
			acked[i] = true
		end
	end
end
if #hp > 0 then
	local ids = {}
	for k, x in ipairs(hp) do ids[k] = x.id end
	local ls, rs = mget(L, ids), mget(E, ids)
	local del, byOwner, byHost = {}, {}, {}
	for k, x in ipairs(hp) do
		if ls[k] and rs[k] then
			local vt, _, owner = lrec(ls[k])
			if vt == x.tok then
				local _, h = unrec(rs[k])
				del[#del + 1] = x.id
				if not byOwner[owner] then byOwner[owner] = {} end
				table.insert(byOwner[owner], x.id)
				byHost[h] = (byHost[h] or 0) + 1
				acked[x.i] = true
			end
		end
	end
	batch('HDEL', E, del)
	batch('HDEL', L, del)
	batch('ZREM', X, del)
	for owner, l in pairs(byOwner) do batch('SREM', OP .. owner, l) end
	-- freeSlots and idle for every host at once: one call per host
	-- leaving B (its head, R's member), the rest batched.
	local hosts = {}
	for h in pairs(byHost) do hosts[#hosts + 1] = h end
	local ns, inB = mget(N, hosts), mscore(B, hosts)
	local nset, ndel, brem, radd, idles = {}, {}, {}, {}, {}
	for i, h in ipairs(hosts) do
		local c = tonumber(ns[i] or '0') - byHost[h]
		local pending = nil
		if inB[i] then
			brem[#brem + 1] = h
			local hid, sc = head(h)
			if hid then
				radd[#radd + 1] = sc
				radd[#radd + 1] = hid .. h
			end
			pending = hid ~= nil
		end
		if c > 0 then
			nset[#nset + 1] = h
			nset[#nset + 1] = c
		else
			ndel[#ndel + 1] = h
			if pending == nil then pending = redis.call('EXISTS', hkey(h)) == 1 end
			if not pending then idles[#idles + 1] = h end
		end
	end
	batch('HSET', N, nset)
	batch('HDEL', N, ndel)
	batch('ZREM', B, brem)
	batch('ZADD', R, radd)
	local ts, wadd = mget(T, idles), {}
	for i, h in ipairs(idles) do
		if ts[i] then
			wadd[#wadd + 1] = ts[i]
			wadd[#wadd + 1] = h
		end
	end
	batch('ZADD', W, wadd)
end
local base = 6 + 2 * np
for j = 18, #KEYS do
	local a = base + 3 * (j - 18)
	if acked[tonumber(ARGV[a])] then
		redis.call('HSET', KEYS[j], ARGV[a + 1], ARGV[a + 2])
	end
end
local unknown = {}
for i = 0, np - 1 do
	if not acked[i] then unknown[#unknown + 1] = i end
end
unknown[#unknown + 1] = replicas
return unknown
`

var hqAckScript = redis.NewScript(hqAckSrc)

// hqReleaseScript is releaseManyScript over both kinds of lease: ARGV[5]
// delay ms, [6] the not-before time in the caller's ms ("" for none, kept
// for Head), then ID/token pairs. Returns the indexes of pairs not held.
var hqReleaseScript = redis.NewScript(hqPrelude + `
local snow = nowms()
local delay = tonumber(ARGV[5])
local unknown = {}
for i = 7, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local ok = false
	if string.sub(id, 1, 1) == 'h' then
		id = string.sub(id, 2)
		local v, r = redis.call('HGET', L, id), redis.call('HGET', E, id)
		if v and r and tok ~= '' then
			local vt, d, owner = lrec(v)
			if vt == tok then
				local _, h = unrec(r)
				unhold(id, h, owner)
				if delay > 0 then
					redis.call('HSET', L, id, ':' .. d .. ':' .. ARGV[6])
					redis.call('ZADD', D, snow + delay, id)
					idle(h)
				else
					redis.call('HSET', L, id, ':' .. d .. ':')
					requeue(id)
				end
				ok = true
			end
		end
	else
		local cur = redis.call('HGET', SL, id)
		local c = cur and string.find(cur, ':', 1, true)
		if c and tok ~= '' and string.sub(cur, 1, c - 1) == tok then
			redis.call('HSET', SL, id, string.sub(cur, c))
			redis.call('ZREM', SX, id)
			redis.call('ZADD', SD, snow + delay, id)
			ok = true
		end
	end
	if not ok then unknown[#unknown + 1] = (i - 7) / 2 end
end
return unknown
`)

// hqRenewScript is renewScript over both kinds of lease: ARGV[5] ttl ms,
// then ID/token pairs. Returns the indexes of pairs not held.
var hqRenewScript = redis.NewScript(hqPrelude + `
local deadline = nowms() + tonumber(ARGV[5])
local unknown = {}
for i = 6, #ARGV, 2 do
	local id, tok = ARGV[i], ARGV[i + 1]
	local ok = false
	if string.sub(id, 1, 1) == 'h' then
		id = string.sub(id, 2)
		local v = redis.call('HGET', L, id)
		if v and tok ~= '' and lrec(v) == tok then
			redis.call('ZADD', X, deadline, id)
			ok = true
		end
	else
		local cur = redis.call('HGET', SL, id)
		if cur and tok ~= '' and string.sub(cur, 1, #tok + 1) == tok .. ':' then
			redis.call('ZADD', SX, deadline, id)
			ok = true
		end
	end
	if not ok then unknown[#unknown + 1] = (i - 6) / 2 end
end
return unknown
`)

// hqReleaseOwnScript: ARGV[5] this consumer, then hosted entry IDs (no
// "h") of its lease set. The leases it still holds are released, ready
// now; IDs it no longer holds leave the set.
var hqReleaseOwnScript = redis.NewScript(hqPrelude + `
for i = 6, #ARGV do
	local id = ARGV[i]
	local v, r = redis.call('HGET', L, id), redis.call('HGET', E, id)
	local held = false
	if v and r then
		local tok, d, owner = lrec(v)
		if tok ~= '' and owner == ARGV[5] then
			local _, h = unrec(r)
			unhold(id, h, owner)
			redis.call('HSET', L, id, ':' .. d .. ':')
			requeue(id)
			held = true
		end
	end
	if not held then redis.call('SREM', O, id) end
end
return 0
`)

// hqReadyScript: ARGV host/ms pairs. Each host keeps the later of its
// stored ready time and the one given, and waits in W for it (a blocked
// host has its time checked when it leaves B). Host "" is skipped: it has
// no ready time.
const hqReadySrc = hqPrelude + `
local hs, ts = {}, {}
for i = 5, #ARGV, 2 do
	if ARGV[i] ~= '' then
		hs[#hs + 1] = ARGV[i]
		ts[#ts + 1] = ARGV[i + 1]
	end
end
-- One call per host (its head, R's member), the rest batched.
local cur, inB = mget(T, hs), mscore(B, hs)
local tset, rrem, wadd = {}, {}, {}
for i, h in ipairs(hs) do
	local t = cur[i]
	if not t or tonumber(ts[i]) > tonumber(t) then
		t = ts[i]
		tset[#tset + 1] = h
		tset[#tset + 1] = t
	end
	if not inB[i] then
		local id = head(h)
		if id then rrem[#rrem + 1] = id .. h end
		wadd[#wadd + 1] = t
		wadd[#wadd + 1] = h
	end
end
batch('HSET', T, tset)
batch('ZREM', R, rrem)
batch('ZADD', W, wadd)
return 0
`

var hqReadyScript = redis.NewScript(hqReadySrc)

// hqHeadScript: ARGV[5] n. Returns {groups, delayed}: groups are {host,
// ready ms or "", head priority, head ms, head seq, entries}, hosts in
// their order, each entry {priority, ms, seq, data}; the stream's pending
// entries are one group of host "". delayed are entries waiting for their
// not-before: {host, priority, ms, seq, data, not-before ms, ready ms or ""}.
var hqHeadScript = redis.NewScript(hqPrelude + `
local n = tonumber(ARGV[5])
local snow = nowms()
due(snow)
expire(snow)
local groups, total = {}, 0
local function ready(h)
	if h == '' then return '' end
	return redis.call('HGET', T, h) or ''
end
local pos = 0
while total < n do
	local page = redis.call('ZRANGE', A, pos, pos + 63)
	pos = pos + 64
	for _, mem in ipairs(page) do
		if total >= n then break end
		local h = string.sub(mem, 21)
		local z = redis.call('ZRANGE', hkey(h), 0, n - total - 1, 'WITHSCORES')
		local es = {}
		for i = 1, #z, 2 do
			local m, s = idparts(z[i])
			local r = redis.call('HGET', E, z[i])
			local _, _, at = unrec(r)
			es[#es + 1] = {-tonumber(z[i + 1]), m, s, string.sub(r, at)}
		end
		total = total + #es
		if #es > 0 then
			groups[#groups + 1] = {h, ready(h), es[1][1], es[1][2], es[1][3], es}
		end
	end
	if #page < 64 then break end
end
local lane = streamLane(snow, n)
if #lane > 0 then
	local es = {}
	for _, c in ipairs(lane) do
		local data = c.data
		if c.old then
			local e = redis.call('XRANGE', Q, c.id, c.id)[1]
			data = e and field(e[2], 'd')
		end
		if data then es[#es + 1] = {0, c.m, c.s, data} end
	end
	if #es > 0 then
		groups[#groups + 1] = {'', '', 0, es[1][2], es[1][3], es}
	end
end
local delayed = {}
local z = redis.call('ZRANGE', D, 0, n - 1, 'WITHSCORES')
for i = 1, #z, 2 do
	local r, v = redis.call('HGET', E, z[i]), redis.call('HGET', L, z[i])
	if r then
		local prio, h, at = unrec(r)
		local nb = z[i + 1]
		if v then
			local _, _, rest = lrec(v)
			if rest ~= '' then nb = rest end
		end
		local m, s = idparts(z[i])
		delayed[#delayed + 1] = {h, prio, m, s, string.sub(r, at), nb, ready(h)}
	end
end
if redis.call('EXISTS', Q) == 1 then
	z = redis.call('ZRANGEBYSCORE', SD, '(' .. snow, '+inf', 'WITHSCORES', 'LIMIT', 0, n)
	for i = 1, #z, 2 do
		local e = redis.call('XRANGE', Q, z[i], z[i])[1]
		if e then
			local m, s = idparts(z[i])
			delayed[#delayed + 1] = {'', 0, m, s, field(e[2], 'd'), z[i + 1], ''}
		end
	end
end
return {groups, delayed}
`)

// hqLenScript: Len over both kinds of entries. Returns {ready, delayed,
// leased}; expired leases and due releases count as ready.
var hqLenScript = redis.NewScript(hqPrelude + `
local snow = nowms()
local leased = redis.call('ZCOUNT', SX, '(' .. snow, '+inf') + redis.call('ZCOUNT', X, '(' .. snow, '+inf')
local delayed = redis.call('ZCOUNT', SD, '(' .. snow, '+inf') + redis.call('ZCOUNT', D, '(' .. snow, '+inf')
return {redis.call('XLEN', Q) + redis.call('HLEN', E) - leased - delayed, delayed, leased}
`)
