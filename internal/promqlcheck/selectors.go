// Package promqlcheck checks that the PromQL queries budgetguard ships (the
// chart's alerts and Grafana dashboard) name only metrics and labels that
// its binaries export: Selectors finds the metrics an expression selects
// and the labels it needs them to carry, ParseExposition reads what a
// /metrics endpoint serves, and Check compares the two.
//
// Selectors is not a full PromQL parser. It tokenizes the expression and
// follows its structure far enough to tell metric names from functions,
// aggregations and keywords, and label names from label values, and it
// refuses what it does not understand (an unknown function, vector
// matching with on/ignoring, a metric name given by a regular expression),
// so that a query it cannot check is an error, never a silent pass.
package promqlcheck

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Selector is one metric an expression selects, with the label names the
// expression needs it to carry: those of its matchers and of the by() and
// without() clauses of the aggregations around it.
type Selector struct {
	Metric string
	Labels []string // sorted, each once
}

func (s Selector) String() string {
	return s.Metric + "{" + strings.Join(s.Labels, ",") + "}"
}

// aggregations are PromQL's aggregation operators, which take by() or
// without().
var aggregations = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio")

// functions are PromQL's functions.
var functions = set("abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
	"avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time",
	"day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv",
	"double_exponential_smoothing", "end", "exp", "floor", "histogram_avg", "histogram_count",
	"histogram_fraction", "histogram_quantile", "histogram_stddev", "histogram_stdvar", "histogram_sum",
	"holt_winters", "hour", "idelta", "increase", "info", "irate", "label_join", "label_replace",
	"last_over_time", "ln", "log10", "log2", "mad_over_time", "max_over_time", "min_over_time", "minute",
	"month", "pi", "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
	"round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc", "sort_desc",
	"sqrt", "start", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time",
	"timestamp", "vector", "year")

// setOperators and the other keywords that stand between two operands.
var wordOperators = set("and", "or", "unless", "atan2")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

type tokenKind int

