package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watched is a list whose changes --watch follows.
type watched struct {
	list client.ObjectList
	opts []client.ListOption
}

const (
	// settleDelay gathers the burst of events one change makes (a pod
	// deleted: its status, the StatefulSet's, the group's) into one read.
	settleDelay = 100 * time.Millisecond
	// tickInterval redraws ages ("12s ago") from what was read last, without
	// reading again.
	tickInterval = time.Second

	cursorHome     = "\x1b[H"
	clearScreen    = "\x1b[2J"
	clearLineEnd   = "\x1b[K"
	clearScreenEnd = "\x1b[J"
	hideCursor     = "\x1b[?25l"
	showCursor     = "\x1b[?25h"
)

// watch draws v, then reads it again whenever one of its watches sees a
// change, until ctx ends (Ctrl-C). On a terminal every frame overwrites the
// last in place, line by line, each line cleared only past its own end and
// the screen only below the frame, so nothing blinks; elsewhere each frame
// that differs is printed after the last.
func (o *options) watch(ctx context.Context, s *session, v view) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	failed := make(chan error, 1)
	for _, w := range v.watches() {
		go follow(ctx, s, w, changed, failed)
	}
	screen := &screen{out: o.streams.Out, tty: o.isTerminal()}
	if screen.tty {
		fmt.Fprint(screen.out, hideCursor+cursorHome+clearScreen)
		defer fmt.Fprint(screen.out, showCursor)
	}
	if err := screen.draw(v, o.now(), o); err != nil {
		return err
	}
	ticks := time.NewTicker(tickInterval)
	defer ticks.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case <-changed:
			if settle == nil {
				settle = time.After(settleDelay)
			}
			continue
		case <-settle:
			settle = nil
			if err := v.read(ctx, s); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		case <-ticks.C:
			if !screen.tty {
				continue // a log of frames gets a new one only when something changed
			}
		}
		if err := screen.draw(v, o.now(), o); err != nil {
			return err
		}
	}
}

// follow watches one list and signals every event on changed, opening the
// watch again when the API server closes it (it does, every few minutes).
func follow(ctx context.Context, s *session, w watched, changed chan<- struct{}, failed chan<- error) {
	for ctx.Err() == nil {
		wi, err := s.client.Watch(ctx, w.list, w.opts...)
		if err != nil {
			if ctx.Err() == nil {
				select {
				case failed <- explain(err, s.host, fmt.Sprintf("watch %T", w.list)):
				default:
				}
			}
			return
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				break // expired or refused: open it again
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		wi.Stop()
		// A watch opened again lists afresh: one redraw, after a pause so
		// that a server refusing watches is not hammered.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// screen draws frames on a terminal in place, or one after the other.
type screen struct {
	out  io.Writer
	tty  bool
	last string
}

func (sc *screen) draw(v view, now time.Time, o *options) error {
	var b strings.Builder
	if err := v.draw(&b, now, o.style()); err != nil {
		return err
	}
	frame := b.String()
	if frame == sc.last {
		return nil
	}
	sc.last = frame
	if !sc.tty {
		_, err := io.WriteString(sc.out, frame+"\n")
		return err
	}
	width, height := terminalSize(sc.out)
	lines := strings.Split(strings.TrimRight(frame, "\n"), "\n")
	if height > 1 && len(lines) > height-1 {
		lines = append(lines[:height-2], fmt.Sprintf("… %d more lines: make the terminal taller", len(lines)-height+2))
	}
	var out strings.Builder
	out.WriteString(cursorHome)
	for _, l := range lines {
		out.WriteString(truncateVisible(l, width))
		out.WriteString(clearLineEnd + "\n")
	}
	out.WriteString(clearScreenEnd)
	_, err := io.WriteString(sc.out, out.String())
	return err
}

// terminalSize is the terminal's width and height, 0 when unknown.
func terminalSize(w io.Writer) (int, int) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, 0
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, 0
	}
	return width, height
}

// truncateVisible cuts a line to width visible characters, keeping ANSI
// escapes whole: a line the terminal wraps would push the frame down and
// break drawing in place.
func truncateVisible(line string, width int) string {
	if width <= 0 {
		return line
	}
	var b strings.Builder
	visible := 0
	cut := false
	for i := 0; i < len(line); {
		if line[i] == '\x1b' {
			end := strings.IndexByte(line[i:], 'm')
			if end < 0 {
				break
			}
			b.WriteString(line[i : i+end+1])
			i += end + 1
			continue
		}
		r := []rune(line[i:])[0]
		if visible == width {
			cut = true
			break
		}
		b.WriteRune(r)
		visible++
		i += len(string(r))
	}
	if cut {
		b.WriteString(ansiReset)
	}
	return b.String()
}

const ansiReset = "\x1b[0m"
