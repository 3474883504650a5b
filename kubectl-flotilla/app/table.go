package app

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// table prints kubectl-like columns: upper-case headers, three spaces
// between columns, "<none>" for empty cells.
type table struct {
	w *tabwriter.Writer
}

func newTable(out io.Writer, headers ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = none
		}
		// Messages, reasons and names are often someone else's words (a
		// member's agent, an event's author): no control characters reach
		// the terminal, and no tab or newline breaks the columns.
		cells[i] = printable(cells[i])
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

const none = "<none>"

// age is kubectl's short human duration since t ("<unknown>" when unset).
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// heading starts a section of a multi-table view.
func heading(out io.Writer, format string, args ...any) {
	fmt.Fprintf(out, "\n"+format+"\n", printableArgs(args)...)
}

// fields2 prints "Label:  value" lines aligned, as kubectl describe does.
func fields2(out io.Writer, pairs [][2]string) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for _, p := range pairs {
		fmt.Fprintf(w, "%s\t%s\n", p[0], printable(p[1]))
	}
	return w.Flush()
}
