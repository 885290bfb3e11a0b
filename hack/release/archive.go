package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// entry is one file of an archive: its name inside, its content and whether
// it is executable.
type entry struct {
	name string
	data []byte
	exec bool
}

func archiveCmd(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	epoch := fs.Int64("epoch", -1, "seconds since 1970 for every timestamp")
	out := fs.String("out", "", "the archive to write, .tar.gz or .zip")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *epoch < 0 || *out == "" || fs.NArg() == 0 {
		return errors.New("usage: release archive --epoch S --out FILE NAME=PATH [NAME=PATH]")
	}
	var entries []entry
	for _, arg := range fs.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("%q: want NAME=PATH", arg)
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, entry{name: name, data: data, exec: info.Mode()&0o111 != 0})
	}
	switch {
	case strings.HasSuffix(*out, ".tar.gz"):
		return writeFile(*out, func(w io.Writer) error { return writeTarGz(w, entries, *epoch) })
	case strings.HasSuffix(*out, ".zip"):
		return writeFile(*out, func(w io.Writer) error { return writeZip(w, entries, *epoch) })
	default:
		return fmt.Errorf("--out %s: want a .tar.gz or a .zip", *out)
	}
}

// writeFile writes path through write, into a temporary file renamed over
// path only when write succeeded.
func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".release-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := write(tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// sorted returns entries by name, so that the order of the arguments does
// not change the bytes.
func sorted(entries []entry) []entry {
	s := append([]entry(nil), entries...)
	sort.Slice(s, func(i, j int) bool { return s[i].name < s[j].name })
	return s
}

func mode(e entry) int64 {
	if e.exec {
		return 0o755
	}
	return 0o644
}

// writeTarGz writes entries as a gzip-compressed tar, with the directories
// their names imply, every time epoch and owner root.
func writeTarGz(w io.Writer, entries []entry, epoch int64) error {
	mtime := time.Unix(epoch, 0).UTC()
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	// No name and no modification time in the gzip header.
	gz.ModTime = time.Time{}
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, e := range sorted(entries) {
		for dir := filepath.Dir(e.name); dir != "." && !dirs[dir]; dir = filepath.Dir(dir) {
			dirs[dir] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	for _, e := range sorted(entries) {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: mode(e), Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeZip writes entries as a zip (deflate), every time epoch.
func writeZip(w io.Writer, entries []entry, epoch int64) error {
	mtime := time.Unix(epoch, 0).UTC()
	zw := zip.NewWriter(w)
	for _, e := range sorted(entries) {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
		hdr.SetMode(os.FileMode(mode(e)))
		f, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := f.Write(e.data); err != nil {
			return err
		}
	}
	return zw.Close()
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func checksumsCmd(args []string) error {
	fs := flag.NewFlagSet("checksums", flag.ContinueOnError)
	out := fs.String("out", "", "the checksums file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("usage: release checksums --out FILE FILE [FILE]")
	}
	files := append([]string(nil), fs.Args()...)
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		sum, err := sha256File(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.ToSlash(f))
	}
	return writeFile(*out, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}
