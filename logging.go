package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// logOutput is where log lines go: stderr or a file, as console text or JSON. Both can
// change while tallyd runs (a reload), and the file can be reopened after a rotation; it is
// safe for every goroutine that logs.
type logOutput struct {
	mu      sync.Mutex
	stderr  io.Writer
	path    string   // "" = stderr
	f       *os.File // open on path
	console bool
}

// logFileMode is the mode a new log file is created with.
const logFileMode = 0o640

func (l *logOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.stderr
	if l.f != nil {
		w = l.f
	}
	if l.console {
		return zerolog.ConsoleWriter{Out: w, TimeFormat: "2006-01-02T15:04:05.000Z07:00", NoColor: true}.Write(p)
	}
	return w.Write(p)
}

// configure sets the format (console or json) and the file ("" = stderr), which is opened
// for appending, created if missing. On an error nothing changes.
func (l *logOutput) configure(format, path string) error {
	if err := checkLog("info", format); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if path != l.path {
		var f *os.File
		if path != "" {
			var err error
			if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, logFileMode); err != nil {
				return fmt.Errorf("--log-file: %w", err)
			}
		}
		if l.f != nil {
			l.f.Close()
		}
		l.f, l.path = f, path
	}
	l.console = format == "console"
	return nil
}

// reopen opens the log file again under its name, so that lines go to a new file once
// logrotate has moved the old one; with no file it does nothing. On an error the old file
// stays in use.
func (l *logOutput) reopen() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return false, nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, logFileMode)
	if err != nil {
		return false, fmt.Errorf("reopening the log file: %w", err)
	}
	l.f.Close()
	l.f = f
	return true, nil
}

func (l *logOutput) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f, l.path = nil, ""
	}
}

// checkLog checks a log level and format.
func checkLog(level, format string) error {
	if _, err := zerolog.ParseLevel(strings.ToLower(level)); err != nil || level == "" {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if format != "console" && format != "json" {
		return fmt.Errorf("--log-format %q: want console or json", format)
	}
	return nil
}

// setLogLevel sets the level of every logger of the process (checked by checkLog): zerolog
// drops a line below it before formatting it, so a reload can change it at no cost.
func setLogLevel(level string) {
	lv, _ := zerolog.ParseLevel(strings.ToLower(level))
	zerolog.TimeFieldFormat = time.RFC3339Nano
	zerolog.SetGlobalLevel(lv)
}
