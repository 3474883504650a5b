// Command image builds Flotilla's container image without a container
// runtime: both binaries (/hub, /agent), static and version-stamped, in one
// reproducible layer on an empty base, written as an OCI image layout and/or
// a docker-archive tarball. `make image` runs it; docs/install.md#image.
//
//	go run ./hack/image --image REF [--oci-layout DIR] [--tarball FILE]
//	    [--platforms linux/amd64,linux/arm64] [--kustomize FILE]
//
// Why go-containerregistry and not ko: ko builds one Go main per image with
// that main as the entrypoint, while this image ships two binaries that the
// manifests run as /hub and /agent; here we also decide every byte of the
// one layer (reproducibility), and ko is itself built on go-containerregistry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

const defaultRepository = "ghcr.io/flotilla-io/flotilla"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	Image     string
	Version   string
	Commit    string
	Source    string
	Platforms string
	Layout    string
	Tarball   string
	Kustomize string
	Root      string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Image, "image", "", "the image reference to tag (default "+defaultRepository+":<version>)")
	fs.StringVar(&o.Version, "version", "", "version stamped into the binaries and the labels (default: git describe --tags --always --dirty, as the Makefile)")
	fs.StringVar(&o.Commit, "commit", "", "commit stamped into the binaries and the labels (default: git rev-parse --short HEAD)")
	fs.StringVar(&o.Source, "source", "https://github.com/flotilla-io/flotilla", "label org.opencontainers.image.source")
	fs.StringVar(&o.Platforms, "platforms", "", "comma-separated linux/ARCH[/VARIANT] to build; more than one makes an image index (default linux/$(go env GOARCH))")
	fs.StringVar(&o.Layout, "oci-layout", "", "write an OCI image layout into this directory (replaced if it holds one)")
	fs.StringVar(&o.Tarball, "tarball", "", "write a docker-archive tarball (docker load, kind load image-archive, ctr import) to this file; with several platforms, the host's (else the first)")
	fs.StringVar(&o.Kustomize, "kustomize", "", "rewrite this kustomize Component (kustomize/image/kustomization.yaml) to deploy the image")
	fs.StringVar(&o.Root, "root", "", "the repository root (default: the module of the working directory)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./hack/image --image REF [--oci-layout DIR] [--tarball FILE] [--platforms P,...] [--kustomize FILE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Layout == "" && o.Tarball == "" && o.Kustomize == "" {
		return o, errors.New("nothing to write: give --oci-layout, --tarball and/or --kustomize")
	}
	return o, nil
}

// gitOut is the trimmed output of git in dir, "" if git fails (not a
// checkout, no git).
func gitOut(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// sourceDateEpoch is the time every file and the image claim: the
// environment's SOURCE_DATE_EPOCH (reproducible-builds.org), else the HEAD
// commit's time, else the epoch: never the clock.
func sourceDateEpoch(getenv func(string) string, root string) (time.Time, error) {
	v := getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		v = gitOut(root, "log", "-1", "--format=%ct", "HEAD")
	}
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", v)
	}
	return time.Unix(n, 0).UTC(), nil
}

