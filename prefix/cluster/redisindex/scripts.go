package redisindex

// The two scripts of llm-d's layout, written for this package (their behaviour is
// llm-d's, pkg/kvcache/kvblock/redis.go at 7be76e1): they run atomically in Redis, so a
// concurrent writer (another router replica, llm-d's scheduler) cannot add a pod to a
// hash between the check and the delete.

// pruneRequestKey deletes KEYS[1], a block's hash, when no entry is left in it.
const pruneRequestKey = `
if redis.call('HLEN', KEYS[1]) == 0 then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0`

// pruneEngineKey deletes KEYS[1], an engine:<hash> sorted set, when every block hash it
// maps to (KEYS[2..]) is empty.
const pruneEngineKey = `
for i = 2, #KEYS do
	if redis.call('HLEN', KEYS[i]) > 0 then
		return 0
	end
end
redis.call('DEL', KEYS[1])
return 1`
