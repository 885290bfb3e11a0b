package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// platformImage is what inspect found for one platform of an archive.
type platformImage struct {
	platform   string
	entrypoint []string
	user       string
	labels     map[string]string
	files      map[string]*tar.Header
	binary     []byte
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// inspect unpacks an archive that imagebuild wrote with nothing but the
// standard library (not the library that wrote it), checks every digest and
// size, and returns the image of each platform and the index.json's one
// descriptor.
func inspect(t *testing.T, archive string) (descriptor, []platformImage) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = data
	}
	if string(entries["oci-layout"]) != `{"imageLayoutVersion": "1.0.0"}` && !strings.Contains(string(entries["oci-layout"]), `"1.0.0"`) {
		t.Fatalf("%s: oci-layout is %q", archive, entries["oci-layout"])
	}
	blob := func(d descriptor) []byte {
		t.Helper()
		data, ok := entries["blobs/"+strings.Replace(d.Digest, ":", "/", 1)]
		if !ok {
			t.Fatalf("%s: no blob %s", archive, d.Digest)
		}
		sum := sha256.Sum256(data)
		if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(data)) != d.Size {
			t.Fatalf("%s: blob %s does not match its descriptor", archive, d.Digest)
		}
		return data
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(entries["index.json"], &index); err != nil {
		t.Fatalf("%s: index.json: %v", archive, err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("%s: index.json holds %+v, want one image index", archive, index.Manifests)
	}
	top := index.Manifests[0]
	var imageIndex struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(blob(top), &imageIndex); err != nil {
		t.Fatal(err)
	}
	var images []platformImage
	for _, m := range imageIndex.Manifests {
		if m.Platform == nil {
			t.Fatalf("%s: manifest %s has no platform", archive, m.Digest)
		}
		var manifest struct {
			Config descriptor   `json:"config"`
			Layers []descriptor `json:"layers"`
		}
		if err := json.Unmarshal(blob(m), &manifest); err != nil {
			t.Fatal(err)
		}
		var config struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
			Config       struct {
				Entrypoint []string          `json:"Entrypoint"`
				User       string            `json:"User"`
				Labels     map[string]string `json:"Labels"`
			} `json:"config"`
		}
		if err := json.Unmarshal(blob(manifest.Config), &config); err != nil {
			t.Fatal(err)
		}
		p := platformImage{
			platform:   config.OS + "/" + config.Architecture,
			entrypoint: config.Config.Entrypoint,
			user:       config.Config.User,
			labels:     config.Config.Labels,
			files:      map[string]*tar.Header{},
		}
		if want := m.Platform.OS + "/" + m.Platform.Architecture; p.platform != want {
			t.Errorf("%s: the index lists %s for a config of %s", archive, want, p.platform)
		}
		for _, l := range manifest.Layers {
			zr, err := gzip.NewReader(bytes.NewReader(blob(l)))
			if err != nil {
				t.Fatal(err)
			}
			lr := tar.NewReader(zr)
			for {
				h, err := lr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				p.files["/"+strings.TrimSuffix(h.Name, "/")] = h
				if len(p.entrypoint) > 0 && "/"+h.Name == p.entrypoint[0] {
					if p.binary, err = io.ReadAll(lr); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		images = append(images, p)
	}
	return top, images
}

// checkArchive checks what the issue asks of each image: both platforms, the
// entrypoint a static binary of the platform's architecture, a non-root user
// that /etc/passwd knows, and the OCI labels.
func checkArchive(t *testing.T, archive, name, version, revision string) {
	t.Helper()
	top, images := inspect(t, archive)
	if got := top.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("%s: ref.name %q, want %q", archive, got, version)
	}
	if got := top.Annotations["io.containerd.image.name"]; !strings.HasSuffix(got, "/"+name+":"+version) {
		t.Errorf("%s: io.containerd.image.name %q, want …/%s:%s", archive, got, name, version)
	}
	var platforms []string
	machines := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	for _, img := range images {
		platforms = append(platforms, img.platform)
		where := archive + " " + img.platform
		if want := []string{"/" + name}; !slices.Equal(img.entrypoint, want) {
			t.Errorf("%s: entrypoint %v, want %v", where, img.entrypoint, want)
		}
		if img.user != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", where, img.user)
		}
		for key, want := range map[string]string{
			"org.opencontainers.image.source":   "https://github.com/budgetguard/budgetguard",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
		} {
			if got := img.labels[key]; got != want {
				t.Errorf("%s: label %s=%q, want %q", where, key, got, want)
			}
		}
		h, ok := img.files["/"+name]
		if !ok || h.Mode&0o111 == 0 || h.Uid != 0 {
			t.Errorf("%s: /%s is not an executable owned by root in the layer: %+v", where, name, h)
			continue
		}
		if _, ok := img.files["/etc/passwd"]; !ok {
			t.Errorf("%s: no /etc/passwd", where)
		}
		if tmp, ok := img.files["/tmp"]; !ok || tmp.Mode&0o1777 != 0o1777 {
			t.Errorf("%s: /tmp is not a world-writable sticky directory: %+v", where, tmp)
		}
		bin, err := elf.NewFile(bytes.NewReader(img.binary))
		if err != nil {
			t.Errorf("%s: /%s is not an ELF binary: %v", where, name, err)
			continue
		}
		if bin.Machine != machines[img.platform] {
			t.Errorf("%s: /%s is built for %v", where, name, bin.Machine)
		}
		for _, prog := range bin.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s: /%s is dynamically linked; an empty base has no loader", where, name)
			}
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("%s: platforms %v, want %v", archive, platforms, want)
	}
}

// TestImagebuild builds the archive of a small static program twice, checks
// it, and checks that both builds are the same bytes.
func TestImagebuild(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", "linux_"+arch, "hello"), src)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GO111MODULE=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", arch, err, out)
		}
	}
	var archives [][]byte
	for i := range 2 {
		o := options{
			binDir:    filepath.Join(dir, "bin"),
			outDir:    filepath.Join(dir, fmt.Sprint("out", i)),
			version:   "v1.2.3",
			revision:  "0123456789abcdef",
			source:    "https://github.com/budgetguard/budgetguard",
			registry:  "ghcr.io/budgetguard",
			epoch:     1700000000,
			platforms: []string{"linux/amd64", "linux/arm64"},
		}
		if err := os.MkdirAll(o.outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		archive := filepath.Join(o.outDir, "hello.oci.tar")
		if _, err := buildArchive(o, "hello", archive); err != nil {
			t.Fatal(err)
		}
		checkArchive(t, archive, "hello", o.version, o.revision)
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, data)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the same binaries differ")
	}
}

// TestBuiltImages checks the archives that make images wrote, when it runs
// this test with IMAGES_DIR, IMAGES_VERSION and IMAGES_REVISION set.
func TestBuiltImages(t *testing.T) {
	dir := os.Getenv("IMAGES_DIR")
	if dir == "" {
		t.Skip("IMAGES_DIR is not set; make images sets it")
	}
	for _, name := range []string{"scheduler", "descheduler"} {
		t.Run(name, func(t *testing.T) {
			checkArchive(t, filepath.Join(dir, name+".oci.tar"), name, os.Getenv("IMAGES_VERSION"), os.Getenv("IMAGES_REVISION"))
		})
	}
}
