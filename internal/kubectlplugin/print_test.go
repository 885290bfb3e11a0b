package kubectlplugin

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestNoColourOffTerminal: output to a buffer or a regular file has no
// escape sequences, even for a denial; a painter that is on colours.
func TestNoColourOffTerminal(t *testing.T) {
	o := WhyOutput{
		Pod:       PodInfo{Namespace: "shop", Name: "web-0", Phase: "Running", Ready: true},
		Decisions: []DecisionInfo{{Operation: "eviction", Reason: "InsufficientBudget", Message: "pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed"}},
	}
	var buf bytes.Buffer
	if colourFor(&buf).on {
		t.Error("a bytes.Buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if colourFor(f).on {
		t.Error("a regular file is not a terminal")
	}
	if err := printWhy(&buf, colourFor(&buf), o, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "\x1b[") {
		t.Errorf("escape sequence in output off a terminal:\n%q", buf.String())
	}
	if !strings.Contains(buf.String(), "DENIED  InsufficientBudget: pdb shop/web") {
		t.Errorf("denial missing:\n%s", buf.String())
	}
	if got := (painter{on: true}).red("DENIED"); got != "\x1b[31mDENIED\x1b[0m" {
		t.Errorf("red on a terminal = %q", got)
	}
}
