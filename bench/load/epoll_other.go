//go:build !linux

package load

import "errors"

const canEpoll = false

var errNoEpoll = errors.New("no epoll on this system")

func (ds *dialers) rawDial(i int) (int, error) { return -1, errNoEpoll }

func (rn *runner) epoll(ws []*worker, done func()) {
	for _, w := range ws {
		go func() { defer done(); w.loop() }()
	}
}

func (w *worker) closeRaw() {}
