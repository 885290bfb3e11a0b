package scenario

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// document is one YAML document of a scenario file.
type document struct {
	// index is the document's number as errors print it: 0-based, header 0.
	index int
	// line is the 1-based line of the file the document starts on (its
	// "---" line, if it has one).
	line int
	data []byte
}

// splitDocuments cuts a file into YAML documents at "---" lines, as a person
// counts them: every "---" line starts a new document, empty ones included,
// except that a "---" with nothing but comments or blank lines before it
// starts document 0 rather than ending an empty one.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var docs []document
	cur := document{line: 1}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		if isSeparator(l) {
			if len(docs) > 0 || !blankYAML(cur.data) {
				docs = append(docs, cur)
			}
			cur = document{line: i + 1}
		}
		cur.data = append(cur.data, l...)
	}
	docs = append(docs, cur)
	for i := range docs {
		docs[i].index = i
	}
	return docs
}

// isSeparator reports whether a line is a YAML document marker "---",
// optionally followed by blanks, a comment or content.
func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' || rest[0] == '\n')
}

// blankYAML reports whether data holds nothing but blank lines and comments.
func blankYAML(data []byte) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// yamlLine matches the "line N: message" parts of the YAML parser's errors.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlProblem is one problem the YAML parser found in a document.
type yamlProblem struct {
	line   int // 1-based line in the file; 0 if the parser gave none
	detail string
}

// toJSON converts one document to JSON, rejecting keys that are set twice.
// A document with no content converts to "null". Problems come back with
// their lines counted from the start of the file.
func (d document) toJSON() ([]byte, []yamlProblem) {
	j, err := safeYAMLToJSON(d.data, yaml.YAMLToJSONStrict)
	if err == nil {
		return j, nil
	}
	return nil, yamlProblems(err, d.line)
}

// toJSONLenient converts one document to JSON, keeping the last of keys set
// twice; errors use it only to name the object a broken document holds.
func (d document) toJSONLenient() []byte {
	j, err := safeYAMLToJSON(d.data, yaml.YAMLToJSON)
	if err != nil {
		return nil
	}
	return j
}

// safeYAMLToJSON runs the YAML parser and turns a panic inside it into an
// error: a scenario file is user input and must not crash the sandbox.
func safeYAMLToJSON(data []byte, convert func([]byte) ([]byte, error)) (j []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			j, err = nil, fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	return convert(data)
}

// yamlProblems splits a YAML parser error into one problem per line it names,
// shifting the parser's line numbers (relative to the document) by the
// document's first line.
func yamlProblems(err error, firstLine int) []yamlProblem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var out []yamlProblem
	for _, part := range strings.Split(msg, "\n") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p := yamlProblem{detail: part}
		if m := yamlLine.FindStringSubmatch(part); m != nil {
			if n, convErr := strconv.Atoi(m[1]); convErr == nil {
				p.line = firstLine + n - 1
				p.detail = m[2]
			}
		}
		if k, ok := strings.CutSuffix(p.detail, " already set in map"); ok {
			p.detail = k + " is set twice"
		}
		out = append(out, p)
	}
	return out
}
