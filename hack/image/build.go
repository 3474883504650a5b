package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's non-root user (distroless's "nonroot"); the manifests'
// securityContext runs as the same uid (pkg/manifeststest checks).
const (
	nonrootUID = 65532
	userSpec   = "65532:65532"
)

// Contents of /etc/passwd and /etc/group: a name for uid 65532 (and root),
// so tools that look the user up (and Go's os/user) find one. The home does
// not exist on purpose: nothing in the image may write outside /tmp. The
// files under rootfs/ are the one source: the Dockerfile copies them too.
var (
	//go:embed rootfs/etc/passwd
	passwdFile string
	//go:embed rootfs/etc/group
	groupFile string
)

// pathEnv is the one environment variable of the image: the PATH every
// Dockerfile builder (BuildKit, buildah) gives an image made FROM scratch,
// so the Dockerfile's image has the same config. Nothing in the image uses
// it (no shell; the manifests run /hub and /agent by path).
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// versionPkg is where -ldflags -X stamps the version (the Makefile's LDFLAGS
// say the same: keep them in step).
const versionPkg = "github.com/flotilla-io/flotilla/pkg/version"

// binaries are the image's programs: /NAME built from ./NAME.
var binaries = []string{"hub", "agent"}

// buildInfo is what gets stamped into the binaries and the image's labels.
type buildInfo struct {
	Version string    // pkg/version.Version, label org.opencontainers.image.version
	Commit  string    // pkg/version.GitCommit, label ...revision
	Created time.Time // SOURCE_DATE_EPOCH: every mtime, the config's created
	Source  string    // label ...source
}

// ldflags are the Makefile's LDFLAGS for info.
func (b buildInfo) ldflags() string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.GitCommit=%s", versionPkg, b.Version, versionPkg, b.Commit)
}

// buildFlags are the `go build` flags of the binaries, the same as `make
// build`'s (with CGO_ENABLED=0), so the Dockerfile, which copies make
// build's bin/hub and bin/agent, ships the same bytes (TestMakeBuildFlags).
// -buildvcs=false: the stamped version says which commit (and -dirty); VCS
// info would make the binary depend on the checkout's state beyond that.
func (b buildInfo) buildFlags() []string {
	return []string{"-trimpath", "-buildvcs=false", "-ldflags", b.ldflags()}
}

// labels are the OCI annotation keys the image's config carries (the
// pre-defined keys of the image spec), so `crane config` or `docker
// inspect` tell what a running image is.
func (b buildInfo) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "flotilla",
		"org.opencontainers.image.description": "Flotilla multi-cluster failover: /hub (host cluster) and /agent (member clusters)",
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Commit,
		"org.opencontainers.image.source":      b.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     b.Created.UTC().Format(time.RFC3339),
	}
}

// platform is one os/arch[/variant] the image is built for.
func parsePlatform(s string) (v1.Platform, error) {
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return v1.Platform{}, err
	}
	if p.OS != "linux" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/ARCH[/VARIANT]", s)
	}
	if p.Variant != "" && p.Architecture != "arm" {
		return v1.Platform{}, fmt.Errorf("platform %q: a variant is only understood for arm (v6, v7)", s)
	}
	return *p, nil
}

