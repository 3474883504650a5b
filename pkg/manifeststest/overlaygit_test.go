package manifeststest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The documented commands (docs/install.md, "Register a member") never put
// the agent's hub token in git: on a fresh clone of the repository,
// `hack/agent-overlay.sh member1 HUB_KUBECONFIG` (a fake hub binary prints
// the kubeconfig with a token) and the placeholder form leave `git status`
// clean, the token lands in the overlay's hub.kubeconfig (0600), and so does
// a rotation. A new member's overlay shows only its kustomization.yaml, to
// commit. Before the script has run, the committed overlay does not build,
// and says which file it misses.
func TestAgentOverlayKeepsTokensOutOfGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git in PATH")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	clone := overlayTestClone(t, root, filepath.Join(tmp, "clone"))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = clone
		cmd.Env = overlayTestGitEnv(tmp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	clean := func(after string) {
		t.Helper()
		if st := git("status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Errorf("after %s, git status --porcelain:\n%s", after, st)
		}
	}
	if tracked := git("ls-files", "--", "*hub.kubeconfig"); tracked != "" {
		t.Errorf("hub.kubeconfig files in git (they hold tokens):\n%s", tracked)
	}

	// A fresh clone's overlay misses its hub.kubeconfig, and says so.
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		kubectl = ""
		t.Logf("%s missing (make tools): the overlays are not rendered", filepath.Join(root, "bin", "kubectl"))
	}
	kustomize := func(overlay string) (string, error) {
		cmd := exec.Command(kubectl, "kustomize", filepath.Join(clone, OverlaysDir, overlay))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		return string(out), nil
	}
	if kubectl != "" {
		if out, err := kustomize("member1"); err == nil || !strings.Contains(out, "hub.kubeconfig") {
			t.Errorf("kubectl kustomize of a fresh clone's member1 overlay: %v, want an error naming hub.kubeconfig:\n%s", err, out)
		}
	}

	// `hub agent-kubeconfig` as the script runs it: it prints a kubeconfig
	// with a token and records its arguments.
	fakeHub := filepath.Join(tmp, "hub")
	if err := os.WriteFile(fakeHub, []byte(`#!/bin/sh
echo "$@" >>"$FAKE_HUB_ARGS"
cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster: {server: https://hub.example.com:6443}
contexts:
- name: agent
  context: {cluster: hub, user: agent}
current-context: agent
users:
- name: agent
  user: {token: $FAKE_HUB_TOKEN}
EOF
`), 0o755); err != nil {
		t.Fatal(err)
	}
	hostConfig := filepath.Join(tmp, "host.config")
	if err := os.WriteFile(hostConfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(tmp, "hub-args")
	overlay := func(token string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(clone, "hack", "agent-overlay.sh"), args...)
		cmd.Dir = clone
		cmd.Env = append(overlayTestGitEnv(tmp), "HUB_BIN="+fakeHub, "HUB_SERVER=https://hub.example.com:6443",
			"FAKE_HUB_TOKEN="+token, "FAKE_HUB_ARGS="+argsFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/agent-overlay.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// holds fails unless the overlay's hub.kubeconfig holds want, is 0600,
	// and (with kubectl) the overlay builds its Secret from it.
	holds := func(member, want string) {
		t.Helper()
		path := filepath.Join(clone, OverlaysDir, member, "hub.kubeconfig")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not hold %q:\n%s", path, want, b)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", path, st.Mode().Perm(), err)
		}
		if kubectl == "" {
			return
		}
		out, err := kustomize(member)
		if err != nil {
			t.Errorf("kubectl kustomize %s: %v\n%s", member, err, out)
			return
		}
		if got := overlayTestSecretFile(t, out); got != string(b) {
			t.Errorf("the %s overlay's Secret holds %q, not its hub.kubeconfig", member, got)
		}
	}

	token := overlayTestToken(t)
	overlay(token, "member1", hostConfig)
	clean("hack/agent-overlay.sh member1 HUB_KUBECONFIG")
	holds("member1", "token: "+token)
	if b, _ := os.ReadFile(argsFile); !strings.Contains(string(b), "agent-kubeconfig --kubeconfig "+hostConfig+" --cluster member1 ") ||
		!strings.Contains(string(b), "--server https://hub.example.com:6443") {
		t.Errorf("the hub binary ran with %q", b)
	}

	// Rotation: the same command again.
	rotated := overlayTestToken(t)
	overlay(rotated, "member1", hostConfig)
	clean("rotating member1's token")
	holds("member1", "token: "+rotated)

	// The placeholder, for an overlay to fill in later.
	overlay("", "member2")
	clean("hack/agent-overlay.sh member2")
	holds("member2", "token: REPLACE-ME")

	// A new member: its kustomization.yaml is yours to commit; its
	// hub.kubeconfig is ignored like the others.
	overlay(overlayTestToken(t), "member4", hostConfig)
	if st, want := git("status", "--porcelain", "--untracked-files=all"), "?? "+OverlaysDir+"/member4/kustomization.yaml\n"; st != want {
		t.Errorf("after hack/agent-overlay.sh member4 HUB_KUBECONFIG, git status --porcelain:\n%s\nwant:\n%s", st, want)
	}
}

// overlayTestClone makes a git repository at dst holding what the overlay
// commands use (hack/agent-overlay.sh, kustomize/, manifests/ and every
// .gitignore) as the checkout at root has them: its tracked files and the
// untracked ones it does not ignore, as a commit would hold them.
func overlayTestClone(t *testing.T, root, dst string) string {
	t.Helper()
	lsFiles := func(args ...string) []string {
		cmd := exec.Command("git", append([]string{"ls-files", "-z"}, args...)...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("git ls-files in %s: %v (not a git checkout)", root, err)
		}
		var fs []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if f == "hack/agent-overlay.sh" || strings.HasPrefix(f, "kustomize/") || strings.HasPrefix(f, "manifests/") ||
				filepath.Base(f) == ".gitignore" {
				fs = append(fs, f)
			}
		}
		return fs
	}
	// Tracked files are added even where a .gitignore matches them (as git
	// keeps tracking them): a hub.kubeconfig in git must fail the test.
	tracked := lsFiles("--cached")
	for _, f := range append(lsFiles("--others", "--exclude-standard"), tracked...) {
		src := filepath.Join(root, f)
		st, err := os.Stat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	var present []string
	for _, f := range tracked {
		if _, err := os.Stat(filepath.Join(dst, f)); err == nil {
			present = append(present, f)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, append([]string{"add", "-f", "--"}, present...), {"commit", "-q", "-m", "snapshot"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dst
		cmd.Env = overlayTestGitEnv(filepath.Dir(dst))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dst
}

// overlayTestGitEnv runs git apart from the user's and the system's
// configuration (hooks, signing, excludes files), as a fresh clone would.
func overlayTestGitEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
}

// overlayTestSecretFile is the hub.kubeconfig key of the Secret
// flotilla-agent-hub-kubeconfig-<hash> in rendered YAML.
func overlayTestSecretFile(t *testing.T, rendered string) string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Data     map[string][]byte     `json:"data"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			t.Fatal("no Secret flotilla-agent-hub-kubeconfig-* rendered")
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "Secret" && strings.HasPrefix(obj.Metadata.Name, "flotilla-agent-hub-kubeconfig-") {
			return string(obj.Data["hub.kubeconfig"])
		}
	}
}

func overlayTestToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "fake-" + hex.EncodeToString(b)
}
