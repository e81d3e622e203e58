package resp

import "testing"

func TestInfoSections(t *testing.T) {
	info := []byte("# Server\r\nredis_version:7.0.0\r\n\r\n# Clients\r\nconnected_clients:1\r\n\r\n# Keyspace\r\ndb0:keys=1\r\n")
	for _, c := range []struct {
		names []string
		want  string
	}{
		{nil, string(info)},
		{[]string{"ALL"}, string(info)},
		{[]string{"clients"}, "# Clients\r\nconnected_clients:1\r\n"},
		{[]string{"keyspace", "Server"}, "# Server\r\nredis_version:7.0.0\r\n\r\n# Keyspace\r\ndb0:keys=1\r\n"},
		{[]string{"nosuch"}, ""},
	} {
		var names [][]byte
		for _, n := range c.names {
			names = append(names, []byte(n))
		}
		if got := string(InfoSections(info, names)); got != c.want {
			t.Errorf("InfoSections(%q) = %q, want %q", c.names, got, c.want)
		}
	}
}
