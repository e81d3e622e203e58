package store

// ValueExpiries returns, for db's keys that have a value, how many expire and their mean
// time to live in milliseconds at now (0 if none expires), as Redis's INFO keyspace shows
// them (expires, avg_ttl). It looks at no more than limit keys (limit <= 0: all), from the
// end of the value table, and scales the count from them to the whole table: an estimate,
// as Redis's avg_ttl is, that never walks a large table on the caller's time.
func (l *Locks) ValueExpiries(db uint8, now int64, limit int) (expiring int, avgTTL int64) {
	if db > MaxLockDB || l.dbs[db] == nil {
		return 0, 0
	}
	vals := l.dbs[db].vals
	seen := len(vals)
	if limit > 0 && seen > limit {
		seen = limit
	}
	var sum int64
	for _, k := range vals[len(vals)-seen:] {
		if ttl := k.ttl(now); ttl >= 0 {
			expiring++
			sum += ttl
		}
	}
	if expiring > 0 {
		avgTTL = sum / int64(expiring)
	}
	if seen > 0 && seen < len(vals) {
		expiring = int(int64(expiring) * int64(len(vals)) / int64(seen))
	}
	return expiring, avgTTL
}
