package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/testreport"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
)

// reportRun is one verify run's report capture: the command's standard
// output is kept (for a stdout report) or the report file is copied back
// as an output of this run (for a file report); execute applies it to
// the command. The file is removed before the run, so only what this run
// wrote can count.
type reportRun struct {
	r      *run
	req    *manifest.VerifyReport
	stdout bytes.Buffer
	over   bool // stdout went past testreport.MaxBytes
	res    *sandbox.Result
}

// startReport prepares the verify run of t: with no report requirement
// it does nothing (nil); otherwise it removes a report file left in the
// workspace. A report path that cannot be cleared is a refusal: the
// verify step fails.
func (r *run) startReport(t *task) (*reportRun, error) {
	req := t.m.VerifyReport
	if req == nil {
		return nil, nil
	}
	if req.File != "" {
		fi, err := r.ws.lstat(req.File)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, refusef("the report path %s cannot be cleared before the verify run: %v", req.File, err)
		case !fi.Mode().IsRegular():
			return nil, refusef("the report path %s holds %s, not a file; it must be removed", req.File, nofollow.Describe(fi.Mode()))
		default:
			// A stale or planted report must not count for this run.
			if err := r.ws.root.Remove(req.File); err != nil {
				return nil, refusef("the report path %s cannot be cleared before the verify run: %v", req.File, err)
			}
			r.logf("task %s: removed %s, left from before this verify run", t.id, req.File)
		}
	}
	return &reportRun{r: r, req: req}, nil
}

// apply makes c capture the report: its standard output, or the report
// file as one more output of this run. It is a no-op on nil.
func (rr *reportRun) apply(c *session.Command) {
	if rr == nil {
		return
	}
	if rr.req.File == "" {
		c.Stdout = &capWriter{rr: rr}
	} else {
		c.Outputs = append(slices.Clip(c.Outputs), rr.req.File)
	}
}

// ran keeps the command's result. It is a no-op on nil.
func (rr *reportRun) ran(res *sandbox.Result) {
	if rr != nil {
		rr.res = res
	}
}

// capWriter keeps up to testreport.MaxBytes of the command's output.
type capWriter struct{ rr *reportRun }

func (c *capWriter) Write(p []byte) (int, error) {
	b := &c.rr.stdout
	if n := testreport.MaxBytes - b.Len(); len(p) > n {
		b.Write(p[:max(n, 0)])
		c.rr.over = true
		return len(p), nil
	}
	b.Write(p)
	return len(p), nil
}

// report reads and judges the report of a verify command that ran (with
// exit status 0 or not): it returns the counts, or why the report is
// unusable, and the report's bytes. Counts is nil when the report could
// not be read as its format.
func (rr *reportRun) report() (data []byte, counts *testreport.Counts, why string) {
	req := rr.req
	if req.File == "" {
		if rr.over {
			return nil, nil, fmt.Sprintf("the standard output is more than the report limit of %d bytes", testreport.MaxBytes)
		}
		data = rr.stdout.Bytes()
	} else {
		var id string
		if rr.res != nil {
			for _, f := range rr.res.Outputs {
				if f.Path == req.File {
					id = f.ID.String()
				}
			}
		}
		if id == "" {
			return nil, nil, fmt.Sprintf("the verify command wrote no report at %s", req.File)
		}
		b, err := rr.r.ws.readFile(req.File, testreport.MaxBytes)
		if err != nil {
			return nil, nil, fmt.Sprintf("the report %s cannot be read: %v", req.File, err)
		}
		if canon.Sum(b).String() != id {
			return nil, nil, fmt.Sprintf("the report %s changed after the verify command wrote it", req.File)
		}
		data = b
	}
	c, err := testreport.Parse(req.Format, data)
	if err != nil {
		return data, nil, err.Error()
	}
	switch {
	case c.Failed > 0:
		return data, &c, fmt.Sprintf("the report counts %d failed tests", c.Failed)
	case c.Passed < req.MinPassed:
		return data, &c, fmt.Sprintf("the report counts %d passed tests; at least %d are required", c.Passed, req.MinPassed)
	}
	return data, &c, ""
}

// judge decides a verify run of t: cerr is why the command could not
// run (nil if it ran), exitOK whether it exited 0 with its outputs
// copied back. With a report requirement, the report is read and a
// verify.report entry records it. It sets t's verification and returns
// whether the verify step passed and a note for the model ("" if none).
func (r *run) judge(t *task, rr *reportRun, cerr error, exitOK bool) (pass bool, note string, err error) {
	req := t.m.VerifyReport
	v := &Verification{Mode: runrecord.VerifyExitStatusOnly}
	if req != nil {
		v = &Verification{Mode: runrecord.VerifyReport, Format: req.Format, From: req.From(), MinPassed: req.MinPassed}
	}
	t.verification = v
	if cerr != nil {
		v.Error = clip(oneLine("the verify command could not run: "+cerr.Error()), 1024)
		return false, "", nil
	}
	if req == nil {
		v.Pass = exitOK
		return exitOK, "", nil
	}
	data, c, why := rr.report()
	v.Counts = c
	v.Pass = exitOK && why == ""
	v.Error = clip(oneLine(why), 1024)
	body := entry.VerifyReport{Task: t.id, Format: req.Format, From: req.From(), MinPassed: req.MinPassed,
		Read: data != nil, Bytes: len(data), Report: canon.Sum(data).String(), ExitOK: exitOK, Pass: v.Pass, Error: v.Error}
	if c != nil {
		body.Passed, body.Failed, body.Skipped = &c.Passed, &c.Failed, &c.Skipped
	}
	if _, err := r.record(body); err != nil {
		return false, "", err
	}
	r.logf("task %s: verify: %s", t.id, v)
	if why != "" {
		note = fmt.Sprintf("\n--- test report (%s, from %s) ---\nthe report does not pass: %s", req.Format, req.From(), oneLine(why))
	} else {
		note = fmt.Sprintf("\n--- test report (%s, from %s) ---\n%d passed, %d failed, %d skipped", req.Format, req.From(), c.Passed, c.Failed, c.Skipped)
	}
	return v.Pass, note, nil
}
