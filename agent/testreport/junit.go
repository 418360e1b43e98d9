package testreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
)

// parseJUnit counts a JUnit XML report. The document element is
// testsuites or testsuite; testsuite elements may nest; a testcase lies
// in a testsuite, or directly in testsuites (as Node's reporter writes
// it). A testcase with a failure or error child failed, else one with a
// skipped child was skipped, else it passed. Other elements (properties,
// system-out, …) are not read. A testsuite or testsuites element whose
// failures plus errors attributes exceed the failures counted inside it
// adds the difference, so a declared failure is never lost. A DOCTYPE,
// an entity other than XML's five, a second document element, a
// testcase anywhere else, nesting deeper than MaxDepth are refused.
func parseJUnit(data []byte) (Counts, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var c Counts
	type frame struct {
		name     string
		failed   int64 // failures counted inside a suite, with its nested suites' additions
		declared int64 // a suite's failures + errors attributes
		// testcase state
		fail, skip bool
	}
	var stack []*frame
	root := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Counts{}, malformed("junit: %v", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return Counts{}, malformed("junit: line %d: a directive (DOCTYPE) is not allowed", line(d, data))
		case xml.CharData:
			if len(stack) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return Counts{}, malformed("junit: line %d: text outside the document element", line(d, data))
			}
		case xml.StartElement:
			name := t.Name.Local
			if len(stack) >= MaxDepth {
				return Counts{}, malformed("junit: line %d: elements nested deeper than %d", line(d, data), MaxDepth)
			}
			if t.Name.Space != "" {
				return Counts{}, malformed("junit: line %d: element %s in namespace %q", line(d, data), name, t.Name.Space)
			}
			var parent *frame
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			f := &frame{name: name}
			switch {
			case parent == nil:
				if root {
					return Counts{}, malformed("junit: line %d: a second document element", line(d, data))
				}
				if name != "testsuites" && name != "testsuite" {
					return Counts{}, malformed("junit: line %d: the document element is %s, not testsuites or testsuite", line(d, data), name)
				}
				root = true
			case parent.name == "testcase":
				switch name {
				case "failure", "error":
					parent.fail = true
				case "skipped":
					parent.skip = true
				case "testcase", "testsuite", "testsuites":
					return Counts{}, malformed("junit: line %d: %s inside a testcase", line(d, data), name)
				}
			case parent.name == "testsuites" || parent.name == "testsuite":
				switch name {
				case "testsuites":
					return Counts{}, malformed("junit: line %d: testsuites inside %s", line(d, data), parent.name)
				case "failure", "error", "skipped":
					return Counts{}, malformed("junit: line %d: %s outside a testcase", line(d, data), name)
				}
			default:
				// Inside an element we do not read (system-out, properties…):
				// nothing there is a test.
				if name == "testcase" || name == "testsuite" || name == "testsuites" {
					return Counts{}, malformed("junit: line %d: %s inside %s", line(d, data), name, parent.name)
				}
			}
			if name == "testsuite" || name == "testsuites" {
				for _, a := range t.Attr {
					if a.Name.Space == "" && (a.Name.Local == "failures" || a.Name.Local == "errors") {
						n, err := strconv.ParseInt(strings.TrimSpace(a.Value), 10, 64)
						if err != nil || n < 0 || n > 1<<40 {
							return Counts{}, malformed("junit: line %d: %s %s=%q is not a count", line(d, data), name, a.Name.Local, a.Value)
						}
						f.declared += n
					}
				}
			}
			stack = append(stack, f)
		case xml.EndElement:
			f := stack[len(stack)-1] // the decoder matches end elements in strict mode
			stack = stack[:len(stack)-1]
			var parent *frame
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch f.name {
			case "testcase":
				switch {
				case f.fail:
					c.Failed++
					parent.failed++
				case f.skip:
					c.Skipped++
				default:
					c.Passed++
				}
			case "testsuite", "testsuites":
				if parent != nil && parent.name == "testcase" {
					break // refused at its start; unreachable
				}
				if f.declared > f.failed {
					c.Failed += f.declared - f.failed
					f.failed = f.declared
				}
				if parent != nil {
					parent.failed += f.failed
				}
			}
		}
	}
	if !root {
		return Counts{}, malformed("junit: no testsuites or testsuite element")
	}
	return c, nil
}

// line is the line of the decoder's position.
func line(d *xml.Decoder, data []byte) int {
	off := d.InputOffset()
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte("\n"))
}
