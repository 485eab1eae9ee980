package console_test

import (
	"html/template"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestBrowserTasks: a task's page shows its status and the monitor's
// state of its sandbox with why, as the API says them.
func TestBrowserTasks(t *testing.T) {
	d := daemontest.Start(t)
	var ticket, task struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tickets", map[string]any{"title": "console"}, &ticket)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tasks", map[string]any{"ticket_id": ticket.ID, "command": []string{"/bin/sh", "-c", "echo working; sleep 600"}}, &task)
	// The task runs once its sandbox is made.
	deadline := time.Now().Add(time.Minute)
	var got struct {
		Status    string `json:"status"`
		SandboxID string `json:"sandbox_id"`
	}
	for {
		apiJSON(t, d, d.AdminKey, "GET", "/v1/tasks/"+task.ID, nil, &got)
		if got.Status == "running" && got.SandboxID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task never ran: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var act struct {
		State string `json:"state"`
		Why   string `json:"why"`
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+got.SandboxID+"/activity", nil, &act)

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("tasks", chromedp.Navigate(d.URL+"/console/tasks"), chromedp.WaitVisible(`a[href="/console/tasks/`+task.ID+`"]`))
	p.check("tasks")
	p.run("task", chromedp.Click(`a[href="/console/tasks/`+task.ID+`"]`), chromedp.WaitVisible("#monitor-state"))
	state := eval[string](p, "monitor state", `document.getElementById("monitor-state").textContent`)
	why := eval[string](p, "monitor why", `document.querySelector(".monitor").textContent`)
	if state != act.State || !strings.Contains(why, strings.Fields(act.Why)[0]) {
		t.Fatalf("the page says %q (%q); the API says %q (%q)", state, why, act.State, act.Why)
	}
	p.check("task")
}

// TestTaskPageAfterTheMonitorReapsIt: an agent that goes idle is reaped by
// the monitor (thresholds shortened); its task's page shows the task
// failed idle_timeout, the monitor's TERMINATED state with why, the
// termination, and the saved transcript as text, line by line, folded
// since it is long. The task list pages through the API's cursor (the API
// lists tasks with a limit now) and another tenant's task is not found.
func TestTaskPageAfterTheMonitorReapsIt(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) {
		c.Monitor.CheckInterval = config.Duration(100 * time.Millisecond)
		c.Monitor.IdleThreshold = config.Duration(2 * time.Second)
	})
	var ticket, idle, other struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tickets", map[string]any{"title": "console"}, &ticket)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tasks", map[string]any{"ticket_id": ticket.ID, "command": []string{"/bin/sh", "-c",
		"agentkernel-agent event agent.started && for i in $(seq 1 30); do echo \"step $i <done>\"; done && " +
			"while :; do agentkernel-agent heartbeat idle; sleep 0.2; done"}}, &idle)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tasks", map[string]any{"ticket_id": ticket.ID, "command": []string{"/bin/sh", "-c", "sleep 600"}}, &other)
	var got struct {
		Status        string `json:"status"`
		FailureReason string `json:"failure_reason"`
		SandboxID     string `json:"sandbox_id"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		apiJSON(t, d, d.AdminKey, "GET", "/v1/tasks/"+idle.ID, nil, &got)
		if got.Status == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle task was never reaped: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var act struct {
		State string `json:"state"`
		Why   string `json:"why"`
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+got.SandboxID+"/activity", nil, &act)

	b := newBrowser(t, d)
	b.login(d.AdminKey)
	resp, body := b.do(http.MethodGet, "/console/tasks/"+idle.ID, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("task page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`<span class="badge" id="task-status">failed</span> <span id="task-reason">idle_timeout</span>`,
		`id="monitor-state">TERMINATED</span> <span id="monitor-why">` + template.HTMLEscapeString(act.Why) + `</span>`,
		`id="termination"`, `idle_timeout`,
		// The transcript as text: its lines, escaped, not a JSON string.
		"step 1 &lt;done&gt;\nstep 2 &lt;done&gt;\n", "step 30 &lt;done&gt;",
		`<details class="ev-fold" id="transcript">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
	if act.State != "TERMINATED" || t.Failed() {
		t.Fatalf("activity %+v; task page:\n%s", act, body)
	}

	// The API pages tasks, oldest first, and the console asks it to.
	var page struct {
		Data    []struct{ ID string }
		HasMore bool `json:"has_more"`
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/tasks?limit=1", nil, &page)
	if len(page.Data) != 1 || page.Data[0].ID != idle.ID || !page.HasMore {
		t.Fatalf("first page of one: %+v", page)
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/tasks?limit=1&after="+idle.ID, nil, &page)
	if len(page.Data) != 1 || page.Data[0].ID != other.ID || page.HasMore {
		t.Fatalf("second page of one: %+v", page)
	}
	if _, body := b.do(http.MethodGet, "/console/tasks?after="+idle.ID, nil, nil); strings.Contains(body, "/console/tasks/"+idle.ID) || !strings.Contains(body, "/console/tasks/"+other.ID) {
		t.Fatalf("the tasks after the first:\n%s", body)
	}

	o := newBrowser(t, d)
	o.login(otherTenantKey(t, d))
	if resp, body := o.do(http.MethodGet, "/console/tasks/"+idle.ID, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "step 1") {
		t.Fatalf("another tenant's task: %d", resp.StatusCode)
	}
	if _, body := o.do(http.MethodGet, "/console/tasks", nil, nil); strings.Contains(body, idle.ID) {
		t.Fatal("another tenant's task is listed")
	}
}
