// Command imagepack packs static binaries into a one-layer image and writes
// it as a docker-archive that `ctr images import` reads. The real-node e2e
// provider (hack/realnode-up.sh) makes its pause and CoreDNS images with it:
// its nodes reach no registry. Flotilla's own image comes from hack/image
// (`make image`), exactly as users build it.
//
//	go run ./hack/realnode/imagepack --image REF --out FILE [--user UID] BIN=/PATH ... -- ENTRYPOINT...
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagepack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagepack", flag.ContinueOnError)
	ref := fs.String("image", "", "image reference (REGISTRY/REPOSITORY:TAG)")
	out := fs.String("out", "", "docker-archive to write")
	user := fs.String("user", "", "config User (empty: root)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, entrypoint := fs.Args(), []string(nil)
	for i, a := range files {
		if a == "--" {
			files, entrypoint = files[:i], files[i+1:]
			break
		}
	}
	if *ref == "" || *out == "" || len(files) == 0 || len(entrypoint) == 0 {
		return errors.New("usage: imagepack --image REF --out FILE [--user UID] SRC=/DEST [SRC=/DEST] -- ENTRYPOINT [ARG]")
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		src, dest, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(dest, "/") {
			return fmt.Errorf("%q: want SRC=/DEST", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		// Parent directories first, as a tar from a file system has them.
		parts := strings.Split(strings.TrimPrefix(dest, "/"), "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/") + "/"
			if !dirs[dir] {
				dirs[dir] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
					return err
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dest, "/"), Mode: 0o755, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	// /tmp, as CoreDNS and most programs expect one.
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: entrypoint, User: *user, WorkingDir: "/"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(*out, tag, img)
}
