package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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
