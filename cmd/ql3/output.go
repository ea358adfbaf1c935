package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// result is a command's answer: under -o json the value itself is the one JSON object on stdout
// (ok first, then the command's fields, empty ones omitted), otherwise writeText prints it for
// people. Every command has its own result type; printResult is the only place that looks at the
// output format.
type result interface {
	writeText(w io.Writer) error
}

// printResult prints r in the chosen format. refusal, when not nil, is the refusal r reports (a
// report with ok false and its code): it is returned so that the command exits with its status,
// marked as printed under json so that report does not print a second object.
func (o *RootOptions) printResult(w io.Writer, r result, refusal error) error {
	if o.Output == "json" {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
		if refusal != nil {
			return printedError{refusal}
		}
		return nil
	}
	if err := r.writeText(w); err != nil {
		return err
	}
	return refusal
}

// lines is the text of a result that prints lines; an empty one prints nothing.
func lines(w io.Writer, ls ...string) error {
	if len(ls) == 0 {
		return nil
	}
	_, err := io.WriteString(w, strings.Join(ls, "\n")+"\n")
	return err
}
