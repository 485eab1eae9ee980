// agentkernel console: follows a session's live trajectory, loads older
// events as you scroll back, and sends the steering forms without a reload.
"use strict";
(function () {
  const csrf = () => (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function insertHTML(list, html, where) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    if (where === "top") list.prepend(tpl.content);
    else list.append(tpl.content);
  }

  function follow(traj) {
    const list = document.getElementById("events");
    const url = new URL(traj.dataset.live, location.href);
    if (traj.dataset.last) url.searchParams.set("after", traj.dataset.last);
    const es = new EventSource(url);
    es.addEventListener("ev", (m) => {
      const tpl = document.createElement("template");
      tpl.innerHTML = m.data;
      const li = tpl.content.firstElementChild;
      if (!li || document.getElementById(li.id)) return;
      const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
      list.append(li);
      const status = document.getElementById("status");
      const t = li.dataset.type || "";
      if (status && t.startsWith("session.status_")) {
        const s = t.slice("session.status_".length);
        status.textContent = s;
        status.className = "badge s-" + s;
      }
      if (atBottom) li.scrollIntoView({ block: "end" });
    });
  }

  function older(traj) {
    const btn = document.getElementById("older");
    if (!btn) return;
    const list = document.getElementById("events");
    let next = traj.dataset.older;
    let busy = false;
    let io = null;
    async function load() {
      if (busy || !next) return;
      busy = true;
      try {
        const first = list.firstElementChild;
        const resp = await fetch(next, { credentials: "same-origin" });
        if (!resp.ok) return;
        insertHTML(list, await resp.text(), "top");
        const more = resp.headers.get("X-Older-Page");
        next = more ? traj.dataset.older.replace(/page=[^&]*/, "page=" + encodeURIComponent(more)) : "";
        if (first) first.scrollIntoView({ block: "start" });
        if (!next) {
          btn.remove();
          if (io) io.disconnect();
        } else if (io) {
          // Observe afresh: a button still in view loads the next page.
          io.unobserve(btn);
          io.observe(btn);
        }
      } finally {
        busy = false; // a failed fetch must not stop the paging for good
      }
    }
    btn.addEventListener("click", load);
    if ("IntersectionObserver" in window) {
      // Only once the reader scrolls: the button may be in view as the
      // page opens, and opening must not load a page more.
      window.addEventListener("scroll", () => {
        io = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) load(); });
        io.observe(btn);
      }, { once: true, passive: true });
    }
  }

  // An event's folds load what they hold when first opened: its JSON, the
  // whole of a long text. The page carries a link to it, which is what a
  // reader without this script follows.
  function foldLoads() {
    document.addEventListener("toggle", async (e) => {
      const fold = e.target;
      if (!fold.open || !fold.classList || !fold.classList.contains("ev-load") || fold.dataset.loading) return;
      if (fold.classList.contains("loaded")) return;
      const link = fold.querySelector(":scope > p a[href]");
      const pre = fold.querySelector(":scope > pre");
      if (!link || !pre) return;
      fold.dataset.loading = "1";
      try {
        const resp = await fetch(link.href, { credentials: "same-origin" });
        const text = await resp.text();
        if (!resp.ok) throw new Error(resp.status === 404 ? "not found" : "HTTP " + resp.status);
        pre.textContent = text;
        pre.classList.remove("is-error");
        fold.classList.add("loaded");
      } catch (err) {
        pre.textContent = "[could not be loaded: " + err.message + "; close and open the fold to try again]";
        pre.classList.add("is-error");
      } finally {
        pre.hidden = false;
        delete fold.dataset.loading;
      }
    }, true); // toggle does not bubble: caught on its way down, for every event however it came
  }

  function steer() {
    for (const id of ["send", "interrupt"]) {
      const form = document.getElementById(id);
      if (!form) continue;
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const body = new URLSearchParams(new FormData(form));
        const resp = await fetch(form.action, {
          method: "POST", body, credentials: "same-origin",
          headers: { "X-CSRF-Token": csrf(), "X-Requested-With": "console" },
        });
        if (resp.ok) {
          form.reset();
        } else {
          alert(await resp.text());
        }
      });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const traj = document.getElementById("trajectory");
    if (traj) {
      follow(traj);
      older(traj);
      foldLoads();
    }
    steer();
  });
})();

// Sandboxes: the exec box streams a command's output as it comes.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("exec");
    const out = document.getElementById("exec-output");
    if (!form || !out) return;
    const run = form.querySelector("button[type=submit]");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      out.textContent = "";
      out.classList.remove("is-error");
      run.disabled = true;
      const token = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
      try {
        const resp = await fetch(form.action, {
          method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin",
          headers: { "X-CSRF-Token": token, "X-Requested-With": "console" },
        });
        if (!resp.ok) out.classList.add("is-error");
        if (!resp.body) { out.textContent = await resp.text(); return; }
        const reader = resp.body.getReader();
        const dec = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          out.textContent += dec.decode(value, { stream: true });
        }
      } catch (err) {
        out.classList.add("is-error");
        out.textContent += "\n[the connection broke: " + err.message + "]";
      } finally {
        run.disabled = false;
      }
    });
  });
})();
