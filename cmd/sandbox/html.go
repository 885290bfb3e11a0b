package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/budgetguard/budgetguard/internal/report"
)

// pageFile is the HTML timeline that --html asks for: a temporary file
// beside its path, opened before any run so that a path that cannot be
// written fails at once, and renamed to the path once the page is whole.
type pageFile struct {
	path string
	tmp  *os.File
}

// openPage checks --html's path and opens the temporary file beside it,
// creating its directory.
func openPage(path string) (*pageFile, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, usageError{fmt.Errorf("invalid value %q for --html: it is a directory; want the path of the HTML page to write", path)}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--html %s: create its directory: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("--html %s: %w", path, err)
	}
	return &pageFile{path: path, tmp: tmp}, nil
}

// write writes r's page and puts it at the path.
func (p *pageFile) write(r *report.Report) error {
	if p.tmp == nil {
		return errors.New("--html: the page was written already")
	}
	w := bufio.NewWriter(p.tmp)
	err := report.WriteHTML(w, r)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = p.tmp.Chmod(0o644)
	}
	if closeErr := p.tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(p.tmp.Name(), p.path)
	}
	if err != nil {
		_ = os.Remove(p.tmp.Name())
		p.tmp = nil
		return fmt.Errorf("--html %s: %w", p.path, err)
	}
	p.tmp = nil
	return nil
}

// discard removes the temporary file unless write put it in place.
func (p *pageFile) discard() {
	if p.tmp != nil {
		_ = p.tmp.Close()
		_ = os.Remove(p.tmp.Name())
		p.tmp = nil
	}
}

// url is the page's file:// address, for a browser.
func (p *pageFile) url() string {
	abs, err := filepath.Abs(p.path)
	if err != nil {
		abs = p.path
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}
