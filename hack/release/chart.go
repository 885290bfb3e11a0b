package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
)

func chartCmd(args []string) error {
	fset := flag.NewFlagSet("chart", flag.ContinueOnError)
	epoch := fset.Int64("epoch", -1, "seconds since 1970 for every timestamp")
	version := fset.String("version", "", "budgetguard's version, e.g. v0.1.0: the chart's appVersion, and its version without the v")
	out := fset.String("out", "", "the .tgz to write")
	dir := fset.String("dir", "", "also write the versioned chart unpacked into this directory (as DIR/<chart name>/)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *epoch < 0 || *version == "" || *out == "" || fset.NArg() != 1 {
		return errors.New("usage: release chart --epoch S --version V --out FILE [--dir DIR] CHART_DIR")
	}
	name, entries, err := versionedChart(fset.Arg(0), *version)
	if err != nil {
		return err
	}
	prefixed := make([]entry, len(entries))
	for i, e := range entries {
		prefixed[i] = entry{name: name + "/" + e.name, data: e.data}
	}
	if err := writeFile(*out, func(w io.Writer) error { return writeTarGz(w, prefixed, *epoch) }); err != nil {
		return err
	}
	// What helm install reads back: the packaged chart must load, with the
	// version it was given.
	ch, err := loader.Load(*out)
	if err != nil {
		return fmt.Errorf("the packaged chart %s does not load: %w", *out, err)
	}
	if ch.Metadata.Version != strings.TrimPrefix(*version, "v") || ch.Metadata.AppVersion != *version {
		return fmt.Errorf("the packaged chart %s has version %q and appVersion %q, want %q and %q", *out, ch.Metadata.Version, ch.Metadata.AppVersion, strings.TrimPrefix(*version, "v"), *version)
	}
	if *dir != "" {
		for _, e := range entries {
			path := filepath.Join(*dir, name, filepath.FromSlash(e.name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, e.data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	versionLine    = regexp.MustCompile(`(?m)^version:.*$`)
	appVersionLine = regexp.MustCompile(`(?m)^appVersion:.*$`)
	nameLine       = regexp.MustCompile(`(?m)^name:\s*(\S+)\s*$`)
)

// versionedChart reads the chart in dir as helm package reads it (hidden
// files and what .helmignore names are left out) and returns its name and
// files, with Chart.yaml's version and appVersion lines set to version: the
// rest of Chart.yaml, comments included, stays as it is.
func versionedChart(dir, version string) (string, []entry, error) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		return "", nil, fmt.Errorf("--version %q is not a semantic version with a leading v", version)
	}
	rules := ignore.Empty()
	if data, err := os.ReadFile(filepath.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return "", nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	rules.AddDefaults()
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") || rules.Ignore(rel, info) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, entry{name: filepath.ToSlash(rel), data: data})
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	name := ""
	for i, e := range entries {
		if e.name != "Chart.yaml" {
			continue
		}
		m := nameLine.FindSubmatch(e.data)
		if m == nil {
			return "", nil, errors.New("the chart's Chart.yaml has no name line")
		}
		name = string(m[1])
		if n := len(versionLine.FindAll(e.data, -1)); n != 1 {
			return "", nil, fmt.Errorf("the chart's Chart.yaml has %d version lines, want 1", n)
		}
		if n := len(appVersionLine.FindAll(e.data, -1)); n != 1 {
			return "", nil, fmt.Errorf("the chart's Chart.yaml has %d appVersion lines, want 1", n)
		}
		data := versionLine.ReplaceAll(e.data, []byte("version: "+strings.TrimPrefix(version, "v")))
		entries[i].data = appVersionLine.ReplaceAll(data, []byte(`appVersion: "`+version+`"`))
	}
	if name == "" {
		return "", nil, fmt.Errorf("%s has no Chart.yaml", dir)
	}
	return name, entries, nil
}
