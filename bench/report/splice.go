package report

import (
	"bytes"
	"fmt"
	"os"
)

// Markers returns the comment lines between which Splice puts the results named name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// Splice returns doc with the text between the markers of name replaced by content,
// or content appended between new markers when doc has none.
func Splice(doc []byte, name string, content []byte) ([]byte, error) {
	Begin, End := Markers(name)
	i := bytes.Index(doc, []byte(Begin))
	j := bytes.Index(doc, []byte(End))
	var out bytes.Buffer
	switch {
	case i < 0 && j < 0:
		out.Write(doc)
		if len(doc) > 0 && !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteByte('\n')
		}
		fmt.Fprintf(&out, "%s\n%s%s\n", Begin, content, End)
	case i < 0 || j < i:
		return nil, fmt.Errorf("document has %q and %q out of order or unpaired", Begin, End)
	default:
		out.Write(doc[:i+len(Begin)])
		out.WriteByte('\n')
		out.Write(content)
		out.Write(doc[j:])
	}
	return out.Bytes(), nil
}

// SpliceFile splices content into the file at path under name, creating it if needed.
func SpliceFile(path, name string, content []byte) error {
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := Splice(doc, name, content)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
