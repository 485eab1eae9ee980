package console

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// A multi-agent session's threads: listed on the session's page with
// their agents, status, usage and cost (each at its own agent's model's
// price), added to the session's own cost; and each thread's own log on a
// page of its own, live as the session's is.

// threadJSON is a session's thread as the API lists it.
type threadJSON struct {
	ID             string           `json:"id"`
	SessionID      string           `json:"session_id"`
	ParentThreadID *string          `json:"parent_thread_id"`
	Agent          agentJSON        `json:"agent"`
	Status         string           `json:"status"`
	Usage          sessionUsageJSON `json:"usage"`
	CreatedAt      time.Time        `json:"created_at"`
	ArchivedAt     *time.Time       `json:"archived_at"`
	// Cost is the console's: the thread's usage at its agent's model's
	// price.
	Cost costView `json:"-"`
}

// ownCostNote ends a session's own cost's title: its threads' usage is
// theirs (a thread is a session of its own), never added to the session's.
const ownCostNote = " A multi-agent session's threads are not in it: its page adds them."

// threadsShown is how many threads the session page lists; the cost with
// threads counts every one the API lists (up to maxThreadsCounted).
const (
	threadsShown      = 100
	maxThreadsCounted = 1000
)

// sessionThreads are a session's child threads (the primary thread is the
// session itself), oldest first, each with its cost.
type sessionThreads struct {
	All []threadJSON
	// Partial: the session has more threads than were counted.
	Partial bool
}

// Shown are the threads the page lists.
func (t sessionThreads) Shown() []threadJSON { return t.All[:min(len(t.All), threadsShown)] }

// threads reads the session's child threads.
func (c *Console) threads(r *http.Request, u *user, id string) (sessionThreads, error) {
	var list struct {
		Data     []threadJSON `json:"data"`
		NextPage string       `json:"next_page"`
	}
	q := url.Values{"limit": {fmt.Sprint(maxThreadsCounted)}}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/threads", q, nil, &list); err != nil {
		return sessionThreads{}, err
	}
	out := sessionThreads{Partial: list.NextPage != ""}
	for _, t := range list.Data {
		if t.ParentThreadID == nil {
			continue // the primary thread: the session itself
		}
		t.Cost = c.cost(t.Agent.Model.ID, t.Usage)
		out.All = append(out.All, t)
	}
	return out, nil
}

// total is the session's own cost with its threads': their sum when every
// part has a price, else the sum of those that do, shown as a floor, its
// title saying what is missing. Zero (not Known) when there are no
// threads.
func (t sessionThreads) total(own costView) costView {
	if len(t.All) == 0 {
		return costView{}
	}
	sum, unpriced := 0.0, 0
	for _, c := range append([]costView{own}, costs(t.All)...) {
		if c.Known {
			sum += c.USD
		} else {
			unpriced++
		}
	}
	v := costView{Known: true, USD: sum, Text: usdText(sum),
		Title: fmt.Sprintf("The session's own cost and its %d threads', each at its own agent's model's price.", len(t.All))}
	if unpriced > 0 || t.Partial {
		v.Text = "≥ " + v.Text
		v.Title = fmt.Sprintf("At least: %d of the session and its threads have no price for their model", unpriced)
		if t.Partial {
			v.Title += fmt.Sprintf(", and only the first %d threads are counted", maxThreadsCounted)
		}
		v.Title += "."
	}
	return v
}

func costs(ts []threadJSON) []costView {
	out := make([]costView, len(ts))
	for i, t := range ts {
		out[i] = t.Cost
	}
	return out
}

// threadPage is a thread of a session: its agent, status, usage and cost,
// and its own log, live.
func (c *Console) threadPage(w http.ResponseWriter, r *http.Request, u *user) {
	id, th := r.PathValue("id"), r.PathValue("thread")
	var t threadJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/threads/"+url.PathEscape(th), nil, nil, &t); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	t.Cost = c.cost(t.Agent.Model.ID, t.Usage)
	traj, err := c.trajectory(r, u, logOf(r))
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "thread", map[string]any{"Thread": t, "Trajectory": traj, "Timeline": timeline(traj.Events)})
}
