package acl

import "strings"

// redisNames are the commands and subcommands of Redis 7.0 (COMMAND of redis-server 7.0.15,
// lower case, subcommands as container|sub). A rule may name one tallyd does not serve, so
// that an ACL file written for Redis loads: such a rule is kept (ACL LIST shows it) and
// permits nothing. A name neither tallyd nor Redis knows is an error, as in Redis, so that a
// typo in a rule that denies never goes unnoticed.
var redisNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(redis70) {
		m[n] = true
	}
	return m
}()

const redis70 = `
acl acl|cat acl|deluser acl|dryrun acl|genpass acl|getuser acl|help acl|list acl|load
acl|log acl|save acl|setuser acl|users acl|whoami append asking auth bgrewriteaof bgsave
bitcount bitfield bitfield_ro bitop bitpos blmove blmpop blpop brpop brpoplpush bzmpop
bzpopmax bzpopmin client client|caching client|getname client|getredir client|help client|id
client|info client|kill client|list client|no-evict client|pause client|reply client|setname
client|tracking client|trackinginfo client|unblock client|unpause cluster cluster|addslots
cluster|addslotsrange cluster|bumpepoch cluster|count-failure-reports
cluster|countkeysinslot cluster|delslots cluster|delslotsrange cluster|failover
cluster|flushslots cluster|forget cluster|getkeysinslot cluster|help cluster|info
cluster|keyslot cluster|links cluster|meet cluster|myid cluster|nodes cluster|replicas
cluster|replicate cluster|reset cluster|saveconfig cluster|set-config-epoch cluster|setslot
cluster|shards cluster|slaves cluster|slots command command|count command|docs
command|getkeys command|getkeysandflags command|help command|info command|list config
config|get config|help config|resetstat config|rewrite config|set copy dbsize debug decr
decrby del discard dump echo eval eval_ro evalsha evalsha_ro exec exists expire expireat
expiretime failover fcall fcall_ro flushall flushdb function function|delete function|dump
function|flush function|help function|kill function|list function|load function|restore
function|stats geoadd geodist geohash geopos georadius georadius_ro georadiusbymember
georadiusbymember_ro geosearch geosearchstore get getbit getdel getex getrange getset hdel
hello hexists hget hgetall hincrby hincrbyfloat hkeys hlen hmget hmset hrandfield hscan hset
hsetnx hstrlen hvals incr incrby incrbyfloat info keys lastsave latency latency|doctor
latency|graph latency|help latency|histogram latency|history latency|latest latency|reset
lcs lindex linsert llen lmove lmpop lolwut lpop lpos lpush lpushx lrange lrem lset ltrim
memory memory|doctor memory|help memory|malloc-stats memory|purge memory|stats memory|usage
mget migrate module module|help module|list module|load module|loadex module|unload monitor
move mset msetnx multi object object|encoding object|freq object|help object|idletime
object|refcount persist pexpire pexpireat pexpiretime pfadd pfcount pfdebug pfmerge
pfselftest ping psetex psubscribe psync pttl publish pubsub pubsub|channels pubsub|help
pubsub|numpat pubsub|numsub pubsub|shardchannels pubsub|shardnumsub punsubscribe quit
randomkey readonly readwrite rename renamenx replconf replicaof reset restore restore-asking
role rpop rpoplpush rpush rpushx sadd save scan scard script script|debug script|exists
script|flush script|help script|kill script|load sdiff sdiffstore select set setbit setex
setnx setrange shutdown sinter sintercard sinterstore sismember slaveof slowlog slowlog|get
slowlog|help slowlog|len slowlog|reset smembers smismember smove sort sort_ro spop spublish
srandmember srem sscan ssubscribe strlen subscribe substr sunion sunionstore sunsubscribe
swapdb sync time touch ttl type unlink unsubscribe unwatch wait watch xack xadd xautoclaim
xclaim xdel xgroup xgroup|create xgroup|createconsumer xgroup|delconsumer xgroup|destroy
xgroup|help xgroup|setid xinfo xinfo|consumers xinfo|groups xinfo|help xinfo|stream xlen
xpending xrange xread xreadgroup xrevrange xsetid xtrim zadd zcard zcount zdiff zdiffstore
zincrby zinter zintercard zinterstore zlexcount zmpop zmscore zpopmax zpopmin zrandmember
zrange zrangebylex zrangebyscore zrangestore zrank zrem zremrangebylex zremrangebyrank
zremrangebyscore zrevrange zrevrangebylex zrevrangebyscore zrevrank zscan zscore zunion
zunionstore
`
