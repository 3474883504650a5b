package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-io/flotilla/pkg/manifeststest"
)

// The layer depends on names, modes and contents only: not on the order
// entries come in, nor on the source files' own mtimes and permissions.
func TestWriteLayerIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hub")
	if err := os.WriteFile(bin, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	es := []entry{{Name: "tmp/", Mode: 0o1777}, {Name: "hub", Mode: 0o755, Src: bin}, {Name: "etc/", Mode: 0o755},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwdFile)}}
	mtime := time.Unix(1234567890, 0)
	var a, b bytes.Buffer
	if err := writeLayer(&a, es, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o777); err != nil {
		t.Fatal(err)
	}
	rev := []entry{es[3], es[2], es[1], es[0]}
	if err := writeLayer(&b, rev, mtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same entries in another order (or with other source mtimes) gave another tar")
	}
	ga, err := gzipLayer(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := gzipLayer(b.Bytes())
	if !bytes.Equal(ga, gb) {
		t.Fatal("gzip of the same tar differs")
	}
	// Fixed gzip header: mtime 0 (bytes 4-7), OS unknown (byte 9).
	if !bytes.Equal(ga[4:8], []byte{0, 0, 0, 0}) || ga[9] != 255 {
		t.Errorf("gzip header % x: want mtime 0 and OS 255", ga[:10])
	}

	tr := tar.NewReader(&a)
	var got []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name+" "+strconv.FormatInt(h.Mode, 8))
		if !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Gid != 0 || h.Format != tar.FormatUSTAR {
			t.Errorf("%s: mtime %s uid %d gid %d format %s", h.Name, h.ModTime, h.Uid, h.Gid, h.Format)
		}
		if h.Name == "hub" {
			if b, _ := io.ReadAll(tr); string(b) != "binary" {
				t.Errorf("hub content %q", b)
			}
		}
	}
	if want := "etc/ 755,etc/passwd 644,hub 755,tmp/ 1777"; strings.Join(got, ",") != want {
		t.Errorf("entries %s, want %s", strings.Join(got, ","), want)
	}
}

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"linux/amd64", "linux/amd64", true},
		{"linux/arm64", "linux/arm64", true},
		{"linux/arm/v7", "linux/arm/v7", true},
		{"windows/amd64", "", false},
		{"linux", "", false},
		{"linux/arm64/v8", "", false},
	} {
		p, err := parsePlatform(tc.in)
		if (err == nil) != tc.ok || (tc.ok && p.String() != tc.want) {
			t.Errorf("parsePlatform(%q) = %s, %v; want %s (ok %v)", tc.in, p.String(), err, tc.want, tc.ok)
		}
	}
	env := strings.Join(goEnv(nil, v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}), " ")
	if env != "CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7" {
		t.Errorf("goEnv(linux/arm/v7) = %s", env)
	}
	ps := []v1.Platform{{OS: "linux", Architecture: "arm64"}, {OS: "linux", Architecture: "amd64"}}
	if tarballPlatform(ps, "amd64") != 1 || tarballPlatform(ps, "s390x") != 0 {
		t.Error("tarballPlatform: want the host's platform, else the first")
	}
}

