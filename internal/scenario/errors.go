package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxErrors bounds how many problems one Parse reports; a file that is not a
// scenario at all should not print thousands of lines.
const maxErrors = 50

// FieldError is one problem in a scenario file. Its message names the file,
// the document and the field:
//
//	x.yaml: document 3 (PodDisruptionBudget shop/web): spec.minAvailabel: unknown field
//	x.yaml: document 0 (Scenario): steps[2].wait.podsReady.count: must be at least 1
//	x.yaml: document 4 (Pod shop/big): line 12: key "app" is set twice
type FieldError struct {
	// File is the scenario's path as given to Parse.
	File string
	// Document is the 0-based index of the YAML document (the header is 0),
	// or -1 for a problem with the file as a whole.
	Document int
	// Object names the document's content: "Scenario",
	// "PodDisruptionBudget shop/web", "" when nothing is known.
	Object string
	// Field is the path of the offending field, such as
	// "steps[2].wait.timeout"; "" when the problem is the whole document or
	// only its line is known.
	Field string
	// Line is the 1-based line in the file, for problems the YAML parser
	// reports by line (syntax errors, keys set twice); 0 otherwise.
	Line int
	// Detail says what is wrong and, where it can, what would be right.
	Detail string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Document >= 0 {
		b.WriteString(describeDocument(e.Document, e.Object))
		b.WriteString(": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

// describeDocument renders "document 3 (PodDisruptionBudget shop/web)", or
// "document 3" when the object is unknown.
func describeDocument(doc int, object string) string {
	if object == "" {
		return fmt.Sprintf("document %d", doc)
	}
	return fmt.Sprintf("document %d (%s)", doc, object)
}

// ErrorList is every problem Parse found, ordered by document. Its message
// has one problem per line.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// collector gathers the problems of one file.
type collector struct {
	file    string
	errs    ErrorList
	dropped int
	total   int // problems found, shown or not
}

func (c *collector) add(e *FieldError) {
	c.total++
	if len(c.errs) >= maxErrors {
		c.dropped++
		return
	}
	e.File = c.file
	c.errs = append(c.errs, e)
}

// err returns the problems as an ErrorList, or nil when there are none.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	// Checks across documents run last; put every problem in file order.
	slices.SortStableFunc(c.errs, func(a, b *FieldError) int { return cmp.Compare(a.Document, b.Document) })
	if c.dropped > 0 {
		noun := "problems"
		if c.dropped == 1 {
			noun = "problem"
		}
		c.errs = append(c.errs, &FieldError{File: c.file, Document: -1,
			Detail: fmt.Sprintf("%d more %s not shown", c.dropped, noun)})
	}
	return c.errs
}

// docErrors reports problems of one document.
type docErrors struct {
	c      *collector
	doc    int
	object string
	// bad are the fields that already have a problem; a later check of the
	// same field or one inside it (such as "count: must be at least 1" after
	// "count: wrong type") would only repeat it.
	bad []string
}

func (d *docErrors) field(field, format string, args ...any) {
	for _, b := range d.bad {
		if field == b || strings.HasPrefix(field, b+".") || strings.HasPrefix(field, b+"[") {
			return
		}
	}
	d.bad = append(d.bad, field)
	d.c.add(&FieldError{Document: d.doc, Object: d.object, Field: field, Detail: fmt.Sprintf(format, args...)})
}
