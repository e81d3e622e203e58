package store_test
import "testing"
func TestDbgMaxLen(t *testing.T) {
	for _, p := range propConfigs { maxLenSeen = 0; runCounters(p); t.Log(p, maxLenSeen) }
}