// resolve fills what the command line left out the way the Makefile does.
func resolve(o options, getenv func(string) string) (options, buildInfo, []v1.Platform, name.Tag, error) {
	fail := func(err error) (options, buildInfo, []v1.Platform, name.Tag, error) {
		return o, buildInfo{}, nil, name.Tag{}, err
	}
	if o.Root == "" {
		gomod := goEnvVar("GOMOD")
		if gomod == "" || gomod == os.DevNull {
			return fail(errors.New("not inside the flotilla module: run from the repository or give --root"))
		}
		o.Root = filepath.Dir(gomod)
	}
	if o.Version == "" {
		o.Version = gitOut(o.Root, "describe", "--tags", "--always", "--dirty")
		if o.Version == "" {
			o.Version = "v0.0.0-dev"
		}
	}
	if o.Commit == "" {
		o.Commit = gitOut(o.Root, "rev-parse", "--short", "HEAD")
		if o.Commit == "" {
			o.Commit = "unknown"
		}
	}
	if o.Image == "" {
		o.Image = defaultRepository + ":" + o.Version
	}
	// A tag, not a digest: a digest is what the build produces.
	ref, err := name.NewTag(o.Image, name.StrictValidation)
	if err != nil {
		return fail(fmt.Errorf("--image %q: want REPOSITORY:TAG: %w", o.Image, err))
	}
	if o.Platforms == "" {
		arch := goEnvVar("GOARCH")
		if arch == "" {
			return fail(errors.New("go env GOARCH failed"))
		}
		o.Platforms = "linux/" + arch
	}
	var ps []v1.Platform
	for _, s := range strings.Split(o.Platforms, ",") {
		p, err := parsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fail(err)
		}
		if slices.ContainsFunc(ps, func(q v1.Platform) bool { return q.Equals(p) }) {
			return fail(fmt.Errorf("--platforms: %s twice", p))
		}
		ps = append(ps, p)
	}
	created, err := sourceDateEpoch(getenv, o.Root)
	if err != nil {
		return fail(err)
	}
	return o, buildInfo{Version: o.Version, Commit: o.Commit, Created: created, Source: o.Source}, ps, ref, nil
}

func goEnvVar(key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// tarballPlatform is the platform whose image a docker-archive (one image)
// holds: the host's when built, else the first.
func tarballPlatform(ps []v1.Platform, hostArch string) int {
	for i, p := range ps {
		if p.Architecture == hostArch {
			return i
		}
	}
	return 0
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	o, info, ps, ref, err := resolve(o, os.Getenv)
	if err != nil {
		return err
	}
	start := time.Now()
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, ">> image: "+format+"\n", a...) }

	work, err := os.MkdirTemp("", "flotilla-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	var imgs []v1.Image
	for i, p := range ps {
		dir := filepath.Join(work, strconv.Itoa(i))
		if err := compile(ctx, o.Root, dir, p, info, logf); err != nil {
			return err
		}
		img, err := newImage(rootfs(dir), p, info)
		if err != nil {
			return fmt.Errorf("image for %s: %w", p, err)
		}
		imgs = append(imgs, img)
	}

	// What the reference names: the image, or with several platforms the
	// index of them.
	var top mutate.Appendable = imgs[0]
	if len(imgs) > 1 {
		top = newIndex(imgs, ps)
	}
	digest, err := top.Digest()
	if err != nil {
		return err
	}

	if o.Layout != "" {
		if err := clearLayout(o.Layout); err != nil {
			return err
		}
		if _, err := layout.Write(o.Layout, layoutIndex(top, ref)); err != nil {
			return fmt.Errorf("writing OCI layout %s: %w", o.Layout, err)
		}
		logf("wrote OCI layout %s", o.Layout)
	}
	if o.Tarball != "" {
		i := tarballPlatform(ps, goEnvVar("GOARCH"))
		if err := writeTarball(o.Tarball, ref, imgs[i]); err != nil {
			return fmt.Errorf("writing %s: %w", o.Tarball, err)
		}
		size := int64(0)
		if st, err := os.Stat(o.Tarball); err == nil {
			size = st.Size()
		}
		logf("wrote docker-archive %s (%s, %.1f MB)", o.Tarball, ps[i], float64(size)/1e6)
	}
	if o.Kustomize != "" {
		if err := writeComponent(o.Kustomize, ref); err != nil {
			return err
		}
		logf("%s now deploys %s", o.Kustomize, ref.Name())
	}
	logf("%s (version %s, commit %s, created %s) in %s", ref.Name(), info.Version, info.Commit,
		info.Created.Format(time.RFC3339), time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(stdout, "%s@%s\n", ref.Name(), digest)
	return nil
}
