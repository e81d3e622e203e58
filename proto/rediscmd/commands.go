// Package rediscmd is the Redis-text side of slock's port: the command table (commands.go),
// one parse per command family (kv.go: SET, GET, INCR, ...; hash.go, cas.go, scan.go,
// fence.go; text.go: slock's own LOCK, UNLOCK and PUSH), and the renders of their replies.
// It builds the lock commands the text commands run as from proto/slock's frames, and knows
// no server: the loop runs what it parses.
package rediscmd

import (
	"strings"

	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file is the Redis-text command table, after Redis's server.c: every
// command slock's text side serves, with its arity and flags, and the parse
// of a command line into a typed Request (each command's parse function). The server
// looks a command up once, checks its arity here, and runs its handler from a table
// indexed by Spec.Index.

// Cmd is a Redis-text command, or a family of them (CmdKV: Spec.Op tells which).
type Cmd uint8

// Commands. CmdNone is no command.
const (
	CmdNone Cmd = iota
	CmdLock
	CmdUnlock
	CmdPush
	CmdPing
	CmdEcho
	CmdQuit
	CmdSelect
	CmdTimeout
	CmdInfo
	CmdConfig
	CmdClient
	CmdCommand
	CmdKV // a key/value command run as a lock command (kv.go)
	CmdMGet
	CmdMSet
	CmdMSetNX
	CmdMulti
	CmdExec
	CmdDiscard
	CmdWatch
	CmdUnwatch
	CmdHello
	CmdHash // a hash command (hash.go: Spec.Hash tells which)
	CmdScan
	CmdConsistency // CONSISTENCY [ONE|QUORUM|ALL]: the connection's consistency level (cluster)
	CmdCluster     // CLUSTER ADD|REMOVE: membership of a tallyd cluster
	CmdToken       // TOKEN key [LOCK_ID id]: a holder's fencing token (fence.go)
	CmdGetFence    // GETFENCE key: the highest token a fenced write presented to key
	CmdAuth        // AUTH [user] password
	CmdACL         // ACL WHOAMI|LIST|CAT|LOAD|USERS
	CmdSlowlog     // SLOWLOG GET [n]|LEN|RESET|HELP: the commands that ran longer than a threshold
	CmdWait        // WAIT numreplicas timeout: how many other voters hold the connection's last write
	CmdEval        // EVAL, EVALSHA, EVAL_RO, EVALSHA_RO: a Lua script (script/)
	CmdScript      // SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP: the script cache
	CmdSnapshot    // SNAPSHOT: a backup file of the store (loop/backup.go)
)

// Pub/sub commands: numbered from 200, apart from the list above, which grows.
const (
	CmdSubscribe    Cmd = 200 + iota // SUBSCRIBE channel...
	CmdUnsubscribe                   // UNSUBSCRIBE [channel...]
	CmdPSubscribe                    // PSUBSCRIBE pattern...
	CmdPUnsubscribe                  // PUNSUBSCRIBE [pattern...]
	CmdPublish                       // PUBLISH channel message
	CmdPubsub                        // PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP
	CmdReset                         // RESET: the connection's state as a new one's
)

// CmdFlags are a command's properties.
type CmdFlags uint16

// Command flags.
const (
	CmdWrite        CmdFlags = 1 << iota // may change a key
	CmdReadonly                          // reads keys only
	CmdMayWait                           // may wait for a lock (inside EXEC it never waits: timeout 0)
	CmdAdmin                             // server administration
	CmdTx                                // transaction control: runs at once inside MULTI, not queued
	CmdDenyOOM                           // may add data: refused beyond the memory budget (Redis's denyoom)
	CmdNoAuth                            // runs before the connection has authenticated (Redis's no_auth)
	CmdMayReplicate                      // changes no key but is replicated (PUBLISH): a write for a read-only script (Redis's may_replicate)
)

// Spec is one command of the table.
type Spec struct {
	Name  string // canonical name, upper case (error texts use it in lower case)
	Cmd   Cmd
	Op    Op  // for CmdKV
	Arity int // argument count with the name: n exactly, or with -n at least n
	Flags CmdFlags
	Hash  HashOp       // for CmdHash
	ACL   acl.Category // its ACL categories, as Redis 7.0 gives them (tallyd's own: @lock, @cluster)
	Keys  KeySpec      // which arguments are keys, for ACL key patterns
	Route Route        // where it runs on a cluster member that does not lead
	parse parseFn      // its parse (nil: nothing to parse)
	Subs  []SubSpec    // a container's subcommands (CONFIG GET, ...), each with its own categories
	Index int          // its place in Commands(), for tables indexed by command (the loop's handlers)
	id    int          // its id in ACLTable
}

// Route says where a command runs on a cluster member that does not lead, decided once
// for each command here: the loop's parse (may it wait?) and its run (forwarded or not?)
// both read it.
type Route uint8

// Routes.
const (
	RouteData   Route = iota // the data's: forwarded to the leader; a read (CmdReadonly) at consistency ONE runs here
	RouteLeader              // always forwarded: the leader's alone (CLUSTER)
	RouteMember              // answered by the member the client is connected to: its own state (INFO, CONFIG), its subscriptions
	RouteConn                // the connection's own settings: answered here, with no read barrier
	RouteUser                // the member's own users (AUTH, ACL): as RouteConn, and never forwarded, even in a forwarded MULTI
)

// parseFn parses the command line args of its command, its arity checked, into r: Parse's
// contract.
type parseFn func(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error)

// SubSpec is a subcommand: its name, arity (the command's name included) and categories.
type SubSpec struct {
	Name  string
	Arity int
	ACL   acl.Category
	id    int
}

// KeySpec says which arguments of a command line are keys, as Redis's legacy key spec: from
// First to Last (negative: counted from the end, -1 the last) every Step-th; First 0 when
// there are none. Lock is slock's LOCK, UNLOCK and PUSH: the key, and the key of each inner
// command an EXECUTE option carries.
type KeySpec struct {
	First, Last, Step int8
	Lock              bool
	Eval              bool // EVAL's: numkeys at args[2], then that many keys
}

// The key specs of the table.
var (
	keysNone  = KeySpec{}
	keysOne   = KeySpec{1, 1, 1, false, false}
	keysAll   = KeySpec{1, -1, 1, false, false}
	keysPairs = KeySpec{1, -1, 2, false, false}
	keysLock  = KeySpec{1, 1, 1, true, false}
	keysEval  = KeySpec{3, -1, 1, false, true}
)

// Categories, shorter, for the table.
const (
	aKeyspace   = acl.Keyspace
	aRead       = acl.Read
	aWrite      = acl.Write
	aHash       = acl.Hash
	aString     = acl.String
	aAdmin      = acl.Admin
	aFast       = acl.Fast
	aSlow       = acl.Slow
	aBlocking   = acl.Blocking
	aDangerous  = acl.Dangerous
	aConnection = acl.Connection
	aTx         = acl.Transaction
	aLock       = acl.Lock
	aCluster    = acl.Cluster
	aScripting  = acl.Scripting
	aPubSub     = acl.PubSub
	aAdminCmd   = aAdmin | aSlow | aDangerous // CONFIG GET, ACL LIST, ...
)

// ArityOK reports whether a command line of n arguments (the name included) has the
// arity of s.
func (s *Spec) ArityOK(n int) bool {
	if s.Arity < 0 {
		return n >= -s.Arity
	}
	return n == s.Arity
}

// ArityError is the error for a command line of s with the wrong number of arguments.
func (s *Spec) ArityError() error { return arity(s.Name) }

// row is a line of the table: a Spec but for its subcommands, index and id.
type row struct {
	Name  string
	Cmd   Cmd
	Op    Op
	Arity int
	Flags CmdFlags
	Hash  HashOp
	ACL   acl.Category
	Keys  KeySpec
	Route Route
	Parse parseFn
}

// table is the command table. slock's own commands (LOCK, UNLOCK, PUSH, TIMEOUT) take -1:
// their parse answers slock's own count error, as the reference server does. The categories
// are Redis 7.0's (COMMAND INFO), tallyd's commands' its own (docs/security.md).
var table = []row{
	{"LOCK", CmdLock, OpNone, -1, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone, aWrite | aSlow | aBlocking | aLock, keysLock, RouteData, parseLock},
	{"UNLOCK", CmdUnlock, OpNone, -1, CmdWrite, HashNone, aWrite | aFast | aLock, keysLock, RouteData, parseLock},
	{"PUSH", CmdPush, OpNone, -1, CmdWrite | CmdDenyOOM, HashNone, aWrite | aFast | aLock, keysLock, RouteData, parseLock},
	{"PING", CmdPing, OpNone, -1, 0, HashNone, aFast | aConnection, keysNone, RouteConn, parsePing},
	{"ECHO", CmdEcho, OpNone, 2, 0, HashNone, aFast | aConnection, keysNone, RouteConn, parseArg},
	{"QUIT", CmdQuit, OpNone, -1, CmdTx | CmdNoAuth, HashNone, aFast | aConnection, keysNone, RouteConn, nil},
	{"SELECT", CmdSelect, OpNone, 2, 0, HashNone, aFast | aConnection, keysNone, RouteConn, parseSelect},
	{"TIMEOUT", CmdTimeout, OpNone, -1, 0, HashNone, aFast | aConnection, keysNone, RouteConn, parseTimeout},
	{"INFO", CmdInfo, OpNone, -1, 0, HashNone, aSlow | aDangerous, keysNone, RouteMember, nil},
	{"CONFIG", CmdConfig, OpNone, -2, CmdAdmin, HashNone, aSlow, keysNone, RouteMember, parseArg},
	{"CLIENT", CmdClient, OpNone, -2, CmdAdmin, HashNone, aSlow, keysNone, RouteConn, parseArg},
	{"COMMAND", CmdCommand, OpNone, -1, 0, HashNone, aSlow | aConnection, keysNone, RouteConn, parseArg},
	{"HELLO", CmdHello, OpNone, -1, CmdNoAuth, HashNone, aFast | aConnection, keysNone, RouteConn, parseHello},
	{"MULTI", CmdMulti, OpNone, 1, CmdTx, HashNone, aFast | aTx, keysNone, RouteData, nil},
	{"EXEC", CmdExec, OpNone, 1, CmdTx, HashNone, aSlow | aTx, keysNone, RouteData, nil},
	{"DISCARD", CmdDiscard, OpNone, 1, CmdTx, HashNone, aFast | aTx, keysNone, RouteData, nil},
	{"WATCH", CmdWatch, OpNone, -2, CmdTx, HashNone, aFast | aTx, keysAll, RouteData, nil},
	{"UNWATCH", CmdUnwatch, OpNone, 1, 0, HashNone, aFast | aTx, keysNone, RouteData, nil},
	{"CONSISTENCY", CmdConsistency, OpNone, -1, 0, HashNone, aFast | aConnection | aCluster, keysNone, RouteConn, nil},
	{"CLUSTER", CmdCluster, OpNone, -2, CmdAdmin, HashNone, aAdminCmd | aCluster, keysNone, RouteLeader, nil},
	{"TOKEN", CmdToken, OpNone, -2, CmdReadonly, HashNone, aRead | aFast | aLock, keysOne, RouteData, nil},
	{"GETFENCE", CmdGetFence, OpNone, 2, CmdReadonly, HashNone, aRead | aFast | aLock, keysOne, RouteData, nil},
	{"AUTH", CmdAuth, OpNone, -2, CmdNoAuth, HashNone, aFast | aConnection, keysNone, RouteUser, nil},
	{"ACL", CmdACL, OpNone, -2, 0, HashNone, aSlow, keysNone, RouteUser, nil},
	{"SLOWLOG", CmdSlowlog, OpNone, -2, CmdAdmin, HashNone, aSlow, keysNone, RouteData, nil},
	{"EVAL", CmdEval, OpNone, -3, 0, HashNone, aSlow | aScripting, keysEval, RouteData, nil},
	{"EVALSHA", CmdEval, OpNone, -3, 0, HashNone, aSlow | aScripting, keysEval, RouteData, nil},
	{"EVAL_RO", CmdEval, OpNone, -3, 0, HashNone, aSlow | aScripting, keysEval, RouteData, nil},
	{"EVALSHA_RO", CmdEval, OpNone, -3, 0, HashNone, aSlow | aScripting, keysEval, RouteData, nil},
	{"SCRIPT", CmdScript, OpNone, -2, 0, HashNone, aSlow, keysNone, RouteData, nil},
	{"SNAPSHOT", CmdSnapshot, OpNone, 1, CmdAdmin, HashNone, aAdminCmd, keysNone, RouteMember, nil}, // tallyd's own: a backup of any member's store
	{"SUBSCRIBE", CmdSubscribe, OpNone, -2, 0, HashNone, aPubSub | aSlow, keysNone, RouteMember, nil},
	{"UNSUBSCRIBE", CmdUnsubscribe, OpNone, -1, 0, HashNone, aPubSub | aSlow, keysNone, RouteMember, nil},
	{"PSUBSCRIBE", CmdPSubscribe, OpNone, -2, 0, HashNone, aPubSub | aSlow, keysNone, RouteMember, nil},
	{"PUNSUBSCRIBE", CmdPUnsubscribe, OpNone, -1, 0, HashNone, aPubSub | aSlow, keysNone, RouteMember, nil},
	{"PUBLISH", CmdPublish, OpNone, 3, CmdMayReplicate, HashNone, aPubSub | aFast, keysNone, RouteData, nil}, // forwarded: the raft log relays it to every member
	{"PUBSUB", CmdPubsub, OpNone, -2, 0, HashNone, aSlow, keysNone, RouteMember, nil},
	{"RESET", CmdReset, OpNone, 1, CmdTx | CmdNoAuth, HashNone, aFast | aConnection, keysNone, RouteData, nil},

	{"SET", CmdKV, OpSet, -3, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone, aWrite | aString | aSlow, keysOne, RouteData, parseSet},
	{"SETEX", CmdKV, OpSet, 4, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aSlow, keysOne, RouteData, parseSetEx},
	{"PSETEX", CmdKV, OpSet, 4, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aSlow, keysOne, RouteData, parsePSetEx},
	{"GETSET", CmdKV, OpGetSet, 3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseGetSet},
	{"SETNX", CmdKV, OpSetNX, 3, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseSetNX},
	{"GET", CmdKV, OpGet, 2, CmdReadonly, HashNone, aRead | aString | aFast, keysOne, RouteData, parseKey},
	{"EXISTS", CmdKV, OpExists, -2, CmdReadonly, HashNone, aKeyspace | aRead | aFast, keysAll, RouteData, parseKeyList},
	{"TYPE", CmdKV, OpType, 2, CmdReadonly, HashNone, aKeyspace | aRead | aFast, keysOne, RouteData, parseKey},
	{"STRLEN", CmdKV, OpStrlen, 2, CmdReadonly, HashNone, aRead | aString | aFast, keysOne, RouteData, parseKey},
	{"INCR", CmdKV, OpIncr, -2, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseIncr}, // slock takes an optional delta
	{"DECR", CmdKV, OpIncr, -2, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseDecr},
	{"INCRBY", CmdKV, OpIncr, 3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseIncrBy},
	{"DECRBY", CmdKV, OpIncr, 3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseDecrBy},
	{"APPEND", CmdKV, OpAppend, 3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseAppend},
	{"DEL", CmdKV, OpDel, -2, CmdWrite, HashNone, aKeyspace | aWrite | aSlow, keysAll, RouteData, parseKeyList},
	{"UNLINK", CmdKV, OpDel, -2, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysAll, RouteData, parseKeyList},
	{"EXPIRE", CmdKV, OpExpire, -3, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysOne, RouteData, parseExpire},
	{"PEXPIRE", CmdKV, OpExpire, -3, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysOne, RouteData, parsePExpire},
	{"EXPIREAT", CmdKV, OpExpire, -3, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysOne, RouteData, parseExpireAt},
	{"PEXPIREAT", CmdKV, OpExpire, -3, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysOne, RouteData, parsePExpireAt},
	{"PERSIST", CmdKV, OpPersist, -2, CmdWrite, HashNone, aKeyspace | aWrite | aFast, keysOne, RouteData, parsePersist}, // the reference wants a dummy third argument
	{"TTL", CmdKV, OpTTL, 2, CmdReadonly, HashNone, aKeyspace | aRead | aFast, keysOne, RouteData, parseKeyOnly},
	{"PTTL", CmdKV, OpPTTL, 2, CmdReadonly, HashNone, aKeyspace | aRead | aFast, keysOne, RouteData, parseKeyOnly},
	{"KEYS", CmdKV, OpKeys, 2, CmdReadonly, HashNone, aKeyspace | aRead | aSlow | aDangerous, keysNone, RouteData, parseKeys},
	{"SCAN", CmdScan, OpNone, -2, CmdReadonly, HashNone, aKeyspace | aRead | aSlow, keysNone, RouteData, parseScan},
	{"DBSIZE", CmdKV, OpDBSize, 1, CmdReadonly, HashNone, aKeyspace | aRead | aFast, keysNone, RouteData, parseDBSize},
	{"FLUSHDB", CmdKV, OpFlushDB, -1, CmdWrite, HashNone, aKeyspace | aWrite | aSlow | aDangerous, keysNone, RouteData, parseFlush},
	{"FLUSHALL", CmdKV, OpFlushAll, -1, CmdWrite, HashNone, aKeyspace | aWrite | aSlow | aDangerous, keysNone, RouteData, parseFlush},
	{"MGET", CmdMGet, OpNone, -2, CmdReadonly, HashNone, aRead | aString | aFast, keysAll, RouteData, nil},
	{"MSET", CmdMSet, OpNone, -3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aSlow, keysPairs, RouteData, parsePairs},
	{"MSETNX", CmdMSetNX, OpNone, -3, CmdWrite | CmdDenyOOM, HashNone, aWrite | aString | aSlow, keysPairs, RouteData, parsePairs},
	{"DELEX", CmdKV, OpDelEx, -2, CmdWrite, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseDelEx},      // Redis 8.4
	{"DELIFEQ", CmdKV, OpDelEx, 3, CmdWrite, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseDelIfEq},   // Valkey 9
	{"DIGEST", CmdKV, OpDigest, 2, CmdReadonly, HashNone, aRead | aString | aFast, keysOne, RouteData, parseKeyOnly}, // Redis 8.4
	{"GETDEL", CmdKV, OpGetDel, 2, CmdWrite, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseKey},
	{"GETEX", CmdKV, OpGetEx, -2, CmdWrite, HashNone, aWrite | aString | aFast, keysOne, RouteData, parseGetEx},
	{"WAIT", CmdWait, OpNone, 3, 0, HashNone, aSlow | aConnection, keysNone, RouteData, nil},

	{"HSET", CmdHash, OpNone, -4, CmdWrite | CmdDenyOOM, HashSet, aWrite | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HMSET", CmdHash, OpNone, -4, CmdWrite | CmdDenyOOM, HashSet, aWrite | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HDEL", CmdHash, OpNone, -3, CmdWrite, HashDel, aWrite | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HINCRBY", CmdHash, OpNone, 4, CmdWrite | CmdDenyOOM, HashIncr, aWrite | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HGET", CmdHash, OpNone, 3, CmdReadonly, HashGet, aRead | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HMGET", CmdHash, OpNone, -3, CmdReadonly, HashMGet, aRead | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HGETALL", CmdHash, OpNone, 2, CmdReadonly, HashGetAll, aRead | aHash | aSlow, keysOne, RouteData, parseHashCmd},
	{"HLEN", CmdHash, OpNone, 2, CmdReadonly, HashLen, aRead | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HEXISTS", CmdHash, OpNone, 3, CmdReadonly, HashExists, aRead | aHash | aFast, keysOne, RouteData, parseHashCmd},
	{"HKEYS", CmdHash, OpNone, 2, CmdReadonly, HashKeys, aRead | aHash | aSlow, keysOne, RouteData, parseHashCmd},
	{"HVALS", CmdHash, OpNone, 2, CmdReadonly, HashVals, aRead | aHash | aSlow, keysOne, RouteData, parseHashCmd},
}

// subcommands are the containers' subcommands, with Redis 7.0's categories (tallyd's CLIENT
// SLOCK its own). A container's own categories count too: as in Redis, +@slow allows every
// subcommand of CONFIG, which is @slow.
var subcommands = map[string][]SubSpec{
	"CONFIG": {{"GET", -3, aAdminCmd, 0}, {"SET", -4, aAdminCmd, 0}, {"RESETSTAT", 2, aAdminCmd, 0}},
	"CLIENT": {{"SETNAME", 3, aSlow | aConnection, 0}, {"GETNAME", 2, aSlow | aConnection, 0},
		{"SLOCK", 3, aSlow | aConnection, 0}, {"SETINFO", 4, aSlow | aConnection, 0},
		{"REPLY", 3, aSlow | aConnection, 0}, {"NO-EVICT", 3, aAdminCmd | aConnection, 0},
		{"NO-TOUCH", 3, aSlow | aConnection, 0}, {"ID", 2, aSlow | aConnection, 0},
		{"LIST", -2, aAdminCmd | aConnection, 0}, {"INFO", 2, aSlow | aConnection, 0}},
	"COMMAND": {{"COUNT", 2, aSlow | aConnection, 0}, {"DOCS", -2, aSlow | aConnection, 0},
		{"INFO", -2, aSlow | aConnection, 0}, {"LIST", -2, aSlow | aConnection, 0}},
	"ACL": {{"WHOAMI", 2, aSlow, 0}, {"CAT", -2, aSlow, 0}, {"LIST", 2, aAdminCmd, 0},
		{"USERS", 2, aAdminCmd, 0}, {"LOAD", 2, aAdminCmd, 0}},
	"SCRIPT": {{"LOAD", 3, aSlow | aScripting, 0}, {"EXISTS", -3, aSlow | aScripting, 0},
		{"FLUSH", -2, aSlow | aScripting, 0}, {"KILL", 2, aSlow | aScripting, 0}, {"HELP", 2, aSlow | aScripting, 0}},
	"PUBSUB": {{"CHANNELS", -2, aPubSub | aSlow, 0}, {"NUMSUB", -2, aPubSub | aSlow, 0},
		{"NUMPAT", 2, aPubSub | aSlow, 0}, {"HELP", 2, aSlow, 0}},
	"SLOWLOG": {{"GET", -2, aAdminCmd, 0}, {"LEN", 2, aAdminCmd, 0}, {"RESET", 2, aAdminCmd, 0},
		{"HELP", 2, aSlow, 0}},
}

// commands are the table's Specs, and aclTable the same commands as ACL rules name them.
var commands, aclTable = func() ([]Spec, *acl.Table) {
	specs := make([]Spec, len(table))
	var names []acl.Command
	for i, r := range table {
		s := &specs[i]
		*s = Spec{Name: r.Name, Cmd: r.Cmd, Op: r.Op, Arity: r.Arity, Flags: r.Flags, Hash: r.Hash, ACL: r.ACL,
			Keys: r.Keys, Route: r.Route, parse: r.Parse, Subs: subcommands[r.Name], Index: i, id: len(names)}
		names = append(names, acl.Command{Name: strings.ToLower(r.Name), Cats: r.ACL})
		for j := range s.Subs {
			sub := &s.Subs[j]
			sub.id = len(names)
			names = append(names, acl.Command{Name: strings.ToLower(r.Name + "|" + sub.Name), Cats: sub.ACL})
		}
	}
	return specs, acl.NewTable(names)
}()

// ACLTable is the command table as ACL rules name the commands.
func ACLTable() *acl.Table { return aclTable }

// ACLID is the id in ACLTable under which the command line args of s (its arity checked)
// is allowed or not: its subcommand's for a container, else its own. False when the
// subcommand is unknown or has the wrong arity: the command answers that error, whoever
// sends it (Redis checks both before the ACL).
func (s *Spec) ACLID(args [][]byte) (int, bool) {
	if len(s.Subs) == 0 || len(args) < 2 {
		return s.id, true
	}
	for i := range s.Subs {
		sub := &s.Subs[i]
		if resp.Is(args[1], sub.Name) {
			if sub.Arity < 0 && len(args) < -sub.Arity || sub.Arity >= 0 && len(args) != sub.Arity {
				return 0, false
			}
			return sub.id, true
		}
	}
	return 0, false
}

// FirstKey is the index in args (a command line of s) of its first key; 0 if it has none.
func (s *Spec) FirstKey(args [][]byte) int {
	if s.Keys.Eval {
		if n, ok := resp.ParseInt(args[2]); ok && n > 0 && n <= int64(len(args)-3) {
			return 3
		}
		return 0
	}
	if k := int(s.Keys.First); k > 0 && k < len(args) {
		return k
	}
	return 0
}

// NextKey is the index of the key after the one at i; 0 if it was the last.
func (s *Spec) NextKey(args [][]byte, i int) int {
	if s.Keys.Lock {
		// LOCK key [opt val]... [EXECUTE stage LOCK|UNLOCK key [opt val]...]: the inner key.
		for j := i + 1; j+1 < len(args); j += 2 {
			if resp.Is(args[j], "EXECUTE") {
				if j+3 < len(args) {
					return j + 3
				}
				return 0
			}
		}
		return 0
	}
	last := int(s.Keys.Last)
	if s.Keys.Eval {
		n, _ := resp.ParseInt(args[2]) // FirstKey checked it
		last = 2 + int(n)
	}
	if last < 0 {
		last += len(args)
	}
	if n := i + int(s.Keys.Step); n <= last && n < len(args) {
		return n
	}
	return 0
}

// maxName is the longest command name.
const maxName = 16

var cmdIndex = func() map[string]*Spec {
	m := make(map[string]*Spec, len(commands))
	for i := range commands {
		s := &commands[i]
		if len(s.Name) > maxName || m[s.Name] != nil {
			panic("slock: bad command table entry " + s.Name)
		}
		m[s.Name] = s
	}
	return m
}()

// byShape lists the commands by name length and first letter, so that Lookup compares a
// name with the one or two commands that can match instead of hashing it.
var byShape = func() (t [maxName + 1][26][]*Spec) {
	for i := range commands {
		s := &commands[i]
		c := s.Name[0] - 'A'
		t[len(s.Name)][c] = append(t[len(s.Name)][c], s)
	}
	return t
}()

// Lookup returns the command named name (any case), nil if there is none.
func Lookup(name []byte) *Spec {
	if len(name) == 0 || len(name) > maxName {
		return nil
	}
	c := name[0] | 0x20 // lower case, for letters
	if c < 'a' || c > 'z' {
		return nil
	}
	for _, s := range byShape[len(name)][c-'a'] {
		if resp.Is(name, s.Name) {
			return s
		}
	}
	return nil
}

// Commands returns the table, in its order. The caller must not change it.
func Commands() []Spec { return commands }

// Request is a parsed Redis-text command. Its byte slices are views into the command line.
type Request struct {
	Spec *Spec
	Args [][]byte // the command line, Args[0] the name

	Frame slock.Frame // LOCK, UNLOCK, PUSH: the lock command (Data a view of the parse buffer)
	Will  bool        // LOCK, UNLOCK with WILL 1: run it when the connection closes
	KV    KV          // CmdKV: the key/value command
	Hash  Hash        // CmdHash: the hash command
	Scan  Scan        // CmdScan: the cursor and filters

	Arg  []byte // PING, ECHO: the text; CONFIG, CLIENT, COMMAND, TIMEOUT: the subcommand
	N    int64  // SELECT: the database; TIMEOUT SET: the value; HELLO: the protocol (0: none given)
	User []byte // HELLO ... AUTH user password: the user (nil: no AUTH)
	Pass []byte // and the password
}

// Errors of the commands parsed here.
var (
	errDBIndex  = &TextError{Msg: "DB index is out of range"}
	errNoProto  = &TextError{Code: "NOPROTO", Msg: "unsupported protocol version"}
	errProtoInt = &TextError{Msg: "Protocol version is not an integer or out of range"}
)

// maxDB is the highest database SELECT accepts.
const maxDB = 254

// Parse parses args, a command line of spec whose arity has been checked, for a connection
// in state t at nowMs (Unix milliseconds), into r. Lock commands and key/value commands build
// their data record into buf; newID supplies RequestIds and fresh LockIds. Errors are
// *TextError.
func Parse(spec *Spec, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, r *Request, buf []byte) ([]byte, error) {
	r.Spec, r.Args, r.Arg, r.N, r.Will, r.User, r.Pass = spec, args, nil, 0, false, nil, nil
	if spec.parse == nil {
		return buf, nil
	}
	return spec.parse(r, args, t, nowMs, newID, buf)
}

// parseLock parses LOCK, UNLOCK and PUSH (text.go).
func parseLock(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	var err error
	r.Will, buf, err = ParseTextLock(args, t, newID, &r.Frame, buf)
	return buf, err
}

// parseHashCmd parses a hash command (hash.go).
func parseHashCmd(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return parseHashOf(args, r.Spec, t, newID, &r.Hash, buf)
}

// parseScan parses SCAN (scan.go).
func parseScan(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	return buf, ParseScan(args, &r.Scan)
}

// parsePing parses PING [text].
func parsePing(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	if len(args) > 2 {
		return buf, r.Spec.ArityError()
	}
	return parseArg(r, args, t, nowMs, newID, buf)
}

// parseArg parses ECHO text, and CONFIG, CLIENT and COMMAND's subcommand: r.Arg.
func parseArg(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	if len(args) > 1 {
		r.Arg = args[1]
	}
	return buf, nil
}

// parsePairs parses MSET and MSETNX: keys and values in pairs.
func parsePairs(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	if len(args)%2 == 0 {
		return buf, r.Spec.ArityError()
	}
	return buf, nil
}

// parseSelect parses SELECT db.
func parseSelect(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	n, ok := resp.ParseInt(args[1])
	if !ok {
		return buf, errNotInt
	}
	if n < 0 || n > maxDB {
		return buf, errDBIndex
	}
	r.N = n
	return buf, nil
}

// parseTimeout parses TIMEOUT SET n and TIMEOUT GET.
func parseTimeout(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	r.Arg = argAt(args, 1)
	switch {
	case resp.Is(r.Arg, "SET"):
		n, ok := textUint(argAt(args, 2), 0xffffffff)
		if !ok {
			return buf, errArg
		}
		r.N = n
	case resp.Is(r.Arg, "GET"):
	default:
		return buf, errArg
	}
	return buf, nil
}

// parseHello parses HELLO [protover [AUTH user password] [SETNAME name]].
func parseHello(r *Request, args [][]byte, _ *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	if len(args) < 2 {
		return buf, nil
	}
	n, ok := resp.ParseInt(args[1])
	if !ok {
		return buf, errProtoInt
	}
	if n != 2 {
		return buf, errNoProto
	}
	r.N = n
	for i := 2; i < len(args); i++ {
		switch {
		case resp.Is(args[i], "SETNAME") && i+1 < len(args):
			i++
		case resp.Is(args[i], "AUTH") && i+2 < len(args):
			r.User, r.Pass = args[i+1], args[i+2]
			i += 2
		default:
			return buf, &TextError{Msg: "Syntax error in HELLO option '" + string(args[i]) + "'"}
		}
	}
	return buf, nil
}

func argAt(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// AppendTextError renders err, a command's error, as a Redis error reply: a *TextError with
// its code (ERR by default), anything else as ERR and its text.
func AppendTextError(dst []byte, err error) []byte {
	if te, ok := err.(*TextError); ok {
		code := te.Code
		if code == "" {
			code = "ERR"
		}
		dst = append(dst, '-')
		dst = append(dst, code...)
		dst = append(dst, ' ')
		return appendErrLine(dst, te.Msg)
	}
	return resp.AppendError(dst, "ERR "+err.Error())
}

// appendErrLine appends msg and CRLF, each CR or LF of msg written as a space.
func appendErrLine(dst []byte, msg string) []byte {
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}

// maxUnknownArgs is how much of an unknown command's line its error repeats, as Redis 7.
const maxUnknownArgs = 128

// AppendUnknown appends Redis 7's error for the unknown command args: "-ERR unknown command
// 'name', with args beginning with: 'a' 'b' " (a space after each argument), the name and
// the arguments cut as Redis cuts them (at 128 bytes in all, and at a NUL byte, as C's
// printf does), CR and LF written as spaces.
func AppendUnknown(dst []byte, args [][]byte) []byte {
	dst = append(dst, "-ERR unknown command '"...)
	start := len(dst)
	dst = appendCString(dst, args[0], maxUnknownArgs)
	dst = append(dst, "', with args beginning with: "...)
	n := 0 // bytes of the argument list so far
	for i := 1; i < len(args) && n < maxUnknownArgs; i++ {
		dst = append(dst, '\'')
		m := len(dst)
		dst = appendCString(dst, args[i], maxUnknownArgs-n)
		dst = append(dst, '\'', ' ')
		n += len(dst) - m + 1 // the quotes, the text and the space
	}
	for i := start; i < len(dst); i++ {
		if dst[i] == '\r' || dst[i] == '\n' {
			dst[i] = ' '
		}
	}
	return append(dst, '\r', '\n')
}

// appendCString appends s up to its first NUL byte and at most max bytes.
func appendCString(dst, s []byte, max int) []byte {
	for i := 0; i < len(s) && i < max && s[i] != 0; i++ {
		dst = append(dst, s[i])
	}
	return dst
}
