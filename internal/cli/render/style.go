package render

import "strings"

// Style says whether output carries ANSI colours. kubectl-echelon turns them
// on only when stdout is a terminal and NO_COLOR is unset (no-color.org).
type Style struct {
	Color bool
	// Width is the terminal's width, which the waiting line is wrapped at so
	// that it is read whole; 0 wraps nothing.
	Width int
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiCyan   = "\x1b[36m"
)

func (s Style) paint(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return code + text + ansiReset
}

// Bold is for names and headings.
func (s Style) Bold(text string) string { return s.paint(ansiBold, text) }

// Dim is for what is fine and needs no attention.
func (s Style) Dim(text string) string { return s.paint(ansiDim, text) }

// Phase colours a phase or pod state by what it asks of the reader: green
// for done, yellow for under way, blue for held by a person, red for a
// problem.
func (s Style) Phase(phase string) string {
	return s.paint(phaseColor(phase), phase)
}

func phaseColor(phase string) string {
	switch phase {
	case "Complete", "Stable", "Idle", "Passed", "Updated", "Eligible":
		return ansiGreen
	case "Progressing", "Rolling", "Waiting", "Analyzing", "Running", "Pending", "ScalingUp", "ScalingDown",
		"Preparing", "Terminating", "NotReady", "Outdated", "Leaving", "Unavailable":
		return ansiYellow
	case "Paused":
		return ansiBlue
	case "Blocked", "Stalled", "Failed", "Errored", "AnalysisFailed", "AnalysisError", "Aborted", "RollbackFailed":
		return ansiRed
	}
	return ansiCyan
}

// cell is one table cell: its text and how it is painted. Widths are measured
// on the text, so colours never break alignment.
type cell struct {
	text  string
	paint func(string) string
}

func plain(text string) cell { return cell{text: text} }

// table lays rows out in columns separated by two spaces, trailing blanks
// trimmed.
func table(rows [][]cell) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c.text)))
		}
	}
	lines := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		pending := 0 // padding owed before the next non-empty cell
		for i, c := range r {
			if c.text == "" {
				pending += widths[i] + 2
				continue
			}
			b.WriteString(strings.Repeat(" ", pending))
			text := c.text
			if c.paint != nil {
				text = c.paint(text)
			}
			b.WriteString(text)
			pending = widths[i] - len([]rune(c.text)) + 2
		}
		lines = append(lines, b.String())
	}
	return lines
}