const (
	tEOF tokenKind = iota
	tIdent
	tNumber // a number or a duration (5m, 1h30m, 0.99, 1e3)
	tString
	tVariable // a Grafana variable: $name, ${name}
	tPunct    // ( ) { } [ ] , @ : and the operators
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

// lex splits expr into tokens.
func lex(expr string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == ':' && len(toks) > 0 && (toks[len(toks)-1].kind == tNumber || toks[len(toks)-1].kind == tVariable):
			// A subquery's colon, after its range: [1h:5m].
			toks = append(toks, token{tPunct, ":", i})
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(expr) && isIdentChar(expr[j]) {
				j++
			}
			toks = append(toks, token{tIdent, expr[i:j], i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			j := i + 1
			for j < len(expr) && (isAlnum(expr[j]) || expr[j] == '.') {
				j++
			}
			toks = append(toks, token{tNumber, expr[i:j], i})
			i = j
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, token{tString, expr[i+1 : j], i})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				end := strings.IndexByte(expr[j:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated variable at %d", i)
				}
				j += end + 1
			} else {
				for j < len(expr) && isAlnum(expr[j]) {
					j++
				}
			}
			if j == i+1 {
				return nil, fmt.Errorf("a lone $ at %d", i)
			}
			toks = append(toks, token{tVariable, expr[i:j], i})
			i = j
		default:
			op := ""
			for _, two := range []string{"=~", "!~", "!=", "==", ">=", "<="} {
				if strings.HasPrefix(expr[i:], two) {
					op = two
					break
				}
			}
			if op == "" && strings.ContainsRune("(){}[],@:=<>+-*/%^", rune(c)) {
				op = string(c)
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, token{tPunct, op, i})
			i += len(op)
		}
	}
	return append(toks, token{kind: tEOF, pos: len(expr)}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// isAlnum: the characters of a number, a duration and a variable's name.
func isAlnum(c byte) bool { return c != ':' && isIdentChar(c) }

// parser walks the tokens. Each selector it meets is recorded with its
// matchers' labels; the grouping labels of the aggregations it is inside
// are added when the aggregation closes.
type parser struct {
	toks []token
	i    int
	sels []*Selector
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isPunct(text string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == text
}

func (p *parser) expect(text string) error {
	t := p.next()
	if t.kind != tPunct || t.text != text {
		return p.errorf(t, "want %q", text)
	}
	return nil
}

func (p *parser) errorf(t token, format string, args ...any) error {
	got := t.text
	if t.kind == tEOF {
		got = "the end"
	}
	return fmt.Errorf("at %d (%s): %s", t.pos, got, fmt.Sprintf(format, args...))
}

// Selectors returns every metric expr selects, with the labels expr needs
// it to carry, in the order they appear (a metric selected twice with the
// same labels, once). It fails on an expression it cannot follow, and on
// one that selects no metric.
func Selectors(expr string) ([]Selector, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if err := p.expr(); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t, "unexpected after a complete expression")
	}
	if len(p.sels) == 0 {
		return nil, fmt.Errorf("selects no metric")
	}
	var out []Selector
	seen := map[string]bool{}
	for _, s := range p.sels {
		slices.Sort(s.Labels)
		s.Labels = slices.Compact(s.Labels)
		if key := s.String(); !seen[key] {
			seen[key] = true
			out = append(out, *s)
		}
	}
	return out, nil
}

// expr: operand { binary-operator [bool] operand }.
func (p *parser) expr() error {
	for {
		if err := p.unary(); err != nil {
			return err
		}
		t := p.peek()
		switch {
		case t.kind == tPunct && strings.Contains(" + - * / % ^ == != >= <= < > ", " "+t.text+" "):
		case t.kind == tIdent && wordOperators[t.text]:
		default:
			return nil
		}
		p.next()
		if t := p.peek(); t.kind == tIdent && t.text == "bool" {
			p.next()
		}
		if t := p.peek(); t.kind == tIdent && (t.text == "on" || t.text == "ignoring" || t.text == "group_left" || t.text == "group_right") {
			// Its labels would have to be on the selectors of both
			// sides; nothing shipped needs it, so it is refused rather
			// than checked loosely.
			return p.errorf(t, "vector matching (%s) is not supported", t.text)
		}
	}
}

// unary: [+|-] postfix.
func (p *parser) unary() error {
	for p.isPunct("-") || p.isPunct("+") {
		p.next()
	}
	return p.postfix()
}

// postfix: operand { [range] | [range:step] | offset d | @ t }.
func (p *parser) postfix() error {
	if err := p.operand(); err != nil {
		return err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tPunct && t.text == "[":
			p.next()
			if err := p.duration(); err != nil {
				return err
			}
			if p.isPunct(":") {
				p.next()
				if !p.isPunct("]") {
					if err := p.duration(); err != nil {
						return err
					}
				}
			}
			if err := p.expect("]"); err != nil {
				return err
			}
		case t.kind == tIdent && t.text == "offset":
			p.next()
			if p.isPunct("-") {
				p.next()
			}
			if err := p.duration(); err != nil {
				return err
			}
		case t.kind == tPunct && t.text == "@":
			p.next()
			if n := p.next(); n.kind == tIdent && (n.text == "start" || n.text == "end") {
				if err := p.expect("("); err != nil {
					return err
				}
				if err := p.expect(")"); err != nil {
					return err
				}
			} else if n.kind != tNumber {
				return p.errorf(n, "want a timestamp after @")
			}
		default:
			return nil
		}
	}
}

// duration: a duration literal or a Grafana variable such as
// $__rate_interval.
func (p *parser) duration() error {
	t := p.next()
	if t.kind != tNumber && t.kind != tVariable {
		return p.errorf(t, "want a duration")
	}
	return nil
}

func (p *parser) operand() error {
	t := p.peek()
	switch t.kind {
	case tNumber, tString:
		p.next()
		return nil
	case tPunct:
		switch t.text {
		case "(":
			p.next()
			if err := p.expr(); err != nil {
				return err
			}
			return p.expect(")")
		case "{":
			return p.selector("")
		}
	case tIdent:
		word := t.text
		lower := strings.ToLower(word)
		switch {
		case lower == "inf" || lower == "nan":
			p.next()
			return nil
		case aggregations[word] && (p.followedBy("(") || p.followedBy("by") || p.followedBy("without")):
			return p.aggregation()
		case p.followedBy("("):
			if !functions[word] {
				return p.errorf(t, "unknown function %s", word)
			}
			p.next()
			return p.call()
		case word == "by" || word == "without" || word == "bool" || word == "offset" || wordOperators[word]:
			return p.errorf(t, "keyword %s where an operand should be", word)
		default:
			p.next()
			return p.selector(word)
		}
	}
	return p.errorf(t, "want an operand")
}

