package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// writeTable prints rows under header in columns two spaces apart: the
// first column left-aligned, the others right-aligned (numbers).
func writeTable(w io.Writer, header []string, rows [][]string) error {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0 && len(r) == 1:
				b.WriteString(c)
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sortStable sorts s by less, keeping equal elements in order.
func sortStable[T any](s []T, less func(x, y T) bool) {
	sort.SliceStable(s, func(i, j int) bool { return less(s[i], s[j]) })
}

// fmtInt is fmt.Sprint for the integers of table cells.
func fmtInt[T ~int | ~int64 | ~uint32 | ~uint64 | ~uint16 | ~uint8](v T) string { return fmt.Sprint(v) }
