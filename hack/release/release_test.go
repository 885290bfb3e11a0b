package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// TestArchivesAreReproducible: the same files give the same bytes whatever
// the order of the arguments, and the archive holds them with the epoch's
// time and their modes.
func TestArchivesAreReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	lic := filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lic, []byte("license\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".tar.gz", ".zip"} {
		a, b := filepath.Join(dir, "a"+ext), filepath.Join(dir, "b"+ext)
		if err := archiveCmd([]string{"--epoch", "1700000000", "--out", a, "kubectl-x=" + bin, "LICENSE=" + lic}); err != nil {
			t.Fatal(err)
		}
		if err := archiveCmd([]string{"--epoch", "1700000000", "--out", b, "LICENSE=" + lic, "kubectl-x=" + bin}); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Errorf("%s: two runs differ", ext)
		}
		modes := map[string]os.FileMode{}
		if ext == ".zip" {
			zr, err := zip.NewReader(bytes.NewReader(da), int64(len(da)))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range zr.File {
				modes[f.Name] = f.Mode().Perm()
				if f.Modified.Unix() != 1700000000 {
					t.Errorf("zip %s: modified %v", f.Name, f.Modified)
				}
			}
		} else {
			gz, err := gzip.NewReader(bytes.NewReader(da))
			if err != nil {
				t.Fatal(err)
			}
			if !gz.ModTime.IsZero() || gz.Name != "" {
				t.Errorf("gzip header carries name %q, time %v", gz.Name, gz.ModTime)
			}
			tr := tar.NewReader(gz)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				modes[h.Name] = os.FileMode(h.Mode).Perm()
				if h.ModTime.Unix() != 1700000000 || h.Uid != 0 || h.Gid != 0 {
					t.Errorf("tar %s: time %v, owner %d:%d", h.Name, h.ModTime, h.Uid, h.Gid)
				}
			}
		}
		if modes["kubectl-x"] != 0o755 || modes["LICENSE"] != 0o644 || len(modes) != 2 {
			t.Errorf("%s: entries %v, want kubectl-x 0755 and LICENSE 0644", ext, modes)
		}
	}
}

// TestChartPackage: the chart packaged twice gives the same bytes; helm
// loads it with the release's version (without the v) and appVersion, and
// the rest of Chart.yaml (comments too) is kept.
func TestChartPackage(t *testing.T) {
	dir := t.TempDir()
	chartDir := "../../charts/budgetguard"
	a, b := filepath.Join(dir, "a.tgz"), filepath.Join(dir, "b.tgz")
	for _, out := range []string{a, b} {
		if err := chartCmd([]string{"--epoch", "1700000000", "--version", "v1.2.3-dev.gabc1234", "--out", out, "--dir", filepath.Join(dir, "unpacked"), chartDir}); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Error("two packagings differ")
	}
	ch, err := loader.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3-dev.gabc1234" || ch.Metadata.AppVersion != "v1.2.3-dev.gabc1234" {
		t.Errorf("version %q, appVersion %q", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	orig, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "unpacked", "budgetguard", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(orig), "\n") {
		if strings.HasPrefix(line, "#") && !strings.Contains(string(got), line) {
			t.Errorf("Chart.yaml lost the line %q", line)
		}
	}
	if err := chartCmd([]string{"--epoch", "0", "--version", "1.2.3", "--out", filepath.Join(dir, "c.tgz"), chartDir}); err == nil {
		t.Error("a version without the v was accepted")
	}
}

// TestKrewManifest: each platform gets its archive's sha256 and URI; a
// platform without its archive, and an archive no platform takes, are errors.
func TestKrewManifest(t *testing.T) {
	tmpl, err := os.ReadFile("../../manifests/krew/budgetguard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var archives []string
	for _, p := range []string{"linux_amd64.tar.gz", "linux_arm64.tar.gz", "darwin_amd64.tar.gz", "darwin_arm64.tar.gz", "windows_amd64.zip", "windows_arm64.zip"} {
		path := filepath.Join(dir, "kubectl-budgetguard_"+p)
		if err := os.WriteFile(path, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		archives = append(archives, path)
	}
	out, err := krewManifest(tmpl, "v9.8.7", "https://example.com/dl", archives)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	// sha256("windows_arm64.zip"), the content of that archive.
	sum, _ := sha256File(archives[5])
	for _, want := range []string{"version: v9.8.7", "uri: https://example.com/dl/v9.8.7/kubectl-budgetguard_windows_arm64.zip", "sha256: " + sum} {
		if !strings.Contains(s, want) {
			t.Errorf("manifest lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "0000000000000000") {
		t.Error("an all-zero sha256 is left")
	}
	if _, err := krewManifest(tmpl, "v9.8.7", "https://example.com/dl", archives[:5]); err == nil || !strings.Contains(err.Error(), "windows/arm64") {
		t.Errorf("a missing archive: err = %v", err)
	}
	extra := filepath.Join(dir, "kubectl-budgetguard_plan9_amd64.tar.gz")
	if err := os.WriteFile(extra, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := krewManifest(tmpl, "v9.8.7", "https://example.com/dl", append(archives, extra)); err == nil {
		t.Error("an archive no platform takes was accepted")
	}
}
