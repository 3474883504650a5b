package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What TestImage stamps, so it can tell its stamp from a default.
const (
	imageTestRef     = "localhost/flotilla:imagetest"
	imageTestVersion = "v9.8.7-imagetest"
	imageTestCommit  = "abc1234"
	imageTestEpoch   = 1700000000
)

// imageTestSnapshot copies the module's files (tracked and untracked, not
// ignored) to a new directory: the builds read a tree nobody edits while
// they run, and two snapshots at two paths show the image does not depend
// on where the checkout is.
func imageTestSnapshot(t *testing.T, dst string) string {
	t.Helper()
	gomod := goEnvVar("GOMOD")
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside the module")
	}
	src := filepath.Dir(gomod)
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = src
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files in %s: %v (not a git checkout)", src, err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// imageTestBuild runs the builder as `make image` does, on the tree at
// root, into dir.
func imageTestBuild(t *testing.T, root, dir string, extra ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--image", imageTestRef, "--version", imageTestVersion, "--commit", imageTestCommit,
		"--root", root, "--oci-layout", filepath.Join(dir, "layout")}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("building the image: %v\n%s", err, stderr.String())
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))
	return strings.TrimSpace(stdout.String())
}

// TestImage builds the image the way `make image` does (compiling both
// binaries), reads it back from the OCI layout and the docker-archive, checks
// its config and its one layer file by file, runs both binaries from the
// extracted root file system, and builds it again to the same digest.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hub and agent twice")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	epoch := time.Unix(imageTestEpoch, 0).UTC()
	tmp := t.TempDir()
	src := imageTestSnapshot(t, filepath.Join(tmp, "src"))
	first := imageTestBuild(t, src, filepath.Join(tmp, "1"), "--tarball", filepath.Join(tmp, "1", "flotilla.tar"))

	// The layout's index names the image by tag (and by containerd's name).
	ii, err := layout.ImageIndexFromPath(filepath.Join(tmp, "1", "layout"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("media type %s, want an OCI image manifest", desc.MediaType)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "imagetest" {
		t.Errorf("ref.name annotation %q, want imagetest", got)
	}
	if got := desc.Annotations["io.containerd.image.name"]; got != imageTestRef {
		t.Errorf("io.containerd.image.name annotation %q, want %s", got, imageTestRef)
	}
	if want := imageTestRef + "@" + desc.Digest.String(); first != want {
		t.Errorf("printed %q, want %q (the reference and the layout's digest)", first, want)
	}
	img, err := ii.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}

	// Config.
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/hub"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/hub] and none", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.Config.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", cfg.Config.WorkingDir)
	}
	if !cfg.Created.Time.Equal(epoch) {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH %s", cfg.Created.Time, epoch)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":       "flotilla",
		"org.opencontainers.image.version":     imageTestVersion,
		"org.opencontainers.image.revision":    imageTestCommit,
		"org.opencontainers.image.source":      "https://github.com/flotilla-io/flotilla",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     "2023-11-14T22:13:20Z",
		"org.opencontainers.image.description": cfg.Config.Labels["org.opencontainers.image.description"],
	}
	if cfg.Config.Labels["org.opencontainers.image.description"] == "" {
		t.Error("no org.opencontainers.image.description label")
	}
	for k, v := range wantLabels {
		if got := cfg.Config.Labels[k]; got != v {
			t.Errorf("label %s=%q, want %q", k, got, v)
		}
	}
	if len(cfg.Config.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want exactly %v", cfg.Config.Labels, wantLabels)
	}

	// The one layer, entry by entry.
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	wantModes := map[string]int64{"agent": 0o755, "etc/": 0o755, "etc/group": 0o644, "etc/passwd": 0o644, "hub": 0o755, "tmp/": 0o1777}
	var names []string
	tr := tar.NewReader(rc)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		want, ok := wantModes[h.Name]
		if !ok {
			t.Errorf("unexpected path %s in the image", h.Name)
			continue
		}
		if h.Mode != want {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, want)
		}
		// Root owns everything, so the non-root user can write nothing
		// but /tmp (world-writable, and sticky).
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want 0:0 without names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if h.Mode&0o002 != 0 && h.Name != "tmp/" {
			t.Errorf("%s: world-writable", h.Name)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %s, want %s", h.Name, h.ModTime, epoch)
		}
		if strings.HasSuffix(h.Name, "/") != (h.Typeflag == tar.TypeDir) || (h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg) {
			t.Errorf("%s: type %c, want a directory or a regular file", h.Name, h.Typeflag)
		}
		if strings.HasPrefix(h.Name, "etc/") && h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[h.Name] = b
		}
	}
	rc.Close()
	if !slices.IsSorted(names) || len(names) != len(wantModes) {
		t.Errorf("layer entries %q: want each of %d paths once, sorted", names, len(wantModes))
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(files["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("/etc/passwd %q, /etc/group %q: want the nonroot user and group 65532", files["etc/passwd"], files["etc/group"])
	}

	// Run both binaries from the extracted root file system, with an empty
	// environment like a container's: static, stamped, and they start.
	root := filepath.Join(tmp, "rootfs")
	imageTestExtract(t, img, root)
	for _, bin := range binaries {
		path := filepath.Join(root, bin)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("/%s has a program interpreter: not static", bin)
			}
		}
		f.Close()
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != "linux" {
			t.Errorf("/%s build settings %v: want CGO_ENABLED=0, -trimpath, GOOS=linux", bin, settings)
		}
		if !slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
			t.Errorf("/%s lacks golang.org/x/crypto/x509roots/fallback: TLS would fail without a CA bundle", bin)
		}

		out := imageTestRun(t, path, "--version")
		if want := bin + " version " + imageTestVersion + " (commit " + imageTestCommit + ","; !strings.HasPrefix(out, want) {
			t.Errorf("/%s --version = %q, want it to start with %q", bin, out, want)
		}
		if out := imageTestRun(t, path, "--help"); !strings.Contains(out, "Usage:") || !strings.Contains(out, "--kubeconfig") {
			t.Errorf("/%s --help = %q, want its usage", bin, out)
		}
	}

	// The docker-archive holds the same image under the reference.
	tag, err := name.NewTag(imageTestRef)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(filepath.Join(tmp, "1", "flotilla.tar"), &tag)
	if err != nil {
		t.Fatalf("reading the docker-archive as %s: %v", imageTestRef, err)
	}
	imageTestSameContent(t, img, fromTar)
	if m := imageTestManifestJSON(t, filepath.Join(tmp, "1", "flotilla.tar")); len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{imageTestRef}) {
		t.Errorf("docker-archive manifest.json %+v: want one image tagged %s", m, imageTestRef)
	}

	// Reproducible: a second build from scratch (binaries compiled again)
	// of the same sources at another path is the same image, byte for byte.
	if err := os.Rename(src, filepath.Join(tmp, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	second := imageTestBuild(t, filepath.Join(tmp, "elsewhere"), filepath.Join(tmp, "2"))
	if second != first {
		t.Errorf("second build %s, first %s: not reproducible", second, first)
	}
}

// imageTestSameContent fails unless two images have the same config and
// layers (a docker-archive keeps both; the manifest is rewritten on load).
func imageTestSameContent(t *testing.T, want, got v1.Image) {
	t.Helper()
	wc, _ := want.ConfigName()
	gc, err := got.ConfigName()
	if err != nil || gc != wc {
		t.Errorf("config %s (%v), want %s", gc, err, wc)
	}
	wl, _ := want.Layers()
	gl, err := got.Layers()
	if err != nil || len(gl) != len(wl) {
		t.Fatalf("%d layers (%v), want %d", len(gl), err, len(wl))
	}
	for i := range wl {
		wd, _ := wl[i].Digest()
		gd, _ := gl[i].Digest()
		if wd != gd {
			t.Errorf("layer %d: %s, want %s", i, gd, wd)
		}
	}
}

// imageTestRun runs a binary of the image with nothing in its environment
// (no PATH, no HOME, no CA bundle path) and returns its output.
func imageTestRun(t *testing.T, path string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{}
	cmd.Dir = filepath.Dir(path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", path, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// imageTestExtract writes the image's flattened file system (mutate.Extract)
// under root, keeping modes.
func imageTestExtract(t *testing.T, img v1.Image, root string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("entry %q escapes the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode&0o777)); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o777))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("entry %q of type %c", h.Name, h.Typeflag)
		}
	}
}

// imageTestManifestJSON is the manifest.json of a docker-archive.
func imageTestManifestJSON(t *testing.T, path string) tarball.Manifest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manifest.json in %s: %v", path, err)
		}
		if h.Name == "manifest.json" {
			var m tarball.Manifest
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
}
