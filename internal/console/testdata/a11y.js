// The accessibility check of the browser tests (harness_test.go),
// evaluated in the page. It returns {violations, focusable}: what the page
// misses of the basics, and a description of each control the keyboard
// must reach, in tab order. It leaves those controls in window.__akWalk and
// records where each Tab lands in window.__akLanded, for the walk the test
// then makes with real key presses.
(() => {
  const v = [];
  const describe = (el) => {
    let d = el.tagName.toLowerCase();
    if (el.id) d += "#" + el.id;
    for (const a of ["name", "type", "href", "class", "role"]) {
      const x = el.getAttribute(a);
      if (x) d += "[" + a + "=" + JSON.stringify(x.length > 60 ? x.slice(0, 60) + "…" : x) + "]";
    }
    const t = (el.textContent || "").trim().replace(/\s+/g, " ");
    if (t) d += " " + JSON.stringify(t.length > 40 ? t.slice(0, 40) + "…" : t);
    return d;
  };
  const byIds = (ids) => ids.split(/\s+/).map((id) => (document.getElementById(id) || {}).textContent || "").join(" ").trim();
  // The accessible name, as far as these checks need it: aria-labelledby
  // (its ids resolved: one pointing nowhere names nothing), aria-label,
  // <label>s, a button's value, the text (with img alts), an svg's
  // <title>, the title attribute.
  const name = (el) => {
    const lb = el.getAttribute("aria-labelledby");
    if (lb && byIds(lb)) return byIds(lb);
    const al = (el.getAttribute("aria-label") || "").trim();
    if (al) return al;
    const labels = el.labels ? [...el.labels].map((l) => l.textContent).join(" ").trim() : "";
    if (labels) return labels;
    if (el.matches("input[type=submit],input[type=button],input[type=reset]")) return (el.value || "").trim();
    if (el.matches("svg")) {
      const title = el.querySelector(":scope > title");
      if (title && title.textContent.trim()) return title.textContent.trim();
    } else if (!el.matches("input,select,textarea")) {
      const t = (el.textContent || "").trim();
      if (t) return t;
      for (const img of el.querySelectorAll("img[alt]")) if (img.alt.trim()) return img.alt.trim();
    }
    return (el.getAttribute("title") || "").trim();
  };
  const visible = (el) => el.checkVisibility({ checkVisibilityCSS: true, contentVisibilityAuto: true });

  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    if (!name(el)) v.push("no label: " + describe(el));
  }
  for (const el of document.querySelectorAll("button, a[href], summary, [role=button], [role=link]")) {
    if (!name(el)) v.push("no accessible name: " + describe(el));
  }
  for (const el of document.querySelectorAll("img")) if (!el.hasAttribute("alt")) v.push("img without alt: " + describe(el));
  // An svg is a picture with a name, or decoration hidden from assistive
  // technology; the svgs inside another svg are its parts.
  for (const el of document.querySelectorAll("svg")) {
    if (el.closest("[aria-hidden=true]") || el.parentElement.closest("svg")) continue;
    if (el.getAttribute("role") !== "img" || !name(el)) v.push("svg neither role=img with a name (aria-label or <title>) nor aria-hidden: " + describe(el));
  }
  for (const el of document.querySelectorAll("label[for]")) {
    if (!document.getElementById(el.htmlFor)) v.push("label for a missing id " + JSON.stringify(el.htmlFor) + ": " + describe(el));
    else if (!el.control) v.push("label for an element that is no form field (" + JSON.stringify(el.htmlFor) + "): " + describe(el));
  }
  for (const el of document.querySelectorAll("[tabindex]")) if (el.tabIndex > 0) v.push("positive tabindex: " + describe(el));
  for (const el of document.querySelectorAll("th")) if (!el.getAttribute("scope")) v.push("th without scope: " + describe(el));
  const h1 = document.querySelectorAll("h1").length;
  if (h1 !== 1) v.push("h1 count " + h1);
  if (!document.querySelector("main")) v.push("no main landmark");
  if (!document.documentElement.lang) v.push("no lang on html");
  if (!document.title.trim()) v.push("no title");
  const ids = new Set();
  for (const el of document.querySelectorAll("[id]")) {
    if (ids.has(el.id)) v.push("duplicate id " + el.id);
    ids.add(el.id);
  }

  // What the Tab key must reach, in document order (no positive tabindex,
  // checked above, so that is the tab order): the visible controls,
  // whatever a tabindex puts in the order, and a box that scrolls with no
  // control in it (chromium lets the keyboard scroll it).
  const controls = "a[href], area[href], button, input:not([type=hidden]), select, textarea, details > summary:first-of-type, iframe, [contenteditable]:not([contenteditable=false]), [tabindex]";
  const inOrder = (el) => el.tabIndex >= 0 && !el.disabled && !el.closest("[inert]") && visible(el);
  const scroller = (el) => {
    const s = getComputedStyle(el);
    return ((/auto|scroll/.test(s.overflowY) && el.scrollHeight > el.clientHeight) ||
      (/auto|scroll/.test(s.overflowX) && el.scrollWidth > el.clientWidth)) &&
      visible(el) && ![...el.querySelectorAll(controls)].some(inOrder);
  };
  const walk = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (!(el.matches(controls) ? inOrder(el) : scroller(el))) continue;
    // The arrow keys move within a radio group; Tab stops at its checked
    // radio, or its first when none is.
    if (el.matches("input[type=radio]") && el.name) {
      const group = [...document.querySelectorAll("input[type=radio]")].filter((r) => r.name === el.name && r.form === el.form);
      if (el !== (group.find((r) => r.checked) || group[0])) continue;
    }
    walk.push(el);
  }

  // What looks clickable must take the focus, or a keyboard cannot use
  // it: a click handler, a role of a control, or a pointer cursor. The
  // cursor is inherited, so only the outermost such element is named,
  // and what sits in a control (a button's text) or a label of a field
  // (a click on it goes to the field) is the control's part.
  const roles = "[role=button], [role=link], [role=checkbox], [role=switch], [role=tab], [role=menuitem], [role=option]";
  const focusable = (el) => el.tabIndex >= 0 && !el.disabled;
  for (const el of document.body.querySelectorAll("*")) {
    const pointer = getComputedStyle(el).cursor === "pointer";
    if (!pointer && !el.matches(roles) && !el.hasAttribute("onclick") && !el.onclick) continue;
    if (focusable(el) || el.matches(":disabled") || !visible(el)) continue;
    if (el.tagName === "LABEL" && el.control) continue;
    const part = el.parentElement && el.parentElement.closest(controls + ", " + roles + ", label");
    if (part && (part.tagName === "LABEL" ? part.control : focusable(part))) continue;
    if (pointer && !el.matches(roles) && !el.hasAttribute("onclick") && !el.onclick && getComputedStyle(el.parentElement).cursor === "pointer") continue;
    v.push("looks clickable but takes no focus: " + describe(el));
  }

  window.__akWalk = walk;
  window.__akLanded = [];
  if (!window.__akListening) {
    window.__akListening = true;
    document.addEventListener("focusin", (e) => {
      const i = window.__akWalk.indexOf(e.target);
      window.__akLanded.push(i >= 0 ? String(i) : describe(e.target));
    });
  }
  return { violations: v, focusable: walk.map(describe) };
})()
