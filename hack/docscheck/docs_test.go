// Package docscheck keeps the operator documentation honest: the tests here
// fail when docs/flags.md no longer matches the flags the hub and agent
// binaries really have.
package docscheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	agentapp "github.com/flotilla-io/flotilla/agent/app"
	hubapp "github.com/flotilla-io/flotilla/hub/app"
)

// commonSection is the heading of the section in docs/flags.md that lists
// the flags every binary shares (help, version, klog's logging flags).
const commonSection = "Common flags"

// row is one documented flag: its default as written and where.
type row struct {
	def  string
	line int
}

// docs is docs/flags.md parsed: section name → flag name → row. A section
// is a "## " heading; a command section names the command in backticks
// (## `hub agent-kubeconfig`). Rows are table lines whose first cell names
// one or more flags in backticks (`-h`, `--help`) and whose second cell is
// the default.
type docs map[string]map[string]row

var (
	headingRE  = regexp.MustCompile("^## +(?:`([^`]+)`|(.+?))\\s*$")
	flagNameRE = regexp.MustCompile("`--([A-Za-z0-9][A-Za-z0-9-]*)`")
)

func readDocs(t *testing.T) docs {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "docs", "flags.md")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("docs/flags.md: %v", err)
	}
	defer f.Close()
	out := docs{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := headingRE.FindStringSubmatch(line); m != nil {
			section = m[1] + m[2]
			continue
		}
		if section == "" || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			continue
		}
		names := flagNameRE.FindAllStringSubmatch(cells[0], -1)
		if len(names) == 0 {
			continue
		}
		if out[section] == nil {
			out[section] = map[string]row{}
		}
		for _, name := range names {
			if prev, dup := out[section][name[1]]; dup {
				t.Errorf("docs/flags.md:%d: --%s is documented twice in section %q (first on line %d)", n, name[1], section, prev.line)
			}
			out[section][name[1]] = row{def: normalizeDefault(cells[1]), line: n}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalizeDefault turns a documented default cell into pflag's DefValue
// spelling: backticks and spaces go, `""` is the empty string.
func normalizeDefault(cell string) string {
	s := strings.TrimSpace(cell)
	s = strings.TrimPrefix(s, "`")
	s = strings.TrimSuffix(s, "`")
	if s == `""` {
		return ""
	}
	return s
}

// commands are the binaries' commands as the binaries build them, with the
// help and version flags cobra adds when a command runs.
func commands() map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	hub := hubapp.NewHubCommand()
	out["hub"] = hub
	for _, sub := range hub.Commands() {
		out["hub "+sub.Name()] = sub
	}
	agent := agentapp.NewAgentCommand()
	out["agent"] = agent
	for _, sub := range agent.Commands() {
		out["agent "+sub.Name()] = sub
	}
	for _, cmd := range out {
		cmd.InitDefaultHelpFlag()
		cmd.InitDefaultVersionFlag()
	}
	return out
}

// TestEveryFlagIsDocumentedWithItsDefault fails when a flag of `hub`, its
// subcommands or `agent` is missing from docs/flags.md, or documented with
// another default.
func TestEveryFlagIsDocumentedWithItsDefault(t *testing.T) {
	d := readDocs(t)
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		own := d[name]
		if own == nil {
			t.Errorf("docs/flags.md has no section \"## `%s`\"", name)
		}
		cmds[name].Flags().VisitAll(func(f *pflag.Flag) {
			r, ok := own[f.Name]
			where := "## `" + name + "`"
			if !ok {
				r, ok = d[commonSection][f.Name]
				where = "## " + commonSection
			}
			if !ok {
				t.Errorf("%s: --%s (default %q) is not documented in docs/flags.md", name, f.Name, f.DefValue)
				return
			}
			if r.def != f.DefValue {
				t.Errorf("docs/flags.md:%d (%s): --%s is documented with default %q, the binary's default is %q", r.line, where, f.Name, r.def, f.DefValue)
			}
		})
	}
}

// TestNoDocumentedFlagIsGone fails when docs/flags.md documents a flag a
// command no longer has, so removed flags do not linger in the docs.
func TestNoDocumentedFlagIsGone(t *testing.T) {
	d := readDocs(t)
	cmds := commands()
	for section, rows := range d {
		if section == commonSection {
			for flag, r := range rows {
				found := false
				for _, cmd := range cmds {
					if cmd.Flags().Lookup(flag) != nil {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("docs/flags.md:%d: --%s is in %q but no command has it", r.line, flag, section)
				}
			}
			continue
		}
		cmd, ok := cmds[section]
		if !ok {
			continue // a section that is not a command (e.g. make up's flags)
		}
		for flag, r := range rows {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("docs/flags.md:%d: `%s` has no flag --%s", r.line, section, flag)
			}
		}
	}
}
