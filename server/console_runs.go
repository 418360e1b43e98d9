package server

import (
	"net/http"
	"slices"
	"time"

	"github.com/cordon-dev/cordon/store"
)

// consoleRunRow is one run in the console's list; every string is
// visible()'d (html/template escapes it as well).
type consoleRunRow struct {
	ID, State, Tier, Tenant, Project, Task, Submitter string
	Created                                           time.Time
}

type runsPage struct {
	Runs     []consoleRunRow
	Status   string
	Project  string
	Statuses []string
}

// consoleRunLimit is how many runs the list reads before filtering.
const consoleRunLimit = 500

// consoleRuns lists the runs of the principal's tenant (the operator,
// refused by the guard, sees none), filtered by status and project name.
func (s *Server) consoleRuns(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	q := r.URL.Query()
	status, project := q.Get("status"), q.Get("project")
	statuses := []string{store.StatePending, store.StateQueued, store.StateRunning, store.StateFinished, store.StateFailed, store.StateCancelled, store.StateRejected}
	if status != "" && !slices.Contains(statuses, status) {
		s.consoleFail(w, r, &apiError{Code: 400, Msg: "status: one of the run states, or none", Hint: "pending_approval, queued, running, finished, failed, cancelled, rejected"})
		return
	}
	if project != "" && !validName(project) {
		s.consoleFail(w, r, &apiError{Code: 400, Msg: "project: a project name (a-z, 0-9, '-', '_')"})
		return
	}
	if p.admin || p.p == nil {
		s.consoleFail(w, r, &apiError{Code: 403, Msg: consoleAdminRefusal})
		return
	}
	runs, err := s.store.Runs(r.Context(), p.p.TenantID, consoleRunLimit)
	if err != nil {
		s.consoleFail(w, r, storeError(err, "run"))
		return
	}
	names, ae := s.projectNames(r, runs)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	page := runsPage{Status: status, Project: project, Statuses: statuses, Runs: []consoleRunRow{}}
	for _, run := range runs {
		name := names[run.ProjectID]
		if (status != "" && run.State != status) || (project != "" && name != project) {
			continue
		}
		page.Runs = append(page.Runs, consoleRunRow{ID: run.ID, State: run.State, Tier: visible(run.Tier), Tenant: run.TenantID,
			Project: visible(name), Task: visible(run.Task), Submitter: run.SubmittedBy, Created: run.CreatedAt})
	}
	s.render(w, r, 200, "runs.html", "Runs", "runs", page)
}

// projectNames maps the runs' project ids to their names.
func (s *Server) projectNames(r *http.Request, runs []*store.Run) (map[string]string, *apiError) {
	out := map[string]string{}
	seen := map[string]bool{}
	for _, run := range runs {
		if seen[run.TenantID] {
			continue
		}
		seen[run.TenantID] = true
		ps, err := s.store.Projects(r.Context(), run.TenantID)
		if err != nil {
			return nil, storeError(err, "project")
		}
		for _, p := range ps {
			out[p.ID] = p.Name
		}
	}
	return out, nil
}
