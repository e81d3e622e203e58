package resp

import "bytes"

// InfoSections keeps the sections of an INFO text ("# Name\r\n" lines, sections separated by
// an empty line) that names asks for, any case, as Redis's INFO [section ...] does; no
// names, or "all", "default" or "everything" among them, keeps every section.
func InfoSections(info []byte, names [][]byte) []byte {
	if len(names) == 0 {
		return info
	}
	for _, n := range names {
		if Is(n, "all") || Is(n, "default") || Is(n, "everything") {
			return info
		}
	}
	var out []byte
	for _, sec := range bytes.SplitAfter(info, []byte("\r\n\r\n")) {
		title, _, _ := bytes.Cut(sec, []byte("\r\n"))
		for _, n := range names {
			if len(title) > 2 && Is(n, string(title[2:])) {
				out = append(out, sec...)
				break
			}
		}
	}
	if bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		out = out[:len(out)-2] // the last section ends as INFO's last one does
	}
	return out
}