// goEnv is the environment `go build` gets for p: static (no cgo), cross
// compiled when p is not the host's.
func goEnv(base []string, p v1.Platform) []string {
	env := append([]string{}, base...)
	env = append(env, "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// compile builds every binary for p into dir, in parallel (the link step
// dominates a warm build and is single-threaded).
func compile(ctx context.Context, root, dir string, p v1.Platform, info buildInfo, logf func(string, ...any)) error {
	var wg sync.WaitGroup
	errs := make([]error, len(binaries))
	for i, bin := range binaries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append([]string{"build"}, info.buildFlags()...), "-o", filepath.Join(dir, bin), "./"+bin)
			cmd := exec.CommandContext(ctx, "go", args...)
			cmd.Dir = root
			cmd.Env = goEnv(os.Environ(), p)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go build ./%s for %s: %w\n%s", bin, p, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logf("built %s for %s", strings.Join(binaries, ", "), p.String())
	return nil
}

// entry is one path of the image's only layer.
type entry struct {
	Name string // relative to /, directories end in "/"
	Mode int64  // permission bits (and sticky)
	Data []byte // a regular file's content
	Src  string // or the file it is copied from
}

// rootfs is the image's file system: the binaries of binDir, the user
// database, and an empty world-writable /tmp (sticky, like every /tmp) for
// anything that insists on a temp dir. Nothing else: no shell, no libc.
func rootfs(binDir string) []entry {
	es := []entry{
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/group", Mode: 0o644, Data: []byte(groupFile)},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwdFile)},
		{Name: "tmp/", Mode: 0o1777},
	}
	for _, b := range binaries {
		es = append(es, entry{Name: b, Mode: 0o755, Src: filepath.Join(binDir, b)})
	}
	return es
}

// writeLayer writes entries as a tar stream that depends only on their
// names, modes and contents: sorted, owned by 0:0 without user names, every
// mtime mtime, USTAR (no PAX access/change times).
func writeLayer(w io.Writer, entries []entry, mtime time.Time) error {
	es := append([]entry{}, entries...)
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	tw := tar.NewWriter(w)
	for _, e := range es {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR}
		var r io.Reader
		switch {
		case strings.HasSuffix(e.Name, "/"):
			h.Typeflag = tar.TypeDir
		case e.Src != "":
			f, err := os.Open(e.Src)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			h.Typeflag, h.Size, r = tar.TypeReg, st.Size(), f
		default:
			h.Typeflag, h.Size, r = tar.TypeReg, int64(len(e.Data)), bytes.NewReader(e.Data)
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		if r != nil {
			if n, err := io.Copy(tw, r); err != nil || n != h.Size {
				return fmt.Errorf("%s: wrote %d of %d bytes: %v", e.Name, n, h.Size, err)
			}
		}
	}
	return tw.Close()
}

// gzipLayer compresses a layer with a fixed header (no name, mtime 0,
// OS unknown) at a fixed level: the same tar gives the same blob with the
// same Go version.
func gzipLayer(tarball []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Header = gzip.Header{OS: 255}
	if _, err := zw.Write(tarball); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newImage is the image for p with entries as its one layer, starting from
// nothing (no base image to pull, nothing in it we did not put there).
func newImage(entries []entry, p v1.Platform, info buildInfo) (v1.Image, error) {
	var raw bytes.Buffer
	if err := writeLayer(&raw, entries, info.Created); err != nil {
		return nil, err
	}
	gz, err := gzipLayer(raw.Bytes())
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: info.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: created, CreatedBy: "go run ./hack/image", Comment: "/hub, /agent, /etc/passwd, /etc/group, /tmp",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = created
	cfg.Author = ""
	cfg.Config = v1.Config{
		User:       userSpec,
		Env:        []string{pathEnv},
		Entrypoint: []string{"/hub"},
		WorkingDir: "/",
		Labels:     info.labels(),
	}
	return mutate.ConfigFile(img, cfg)
}

// newIndex is the multi-platform index of imgs (in the order given).
func newIndex(imgs []v1.Image, ps []v1.Platform) v1.ImageIndex {
	var adds []mutate.IndexAddendum
	for i, img := range imgs {
		p := ps[i]
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
}

// layoutIndex is the index.json of an OCI layout holding what (an image or
// an index) under ref: the OCI tag annotation, and containerd's full name
// so `ctr import` of the layout names it too.
func layoutIndex(what mutate.Appendable, ref name.Tag) v1.ImageIndex {
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: what,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			"org.opencontainers.image.ref.name": ref.TagStr(),
			"io.containerd.image.name":          ref.Name(),
		}},
	})
}

// clearLayout empties dir for a new layout, refusing to delete a
// directory that is not one (a mistyped --oci-layout must not cost files).
func clearLayout(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("--oci-layout %s: exists and is not an OCI image layout; not overwriting it", dir)
	}
	return os.RemoveAll(dir)
}

// writeTarball writes img as a docker-archive (`docker save`'s format:
// manifest.json + config + layers) tagged ref: `docker load -i`, `kind load
// image-archive`, `ctr -n k8s.io images import` and `podman load` read it.
func writeTarball(path string, ref name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
