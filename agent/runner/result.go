package runner

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/session"
)

// seal writes the result, the manifest and, with a key, the signature,
// a receipt, an attestation and the public key. The result is written
// last, by rename, so a reader never sees it ahead of what it commits to.
func (r *run) seal(end journal.Entry) error {
	m := r.cfg.Manifest
	head := r.jw.Head()
	res := Result{
		Type: runrecord.ResultType,
		Commitments: Commitments{
			Manifest: m.ID().String(),
			Journal:  JournalHead{Count: head.Count, Head: head.ID.String()},
			Body:     r.body.ID().String(),
			Since:    r.since,
		},
		Body: r.body,
	}
	files := []struct {
		name string
		data []byte
	}{{ManifestFile, m.JCS()}}
	if k := r.cfg.Key; k != nil {
		res.Signature = sign.Seal(k, sign.PayloadRunResult, runrecord.JCS(res.Commitments))
		exit := int64(0)
		if r.body.Status != StatusFinished && r.body.Status != StatusVerified {
			exit = 1
		}
		// The manifest is the unit of work, run.end the journal root.
		in := session.SealInput{Unit: m.ID(), Exit: exit, Outputs: maps.Clone(r.outputs), JournalRoot: end.ID()}
		if r.parked != nil {
			// A resumed run's receipt covers the run: from its start, the
			// energy of every execute segment (the idle energy of its parks
			// is the durable record's, not the receipt's).
			in.Start, in.Prior = r.start, r.priorDevices
		}
		sealed, err := r.sess.Seal(k, in)
		if err != nil {
			return fmt.Errorf("runner: receipt: %w", err)
		}
		r.receiptID = sealed.ID
		files = append(files,
			struct {
				name string
				data []byte
			}{ReceiptFile, sealed.Receipt},
			struct {
				name string
				data []byte
			}{AttestationFile, sealed.Attestation},
			struct {
				name string
				data []byte
			}{PubkeyFile, k.Public().MarshalPublic()})
	} else {
		// Stale evidence of an earlier signed run must not sit beside an
		// unsigned result as if it belonged to it.
		for _, f := range []string{ReceiptFile, AttestationFile, PubkeyFile} {
			if err := os.Remove(filepath.Join(r.state, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("runner: %w", err)
			}
		}
	}
	files = append(files, struct {
		name string
		data []byte
	}{ResultFile, runrecord.JCS(res)})
	for _, f := range files {
		if err := replaceFile(filepath.Join(r.state, f.name), f.data); err != nil {
			return fmt.Errorf("runner: %w", err)
		}
	}
	return nil
}

// replaceFile writes data to name through a temporary file and a rename.
func replaceFile(name string, data []byte) error {
	if fi, err := os.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s; remove it", name, fi.Mode().Type())
	}
	tmp := name + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