// Several platforms make an index of one image each, written to the layout
// under the reference; read back, each image has its own platform.
func TestMultiPlatformIndex(t *testing.T) {
	info := buildInfo{Version: "v1.2.3", Commit: "abc", Created: time.Unix(0, 0)}
	ps := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	var imgs []v1.Image
	for _, p := range ps {
		img, err := newImage([]entry{{Name: "hub", Mode: 0o755, Data: []byte("hub for " + p.Architecture)}}, p, info)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	ref, _ := name.NewTag("localhost:5000/flotilla:v1.2.3", name.StrictValidation)
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := layout.Write(dir, layoutIndex(newIndex(imgs, ps), ref)); err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := top.IndexManifest()
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex ||
		tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Fatalf("index.json %+v: want one image index tagged v1.2.3", tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 2 {
		t.Fatalf("%d manifests in the index, want 2", len(im.Manifests))
	}
	for i, d := range im.Manifests {
		if d.Platform == nil || !d.Platform.Equals(ps[i]) {
			t.Errorf("manifest %d: platform %v, want %s", i, d.Platform, ps[i])
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := img.ConfigFile()
		if cfg.Architecture != ps[i].Architecture || cfg.Config.User != userSpec {
			t.Errorf("image %d: arch %s user %s", i, cfg.Architecture, cfg.Config.User)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	noenv := func(string) string { return "" }
	if got, err := sourceDateEpoch(func(string) string { return "86400" }, t.TempDir()); err != nil || got.Unix() != 86400 {
		t.Errorf("SOURCE_DATE_EPOCH=86400: %s, %v", got, err)
	}
	if _, err := sourceDateEpoch(func(string) string { return "yesterday" }, t.TempDir()); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday accepted")
	}
	// Outside git: the epoch, never the clock.
	if got, err := sourceDateEpoch(noenv, t.TempDir()); err != nil || got.Unix() != 0 {
		t.Errorf("outside git: %s, %v; want 0", got, err)
	}
	// In the checkout: the HEAD commit's time.
	root := filepath.Dir(goEnvVar("GOMOD"))
	head := gitOut(root, "log", "-1", "--format=%ct", "HEAD")
	if head == "" {
		t.Skip("not a git checkout")
	}
	if got, err := sourceDateEpoch(noenv, root); err != nil || strconv.FormatInt(got.Unix(), 10) != head {
		t.Errorf("in git: %s, %v; want HEAD's %s", got, err, head)
	}
}

func TestParseFlags(t *testing.T) {
	if _, err := parseFlags([]string{"--image", "x/y:z"}, io.Discard); err == nil {
		t.Error("no output accepted")
	}
	o, err := parseFlags([]string{"--tarball", "f.tar", "--image", "localhost/f:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := resolve(o, func(string) string { return "0" }); err != nil {
		t.Errorf("resolve: %v", err)
	}
	for _, bad := range []string{"flotilla:dev", "localhost/flotilla", "localhost/flotilla@sha256:" + strings.Repeat("a", 64)} {
		o.Image = bad
		if _, _, _, _, err := resolve(o, func(string) string { return "0" }); err == nil {
			t.Errorf("--image %s accepted: want REGISTRY/REPOSITORY:TAG", bad)
		}
	}
	o.Image, o.Platforms = "localhost/f:1", "linux/amd64,linux/amd64"
	if _, _, _, _, err := resolve(o, func(string) string { return "0" }); err == nil {
		t.Error("a platform twice accepted")
	}
}

// A mistyped --oci-layout must not delete a directory that is not a layout.
func TestClearLayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(dir); err == nil {
		t.Fatal("cleared a directory that is not an OCI layout")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(dir); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
}

// The Component the builder writes is what every kustomization deploys:
// rendered by kubectl's own kustomize (bin/kubectl, `make tools`) from a
// copy of kustomize/ and manifests/, every Flotilla container of the hub,
// the hub with DNS traffic, and an agent overlay runs the image.
func TestComponentSetsEveryImage(t *testing.T) {
	root := filepath.Dir(goEnvVar("GOMOD"))
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no kubectl in bin/ (make tools) or PATH")
		}
	}
	// A copy (the Component is rewritten), whose agent overlays have their
	// placeholder hub.kubeconfig (none is in git).
	tmp := t.TempDir()
	if err := manifeststest.KustomizeTree(root, tmp); err != nil {
		t.Fatal(err)
	}
	// Numeric and dotted tags, a registry with a port: kustomize must get
	// each as written (a bare 1234 would be a YAML number).
	for _, image := range []string{"localhost/flotilla:e2e", "registry.example:5000/team/flotilla:1234", "ghcr.io/flotilla-io/flotilla:v0.2.0-rc.1"} {
		ref, err := name.NewTag(image, name.StrictValidation)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeComponent(filepath.Join(tmp, "kustomize/image/kustomization.yaml"), ref); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"kustomize/hub", "kustomize/hub-dns-traffic", "kustomize/agent/overlays/member1"} {
			out, err := exec.Command(kubectl, "kustomize", filepath.Join(tmp, k)).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", k, err, stderrOf(err))
			}
			images, users := imageTestContainerImages(t, out)
			if len(images) == 0 {
				t.Fatalf("%s renders no workload", k)
			}
			for c, got := range images {
				if got != image {
					t.Errorf("%s: %s runs %s, want %s", k, c, got, image)
				}
				// The pods run as the image's user (runAsNonRoot needs a
				// numeric one, and /etc/passwd names it).
				if users[c] != strconv.Itoa(nonrootUID)+":"+strconv.Itoa(nonrootUID) || users[c] != userSpec {
					t.Errorf("%s: %s runs as %s, the image's user is %s", k, c, users[c], userSpec)
				}
			}
		}
	}
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// imageTestContainerImages is kind/name/container → image, and → the
// uid:gid it runs as (container securityContext over the pod's), of every
// pod template in a rendered multi-document YAML.
func imageTestContainerImages(t *testing.T, rendered []byte) (images, users map[string]string) {
	t.Helper()
	images, users = map[string]string{}, map[string]string{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return images, users
		} else if err != nil {
			t.Fatal(err)
		}
		// Unstructured's own decoding keeps integers int64.
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		podUID, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "securityContext", "runAsUser")
		podGID, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "securityContext", "runAsGroup")
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				m, _ := c.(map[string]any)
				img, _ := m["image"].(string)
				n, _ := m["name"].(string)
				key := u.GetKind() + "/" + u.GetName() + "/" + n
				images[key] = img
				uid, gid := podUID, podGID
				if v, ok, _ := unstructured.NestedInt64(m, "securityContext", "runAsUser"); ok {
					uid = v
				}
				if v, ok, _ := unstructured.NestedInt64(m, "securityContext", "runAsGroup"); ok {
					gid = v
				}
				users[key] = strconv.FormatInt(uid, 10) + ":" + strconv.FormatInt(gid, 10)
			}
		}
	}
}