// followedBy reports whether the token after the current one is text (a
// punctuation or a word).
func (p *parser) followedBy(text string) bool {
	if p.i+1 >= len(p.toks) {
		return false
	}
	n := p.toks[p.i+1]
	return (n.kind == tPunct || n.kind == tIdent) && n.text == text
}

// call: ( [expr {, expr}] ), the current token being "(".
func (p *parser) call() error {
	if err := p.expect("("); err != nil {
		return err
	}
	if p.isPunct(")") {
		p.next()
		return nil
	}
	for {
		if err := p.expr(); err != nil {
			return err
		}
		if p.isPunct(",") {
			p.next()
			continue
		}
		return p.expect(")")
	}
}

// aggregation: op [by|without (labels)] (args) [by|without (labels)]. The
// grouping labels go to every selector inside the arguments.
func (p *parser) aggregation() error {
	p.next() // the operator
	var grouping []string
	if t := p.peek(); t.kind == tIdent && (t.text == "by" || t.text == "without") {
		p.next()
		labels, err := p.labelList()
		if err != nil {
			return err
		}
		grouping = labels
	}
	first := len(p.sels)
	if err := p.call(); err != nil {
		return err
	}
	if t := p.peek(); t.kind == tIdent && (t.text == "by" || t.text == "without") {
		if grouping != nil {
			return p.errorf(t, "a second grouping clause")
		}
		p.next()
		labels, err := p.labelList()
		if err != nil {
			return err
		}
		grouping = labels
	}
	if len(grouping) > 0 && len(p.sels) == first {
		return fmt.Errorf("grouping by %v over no metric", grouping)
	}
	for _, s := range p.sels[first:] {
		s.Labels = append(s.Labels, grouping...)
	}
	return nil
}

// labelList: ( [label {, label}] [,] ).
func (p *parser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	labels := []string{}
	for !p.isPunct(")") {
		t := p.next()
		if t.kind != tIdent || !isLabelName(t.text) {
			return nil, p.errorf(t, "want a label name")
		}
		labels = append(labels, t.text)
		if !p.isPunct(",") {
			break
		}
		p.next()
	}
	return labels, p.expect(")")
}

// selector: [name] [{ matchers }]. A selector without a name must match
// __name__ exactly.
func (p *parser) selector(name string) error {
	sel := &Selector{Metric: name}
	if p.isPunct("{") {
		p.next()
		for !p.isPunct("}") {
			lt := p.next()
			if lt.kind != tIdent || !isLabelName(lt.text) {
				return p.errorf(lt, "want a label name in a matcher")
			}
			op := p.next()
			if op.kind != tPunct || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
				return p.errorf(op, "want a matcher's operator")
			}
			val := p.next()
			if val.kind != tString {
				return p.errorf(val, "want a quoted label value")
			}
			if lt.text == "__name__" {
				if op.text != "=" {
					return p.errorf(op, "the metric name must be matched exactly to be checked")
				}
				if sel.Metric != "" {
					return p.errorf(lt, "a second metric name")
				}
				sel.Metric = val.text
			} else {
				sel.Labels = append(sel.Labels, lt.text)
			}
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
		if err := p.expect("}"); err != nil {
			return err
		}
	}
	if sel.Metric == "" {
		return fmt.Errorf("a selector without a metric name")
	}
	if !isMetricName(sel.Metric) {
		return fmt.Errorf("%q is not a metric name", sel.Metric)
	}
	p.sels = append(p.sels, sel)
	return nil
}

func isMetricName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

func isLabelName(s string) bool {
	for i, r := range s {
		if r > unicode.MaxASCII || r == ':' || (i == 0 && r >= '0' && r <= '9') || !isIdentChar(byte(r)) {
			return false
		}
	}
	return s != ""
}
