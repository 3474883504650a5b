package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestDockerfile builds the top-level Dockerfile with buildah (no daemon,
// no network: FROM scratch) from the binaries `make build` writes (built
// here with hack/image's flags, which TestMakeBuildFlags ties to the
// Makefile's) and compares the result with hack/image's image of the same
// binaries: every path, type, mode, owner, mtime and content, and the config
// (user, entrypoint, working dir, environment, labels, created).
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hub and agent")
	}
	buildah, err := exec.LookPath("buildah")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs buildah and root (CI runs as root and .ci/run installs buildah): the Dockerfile is NOT checked against hack/image")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	src := imageTestSnapshot(t, filepath.Join(tmp, "src"))
	info := buildInfo{Version: imageTestVersion, Commit: imageTestCommit, Created: time.Unix(imageTestEpoch, 0).UTC(),
		Source: "https://github.com/flotilla-io/flotilla"}
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

	// `make build`: bin/hub, bin/agent in the build context.
	bin := filepath.Join(src, "bin")
	if err := compile(ctx, src, bin, p, info, t.Logf); err != nil {
		t.Fatal(err)
	}
	// What the bin/ of a developer's checkout also holds: .dockerignore
	// keeps it out of the context.
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte("not for the image"), 0o755); err != nil {
		t.Fatal(err)
	}
	want, err := newImage(rootfs(bin), p, info)
	if err != nil {
		t.Fatal(err)
	}

	// buildah with its own storage under tmp (vfs: no overlay mounts), chroot
	// isolation (no RUN anyway), one layer, no buildah label, SOURCE_DATE_EPOCH
	// for created and the files' mtimes.
	const ref = "localhost/flotilla:dockerfile-test"
	store := []string{"--storage-driver", "vfs", "--root", filepath.Join(tmp, "storage"), "--runroot", filepath.Join(tmp, "run")}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, buildah, append(slices.Clone(store), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("buildah %s:\n%s", args[0], strings.TrimSpace(string(out)))
	}
	start := time.Now()
	run("bud", "--layers=false", "--isolation", "chroot", "--identity-label=false",
		"--timestamp", strconv.FormatInt(imageTestEpoch, 10),
		"--build-arg", "VERSION="+info.Version, "--build-arg", "COMMIT="+info.Commit,
		"--build-arg", "CREATED="+info.Created.Format(time.RFC3339),
		"-f", filepath.Join(src, "Dockerfile"), "-t", ref, src)
	dir := filepath.Join(tmp, "oci")
	run("push", ref, "oci:"+dir+":dockerfile-test")
	t.Logf("buildah bud + push: %s", time.Since(start).Round(100*time.Millisecond))
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("buildah's OCI layout: %+v, %v", im, err)
	}
	got, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}

	// The files.
	wantFS, gotFS := dockerfileTestFiles(t, want), dockerfileTestFiles(t, got)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range wantFS {
			if !yield(n) {
				return
			}
		}
		for n := range gotFS {
			if _, ok := wantFS[n]; !ok && !yield(n) {
				return
			}
		}
	}) {
		w, inWant := wantFS[name]
		g, inGot := gotFS[name]
		switch {
		case !inGot:
			t.Errorf("/%s: in hack/image's image, not in the Dockerfile's", name)
		case !inWant:
			t.Errorf("/%s: in the Dockerfile's image, not in hack/image's", name)
		case w != g:
			t.Errorf("/%s: Dockerfile %v, hack/image %v", name, g, w)
		}
	}
	if len(wantFS) != 6 {
		t.Errorf("hack/image's image holds %d paths, want 6 (/hub, /agent, /etc, /etc/passwd, /etc/group, /tmp)", len(wantFS))
	}
	if layers, err := got.Layers(); err != nil || len(layers) != 1 {
		t.Errorf("buildah made %d layers (%v), want 1", len(layers), err)
	}

	// The config.
	wc, err := want.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	gc, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gc.Config, wc.Config) {
		g, _ := json.MarshalIndent(gc.Config, "", "  ")
		w, _ := json.MarshalIndent(wc.Config, "", "  ")
		t.Errorf("config of the Dockerfile's image:\n%s\nof hack/image's:\n%s", g, w)
	}
	if gc.OS != wc.OS || gc.Architecture != wc.Architecture || gc.Variant != wc.Variant || !gc.Created.Time.Equal(wc.Created.Time) {
		t.Errorf("Dockerfile's image %s/%s%s created %s, hack/image's %s/%s%s created %s",
			gc.OS, gc.Architecture, gc.Variant, gc.Created.Time, wc.OS, wc.Architecture, wc.Variant, wc.Created.Time)
	}
}

// dockerfileTestFile is what the comparison sees of one path.
type dockerfileTestFile struct {
	Type     byte
	Mode     int64
	UID, GID int
	Size     int64
	SHA256   string
	ModTime  time.Time
}

func (f dockerfileTestFile) String() string {
	return fmt.Sprintf("{type %c mode %#o owner %d:%d size %d sha256 %.12s mtime %s}",
		f.Type, f.Mode, f.UID, f.GID, f.Size, f.SHA256, f.ModTime.Format(time.RFC3339))
}

// dockerfileTestFiles is the flattened file system of img by path ("etc/",
// "etc/passwd").
func dockerfileTestFiles(t *testing.T, img v1.Image) map[string]dockerfileTestFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]dockerfileTestFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		// Permission, setuid/setgid/sticky bits only: some writers (buildah)
		// add the file type's bits (S_IFREG, S_IFDIR) to the tar mode.
		f := dockerfileTestFile{Type: h.Typeflag, Mode: h.Mode & 0o7777, UID: h.Uid, GID: h.Gid, Size: h.Size, ModTime: h.ModTime.UTC()}
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				t.Fatal(err)
			}
			f.SHA256 = hex.EncodeToString(sum.Sum(nil))
		}
		files[name] = f
	}
}

// `make build` compiles the binaries the Dockerfile copies with the flags
// hack/image uses (buildFlags), static: the same bytes in both images.
func TestMakeBuildFlags(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make in PATH")
	}
	root := filepath.Dir(goEnvVar("GOMOD"))
	info := buildInfo{Version: imageTestVersion, Commit: imageTestCommit}
	cmd := exec.Command(mk, "-n", "build", "VERSION="+info.Version, "COMMIT="+info.Commit, "BIN=/flotilla-bin")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	flags := info.buildFlags()
	// The shell form: -ldflags' value quoted.
	want := strings.Join(flags[:len(flags)-1], " ") + ` "` + flags[len(flags)-1] + `"`
	for _, bin := range binaries {
		line := fmt.Sprintf("CGO_ENABLED=0 go build %s -o /flotilla-bin/%s ./%s", want, bin, bin)
		if !slices.Contains(strings.Split(string(out), "\n"), line) {
			t.Errorf("make -n build does not run\n  %s\nit runs:\n%s", line, out)
		}
	}
}
