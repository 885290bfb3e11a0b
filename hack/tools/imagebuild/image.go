package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the images run as: distroless' nonroot.
const (
	uid      = 65532
	userName = "nonroot"
)

type options struct {
	binDir, outDir    string
	version, revision string
	source, registry  string
	epoch             int64
	platforms         []string
}

func (o options) imageName(name string) string {
	return strings.TrimSuffix(o.registry, "/") + "/" + name
}

func (o options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   o.source,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  time.Unix(o.epoch, 0).UTC().Format(time.RFC3339),
	}
}

// buildArchive writes the image index of name, over every platform, as an
// OCI layout in a tar file at archive, and returns the index's digest.
func buildArchive(o options, name, archive string) (v1.Hash, error) {
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range o.platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok {
			return v1.Hash{}, fmt.Errorf("platform %q is not os/arch", p)
		}
		img, err := buildImage(o, name, osName, arch)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: osName, Architecture: arch},
			},
		})
	}
	idx = mutate.Annotations(idx, o.labels()).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	dir, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	ref := o.imageName(name) + ":" + o.version
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// containerd's import (kind load image-archive) names the image by
		// the first; the OCI layout spec's tag is the second.
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": o.version,
	})); err != nil {
		return v1.Hash{}, err
	}
	if err := tarDir(dir, archive, o.epoch); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// buildImage returns the image of binary name for one platform: one layer
// with /<name>, /etc/passwd and /etc/group on an empty base.
func buildImage(o options, name, osName, arch string) (v1.Image, error) {
	binary, err := os.ReadFile(filepath.Join(o.binDir, osName+"_"+arch, name))
	if err != nil {
		return nil, err
	}
	mtime := time.Unix(o.epoch, 0).UTC()
	layerTar, err := tarFiles([]file{
		{path: "etc/", mode: 0o755 | fs.ModeDir},
		{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", userName, uid)},
		{path: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", userName, uid, uid, userName, userName)},
		{path: "tmp/", mode: 0o777 | fs.ModeDir | fs.ModeSticky},
		{path: name, mode: 0o755, data: binary},
	}, mtime)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: mtime}, CreatedBy: "imagebuild: /" + name, Comment: "budgetguard " + o.version},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = osName
	cfg.Architecture = arch
	cfg.Created = v1.Time{Time: mtime}
	cfg.Config.Entrypoint = []string{"/" + name}
	cfg.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = o.labels()
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: mtime})
}

type file struct {
	path string
	mode fs.FileMode
	data []byte
}

// tarFiles returns a tar of files, in their order, owned by root, with mtime.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.path,
			Mode:    int64(f.mode.Perm()),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.mode.IsDir() {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files below dir, sorted by path, into a tar at out, with
// fixed owners, modes and times.
func tarDir(dir, out string, epoch int64) error {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	var files []file
	for _, path := range paths {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if info.IsDir() {
			files = append(files, file{path: rel + "/", mode: 0o755 | fs.ModeDir})
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, file{path: rel, mode: 0o644, data: data})
	}
	data, err := tarFiles(files, time.Unix(epoch, 0).UTC())
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}
